/* fftsplit: the communication of a plane-wave code's parallel FFTs (as
 * Quantum ESPRESSO's pw.x does them): the ranks split into groups (pools),
 * each group splits again into rows and columns of a grid, and every step
 * does back-to-back MPI_Alltoall on the rows, then on the columns, then a
 * sum over the group and, now and then, over the world. Groups work
 * unequal amounts, so they are at different steps at any instant.
 *
 *   fftsplit [N [ITERS]]
 *
 * N doubles per rank go through each transpose. Output (rank 0, stdout, at
 * the end): one line hashing every rank's results and the time per step
 * of the plain run ("step_us").
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1024, iters = argc > 2 ? atoi(argv[2]) : 2000;
	int rank, size, pool, prank, psize, q, rows;
	MPI_Comm poolc, row, col;
	uint64_t h = HASH_START, all;
	double *a, *b, t0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	pool = size >= 4 ? rank % 2 : 0;
	MPI_Comm_split(MPI_COMM_WORLD, pool, rank, &poolc);
	MPI_Comm_rank(poolc, &prank);
	MPI_Comm_size(poolc, &psize);
	for (rows = 1; rows * rows < psize; rows++)
		;
	while (psize % rows)
		rows--;
	q = psize / rows;
	MPI_Comm_split(poolc, prank / q, prank, &row);
	MPI_Comm_split(poolc, prank % q, prank, &col);
	n -= n % psize;
	if (n < psize)
		n = psize;
	a = malloc(sizeof(double) * n);
	b = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++)
		a[i] = (double)((rank * 3 + i) % 17), b[i] = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int it = 0; it < iters; it++) {
		int rs, cs;
		double s;

		MPI_Comm_size(row, &rs);
		MPI_Comm_size(col, &cs);
		for (int rep = 0; rep <= pool; rep++)
			for (int i = 1; i < n; i++)
				a[i] = 0.5 * a[i] + 0.25 * (a[i - 1] + b[i]);
		MPI_Alltoall(a, n / rs, MPI_DOUBLE, b, n / rs, MPI_DOUBLE, row);
		MPI_Alltoall(b, n / cs, MPI_DOUBLE, a, n / cs, MPI_DOUBLE, col);
		MPI_Alltoall(a, n / cs, MPI_DOUBLE, b, n / cs, MPI_DOUBLE, col);
		MPI_Alltoall(b, n / rs, MPI_DOUBLE, a, n / rs, MPI_DOUBLE, row);
		s = a[it % n];
		MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, poolc);
		a[0] = 1e-3 * s;
		if (it % 16 == 15) {
			MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			a[1] = 1e-6 * s;
		}
		h = hash_mix(h, a, sizeof(double) * 8);
	}
	t0 = MPI_Wtime() - t0;
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (!rank) {
		printf("fftsplit np=%d n=%d iters=%d hash %016llx\n", size, n, iters,
		       (unsigned long long)all);
		fprintf(stderr, "fftsplit: step_us %.1f\n", 1e6 * t0 / iters);
	}
	MPI_Comm_free(&row);
	MPI_Comm_free(&col);
	MPI_Comm_free(&poolc);
	free(a);
	free(b);
	MPI_Finalize();
	return 0;
}
