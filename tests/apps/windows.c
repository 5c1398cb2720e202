/* windows: one-sided communication, a checkpoint test subject for windows,
 * their memory and their epochs. Each rank works on a block of N doubles in
 * a window and exchanges with its neighbours through it; no location has
 * two writers in one epoch, so every run computes the same.
 *
 *   windows --MODE [N [ITERS]]
 *
 *   fence    MPI_Win_allocate; halos put between fences (MPI_MODE_NOSUCCEED
 *            on the last); an attribute cached on the window (its keyval's
 *            delete function runs at MPI_Win_free)
 *   lock     MPI_Win_create over malloc'd memory; per step an exclusive
 *            MPI_Win_lock on the right neighbour with Put, Get, Accumulate,
 *            Get_accumulate, Fetch_and_op, Compare_and_swap, Rput, Rget
 *   lockall  MPI_Win_allocate under one MPI_Win_lock_all for the whole run;
 *            Put and Accumulate, MPI_Win_flush_all, a barrier
 *   dynamic  MPI_Win_create_dynamic with a block attached (and one attached
 *            and detached again halfway); Put at absolute addresses under
 *            MPI_Win_lock_all / flush / unlock_all; MPI_Alloc_mem memory
 *   long     a long passive-target phase: each step holds an MPI_Win_lock
 *            on the right neighbour for most of its time (a checkpoint asked
 *            for meanwhile waits for the unlock)
 *   pscw     MPI_Win_create; each step generalized active target: exposed to
 *            both neighbours (MPI_Win_post), their windows accessed
 *            (MPI_Win_start), halos put, MPI_Win_complete, MPI_Win_wait (on
 *            odd steps a loop of MPI_Win_test); no collective in the loop,
 *            so that no rank waits at one when a checkpoint is asked for
 *            (with Open MPI's osc/rdma, MPI_Win_start waits for the posts)
 *   shared   MPI_Win_allocate_shared on the node's communicator
 *            (MPI_Comm_split_type): each step reads its neighbours' edge
 *            values straight from their parts (MPI_Win_shared_query), under
 *            one MPI_Win_lock_all with MPI_Win_sync and node barriers, and
 *            every 8th step an MPI_Put into the right neighbour's part; the
 *            parts must be contiguous in rank order
 *
 * Output (rank 0, stdout, at the end): one line hashing every step.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

static uint64_t hash = HASH_START;
static int rank, size, left, right;

static void step_hash(const double *a, int n)
{
	double sum = 0;

	for (int i = 0; i < n; i++)
		sum += a[i] * (double)(i % 7 + 1);
	MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	hash = hash_mix(hash, &sum, sizeof(sum));
}

/* Some work on the local block, so that a step takes time. */
static void relax(double *a, int from, int to)
{
	for (int k = 0; k < 4; k++)
		for (int i = from + 1; i < to - 1; i++)
			a[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1];
}

static void fill(double *a, int n)
{
	for (int i = 0; i < n; i++)
		a[i] = (double)((rank * 131 + i) % 101) / 101.0;
}

/* The attribute fence mode caches on its window, and what its delete
 * function saw when the window was freed. */
static int attr_val, deleted;

static int on_delete(MPI_Win win, int keyval, void *val, void *extra)
{
	(void)win, (void)keyval, (void)extra;
	deleted = *(int *)val;
	return MPI_SUCCESS;
}

/* a[0] and a[n+1] are halos, a[1..n] the block. */
static void fence_mode(int n, int iters)
{
	double *a;
	MPI_Win win;
	int keyval, flag = 0;
	void *got = NULL;

	MPI_Win_allocate((MPI_Aint)(n + 2) * sizeof(double), sizeof(double), MPI_INFO_NULL,
			 MPI_COMM_WORLD, &a, &win);
	MPI_Win_set_name(win, "halo");
	MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, on_delete, &keyval, NULL);
	attr_val = 17 + rank;
	MPI_Win_set_attr(win, keyval, &attr_val);
	fill(a, n + 2);
	MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
	for (int it = 0; it < iters; it++) {
		MPI_Put(&a[1], 1, MPI_DOUBLE, left, n + 1, 1, MPI_DOUBLE, win);
		MPI_Put(&a[n], 1, MPI_DOUBLE, right, 0, 1, MPI_DOUBLE, win);
		MPI_Win_fence(it + 1 == iters ? MPI_MODE_NOSUCCEED : 0, win);
		relax(a, 0, n + 2);
		step_hash(a, n + 2);
		/* The next puts read a[1] and a[n]: nobody writes them. */
	}
	{
		char name[MPI_MAX_OBJECT_NAME];
		int len;

		MPI_Win_get_name(win, name, &len);
		hash = hash_mix(hash, name, (size_t)len);
	}
	/* The attribute, back after a restart: the same pointer. */
	MPI_Win_get_attr(win, keyval, &got, &flag);
	flag = flag && got == &attr_val;
	hash = hash_mix(hash, &flag, sizeof(flag));
	MPI_Win_free(&win);
	MPI_Win_free_keyval(&keyval);
	hash = hash_mix(hash, &deleted, sizeof(deleted));
}

