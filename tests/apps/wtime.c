/* wtime: MPI_Wtime read by C (both names) and, through mpi_wtime_, the way
 * a Fortran program reads it, every step of a loop; a step whose clock
 * reads less than the step before is counted. A restart must not turn the
 * clock back (mpi/wtime.h).
 *
 *   wtime [N [ITERS]]
 *
 * Output (rank 0, stdout, at the end): the hash of the work and the
 * number of backward steps summed over the ranks (0).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"

double mpi_wtime_(void); /* the Fortran binding (mpif.h, use mpi) */

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096, iters = argc > 2 ? atoi(argv[2]) : 4000;
	int rank, back = 0, all_back;
	double last = 0, *u, s;
	uint64_t h = HASH_START, all;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	u = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++)
		u[i] = (double)((rank + i) % 7);
	for (int it = 0; it < iters; it++) {
		double t[3];

		for (int i = 1; i < n - 1; i++)
			u[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
		s = u[it % n];
		MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		u[0] = 1e-3 * s;
		h = hash_mix(h, &s, sizeof(s));
		t[0] = MPI_Wtime();
		t[1] = PMPI_Wtime();
		t[2] = mpi_wtime_();
		for (int k = 0; k < 3; k++) {
			if (t[k] < last)
				back++;
			last = t[k];
		}
	}
	MPI_Reduce(&back, &all_back, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	if (!rank)
		printf("wtime n=%d iters=%d hash %016llx, clock went back %d times\n", n, iters,
		       (unsigned long long)all, all_back);
	free(u);
	MPI_Finalize();
	return 0;
}
