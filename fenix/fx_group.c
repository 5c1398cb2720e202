/* Fenix data groups and members, and the local queries on them. */
#include <stdlib.h>
#include <string.h>

#include "fenix_int.h"
#include "redundancy.h"

struct fx_group *fx_group_find(int gid)
{
	for (struct fx_group *g = fx.groups; g; g = g->next)
		if (g->gid == gid)
			return g;
	return NULL;
}

int fx_group_get(int gid, struct fx_group **g)
{
	if (!fx.init)
		return FENIX_ERROR_UNINITIALIZED;
	fx_proc_still_running();
	*g = fx_group_find(gid);
	if (*g)
		fx_async_join(*g);
	return *g ? 0 : FENIX_ERROR_INVALID_GROUPID;
}

struct fx_member *fx_member_find(struct fx_group *g, int mid)
{
	for (int i = 0; i < g->nm; i++)
		if (g->m[i].mid == mid)
			return &g->m[i];
	return NULL;
}

/* A relaunched group gets back the members of its newest snapshot (the
 * spec: "after a failure, members are recreated implicitly"), so that a
 * recovered rank can restore before, or without, member_create; their
 * buffer is unknown until attr_set(BUFFER) or member_create gives it. The
 * member list comes from the lowest rank that has a snapshot (a spare
 * whose files are still to be rebuilt has none); counts are each rank's
 * own where it has them. */
#define FX_MAX_IMPLICIT 64
static void implicit_members(struct fx_group *g, int newest)
{
	int mine[FX_MAX_IMPLICIT][3], all[FX_MAX_IMPLICIT][3];
	int n = newest >= 0 ? fx_members(g->gid, newest, g->rank, mine, FX_MAX_IMPLICIT) : -1;
	int who = n > 0 ? g->rank : g->size, from;
	MPI_Allreduce(&who, &from, 1, MPI_INT, MPI_MIN, g->comm);
	if (from == g->size)
		return;
	int cnt = n;
	if (g->rank == from)
		memcpy(all, mine, sizeof(mine));
	MPI_Bcast(&cnt, 1, MPI_INT, from, g->comm);
	MPI_Bcast(all, 3 * FX_MAX_IMPLICIT, MPI_INT, from, g->comm);
	struct fx_member *m = calloc((size_t)cnt, sizeof(*m));
	if (!m)
		return;
	for (int i = 0; i < cnt; i++) {
		m[i] = (struct fx_member){.mid = all[i][0], .dtsize = all[i][1], .count = all[i][2],
					  .dt = MPI_DATATYPE_NULL, .implicit = true};
		for (int k = 0; k < n; k++)
			if (mine[k][0] == m[i].mid)
				m[i].count = mine[k][2];
	}
	g->m = m;
	g->nm = cnt;
}

int fx_group_make(int gid, MPI_Comm comm, int start_ts, int depth, const int policy[3])
{
	struct fx_group *g = calloc(1, sizeof(*g));
	if (!g)
		return FENIX_ERROR_GROUP_CREATE;
	if (MPI_Comm_dup(comm, &g->comm) != MPI_SUCCESS) {
		free(g);
		return FENIX_ERROR_GROUP_CREATE;
	}
	MPI_Comm_rank(g->comm, &g->rank);
	MPI_Comm_size(g->comm, &g->size);
	g->gid = gid;
	g->start_ts = start_ts;
	g->depth = depth;
	memcpy(g->policy, policy, sizeof(g->policy));
	/* A relaunched job continues after the newest snapshot any rank has,
	 * so that the ranks' next snapshots carry the same ts. */
	int ts[FX_MAX_SNAPS], n = fx_list_done(gid, g->rank, ts, FX_MAX_SNAPS);
	int next = n > 0 ? ts[n - 1] + 1 : start_ts;
	if (next < start_ts)
		next = start_ts;
	MPI_Allreduce(&next, &g->next_ts, 1, MPI_INT, MPI_MAX, g->comm);
	g->next = fx.groups;
	fx.groups = g;
	if (fx.proc.epoch > 0)
		implicit_members(g, n > 0 ? ts[n - 1] : -1);
	return FENIX_SUCCESS;
}

static int group_create(int gid, MPI_Comm comm, int start_ts, int depth, const int policy[3])
{
	if (!fx.init)
		return FENIX_ERROR_UNINITIALIZED;
	if (gid < 0 || gid >= FENIX_GROUP_ID_MAX)
		return gid == FENIX_DATA_GROUP_WORLD_ID ? FENIX_SUCCESS : FENIX_ERROR_INVALID_GROUPID;
	if (start_ts < 0 || start_ts >= FENIX_TIME_STAMP_MAX)
		return FENIX_ERROR_INVALID_TIMESTAMP;
	if (depth < -1)
		return FENIX_ERROR_INVALID_DEPTH;
	if (comm == MPI_COMM_NULL)
		return FENIX_ERROR_GROUP_CREATE;
	if (fx_group_find(gid))
		return FENIX_SUCCESS; /* recovery re-creates it: the same group */
	return fx_group_make(gid, comm, start_ts, depth, policy);
}

