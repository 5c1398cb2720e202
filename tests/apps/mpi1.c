/* mpi1: MPI-1 calls MPI-3 removed, which mpi.h still declares and real
 * codes still call (mpi/calls.def): MPI_Attr_put/get/delete on a keyval
 * freed at the end with MPI_Keyval_free, MPI_Attr_get of a predefined
 * attribute (MPI_TAG_UB), MPI_Errhandler_set/get, MPI_Address and
 * MPI_Type_extent/lb/ub, every step of a loop whose sums run on the
 * communicator carrying the attribute. The attribute's value must still be
 * there after a restart and its pointer the same.
 *
 *   mpi1 [N [ITERS]]
 *
 * Output (rank 0, stdout, at the end): one line with every rank's hash.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"

static int slots[2] = {3, 5};

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096, iters = argc > 2 ? atoi(argv[2]) : 4000;
	int rank, kv, flag, *tag_ub, *val, bad = 0;
	MPI_Comm dup;
	MPI_Errhandler eh;
	uint64_t h = HASH_START, all;
	double *u;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &kv, NULL);
	MPI_Attr_put(dup, kv, &slots[0]);
	MPI_Errhandler_set(dup, MPI_ERRORS_RETURN);
	u = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++)
		u[i] = (double)((rank * 3 + i) % 13);
	for (int it = 0; it < iters; it++) {
		MPI_Aint a0, a1, ext, lb, ub;
		double s;

		for (int i = 1; i < n - 1; i++)
			u[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
		MPI_Attr_get(dup, kv, &val, &flag);
		if (!flag || (val != &slots[0] && val != &slots[1]))
			bad++;
		MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
		if (!flag || *tag_ub < 32767)
			bad++;
		MPI_Errhandler_get(dup, &eh);
		if (eh != MPI_ERRORS_RETURN)
			bad++;
		MPI_Errhandler_free(&eh);
		MPI_Address(&u[0], &a0);
		MPI_Address(&u[it % n], &a1);
		MPI_Type_extent(MPI_DOUBLE, &ext);
		MPI_Type_lb(MPI_DOUBLE, &lb);
		MPI_Type_ub(MPI_DOUBLE, &ub);
		if ((a1 - a0) != (MPI_Aint)(it % n) * ext || ub - lb != ext)
			bad++;
		s = u[it % n] * *val;
		MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, dup);
		u[0] = 1e-3 * s;
		h = hash_mix(h, &s, sizeof(s));
		if (it % 100 == 99) {
			/* Another value for the attribute. */
			MPI_Attr_delete(dup, kv);
			MPI_Attr_put(dup, kv, &slots[(it / 100) % 2]);
		}
	}
	h = hash_mix(h, &bad, sizeof(bad));
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(rank ? &bad : MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (!rank)
		printf("mpi1 n=%d iters=%d hash %016llx, %d wrong answers\n", n, iters,
		       (unsigned long long)all, bad);
	MPI_Comm_free(&dup);
	MPI_Keyval_free(&kv);
	free(u);
	MPI_Finalize();
	return 0;
}
