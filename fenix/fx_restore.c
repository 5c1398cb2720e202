/* Fenix restore: make the group's files whole again (a slot whose
 * directory was lost gets its snapshots rebuilt through the redundancy
 * set), agree on the snapshot to start from, and give each rank the data
 * of the slot it asks for, merged from that snapshot back through the
 * older consistent ones until every element has a value. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fenix_int.h"

/* Collective. For every ts some rank has committed and this rank has not
 * (its files are gone), rebuild from the set. A ts committed by every other
 * rank and rebuilt here gets its commit record again: the other ranks'
 * records say this slot committed it too (store is collective and the
 * .dat was encoded before any commit). */
static int recover(struct fx_group *g, struct why *why)
{
	int mine[FX_MAX_SNAPS], n = fx_list_done(g->gid, g->rank, mine, FX_MAX_SNAPS);
	if (n < 0)
		n = 0;
	int *all = malloc(sizeof(int) * FX_MAX_SNAPS * (size_t)g->size);
	if (!all)
		return why_set(why, -12, "out of memory");
	for (int i = n; i < FX_MAX_SNAPS; i++)
		mine[i] = -1;
	MPI_Allgather(mine, FX_MAX_SNAPS, MPI_INT, all, FX_MAX_SNAPS, MPI_INT, g->comm);
	/* Every ts anyone has, with how many ranks hold it. */
	int ts[FX_MAX_SNAPS], cnt[FX_MAX_SNAPS], nts = 0;
	for (int r = 0; r < g->size; r++)
		for (int k = 0; k < FX_MAX_SNAPS && all[r * FX_MAX_SNAPS + k] >= 0; k++) {
			int t = all[r * FX_MAX_SNAPS + k], j = 0;
			while (j < nts && ts[j] != t)
				j++;
			if (j == nts && nts < FX_MAX_SNAPS)
				ts[nts] = t, cnt[nts++] = 0;
			if (j < nts)
				cnt[j]++;
		}
	free(all);
	int ret = 0;
	for (int j = 0; j < nts && !ret; j++) {
		/* Per rank: intact (its record and a .dat whose crcs hold), to
		 * rebuild (its directory is gone: no snapshot of the group at
		 * all; or its record is there but the .dat is missing or
		 * damaged), or pruned (it removed this old snapshot another rank
		 * kept, killed between their prunes: nothing to rebuild, barrier
		 * drops it). */
		bool mine_done = false;
		for (int k = 0; k < n; k++)
			mine_done |= mine[k] == ts[j];
		bool have = mine_done && fx_dat_ok(g->gid, ts[j], g->rank);
		int st[2] = {n == 0 || (mine_done && !have), n > 0 && !mine_done}, sum[2];
		MPI_Allreduce(st, sum, 2, MPI_INT, MPI_SUM, g->comm);
		if (!sum[0] || sum[1] || sum[0] == g->size)
			continue;
		bool lost = st[0];
		if (!g->set && (ret = fx_set(g, why)))
			break;
		ret = fx_rebuild(g, ts[j], have, why);
		if (!ret && lost && !mine_done)
			ret = fx_write_done(g, ts[j], why);
	}
	return ret;
}

/* Merge member mid of this rank's slot from ts back through the
 * consistent snapshots c[0..nc) (ascending). */
static int merge(struct fx_group *g, int mid, int dtsize, const int *c, int nc, int ts,
		 unsigned char **out, unsigned char **filled, int *count)
{
	*count = 0;
	for (int i = nc - 1; i >= 0; i--)
		if (c[i] <= ts)
			fx_merge(g->gid, c[i], g->rank, mid, NULL, NULL, 0, dtsize, count);
	*out = calloc((size_t)*count + 1, (size_t)dtsize);
	*filled = calloc((size_t)*count + 1, 1);
	if (!*out || !*filled)
		return FENIX_ERROR_INTERN;
	for (int i = nc - 1; i >= 0; i--) {
		if (c[i] > ts)
			continue;
		int r = fx_merge(g->gid, c[i], g->rank, mid, *out, *filled, *count, dtsize, count);
		if (r && r != -2 /* ENOENT: not stored in that one */)
			return FENIX_ERROR_INTERN;
	}
	return 0;
}

