/* comms: an MPI program whose collectives all run on communicators it made
 * itself, as PETSc-style and Quantum ESPRESSO-style codes do. A checkpoint
 * test subject for virtual handles: every communicator, group, keyval,
 * attribute, name and error handler here must come back after a restart as it
 * was.
 *
 *   comms [N [ITERS]]
 *
 * A 1-D diffusion of N cells per rank on a periodic ring:
 *   - world: MPI_Comm_dup(MPI_COMM_WORLD), named, with MPI_ERRORS_RETURN
 *     and an attribute (a keyval with copy and delete callbacks);
 *   - ring: MPI_Cart_create over world (1-D, periodic, reordering allowed),
 *     its neighbours from MPI_Cart_shift; halos travel with MPI_Sendrecv;
 *   - half: MPI_Comm_split of world by rank parity, an allreduce per step;
 *   - evens: MPI_Comm_create from a group of the even ranks;
 *   - scratch: a duplicate of ring (MPI_Comm_idup, its request waited
 *     for) used for the first half of the run, then freed (its
 *     attribute's delete callback counts frees);
 *   - keyvals made and freed every step, as a library does per call: one
 *     freed with no attribute left, one freed while its attribute is still
 *     on world (then deleted), and one freed while its attribute stays on
 *     world for 16 steps (across checkpoints) before it is deleted; the
 *     delete callback mixes what it is handed. Thousands of keyvals come
 *     and go: MPI destroys each with its last attribute, so a checkpoint
 *     must never ask MPI about one (that ends the job) nor keep them all.
 * Every step ends with an MPI_Allreduce on ring (a communicator of every
 * rank: where stasis may checkpoint); MPI_COMM_WORLD itself is used only
 * for MPI_Init and MPI_Finalize.
 *
 * Output (rank 0, stdout, at the end): one line hashing the field, the
 * reductions and what the program reads back from its communicators.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash = 0xcbf29ce484222325ull;

static void mix(const void *buf, size_t len)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++) {
		hash ^= p[i];
		hash *= 0x100000001b3ull;
	}
}

static int copies, deletes; /* counted by the keyval's callbacks */

static int copy_fn(MPI_Comm old, int keyval, void *extra, void *in, void *out, int *flag)
{
	(void)old;
	(void)keyval;
	(void)extra;
	copies++;
	*(void **)out = in;
	*flag = 1;
	return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm comm, int keyval, void *val, void *extra)
{
	(void)comm;
	(void)keyval;
	(void)val;
	(void)extra;
	deletes++;
	return MPI_SUCCESS;
}

static long step_values[3]; /* what the per-step keyvals' attributes point at */

static int step_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
	(void)comm;
	(void)keyval;
	mix(&extra, sizeof(extra));
	mix(val, sizeof(long));
	deletes++;
	return MPI_SUCCESS;
}

/* This step's keyvals (see the top). *linger: the keyval freed while its
 * attribute stays on world, MPI_KEYVAL_INVALID once deleted. */
static void step_keyvals(MPI_Comm world, int it, int *linger, int *linger_key)
{
	int kv;

	for (int i = 0; i < 3; i++)
		step_values[i] = (long)it * 3 + i;
	MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, step_delete, &kv, (void *)(intptr_t)1);
	MPI_Comm_set_attr(world, kv, &step_values[0]);
	MPI_Comm_delete_attr(world, kv);
	MPI_Comm_free_keyval(&kv);
	if (kv != MPI_KEYVAL_INVALID)
		fprintf(stderr, "comms: a freed keyval is not MPI_KEYVAL_INVALID\n"), exit(1);

	MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, step_delete, &kv, (void *)(intptr_t)2);
	MPI_Comm_set_attr(world, kv, &step_values[1]);
	{
		int key = kv;

		MPI_Comm_free_keyval(&kv);
		MPI_Comm_delete_attr(world, key); /* the callback still runs */
	}

	if (it % 16 == 0) {
		if (*linger_key != MPI_KEYVAL_INVALID)
			MPI_Comm_delete_attr(world, *linger_key);
		MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, step_delete, linger, (void *)(intptr_t)3);
		MPI_Comm_set_attr(world, *linger, &step_values[2]);
		*linger_key = *linger;
		MPI_Comm_free_keyval(linger);
	}
}