int Fenix_Data_group_create_4(int gid, MPI_Comm comm, int start_ts, int depth)
{
	int pol[3] = {0, 0, 0}; /* spec default: one partner copy */
	return group_create(gid, comm, start_ts, depth, pol);
}

/* Reference policy IN_MEMORY_RAID {mode 1 partner | 5 xor, separation, set
 * size}; stasis's own {scheme, set size, rs k}. The rank separation is not
 * kept: stasis forms its sets over the group's ranks in order. */
static int policy_from(int name, const int *v, int pol[3])
{
	if (name == FENIX_DATA_POLICY_IN_MEMORY_RAID && v && (v[0] == 1 || v[0] == 5)) {
		pol[0] = v[0] == 1 ? 0 : 1;
		pol[1] = v[0] == 5 ? v[2] : 0;
		pol[2] = 0;
		return 0;
	}
	if (name == FENIX_DATA_POLICY_PEER_RANK_SEPARATION) {
		pol[0] = 0, pol[1] = 0, pol[2] = 0;
		return 0;
	}
	if (name == FENIX_DATA_POLICY_STASIS && v && v[0] >= 0 && v[0] <= 2) {
		memcpy(pol, v, 3 * sizeof(int));
		return 0;
	}
	return -1;
}

int Fenix_Data_group_create_7(int gid, MPI_Comm comm, int start_ts, int depth, int policy_name,
			      void *policy_value, int *flag)
{
	int pol[3] = {0, 0, 0};
	int bad = policy_from(policy_name, policy_value, pol);
	if (flag)
		*flag = !bad;
	return group_create(gid, comm, start_ts, depth, pol);
}

int Fenix_Data_group_delete(int gid)
{
	if (!fx.init)
		return FENIX_ERROR_UNINITIALIZED;
	struct fx_group **pp = &fx.groups, *g;
	while ((g = *pp) && g->gid != gid)
		pp = &g->next;
	if (!g || gid == FENIX_DATA_GROUP_WORLD_ID)
		return FENIX_ERROR_INVALID_GROUPID;
	fx_async_join(g);
	int ts[FX_MAX_SNAPS], n = fx_list_done(gid, g->rank, ts, FX_MAX_SNAPS);
	for (int i = 0; i < n; i++)
		fx_remove_snapshot(gid, ts[i], g->rank);
	*pp = g->next;
	for (int i = 0; i < g->nm; i++) {
		free(g->m[i].stage);
		free(g->m[i].mask);
	}
	free(g->m);
	if (g->set)
		redundancy_set_free(g->set);
	MPI_Comm_free(&g->comm);
	free(g);
	return FENIX_SUCCESS;
}

int Fenix_Data_member_create(int gid, int mid, void *buf, int count, MPI_Datatype dt)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	int code = FENIX_SUCCESS, dtsize = 0;
	struct fx_member *old = mid < 0 ? NULL : fx_member_find(g, mid);
	if (mid < 0 || mid >= FENIX_MEMBER_ID_MAX || (old && !old->implicit))
		code = FENIX_ERROR_INVALID_MEMBERID;
	else if (count < 0 || dt == MPI_DATATYPE_NULL || MPI_Type_size(dt, &dtsize) != MPI_SUCCESS ||
		 dtsize <= 0)
		code = FENIX_ERROR_MEMBER_CREATE;
	/* The program may create again what the relaunch recreated: the same
	 * member, now with its buffer (another element size would not be). */
	if (!code && old && old->dtsize != dtsize)
		code = FENIX_ERROR_MEMBER_CREATE;
	code = fx_agree(g->comm, code);
	if (code)
		return code;
	if (old) {
		old->buf = buf, old->count = count, old->dt = dt, old->implicit = false;
		return FENIX_SUCCESS;
	}
	struct fx_member *n = realloc(g->m, sizeof(*n) * (size_t)(g->nm + 1));
	if (!n)
		return FENIX_ERROR_MEMBER_CREATE;
	g->m = n;
	g->m[g->nm++] = (struct fx_member){.mid = mid, .buf = buf, .count = count, .dt = dt,
					   .dtsize = dtsize};
	return FENIX_SUCCESS;
}

int Fenix_Data_member_delete(int gid, int mid)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	struct fx_member *m = fx_member_find(g, mid);
	if (!m)
		return FENIX_ERROR_INVALID_MEMBERID;
	free(m->stage);
	free(m->mask);
	int i = (int)(m - g->m);
	memmove(m, m + 1, sizeof(*m) * (size_t)(g->nm - i - 1));
	g->nm--;
	return FENIX_SUCCESS;
}

