/* omp: a hybrid MPI + OpenMP solver, MPI_THREAD_FUNNELED: its compute loop is
 * an OpenMP parallel for with a reduction, run by libgomp's worker threads;
 * only the main thread calls MPI. Each thread also counts what it did in a
 * threadprivate variable (thread-local storage), folded into the answer (a
 * static schedule gives every thread the same share in every run).
 *
 *   OMP_NUM_THREADS=2 omp [N [ITERS]]
 *
 * Output (rank 0, stdout, at the end): one line hashing every rank's state.
 */
#include <mpi.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"

static uint64_t done;
#pragma omp threadprivate(done)

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1 << 16, iters = argc > 2 ? atoi(argv[2]) : 2000;
	int rank, size, provided, threads = 0;
	double *u, *v, sum, global;
	uint64_t h = HASH_START, all, counts[64] = {0};

	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	u = malloc(sizeof(double) * n);
	v = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++)
		u[i] = v[i] = (double)((rank * 11 + i) % 17);

	for (int it = 0; it < iters; it++) {
		double *t;

		sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
		for (int i = 1; i < n - 1; i++) {
			v[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
			sum += v[i] * (1 + (i & 3));
			done++;
		}
		t = u;
		u = v;
		v = t;
		MPI_Allreduce(&sum, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		u[it % n] += global * 1e-12;
	}
#pragma omp parallel
	{
		int me = omp_get_thread_num();

#pragma omp critical
		{
			if (me < 64)
				counts[me] = done;
			if (omp_get_num_threads() > threads)
				threads = omp_get_num_threads();
		}
	}

	h = hash_mix(h, u, sizeof(double) * n);
	h = hash_mix(h, counts, sizeof(counts));
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("omp: n=%d iters=%d ranks=%d threads=%d hash=%016llx\n", n, iters, size,
		       threads, (unsigned long long)all);
	MPI_Finalize();
	return 0;
}
