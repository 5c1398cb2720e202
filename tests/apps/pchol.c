/* pchol: a distributed Cholesky factorisation in a loop with Debian's
 * ScaLAPACK (libscalapack-openmpi): BLACS's grid, its broadcasts on rows
 * and columns and point-to-point receives from MPI_ANY_SOURCE, as a real
 * code does them, written by nobody here (pdpotrf).
 *
 *   pchol [N [ITERS]]
 *
 * Each step makes a symmetric positive definite N x N matrix that depends
 * on the step (diagonally dominant), distributed 2 x (ranks / 2) in
 * blocks of 16, factors it and folds the factor into a hash. Output (rank
 * 0, stdout, at the end): one line with every rank's hash combined.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"

void Cblacs_get(int ctxt, int what, int *val);
void Cblacs_gridinit(int *ctxt, const char *order, int nprow, int npcol);
void Cblacs_gridinfo(int ctxt, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_gridexit(int ctxt);
int numroc_(const int *n, const int *nb, const int *iproc, const int *isrcproc,
	    const int *nprocs);
void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb,
	       const int *irsrc, const int *icsrc, const int *ictxt, const int *lld, int *info);
void pdpotrf_(const char *uplo, const int *n, double *a, const int *ia, const int *ja,
	      const int *desc, int *info);

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 96, iters = argc > 2 ? atoi(argv[2]) : 200;
	int rank, size, ctxt, nprow, npcol, myrow, mycol, nb = 16, zero = 0, one = 1;
	int mloc, nloc, lld, desc[9], info;
	uint64_t h = HASH_START, all;
	double *a;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	nprow = size >= 2 ? 2 : 1;
	npcol = size / nprow;
	Cblacs_get(-1, 0, &ctxt);
	Cblacs_gridinit(&ctxt, "Row", nprow, npcol);
	Cblacs_gridinfo(ctxt, &nprow, &npcol, &myrow, &mycol);
	mloc = numroc_(&n, &nb, &myrow, &zero, &nprow);
	nloc = numroc_(&n, &nb, &mycol, &zero, &npcol);
	lld = mloc > 1 ? mloc : 1;
	descinit_(desc, &n, &n, &nb, &nb, &zero, &zero, &ctxt, &lld, &info);
	a = malloc(sizeof(double) * lld * (nloc ? nloc : 1));
	for (int it = 0; it < iters; it++) {
		for (int jl = 0; jl < nloc; jl++)
			for (int il = 0; il < mloc; il++) {
				/* Global indices of the local element (block cyclic). */
				int i = (il / nb * nprow + myrow) * nb + il % nb;
				int j = (jl / nb * npcol + mycol) * nb + jl % nb;
				double v = 1.0 / (1 + i + j) + 1e-3 * ((i * 7 + j * 3 + it) % 11);

				if (i > j)
					v = 1.0 / (1 + i + j) + 1e-3 * ((j * 7 + i * 3 + it) % 11);
				a[il + (size_t)jl * lld] = i == j ? n + v + it % 5 : v;
			}
		pdpotrf_("L", &n, a, &one, &one, desc, &info);
		if (info) {
			fprintf(stderr, "pchol: pdpotrf info %d at step %d\n", info, it);
			MPI_Abort(MPI_COMM_WORLD, 3);
		}
		h = hash_mix(h, a, sizeof(double) * lld * nloc);
	}
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (!rank)
		printf("pchol %dx%d n=%d iters=%d hash %016llx\n", nprow, npcol, n, iters,
		       (unsigned long long)all);
	free(a);
	Cblacs_gridexit(ctxt);
	MPI_Finalize();
	return 0;
}
