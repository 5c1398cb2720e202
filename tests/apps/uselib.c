/* uselib: an MPI program whose work goes through an application library of
 * its own (libstasis_step, step.c), for the checks a restart makes of the
 * address space before it puts the image back (tests/cr/err_maps.sh).
 *
 *   uselib [N [ITERS]] [--deep KIB]
 *
 * --deep runs the loop below a frame of KIB KiB of stack, so that every
 * checkpoint holds that much of the main stack.
 *
 * Output (rank 0, stdout, at the end):
 *   uselib: n=<N> iters=<ITERS> calls=<sum> hash=<16 hex>
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

double step_apply(double x);
long step_calls(void);

static uint64_t run(int n, int iters, int rank)
{
	double *u = malloc(n * sizeof(*u)), sum, total;
	uint64_t h = HASH_START;

	if (!u)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (int i = 0; i < n; i++)
		u[i] = (double)((i * 7 + rank * 13) % 101) / 100.0;
	for (int it = 0; it < iters; it++) {
		sum = 0;
		for (int i = 0; i < n; i++) {
			u[i] = u[i] * 0.999 + step_apply(u[(i + 1) % n]);
			sum += u[i];
		}
		MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		u[it % n] += total * 1e-9;
		h = hash_mix(h, &total, sizeof(total));
	}
	free(u);
	return h;
}

/* A deep frame below the loop: its bytes are part of the stack saved. */
static __attribute__((noinline)) uint64_t run_deep(int n, int iters, int rank, size_t kib)
{
	volatile char pad[kib * 1024];
	uint64_t h;

	memset((char *)pad, 1, sizeof(pad));
	h = run(n, iters, rank);
	return h + pad[kib * 512];
}

int main(int argc, char **argv)
{
	int n = 4096, iters = 2000, pos = 0, rank;
	size_t deep = 0;
	long calls, total_calls;
	uint64_t h;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--deep") && i + 1 < argc)
			deep = strtoul(argv[++i], NULL, 10);
		else if (pos++ == 0)
			n = atoi(argv[i]);
		else
			iters = atoi(argv[i]);
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (n < 2 || iters < 1)
		MPI_Abort(MPI_COMM_WORLD, 2);
	h = deep ? run_deep(n, iters, rank, deep) : run(n, iters, rank);
	calls = step_calls();
	MPI_Reduce(&calls, &total_calls, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("uselib: n=%d iters=%d calls=%ld hash=%016llx\n", n, iters, total_calls,
		       (unsigned long long)h);
	MPI_Finalize();
	return 0;
}
