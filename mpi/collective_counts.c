#define LOG_PREFIX "collective counts: "
#include <stdlib.h>
#include <string.h>

#include "collective_counts.h"
#include "log.h"

/* Runtime state only: a restart rebuilds it by replaying the records of
 * the program's communicators (each ends with its global id) and reading
 * next_gid back from the MPI section. */
static struct comm_info world, self;
static int *world_ranks, self_rank;
static uint64_t next_gid = 2;

int collective_counts_init(void)
{
	int n, me;

	PMPI_Comm_size(MPI_COMM_WORLD, &n);
	PMPI_Comm_rank(MPI_COMM_WORLD, &me);
	world_ranks = malloc(sizeof(int) * n);
	if (!world_ranks)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		world_ranks[i] = i;
	self_rank = me;
	world = (struct comm_info){GID_WORLD, n, world_ranks, 0, 0, MPI_COMM_WORLD};
	self = (struct comm_info){GID_SELF, 1, &self_rank, 0, 0, MPI_COMM_SELF};
	return 0;
}

struct comm_info *collective_counts_of(MPI_Comm v)
{
	struct vh_entry *e;

	if (v == MPI_COMM_WORLD)
		return &world;
	if (v == MPI_COMM_SELF)
		return &self;
	e = vh_entry(VH_COMM, v);
	return e ? e->aux : NULL;
}

/* The largest of every member's proposal and the smallest member's world
 * rank (as its complement, so that one MPI_MAX gives both), on every
 * member. An intercommunicator's allreduce gives each side the other
 * side's values: a second round makes both sides agree. */
static int agree_max(MPI_Comm real, bool inter, uint64_t v[2])
{
	uint64_t other[2];

	if (PMPI_Allreduce(v, other, 2, MPI_UINT64_T, MPI_MAX, real) != MPI_SUCCESS)
		return -1;
	if (inter) {
		for (int i = 0; i < 2; i++)
			v[i] = v[i] > other[i] ? v[i] : other[i];
		if (PMPI_Allreduce(v, other, 2, MPI_UINT64_T, MPI_MAX, real) != MPI_SUCCESS)
			return -1;
		for (int i = 0; i < 2; i++)
			other[i] = v[i] > other[i] ? v[i] : other[i];
	}
	v[0] = other[0];
	v[1] = other[1];
	return 0;
}

/* A global id: the members' agreed number, and their smallest world rank
 * in the low bits. The communicators one MPI_Comm_split makes agree on the
 * same number each among its own members; the rank keeps them apart (they
 * are disjoint), or the coordinator would take their counts for one
 * communicator's and set every row the target of the busiest (mpi/coord.h:
 * ranks that never met). */
#define GID_RANK_BITS 24

static uint64_t new_gid(MPI_Comm real, bool inter)
{
	uint64_t v[2] = {next_gid, ~(uint64_t)self_rank};

	if (agree_max(real, inter, v))
		return 0;
	return v[0] << GID_RANK_BITS | (~v[1] & ((1u << GID_RANK_BITS) - 1));
}

uint64_t collective_counts_attach(MPI_Comm v, MPI_Comm real, const int *peers, int npeers,
				 bool inter, uint64_t gid)
{
	struct vh_entry *e = vh_entry(VH_COMM, v);
	struct comm_info *ci;
	int *copy;

	if (!e)
		return 0;
	if (!gid) {
		gid = new_gid(real, inter);
		if (!gid)
			return 0;
	}
	if (gid >> GID_RANK_BITS >= next_gid)
		next_gid = (gid >> GID_RANK_BITS) + 1;
	ci = malloc(sizeof(*ci));
	copy = malloc(sizeof(int) * (npeers + 1));
	if (!ci || !copy) {
		free(ci);
		free(copy);
		return 0;
	}
	memcpy(copy, peers, sizeof(int) * npeers);
	*ci = (struct comm_info){gid, npeers, copy, 0, 0, v};
	vh_lock();
	e->aux = ci;
	vh_unlock();
	return gid;
}

void collective_counts_detach(struct vh_entry *e)
{
	struct comm_info *ci = e->aux;

	if (!ci)
		return;
	vh_lock();
	e->aux = NULL;
	vh_unlock();
	free((void *)ci->world);
	free(ci);
}

uint64_t collective_counts_next_gid(void)
{
	return next_gid;
}

void collective_counts_set_next_gid(uint64_t next)
{
	if (next > next_gid)
		next_gid = next;
}

struct walk_ctx {
	collective_counts_walk_fn fn;
	void *arg;
};

static int walk_one(enum vh_kind k, uint32_t index, struct vh_entry *e, void *arg)
{
	struct walk_ctx *w = arg;

	(void)k;
	(void)index;
	if (e->aux)
		w->fn(e->aux, w->arg);
	return 0;
}

/* Under the table lock: the coordinator thread walks the counts while the
 * program's thread makes and frees communicators. fn must not take it. */
void collective_counts_walk(collective_counts_walk_fn fn, void *arg)
{
	struct walk_ctx w = {fn, arg};

	fn(&world, arg);
	fn(&self, arg);
	vh_lock();
	vh_walk(VH_COMM, walk_one, &w);
	vh_unlock();
}

struct find_ctx {
	uint64_t gid;
	struct comm_info *found;
};

static void find_one(struct comm_info *ci, void *arg)
{
	struct find_ctx *f = arg;

	if (ci->gid == f->gid && !f->found)
		f->found = ci;
}

struct comm_info *collective_counts_find(uint64_t gid)
{
	struct find_ctx f = {gid, NULL};

	collective_counts_walk(find_one, &f);
	return f.found;
}