static void check(int err, const char *what)
{
	if (err != MPI_SUCCESS) {
		fprintf(stderr, "comms: %s failed (%d)\n", what, err);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096, iters = argc > 2 ? atoi(argv[2]) : 2000;
	int rank, size, left, right, keyval, flag, dims[1] = {0}, periods[1] = {1};
	int wrank, erank = -1, len;
	static long tag_value = 12345; /* an attribute value: an address in .data */
	MPI_Comm world, ring, half, evens, scratch;
	MPI_Group wgroup, egroup;
	double *u, *next, sum, hsum, esum = 0;
	char name[MPI_MAX_OBJECT_NAME];
	void *attr;
	int linger = MPI_KEYVAL_INVALID, linger_key = MPI_KEYVAL_INVALID;

	MPI_Init(&argc, &argv);
	MPI_Comm_dup(MPI_COMM_WORLD, &world);
	MPI_Comm_set_name(world, "comms-world");
	MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
	MPI_Comm_create_keyval(copy_fn, delete_fn, &keyval, NULL);
	MPI_Comm_set_attr(world, keyval, &tag_value);
	MPI_Comm_rank(world, &wrank);
	MPI_Comm_size(world, &size);

	MPI_Dims_create(size, 1, dims);
	check(MPI_Cart_create(world, 1, dims, periods, 1, &ring), "MPI_Cart_create");
	MPI_Comm_rank(ring, &rank);
	MPI_Cart_shift(ring, 0, 1, &left, &right);
	MPI_Comm_split(world, wrank % 2, wrank, &half);
	MPI_Comm_group(world, &wgroup);
	{
		int ev[64], ne = 0;

		for (int r = 0; r < size && ne < 64; r += 2)
			ev[ne++] = r;
		MPI_Group_incl(wgroup, ne, ev, &egroup);
	}
	MPI_Comm_create(world, egroup, &evens);
	MPI_Group_free(&egroup);
	if (evens != MPI_COMM_NULL)
		MPI_Comm_rank(evens, &erank);
	{
		MPI_Request rq;

		MPI_Comm_idup(ring, &scratch, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	}
	MPI_Comm_set_attr(scratch, keyval, &tag_value);

	u = calloc(n + 2, sizeof(double));
	next = calloc(n + 2, sizeof(double));
	for (int i = 1; i <= n; i++)
		u[i] = (double)((rank * n + i) % 97) / 97.0;

	for (int it = 0; it < iters; it++) {
		MPI_Sendrecv(&u[n], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, ring,
			     MPI_STATUS_IGNORE);
		MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 2, &u[n + 1], 1, MPI_DOUBLE, right, 2, ring,
			     MPI_STATUS_IGNORE);
		for (int i = 1; i <= n; i++)
			next[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1]);
		memcpy(&u[1], &next[1], n * sizeof(double));

		sum = 0;
		for (int i = 1; i <= n; i++)
			sum += u[i];
		MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, ring);
		hsum = u[1 + it % n];
		MPI_Allreduce(MPI_IN_PLACE, &hsum, 1, MPI_DOUBLE, MPI_MAX, half);
		mix(&sum, sizeof(sum));
		mix(&hsum, sizeof(hsum));
		if (evens != MPI_COMM_NULL && it % 8 == 0) {
			esum = u[n];
			MPI_Reduce(&u[n], &esum, 1, MPI_DOUBLE, MPI_SUM, 0, evens);
			if (erank == 0)
				mix(&esum, sizeof(esum));
		}
		if (scratch != MPI_COMM_NULL) {
			double m = u[1];

			MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MIN, scratch);
			mix(&m, sizeof(m));
			if (it == iters / 2)
				MPI_Comm_free(&scratch);
		}
		if (it % 4 == 0)
			step_keyvals(world, it / 4, &linger, &linger_key);
		if (it % 64 == 0) {
			double b = sum;

			MPI_Bcast(&b, 1, MPI_DOUBLE, it % size, world);
			mix(&b, sizeof(b));
		}
	}

	/* What the communicators hold now must be what they held before any
	 * restart. */
	MPI_Comm_get_name(world, name, &len);
	mix(name, len);
	MPI_Comm_get_attr(world, keyval, &attr, &flag);
	if (!flag || attr != &tag_value || *(long *)attr != 12345)
		fprintf(stderr, "comms: the attribute of world is lost\n"), exit(1);
	{
		MPI_Errhandler eh;

		MPI_Comm_get_errhandler(world, &eh);
		if (eh != MPI_ERRORS_RETURN)
			fprintf(stderr, "comms: the error handler of world is lost\n"), exit(1);
		MPI_Errhandler_free(&eh);
	}
	{
		int cd, cp[1], cc[1], topo;

		MPI_Topo_test(ring, &topo);
		MPI_Cartdim_get(ring, &cd);
		MPI_Cart_get(ring, 1, dims, cp, cc);
		if (topo != MPI_CART || cd != 1 || cc[0] != rank)
			fprintf(stderr, "comms: the cartesian topology is lost\n"), exit(1);
	}
	mix(&deletes, sizeof(deletes));

	MPI_Comm_free(&half);
	if (evens != MPI_COMM_NULL)
		MPI_Comm_free(&evens);
	MPI_Comm_free(&ring);
	MPI_Comm_free(&world);
	MPI_Group_free(&wgroup);
	MPI_Comm_free_keyval(&keyval);
	if (wrank == 0)
		printf("comms: n=%d iters=%d ranks=%d hash=%016llx deletes=%d\n", n, iters, size,
		       (unsigned long long)hash, deletes);
	MPI_Finalize();
	(void)copies;
	return 0;
}
