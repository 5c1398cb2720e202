/* safepoint_perf N: time N MPI_Allreduce of one double and N MPI_Barrier
 * on MPI_COMM_WORLD and print microseconds per call (rank 0). Run plain
 * and under stasis-run by bench/safepoint_perf.sh. Under stasis every such
 * call goes through its generated wrapper, which checks the coordinator's
 * flag and counts the collective on its communicator before and after the
 * real call (mpi/coord.h, mpi/collective_counts.h). The name is from the
 * first design, where these collectives were the only places a checkpoint
 * could start. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000, rank;
	double x = 1, y, t0, t_allreduce, t_barrier;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	for (int i = 0; i < n / 10; i++) /* warm up */
		MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int i = 0; i < n; i++)
		MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	t_allreduce = (MPI_Wtime() - t0) / n * 1e6;
	t0 = MPI_Wtime();
	for (int i = 0; i < n; i++)
		MPI_Barrier(MPI_COMM_WORLD);
	t_barrier = (MPI_Wtime() - t0) / n * 1e6;
	if (rank == 0)
		printf("allreduce_us %.3f\nbarrier_us %.3f\n", t_allreduce, t_barrier);
	MPI_Finalize();
	return 0;
}