static int restore_now(int gid, int mid, void *target, int max_count, int ts, Fenix_Data_subset *found,
		   int source, bool from_rank)
{
	struct fx_group *g;
	int err = fx_group_get(gid, &g);
	if (err)
		return err;
	struct fx_member *m = fx_member_find(g, mid);
	int code = !m ? FENIX_ERROR_INVALID_MEMBERID
		   : (from_rank && (source < 0 || source >= g->size)) ? FENIX_ERROR_INVALID_POSITION
		   : (ts < 0 && ts != FENIX_DATA_SNAPSHOT_LATEST)     ? FENIX_ERROR_INVALID_TIMESTAMP
								      : 0;
	code = fx_agree(g->comm, code);
	if (code)
		return code;
	/* Stored by another number of ranks (after a shrink): refused before
	 * anything is rebuilt, as a rebuild over this comm's sets would be of
	 * the wrong slots. */
	int sz = 0, t[FX_MAX_SNAPS], nt = fx_list_done(gid, g->rank, t, FX_MAX_SNAPS), other;
	if (nt > 0 && fx_read_done(gid, t[nt - 1], g->rank, &sz))
		sz = 0;
	int mism = sz && sz != g->size ? sz : 0;
	MPI_Allreduce(&mism, &other, 1, MPI_INT, MPI_MAX, g->comm);
	if (other && !from_rank)
		return fx_say_before_return(g->comm, g->rank == 0, FENIX_ERROR_INVALID_GROUPID,
					    "restore of group %d: stored by %d ranks, restored "
					    "by %d: use restore_from_rank", gid, other, g->size);
	struct why why = WHY_INIT;
	int ret = recover(g, &why);
	int r0 = ret;
	MPI_Bcast(&r0, 1, MPI_INT, 0, g->comm);
	/* One line: rank 0's (a set's failure is agreed, the same on all). */
	if (fx_agree(g->comm, ret ? -1 : 0))
		return fx_say_before_return(g->comm, ret && (g->rank == 0 || !r0),
					    FENIX_ERROR_NODATA_FOUND, "restore of group %d: %s",
					    gid, why.msg);
	int c[FX_MAX_SNAPS], nc = fx_consistent(g, c);
	if (nc <= 0)
		return FENIX_ERROR_NODATA_FOUND;
	/* ts newer than the newest: the newest (FENIX.md 1.5). */
	if (ts == FENIX_DATA_SNAPSHOT_LATEST || ts > c[nc - 1])
		ts = c[nc - 1];
	if (ts < c[0])
		return FENIX_ERROR_INVALID_TIMESTAMP;
	/* The comm size at store time. */
	int stored = g->size;
	fx_read_done(gid, c[nc - 1], g->rank, &stored);
	code = (!from_rank && stored != g->size) ? FENIX_ERROR_INVALID_GROUPID : 0;
	code = fx_agree(g->comm, code);
	if (code)
		return fx_say_before_return(g->comm, g->rank == 0, code,
					    "restore of group %d: stored by %d ranks, restored "
					    "by %d: use restore_from_rank", gid, stored, g->size);
	/* Who asks whom: slot s lives with rank s. */
	if (!from_rank)
		source = g->rank;
	int *src = malloc(sizeof(int) * (size_t)g->size);
	unsigned char *out = NULL, *filled = NULL;
	int count = 0;
	code = src ? merge(g, mid, m->dtsize, c, nc, ts, &out, &filled, &count) : FENIX_ERROR_INTERN;
	code = fx_agree(g->comm, code);
	if (code)
		goto done;
	MPI_Allgather(&source, 1, MPI_INT, src, 1, MPI_INT, g->comm);
	int nreq = 0;
	MPI_Request *req = malloc(sizeof(MPI_Request) * 3 * (size_t)g->size);
	for (int r = 0; r < g->size; r++) {
		if (src[r] != g->rank || r == g->rank)
			continue;
		MPI_Isend(&count, 1, MPI_INT, r, 71, g->comm, &req[nreq++]);
		MPI_Isend(out, count * m->dtsize, MPI_BYTE, r, 72, g->comm, &req[nreq++]);
		MPI_Isend(filled, count, MPI_BYTE, r, 73, g->comm, &req[nreq++]);
	}
	unsigned char *rout = out, *rfilled = filled;
	int rcount = count;
	if (source != g->rank) {
		MPI_Recv(&rcount, 1, MPI_INT, source, 71, g->comm, MPI_STATUS_IGNORE);
		rout = calloc((size_t)rcount + 1, (size_t)m->dtsize);
		rfilled = calloc((size_t)rcount + 1, 1);
		MPI_Recv(rout, rcount * m->dtsize, MPI_BYTE, source, 72, g->comm, MPI_STATUS_IGNORE);
		MPI_Recv(rfilled, rcount, MPI_BYTE, source, 73, g->comm, MPI_STATUS_IGNORE);
	}
	MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
	free(req);
	int nfilled = 0;
	for (int e = 0; e < rcount; e++)
		nfilled += rfilled[e];
	if (!nfilled)
		code = FENIX_ERROR_NODATA_FOUND;
	else if (target && rcount > max_count)
		code = fx_say(FENIX_ERROR_INVALID_ATTRIBUTE_VALUE,
			      "restore of group %d member %d: %d elements stored, room for %d: "
			      "nothing written", gid, mid, rcount, max_count);
	else {
		/* Elements with no value stay unchanged. */
		for (int e = 0; target && e < rcount; e++)
			if (rfilled[e])
				memcpy((char *)target + (size_t)e * (size_t)m->dtsize,
				       rout + (size_t)e * (size_t)m->dtsize, (size_t)m->dtsize);
		code = nfilled < rcount ? FENIX_WARNING_PARTIAL_RESTORE : FENIX_SUCCESS;
		if (found)
			*found = FENIX_DATA_SUBSET_FULL;
	}
	if (rout != out) {
		free(rout);
		free(rfilled);
	}
	/* Errors reach every rank; a warning stays with the rank it concerns. */
	int agreed = fx_agree(g->comm, code < 0 ? code : 0);
	if (agreed)
		code = agreed;
done:
	free(src);
	free(out);
	free(filled);
	return code;
}

