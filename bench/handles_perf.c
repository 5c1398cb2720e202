/* handles_perf N: the latency of MPI calls whose handles stasis translates
 * and whose collectives and messages it counts, on communicators and
 * datatypes the program made: microseconds per call, rank 0 prints one line
 * per case. Run plain and under stasis-run, alternating, by
 * bench/handles_perf.sh.
 *
 *   allreduce_dup    8-byte MPI_Allreduce on a duplicate of the world
 *   allreduce_split  8-byte MPI_Allreduce on a split
 *   pingpong         0-byte MPI_Send/MPI_Recv between ranks 0 and 1, half
 *                    a round trip (under stasis an Isend/Irecv and a wait
 *                    loop, blocking.h)
 *   pingpong_req     the same with MPI_Isend/MPI_Irecv/MPI_Waitall (a
 *                    virtual request minted and released per message)
 *   vector_pingpong  one MPI_Type_vector of 64 doubles (stride 2)
 *   pingpong_4mib    4 MiB MPI_Send/MPI_Recv, half a round trip (the
 *                    bandwidth a blocking call keeps)
 *   type_cycle       MPI_Type_vector + MPI_Type_commit + MPI_Type_free, as
 *                    BLACS does for every message it sends (MPI hands the
 *                    same address back each time: the reverse map's worst
 *                    case)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double pingpong(int rank, int n, void *buf, int count, MPI_Datatype t, MPI_Comm c,
		       int requests)
{
	double t0;
	int peer = 1 - rank;

	MPI_Barrier(c);
	t0 = MPI_Wtime();
	for (int i = 0; i < n && rank < 2; i++) {
		if (requests) {
			MPI_Request r[2];

			if (rank == 0) {
				MPI_Isend(buf, count, t, peer, 0, c, &r[0]);
				MPI_Irecv(buf, count, t, peer, 0, c, &r[1]);
			} else {
				MPI_Irecv(buf, count, t, peer, 0, c, &r[1]);
				MPI_Waitall(1, &r[1], MPI_STATUSES_IGNORE);
				MPI_Isend(buf, count, t, peer, 0, c, &r[0]);
				r[1] = MPI_REQUEST_NULL;
			}
			MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
		} else if (rank == 0) {
			MPI_Send(buf, count, t, peer, 0, c);
			MPI_Recv(buf, count, t, peer, 0, c, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(buf, count, t, peer, 0, c, MPI_STATUS_IGNORE);
			MPI_Send(buf, count, t, peer, 0, c);
		}
	}
	return (MPI_Wtime() - t0) / n / 2 * 1e6;
}

static double allreduce(int n, MPI_Comm c)
{
	double x = 1, y, t0;

	MPI_Barrier(c);
	t0 = MPI_Wtime();
	for (int i = 0; i < n; i++)
		MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, c);
	return (MPI_Wtime() - t0) / n * 1e6;
}

static double type_cycle(int n)
{
	double t0 = MPI_Wtime();

	for (int i = 0; i < n; i++) {
		MPI_Datatype t;

		MPI_Type_vector(16, 16, 96, MPI_DOUBLE, &t);
		MPI_Type_commit(&t);
		MPI_Type_free(&t);
	}
	return (MPI_Wtime() - t0) / n * 1e6;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000, rank;
	double buf[128] = {0}, r[7];
	char *big = calloc(1, 4 << 20);
	MPI_Comm dup, split;
	MPI_Datatype vec;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &split);
	MPI_Type_vector(64, 1, 2, MPI_DOUBLE, &vec);
	MPI_Type_commit(&vec);
	allreduce(n / 10, dup); /* warm up */
	pingpong(rank, n / 10, buf, 0, MPI_BYTE, dup, 0);

	r[0] = allreduce(n, dup);
	r[1] = allreduce(n, split);
	r[2] = pingpong(rank, n, buf, 0, MPI_BYTE, dup, 0);
	r[3] = pingpong(rank, n, buf, 0, MPI_BYTE, dup, 1);
	r[4] = pingpong(rank, n, buf, 1, vec, dup, 0);
	r[5] = pingpong(rank, n / 500 + 10, big, 4 << 20, MPI_BYTE, dup, 0);
	r[6] = type_cycle(n);
	if (rank == 0)
		printf(
		    "allreduce_dup %.4f\nallreduce_split %.4f\npingpong %.4f\npingpong_req %.4f\n"
		    "vector_pingpong %.4f\npingpong_4mib %.4f\ntype_cycle %.4f\n",
		    r[0], r[1], r[2], r[3], r[4], r[5], r[6]);
	free(big);
	MPI_Type_free(&vec);
	MPI_Comm_free(&split);
	MPI_Comm_free(&dup);
	MPI_Finalize();
	return 0;
}
