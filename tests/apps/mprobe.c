/* mprobe: matched probes, as an event loop or a library that learns a
 * message's size before it allocates does them: every step each rank sends
 * to its right neighbour, matches what comes from anywhere (MPI_Mprobe, or
 * a loop of MPI_Improbe every other step), and receives it (MPI_Mrecv, or
 * MPI_Imrecv and a wait) only after an MPI_Allreduce on a duplicate of the
 * world: the matched message is held across a collective. A checkpoint
 * cannot be taken while a rank holds one (mpi/coord.h, coord_match_begin):
 * the ranks must still agree where to stop, and never hang (a rank let
 * through a collective's gate because it held a matched message, while
 * the others stopped, once waited in the collective for ever).
 *
 *   mprobe [N [ITERS]]     N: doubles per message
 *
 * Output (rank 0, stdout, at the end): one line hashing every message and
 * status received and every reduction.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 16, iters = argc > 2 ? atoi(argv[2]) : 20000;
	int rank, size;
	uint64_t h = HASH_START, all;
	double *out, *in;
	MPI_Comm comm;

	MPI_Init(&argc, &argv);
	MPI_Comm_dup(MPI_COMM_WORLD, &comm);
	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	out = malloc(sizeof(double) * (n + 1));
	in = malloc(sizeof(double) * (n + 1));
	for (int it = 0; it < iters; it++) {
		int right = (rank + 1) % size, count, flag = 0;
		double sum = 0, total;
		MPI_Message msg;
		MPI_Status st;

		/* A length that changes: what the probe is for. */
		count = 1 + (rank + it) % n;
		for (int i = 0; i < count; i++)
			out[i] = rank * 1e6 + it + i * 0.5;
		MPI_Send(out, count, MPI_DOUBLE, right, it % 5, comm);
		if (it % 2)
			while (!flag)
				MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &msg, &st);
		else
			MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &msg, &st);
		MPI_Get_count(&st, MPI_DOUBLE, &count);
		for (int i = 0; i < count; i++)
			sum += out[i];
		MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, comm);
		if (it % 3) {
			MPI_Mrecv(in, count, MPI_DOUBLE, &msg, &st);
		} else {
			MPI_Request rq;

			MPI_Imrecv(in, count, MPI_DOUBLE, &msg, &rq);
			MPI_Wait(&rq, &st);
		}
		h = hash_mix(h, in, sizeof(double) * count);
		h = hash_mix(h, &st.MPI_SOURCE, sizeof(int));
		h = hash_mix(h, &st.MPI_TAG, sizeof(int));
		h = hash_mix(h, &total, sizeof(total));
	}
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, comm);
	if (rank == 0)
		printf("mprobe n=%d iters=%d ranks=%d hash %016llx\n", n, iters, size,
		       (unsigned long long)all);
	free(out);
	free(in);
	MPI_Comm_free(&comm);
	MPI_Finalize();
	return 0;
}