static int restore(int gid, int mid, void *target, int max_count, int ts, Fenix_Data_subset *found,
		   int source_rank, bool from_rank)
{
	int section = fx_section_begin();
	int code = restore_now(gid, mid, target, max_count, ts, found, source_rank, from_rank);
	fx_section_end(section);
	return code;
}

int Fenix_Data_member_restore_5(int gid, int mid, void *target, int max_count, int ts)
{
	return restore(gid, mid, target, max_count, ts, NULL, 0, false);
}

int Fenix_Data_member_restore_6(int gid, int mid, void *target, int max_count, int ts,
				Fenix_Data_subset *found)
{
	return restore(gid, mid, target, max_count, ts, found, 0, false);
}

int Fenix_Data_member_lrestore(int gid, int mid, void *target, int max_count, int ts,
			       Fenix_Data_subset *found)
{
	return restore(gid, mid, target, max_count, ts, found, 0, false);
}

int Fenix_Data_member_restore_from_rank_6(int gid, int mid, void *target, int max_count, int ts,
					  int source_rank)
{
	return restore(gid, mid, target, max_count, ts, NULL, source_rank, true);
}

int Fenix_Data_member_restore_from_rank_7(int gid, int mid, void *target, int max_count, int ts,
					  Fenix_Data_subset *found, int source_rank)
{
	return restore(gid, mid, target, max_count, ts, found, source_rank, true);
}