int Fenix_Data_group_get_redundancy_policy_spec(int gid, int policy_name, void *value, int *flag)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	*flag = 0;
	if (policy_name == FENIX_DATA_POLICY_PEER_RANK_SEPARATION && g->policy[0] == 0) {
		*(int *)value = g->size / 2;
		*flag = 1;
	} else if (policy_name == FENIX_DATA_POLICY_STASIS) {
		memcpy(value, g->policy, sizeof(g->policy));
		*flag = 1;
	} else if (policy_name == FENIX_DATA_POLICY_IN_MEMORY_RAID && g->policy[0] <= 1) {
		int *v = value;
		v[0] = g->policy[0] == 0 ? 1 : 5, v[1] = g->size / 2, v[2] = g->policy[1];
		*flag = 1;
	}
	return FENIX_SUCCESS;
}

int Fenix_Data_group_get_redundancy_policy_ref(int gid, int *policy_name, void *value, int *flag)
{
	if (policy_name)
		*policy_name = FENIX_DATA_POLICY_IN_MEMORY_RAID;
	return Fenix_Data_group_get_redundancy_policy_spec(gid, FENIX_DATA_POLICY_IN_MEMORY_RAID,
							   value, flag);
}

int Fenix_Data_group_set_redundancy_policy(int gid, int policy_name, void *value, int *flag)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	int pol[3];
	int ok = !g->frozen && !policy_from(policy_name, value, pol);
	int all;
	MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, g->comm);
	if (all)
		memcpy(g->policy, pol, sizeof(pol));
	*flag = all;
	return FENIX_SUCCESS;
}

int Fenix_Data_group_get_number_of_members(int gid, int *n)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	*n = g->nm;
	return FENIX_SUCCESS;
}

int Fenix_Data_group_get_member_at_position(int gid, int *mid, int pos)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	if (pos < 0 || pos >= g->nm)
		return FENIX_ERROR_INVALID_POSITION;
	*mid = g->m[pos].mid;
	return FENIX_SUCCESS;
}

int Fenix_Data_group_get_snapshot_at_position(int gid, int pos, int *ts)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	int l[FX_MAX_SNAPS], n = fx_list_done(gid, g->rank, l, FX_MAX_SNAPS);
	if (pos < 0 || pos >= n)
		return FENIX_ERROR_INVALID_POSITION;
	*ts = l[n - 1 - pos]; /* newest first */
	return FENIX_SUCCESS;
}

int Fenix_Data_member_attr_set(int gid, int mid, int name, void *value, int *flag)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	struct fx_member *m = fx_member_find(g, mid);
	if (!m)
		return FENIX_ERROR_INVALID_MEMBERID;
	if (flag)
		*flag = 0;
	switch (name) {
	case FENIX_DATA_MEMBER_ATTRIBUTE_BUFFER:
		m->buf = value; /* the pointer itself (spec) */
		if (flag)
			*flag = 1;
		return FENIX_SUCCESS;
	case FENIX_DATA_MEMBER_ATTRIBUTE_COUNT:
	case FENIX_DATA_MEMBER_ATTRIBUTE_DATATYPE:
	case FENIX_DATA_MEMBER_ATTRIBUTE_SIZE:
		return FENIX_SUCCESS; /* read-only: flag false */
	default:
		return FENIX_ERROR_INVALID_ATTRIBUTE_NAME;
	}
}

int Fenix_Data_member_attr_get(int gid, int mid, int name, void *value, int *flag,
			       int source_rank)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	struct fx_member *m = fx_member_find(g, mid);
	int code = !m ? FENIX_ERROR_INVALID_MEMBERID
		   : (name < FENIX_DATA_MEMBER_ATTRIBUTE_BUFFER ||
		      name > FENIX_DATA_MEMBER_ATTRIBUTE_SIZE)
		       ? FENIX_ERROR_INVALID_ATTRIBUTE_NAME
		   : (source_rank < 0 || source_rank >= g->size) ? FENIX_ERROR_INVALID_ATTRIBUTE_VALUE
								 : 0;
	code = fx_agree(g->comm, code);
	if (code)
		return code;
	/* Rank-dependent values come from source_rank. */
	long long v[2] = {(long long)(intptr_t)m->buf, m->count};
	MPI_Bcast(v, 2, MPI_LONG_LONG, source_rank, g->comm);
	switch (name) {
	case FENIX_DATA_MEMBER_ATTRIBUTE_BUFFER:
		*(void **)value = source_rank == g->rank ? m->buf : NULL;
		break;
	case FENIX_DATA_MEMBER_ATTRIBUTE_COUNT:
		*(int *)value = (int)v[1];
		break;
	case FENIX_DATA_MEMBER_ATTRIBUTE_DATATYPE:
		*(MPI_Datatype *)value = m->dt;
		break;
	case FENIX_DATA_MEMBER_ATTRIBUTE_SIZE:
		*(int *)value = m->dtsize;
		break;
	}
	if (flag)
		*flag = 1;
	return FENIX_SUCCESS;
}
