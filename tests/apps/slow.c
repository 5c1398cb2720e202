/* slow: one rank computes for seconds while the others wait inside MPI:
 * rank 0 works SECONDS at a time without calling MPI, then sends to rank
 * 1, which waited in MPI_Recv; the other ranks wait in MPI_Barrier
 * meanwhile. A checkpoint wanted while rank 0 works must be
 * taken once it calls MPI again, with the others stopped where they wait.
 *
 *   slow [WORK [ROUNDS]]     (WORK: tens of millions of steps per round)
 *
 * Output (rank 0, stdout, at the end): one line with a checksum.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double work(int units, double x)
{
	for (long k = 0; k < units * 10000000L; k++)
		x = x * 0.9999999 + 1e-7;
	return x;
}

int main(int argc, char **argv)
{
	int units = argc > 1 ? atoi(argv[1]) : 20, rounds = argc > 2 ? atoi(argv[2]) : 4;
	int rank, size;
	double acc = 0, x = 1, got;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int r = 0; r < rounds; r++) {
		if (rank == 0) {
			x = work(units, r + 1.0);
			MPI_Send(&x, 1, MPI_DOUBLE, 1, r, MPI_COMM_WORLD);
		} else if (rank == 1) {
			MPI_Recv(&got, 1, MPI_DOUBLE, 0, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			acc += got;
		}
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Bcast(&acc, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
	}
	if (rank == 0)
		printf("slow: work=%d rounds=%d ranks=%d acc=%.17g\n", units, rounds, size, acc);
	MPI_Finalize();
	return 0;
}
