/* Fenix store, commit and the snapshot bookkeeping. store is collective:
 * it stages the stored elements, writes this slot's .dat of the next
 * snapshot and protects it with the group's redundancy set before it
 * returns (istore does the same in the background, fx_async.c); commit is
 * local: it writes the commit record. A kill anywhere
 * leaves the older snapshots whole (no .done is touched before the new one
 * is complete) and the new one absent. */
#include <stdlib.h>
#include <string.h>

#include "fenix_int.h"

static int check_subset(const struct fx_member *m, const Fenix_Data_subset *s)
{
	if (s->specifier == FENIX_DATA_SUBSET_SPEC_FULL || s->specifier == FENIX_DATA_SUBSET_SPEC_EMPTY)
		return 0;
	if (s->specifier != FENIX_DATA_SUBSET_CREATED)
		return FENIX_ERROR_SUBSET_NUM_BLOCKS;
	for (int b = 0; b < s->num_blocks; b++) {
		if (s->end_offsets[b] >= m->count)
			return FENIX_ERROR_SUBSET_END_OFFSET;
		if (s->start_offsets[b] > s->end_offsets[b])
			return FENIX_ERROR_SUBSET_START_OFFSET;
	}
	return 0;
}

static int stage(struct fx_member *m, const Fenix_Data_subset *s)
{
	if (s->specifier == FENIX_DATA_SUBSET_SPEC_EMPTY)
		return 0;
	if (!m->stage || m->stage_count != m->count) {
		free(m->stage);
		free(m->mask);
		m->stage_count = m->count;
		m->stage = calloc((size_t)m->count + 1, (size_t)m->dtsize);
		m->mask = calloc((size_t)m->count + 1, 1);
		if (!m->stage || !m->mask)
			return FENIX_ERROR_INTERN;
	}
	size_t sz = (size_t)m->dtsize;
	if (s->specifier == FENIX_DATA_SUBSET_SPEC_FULL) {
		if (m->count && !m->buf)
			return FENIX_ERROR_INVALID_ATTRIBUTE_VALUE;
		memcpy(m->stage, m->buf, sz * (size_t)m->count);
		memset(m->mask, 1, (size_t)m->count);
		return 0;
	}
	for (int b = 0; b < s->num_blocks; b++) {
		size_t a = (size_t)s->start_offsets[b], e = (size_t)s->end_offsets[b];
		memcpy(m->stage + a * sz, (char *)m->buf + a * sz, (e - a + 1) * sz);
		memset(m->mask + a, 1, e - a + 1);
	}
	return 0;
}

int fx_stage_checked(int gid, int mid, const Fenix_Data_subset *s, struct fx_group **out)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	/* An istore not yet completed is, first (collective, as this call). */
	int code = fx_async_finish(g, FENIX_ERROR_DATA_WAIT);
	if (!code && mid != FENIX_DATA_MEMBER_ALL && !fx_member_find(g, mid))
		code = FENIX_ERROR_INVALID_MEMBERID;
	for (int i = 0; i < g->nm && !code; i++)
		if (mid == FENIX_DATA_MEMBER_ALL || g->m[i].mid == mid)
			code = check_subset(&g->m[i], s);
	code = fx_agree(g->comm, code);
	if (code)
		return code;
	for (int i = 0; i < g->nm && !code; i++)
		if (mid == FENIX_DATA_MEMBER_ALL || g->m[i].mid == mid)
			code = stage(&g->m[i], s);
	int ret = !code && !g->frozen ? fx_write_meta(g) : 0;
	code = fx_agree(g->comm, code ? code : ret ? FENIX_ERROR_INTERN : 0);
	if (ret)
		fx_say(0, "store of group %d: cannot write its policy record", gid);
	*out = g;
	return code;
}

static int store(int gid, int mid, Fenix_Data_subset s)
{
	struct fx_group *g;
	int code = fx_stage_checked(gid, mid, &s, &g);
	if (code)
		return code;
	struct why why = WHY_INIT;
	int ret = fx_write_dat(g, g->next_ts, &why);
	code = fx_agree(g->comm, ret ? FENIX_ERROR_INTERN : 0);
	if (code)
		return fx_say_before_return(g->comm, ret, code, "store of group %d: %s", gid,
					    why.msg[0] ? why.msg : "cannot write");
	/* Inside store, not commit: commit must complete locally. */
	code = fx_protect(g, g->next_ts, "store", FENIX_ERROR_INTERN);
	if (code)
		return code;
	g->frozen = true;
	g->staged = true;
	return FENIX_SUCCESS;
}

int Fenix_Data_member_store(int gid, int mid, Fenix_Data_subset s)
{
	int section = fx_section_begin();
	int code = store(gid, mid, s);
	fx_section_end(section);
	return code;
}

/* The subset extents may differ per rank: stasis pads them alike anyway. */
int Fenix_Data_member_storev(int gid, int mid, Fenix_Data_subset s)
{
	return Fenix_Data_member_store(gid, mid, s);
}