/* Slots of the right neighbour's window this rank writes (only it does). */
enum { S_PUT, S_ACC, S_GACC, S_FOP, S_CAS, S_RPUT, NSLOTS };

static void lock_step(MPI_Win win, double *a, int n, int it)
{
	double got[4] = {0}, one = 1.0;
	int64_t v = it, cmp = it - 1, res = 0, old = 0;
	MPI_Request r[2];

	MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
	MPI_Put(&a[1], 1, MPI_DOUBLE, right, S_PUT + n, 1, MPI_DOUBLE, win);
	MPI_Get(&got[0], 1, MPI_DOUBLE, right, 2, 1, MPI_DOUBLE, win);
	MPI_Accumulate(&one, 1, MPI_DOUBLE, right, S_ACC + n, 1, MPI_DOUBLE, MPI_SUM, win);
	MPI_Get_accumulate(&one, 1, MPI_DOUBLE, &got[1], 1, MPI_DOUBLE, right, S_GACC + n, 1,
			   MPI_DOUBLE, MPI_SUM, win);
	MPI_Fetch_and_op(&v, &res, MPI_INT64_T, right, S_FOP + n, MPI_REPLACE, win);
	MPI_Compare_and_swap(&v, &cmp, &old, MPI_INT64_T, right, S_CAS + n, win);
	MPI_Rput(&a[2], 1, MPI_DOUBLE, right, S_RPUT + n, 1, MPI_DOUBLE, win, &r[0]);
	MPI_Rget(&got[2], 1, MPI_DOUBLE, right, 3, 1, MPI_DOUBLE, win, &r[1]);
	MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
	MPI_Win_unlock(right, win);
	a[1] += 1e-3 * (got[0] + got[1] + got[2] + (double)res + old);
}

