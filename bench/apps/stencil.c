/* stencil: the "every page changes" workload of bench/incremental_perf.sh.
 *
 * An ordinary MPI program: a 1-D three-point Jacobi sweep over two arrays
 * of M doubles per rank, swapped every iteration, so that each iteration
 * rewrites every page of one of them (and every interval of more than one
 * iteration, all of both). Halo exchange with MPI_Sendrecv, then an
 * MPI_Allreduce on MPI_COMM_WORLD.
 *
 *   stencil [M [ITERS]]    default M = 4 Mi doubles: 2 x 32 MiB per rank,
 *                          256 MiB on 4 ranks
 * Output (rank 0): stencil: m=<M> iters=<ITERS> checksum=<%.17g>
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long m = argc > 1 ? atol(argv[1]) : 4L << 20, iters = argc > 2 ? atol(argv[2]) : 300;
	int rank, size, left, right;
	double *u, *v, *t, sum, total = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
	right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
	/* m interior points plus one halo on each side. */
	u = malloc((m + 2) * sizeof(double));
	v = malloc((m + 2) * sizeof(double));
	if (!u || !v || m < 2 || iters < 1) {
		fprintf(stderr, "stencil: bad arguments or out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (long i = 0; i < m + 2; i++)
		u[i] = v[i] = (double)((rank * m + i) % 101) / 101.0;

	for (long it = 0; it < iters; it++) {
		MPI_Sendrecv(u + 1, 1, MPI_DOUBLE, left, 0, u + m + 1, 1, MPI_DOUBLE, right, 0,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Sendrecv(u + m, 1, MPI_DOUBLE, right, 1, u, 1, MPI_DOUBLE, left, 1,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		sum = 0;
		for (long i = 1; i <= m; i++) {
			v[i] = 0.25 * u[i - 1] + 0.5 * u[i] + 0.25 * u[i + 1];
			sum += v[i];
		}
		t = u;
		u = v;
		v = t;
		MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	}
	if (rank == 0)
		printf("stencil: m=%ld iters=%ld checksum=%.17g\n", m, iters, total);
	free(u);
	free(v);
	MPI_Finalize();
	return 0;
}
