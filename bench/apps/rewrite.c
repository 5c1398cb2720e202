/* rewrite: the "all memory changes every iteration" workload of
 * bench/incremental_perf.sh and bench/restart_perf.sh.
 *
 * An ordinary MPI program: one array of MIB MiB per rank (malloc), every
 * iteration rewrites all of it (each 8-byte word gets a value of its index
 * and the iteration), then an MPI_Allreduce of one word per page on
 * MPI_COMM_WORLD. Every page of the array is written between any two
 * checkpoints: write-protecting it only costs faults.
 *
 *   rewrite [MIB [ITERS]]    default 1024 MiB per rank, 200 iterations
 * Output (rank 0): rewrite: mib=<MIB> iters=<ITERS> checksum=<16 hex>
 */
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 1024, iters = argc > 2 ? atol(argv[2]) : 200;
	size_t words, stride = 4096 / sizeof(uint64_t);
	uint64_t *a, sum, total = 0;
	int rank;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	words = (size_t)mib << 17;
	a = malloc(words * sizeof(*a));
	if (!a || mib < 1 || iters < 1) {
		fprintf(stderr, "rewrite: usage: rewrite [MIB [ITERS]] (or out of memory)\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (long it = 0; it < iters; it++) {
		uint64_t v = (uint64_t)it * 0x9e3779b97f4a7c15ULL + (uint64_t)rank;

		for (size_t i = 0; i < words; i++)
			a[i] = v ^ i;
		sum = 0;
		for (size_t i = 0; i < words; i += stride)
			sum += a[i] * (i | 1);
		MPI_Allreduce(&sum, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
	}
	if (rank == 0)
		printf("rewrite: mib=%ld iters=%ld checksum=%016" PRIx64 "\n", mib, iters, total);
	free(a);
	MPI_Finalize();
	return 0;
}
