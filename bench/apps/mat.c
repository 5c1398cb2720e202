/* mat: the "few pages change" workload of bench/incremental_perf.sh.
 *
 * An ordinary MPI program: C = A * B, dense, row-distributed. A (this rank's
 * rows) and B (whole) are filled once and never written again; C is filled
 * one row per iteration, each iteration ending with an MPI_Allreduce on
 * MPI_COMM_WORLD. Between two checkpoints only the C rows of that interval
 * change: a few pages of a large image.
 *
 *   mat [N [ITERS]] [--rate R]
 *                      N x N matrices (N divisible by the ranks), ITERS rows
 *                      of C per rank (<= N / ranks); with --rate, at most R
 *                      rows per second (a sleep after each row), so that
 *                      the rows written per interval do not depend on the
 *                      machine's speed (tests/cr/mat.sh)
 *
 * Memory per rank: 8 N^2 (B) + 16 N^2 / ranks (A and C); N = 3072 on
 * 4 ranks: 72 + 18 + 18 MiB, 432 MiB in all.
 * Output (rank 0): mat: n=<N> iters=<ITERS> checksum=<%.17g>
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
	long n = 3072, iters = -1, rows, pos = 0;
	double rate = 0, t0 = 0;
	int rank, size;
	double *a, *b, *c, local = 0, total = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rate") && i + 1 < argc)
			rate = atof(argv[++i]);
		else if (pos++ == 0)
			n = atol(argv[i]);
		else
			iters = atol(argv[i]);
	}
	rows = n / size;
	if (iters < 0)
		iters = rows;
	if (n < size || n % size || iters < 1 || iters > rows) {
		fprintf(stderr, "mat: usage: mat [N [ITERS <= N/ranks]] [--rate R]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	a = malloc(rows * n * sizeof(double));
	b = malloc(n * n * sizeof(double));
	c = calloc(rows * n, sizeof(double));
	if (!a || !b || !c) {
		fprintf(stderr, "mat: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (long i = 0; i < rows; i++)
		for (long k = 0; k < n; k++)
			a[i * n + k] = (double)((rank * rows + i + 2 * k) % 17) / 17.0;
	for (long k = 0; k < n; k++)
		for (long j = 0; j < n; j++)
			b[k * n + j] = (double)((3 * k + j) % 13) / 13.0;

	if (rate > 0)
		t0 = MPI_Wtime();
	for (long i = 0; i < iters; i++) {
		double *ci = c + i * n, s = 0;

		/* Row i starts no earlier than i / rate seconds in. */
		while (rate > 0 && MPI_Wtime() - t0 < i / rate) {
			struct timespec ts = {0, 1000000};

			nanosleep(&ts, NULL);
		}

		/* i-k-j order: streams through B, writes one row of C. */
		for (long k = 0; k < n; k++) {
			double aik = a[i * n + k];
			const double *bk = b + k * n;

			for (long j = 0; j < n; j++)
				ci[j] += aik * bk[j];
		}
		for (long j = 0; j < n; j++)
			s += ci[j];
		local += s;
		MPI_Allreduce(&s, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	}
	MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mat: n=%ld iters=%ld checksum=%.17g\n", n, iters, total);
	free(a);
	free(b);
	free(c);
	MPI_Finalize();
	return 0;
}
