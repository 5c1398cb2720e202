/* ring: a halo exchange that never calls a collective in its main loop, and
 * always has a receive pending: each step it posts the MPI_Irecv for the next
 * step before computing, sends its boundary to the next rank, then waits for
 * this step's message. A checkpoint must come while a receive is posted and
 * messages are on their way.
 *
 *   ring [N [ITERS]] [--any]
 *
 * --any receives with MPI_ANY_SOURCE and MPI_ANY_TAG (the tag carries the
 * step, checked on arrival).
 *
 * Output (rank 0, stdout, at the end): one line hashing every value
 * received; a final MPI_Reduce gathers the ranks' hashes.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096, iters = argc > 2 ? atoi(argv[2]) : 20000;
	int any = argc > 3 && !strcmp(argv[3], "--any");
	int rank, size, left, right;
	double *u, *in[2];
	uint64_t h = HASH_START, all;
	MPI_Request rq;
	MPI_Status st;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	left = (rank + size - 1) % size;
	right = (rank + 1) % size;
	u = malloc(sizeof(double) * n);
	in[0] = malloc(sizeof(double) * 8);
	in[1] = malloc(sizeof(double) * 8);
	for (int i = 0; i < n; i++)
		u[i] = (double)((rank * 7 + i) % 13);

	/* The first receive, posted ahead like every later one. */
	MPI_Irecv(in[0], 8, MPI_DOUBLE, any ? MPI_ANY_SOURCE : left, any ? MPI_ANY_TAG : 0,
		  MPI_COMM_WORLD, &rq);
	for (int it = 0; it < iters; it++) {
		MPI_Request next;
		double *got = in[it % 2];

		/* The next step's receive, before this step's work. */
		MPI_Irecv(in[(it + 1) % 2], 8, MPI_DOUBLE, any ? MPI_ANY_SOURCE : left,
			  any ? MPI_ANY_TAG : (it + 1) % 32768, MPI_COMM_WORLD, &next);
		for (int i = 1; i < n - 1; i++)
			u[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
		MPI_Send(u, 8, MPI_DOUBLE, right, it % 32768, MPI_COMM_WORLD);
		MPI_Wait(&rq, &st);
		if (st.MPI_SOURCE != left || st.MPI_TAG != it % 32768) {
			fprintf(stderr, "ring: step %d got source %d tag %d\n", it, st.MPI_SOURCE,
				st.MPI_TAG);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		h = hash_mix(h, got, sizeof(double) * 8);
		u[0] = got[it % 8];
		rq = next;
	}
	MPI_Cancel(&rq);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("ring: n=%d iters=%d ranks=%d%s hash=%016llx\n", n, iters, size,
		       any ? " any" : "", (unsigned long long)all);
	MPI_Finalize();
	return 0;
}