/* Local: the staged data becomes snapshot next_ts. */
static int commit_now(struct fx_group *g, int *ts)
{
	struct why why = WHY_INIT;
	/* An istore the program did not wait for completes here. */
	int ret = fx_async_finish(g, FENIX_ERROR_INTERN);
	if (ret)
		return ret;
	if (!g->staged) /* nothing stored: an empty snapshot, no redundancy needed */
		ret = fx_write_dat(g, g->next_ts, &why);
	if (!ret)
		ret = fx_write_done(g, g->next_ts, &why);
	if (ret)
		return fx_say(FENIX_ERROR_INTERN, "commit of group %d: %s", g->gid, why.msg);
	if (ts)
		*ts = g->next_ts;
	g->next_ts++;
	g->frozen = true;
	g->staged = false;
	/* The staging copy is kept for the next store (its pages stay
	 * mapped); only what is marked stored is written. */
	for (int i = 0; i < g->nm; i++)
		if (g->m[i].mask)
			memset(g->m[i].mask, 0, (size_t)g->m[i].stage_count);
	return FENIX_SUCCESS;
}

static int commit(struct fx_group *g, int *ts)
{
	int section = fx_section_begin();
	int code = commit_now(g, ts);
	fx_section_end(section);
	return code;
}

/* Keep the depth + 1 newest of this rank's snapshots (depth -1: all). */
static void prune(struct fx_group *g)
{
	if (g->depth < 0)
		return;
	int l[FX_MAX_SNAPS], n = fx_list_done(g->gid, g->rank, l, FX_MAX_SNAPS);
	for (int i = 0; i < n - (g->depth + 1); i++)
		fx_remove_snapshot(g->gid, l[i], g->rank);
}

int fx_consistent(struct fx_group *g, int *out)
{
	int l[FX_MAX_SNAPS], n = fx_list_done(g->gid, g->rank, l, FX_MAX_SNAPS);
	int *all = malloc(sizeof(int) * FX_MAX_SNAPS * (size_t)g->size);
	if (!all)
		return -1;
	for (int i = n < 0 ? 0 : n; i < FX_MAX_SNAPS; i++)
		l[i] = -1;
	MPI_Allgather(l, FX_MAX_SNAPS, MPI_INT, all, FX_MAX_SNAPS, MPI_INT, g->comm);
	int c = 0;
	for (int i = 0; i < n; i++) {
		bool everywhere = true;
		for (int r = 0; r < g->size && everywhere; r++) {
			bool has = false;
			for (int k = 0; k < FX_MAX_SNAPS && all[r * FX_MAX_SNAPS + k] >= 0; k++)
				has |= all[r * FX_MAX_SNAPS + k] == l[i];
			everywhere = has;
		}
		if (everywhere)
			out[c++] = l[i];
	}
	free(all);
	return c;
}

/* Collective: remove the snapshots not on every rank, then prune. */
static int barrier(struct fx_group *g)
{
	int c[FX_MAX_SNAPS], nc = fx_consistent(g, c);
	if (nc < 0)
		return FENIX_ERROR_INTERN;
	int l[FX_MAX_SNAPS], n = fx_list_done(g->gid, g->rank, l, FX_MAX_SNAPS);
	for (int i = 0; i < n; i++) {
		bool keep = false;
		for (int k = 0; k < nc; k++)
			keep |= c[k] == l[i];
		if (!keep)
			fx_remove_snapshot(g->gid, l[i], g->rank);
	}
	prune(g);
	return FENIX_SUCCESS;
}

int Fenix_Data_commit(int gid, int *ts)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	return commit(g, ts);
}

int Fenix_Data_commit_barrier(int gid, int *ts)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	int code = fx_agree(g->comm, commit(g, ts));
	if (code)
		return FENIX_ERROR_COMMIT_BARRIER;
	return barrier(g);
}

int Fenix_Data_commit_cleanup(int gid, int *ts)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	int code = commit(g, ts);
	if (!code)
		prune(g);
	return code;
}

int Fenix_Data_barrier(int gid)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	return barrier(g);
}

int Fenix_Data_cleanup(int gid)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	prune(g);
	return FENIX_SUCCESS;
}

int Fenix_Data_group_get_number_of_snapshots(int gid, int *n)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	int c[FX_MAX_SNAPS];
	*n = fx_consistent(g, c);
	return *n < 0 ? FENIX_ERROR_INTERN : FENIX_SUCCESS;
}

int Fenix_Data_snapshot_delete(int gid, int ts)
{
	struct fx_group *g;
	int found = fx_group_get(gid, &g);
	if (found)
		return found;
	int l[FX_MAX_SNAPS], n = fx_list_done(gid, g->rank, l, FX_MAX_SNAPS);
	if (ts == FENIX_DATA_SNAPSHOT_ALL) {
		for (int i = 0; i < n; i++)
			fx_remove_snapshot(gid, l[i], g->rank);
		return FENIX_SUCCESS;
	}
	if (ts == FENIX_DATA_SNAPSHOT_LATEST) {
		if (n <= 0)
			return FENIX_ERROR_INVALID_TIMESTAMP;
		ts = l[n - 1];
	}
	for (int i = 0; i < n; i++)
		if (l[i] == ts)
			return fx_remove_snapshot(gid, ts, g->rank) ? FENIX_ERROR_INTERN
								    : FENIX_SUCCESS;
	return FENIX_ERROR_INVALID_TIMESTAMP;
}
