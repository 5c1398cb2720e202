/* unseen: a program that reaches MPI a way stasis does not see, for the
 * never-silent rule (mpi/unseen.h): it initialises MPI through PMPI_Init,
 * found with dlsym at run time (as a binding stasis does not wrap would
 * reach it), then works through the profiling names only.
 *
 *   unseen [ITERS [SECONDS]]
 *
 * With SECONDS, it runs at least that long (the reductions spread over
 * it), so that a watcher has time to see it.
 *
 * Output (rank 0, stdout): one line with the sum of the ranks, ITERS
 * times reduced. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int (*init)(int *, char ***) = (int (*)(int *, char ***))dlsym(RTLD_DEFAULT, "PMPI_Init");
	int iters = argc > 1 ? atoi(argv[1]) : 1000, rank, sum = 0;
	double seconds = argc > 2 ? atof(argv[2]) : 0;

	if (!init || init(&argc, &argv) != MPI_SUCCESS) {
		fprintf(stderr, "unseen: cannot initialise MPI through PMPI_Init\n");
		return 1;
	}
	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	for (int i = 0; i < iters; i++) {
		int r = 0;

		PMPI_Allreduce(&rank, &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		sum += r;
		if (seconds > 0)
			usleep((useconds_t)(seconds * 1e6 / iters));
	}
	if (rank == 0)
		printf("unseen: iters=%d sum=%d\n", iters, sum);
	PMPI_Finalize();
	return 0;
}
