/* flood: thousands of small messages on their way at once. Each step every
 * rank sends BURST small messages to the next rank with MPI_Isend, works a
 * while, then receives the BURST messages from the previous rank and
 * completes its sends; the only collective is an allreduce every STEP steps.
 * A checkpoint taken while messages are in flight must drain them and give
 * them back in order.
 *
 *   flood [BURST [ITERS]]
 *
 * Output (rank 0, stdout, at the end): one line hashing every message
 * received, in the order received.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"

int main(int argc, char **argv)
{
	int burst = argc > 1 ? atoi(argv[1]) : 2000, iters = argc > 2 ? atoi(argv[2]) : 200;
	int rank, size, left, right;
	uint64_t h = HASH_START, all;
	int(*out)[4], in[4];
	MPI_Request *rq;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	left = (rank + size - 1) % size;
	right = (rank + 1) % size;
	out = malloc(sizeof(*out) * burst);
	rq = malloc(sizeof(*rq) * burst);
	for (int it = 0; it < iters; it++) {
		volatile double x = 0;

		for (int m = 0; m < burst; m++) {
			out[m][0] = it;
			out[m][1] = m;
			out[m][2] = rank;
			out[m][3] = (it * 31 + m * 7 + rank) % 1009;
			MPI_Isend(out[m], 4, MPI_INT, right, m % 7, MPI_COMM_WORLD, &rq[m]);
		}
		/* The messages are on their way meanwhile. */
		for (int k = 0; k < 200000; k++)
			x += k * 0.5;
		for (int m = 0; m < burst; m++) {
			MPI_Status st;

			MPI_Recv(in, 4, MPI_INT, left, m % 7, MPI_COMM_WORLD, &st);
			if (in[0] != it || in[1] != m || in[2] != left) {
				fprintf(stderr, "flood: step %d message %d came as %d/%d from %d\n",
					it, m, in[0], in[1], in[2]);
				MPI_Abort(MPI_COMM_WORLD, 1);
			}
			h = hash_mix(h, in, sizeof(in));
		}
		MPI_Waitall(burst, rq, MPI_STATUSES_IGNORE);
		if (it % 16 == 15) {
			uint64_t g;

			MPI_Allreduce(&h, &g, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
			h = hash_mix(h, &g, sizeof(g));
		}
	}
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("flood: burst=%d iters=%d ranks=%d hash=%016llx\n", burst, iters, size,
		       (unsigned long long)all);
	MPI_Finalize();
	return 0;
}