static void lock_mode(int n, int iters, int hold)
{
	double *a = calloc((size_t)n + NSLOTS, sizeof(double));
	MPI_Win win;

	fill(a, n);
	memset(&a[n], 0, NSLOTS * sizeof(double));
	MPI_Win_create(a, (MPI_Aint)(n + NSLOTS) * sizeof(double), sizeof(double),
		       MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
	for (int it = 0; it < iters; it++) {
		if (hold) {
			/* A long passive-target phase: operations and work, all
			 * under one lock, flushed now and then. */
			MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
			for (int k = 0; k < hold; k++) {
				double one = 1.0;

				MPI_Accumulate(&one, 1, MPI_DOUBLE, right, S_ACC + n, 1,
					       MPI_DOUBLE, MPI_SUM, win);
				relax(a, 4, n);
				MPI_Win_flush(right, win);
			}
			MPI_Win_unlock(right, win);
		} else {
			lock_step(win, a, n, it);
			relax(a, 4, n);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
		step_hash(a, n + NSLOTS);
		MPI_Win_unlock(rank, win);
		MPI_Barrier(MPI_COMM_WORLD);
	}
	MPI_Win_free(&win);
	free(a);
}

static void lockall_mode(int n, int iters)
{
	double *a, one = 1.0;
	MPI_Win win;

	MPI_Win_allocate((MPI_Aint)(n + 2) * sizeof(double), sizeof(double), MPI_INFO_NULL,
			 MPI_COMM_WORLD, &a, &win);
	fill(a, n + 2);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
	for (int it = 0; it < iters; it++) {
		MPI_Put(&a[1], 1, MPI_DOUBLE, right, n + 1, 1, MPI_DOUBLE, win);
		MPI_Accumulate(&one, 1, MPI_DOUBLE, left, 0, 1, MPI_DOUBLE, MPI_SUM, win);
		MPI_Win_flush_all(win);
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Win_sync(win);
		relax(a, 1, n + 1);
		step_hash(a, n + 2);
		MPI_Barrier(MPI_COMM_WORLD); /* all read before the next puts */
	}
	MPI_Win_unlock_all(win);
	MPI_Win_free(&win);
}

static void dynamic_mode(int n, int iters)
{
	double *a, *b = malloc(64 * sizeof(double));
	MPI_Aint mine, *addr = malloc(sizeof(MPI_Aint) * (size_t)size);
	MPI_Win win;

	MPI_Alloc_mem((MPI_Aint)(n + 2) * sizeof(double), MPI_INFO_NULL, &a);
	fill(a, n + 2);
	MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	MPI_Win_attach(win, a, (MPI_Aint)(n + 2) * sizeof(double));
	MPI_Win_attach(win, b, 64 * sizeof(double));
	MPI_Get_address(&a[n + 1], &mine);
	MPI_Allgather(&mine, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD);
	for (int it = 0; it < iters; it++) {
		if (it == iters / 2)
			MPI_Win_detach(win, b);
		MPI_Win_lock_all(0, win);
		MPI_Put(&a[1], 1, MPI_DOUBLE, right, addr[right], 1, MPI_DOUBLE, win);
		MPI_Win_flush(right, win);
		MPI_Win_unlock_all(win);
		MPI_Barrier(MPI_COMM_WORLD);
		relax(a, 1, n + 1);
		step_hash(a, n + 2);
		MPI_Barrier(MPI_COMM_WORLD);
	}
	MPI_Win_detach(win, a);
	MPI_Win_free(&win);
	MPI_Free_mem(a);
	free(b);
	free(addr);
}

static void pscw_mode(int n, int iters)
{
	double *a = malloc(((size_t)n + 2) * sizeof(double));
	int peers[2] = {left, right}, flag;
	uint64_t mine = HASH_START, *all = malloc(sizeof(uint64_t) * (size_t)size);
	MPI_Group world, nbrs;
	MPI_Win win;

	fill(a, n + 2);
	MPI_Win_create(a, ((MPI_Aint)n + 2) * sizeof(double), sizeof(double), MPI_INFO_NULL,
		       MPI_COMM_WORLD, &win);
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	MPI_Group_incl(world, left == right ? 1 : 2, peers, &nbrs);
	for (int it = 0; it < iters; it++) {
		double sum = 0;

		MPI_Win_post(nbrs, 0, win);
		MPI_Win_start(nbrs, 0, win);
		MPI_Put(&a[1], 1, MPI_DOUBLE, left, n + 1, 1, MPI_DOUBLE, win);
		MPI_Put(&a[n], 1, MPI_DOUBLE, right, 0, 1, MPI_DOUBLE, win);
		MPI_Win_complete(win);
		if (it % 2) {
			do
				MPI_Win_test(win, &flag);
			while (!flag);
		} else {
			MPI_Win_wait(win);
		}
		relax(a, 0, n + 2);
		for (int i = 0; i < n + 2; i++)
			sum += a[i] * (double)(i % 7 + 1);
		mine = hash_mix(mine, &sum, sizeof(sum));
	}
	MPI_Gather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	if (rank == 0)
		hash = hash_mix(hash, all, sizeof(uint64_t) * (size_t)size);
	MPI_Group_free(&nbrs);
	MPI_Group_free(&world);
	MPI_Win_free(&win);
	free(all);
	free(a);
}

static void shared_mode(int n, int iters)
{
	double *a, *left, *right, *first;
	MPI_Aint sz;
	MPI_Comm node;
	MPI_Win win;
	int nr, nn, du;

	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &nr);
	MPI_Comm_size(node, &nn);
	MPI_Win_allocate_shared((MPI_Aint)n * sizeof(double), sizeof(double), MPI_INFO_NULL, node,
				&a, &win);
	MPI_Win_shared_query(win, (nr + nn - 1) % nn, &sz, &du, &left);
	MPI_Win_shared_query(win, (nr + 1) % nn, &sz, &du, &right);
	MPI_Win_shared_query(win, MPI_PROC_NULL, &sz, &du, &first);
	if (a != first + (size_t)nr * (size_t)n || sz != (MPI_Aint)(n * sizeof(double)) ||
	    du != sizeof(double)) {
		fprintf(stderr, "rank %d: the shared window's parts are not contiguous\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 3);
	}
	fill(a, n);
	MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
	for (int it = 0; it < iters; it++) {
		double l, r;

		MPI_Win_sync(win);
		MPI_Barrier(node);
		l = left[n - 1];
		r = right[0];
		MPI_Barrier(node);
		a[0] = 0.5 * (a[0] + l);
		a[n - 1] = 0.5 * (a[n - 1] + r);
		relax(a, 0, n);
		MPI_Win_sync(win);
		step_hash(a, n);
		if (it % 8 == 7) {
			double v = a[1] + it;

			MPI_Put(&v, 1, MPI_DOUBLE, (nr + 1) % nn, n / 2, 1, MPI_DOUBLE, win);
			MPI_Win_flush_all(win);
			MPI_Win_sync(win);
			MPI_Barrier(node);
		}
	}
	MPI_Win_unlock_all(win);
	MPI_Win_free(&win);
	MPI_Comm_free(&node);
}

int main(int argc, char **argv)
{
	const char *mode = "fence";
	int n = 4000, iters = 400, pos = 0;

	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--", 2))
			mode = argv[i] + 2;
		else if (pos++ == 0)
			n = atoi(argv[i]);
		else
			iters = atoi(argv[i]);
	}

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	left = (rank + size - 1) % size;
	right = (rank + 1) % size;
	if (n < 8)
		n = 8;
	if (!strcmp(mode, "fence"))
		fence_mode(n, iters);
	else if (!strcmp(mode, "lock"))
		lock_mode(n, iters, 0);
	else if (!strcmp(mode, "long"))
		lock_mode(n, iters, 20);
	else if (!strcmp(mode, "lockall"))
		lockall_mode(n, iters);
	else if (!strcmp(mode, "dynamic"))
		dynamic_mode(n, iters);
	else if (!strcmp(mode, "pscw"))
		pscw_mode(n, iters);
	else if (!strcmp(mode, "shared"))
		shared_mode(n, iters);
	else
		MPI_Abort(MPI_COMM_WORLD, 2);
	if (rank == 0)
		printf("windows %s: n=%d iters=%d ranks=%d hash=%016llx\n", mode, n, iters, size,
		       (unsigned long long)hash);
	MPI_Finalize();
	return 0;
}
