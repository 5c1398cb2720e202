/* anyof: the request completions that take any one or some of many, as
 * master/worker codes and halo exchanges that process whatever arrived
 * first do: every step each rank posts a receive from every other rank and
 * sends to each (sizes vary by step), then completes the receives with
 * MPI_Waitany, MPI_Waitsome, a loop of MPI_Testany or of MPI_Testsome (by
 * step), and its sends with MPI_Waitall or MPI_Testall. A checkpoint may
 * come while some are complete and others not: the program must get each
 * completion once, with its index and status.
 *
 *   anyof [N [ITERS]]     N: most doubles per message
 *
 * Output (rank 0, stdout, at the end): one line hashing every message
 * with the index and status it completed with (in an order-free way:
 * arrival order varies) and the number of completions.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 512, iters = argc > 2 ? atoi(argv[2]) : 2000;
	int rank, size;
	uint64_t h = HASH_START, all, completions = 0, total;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	double *in = malloc(sizeof(double) * n * size), *out = malloc(sizeof(double) * n * size);
	MPI_Request *rr = malloc(sizeof(MPI_Request) * size), *sr = malloc(sizeof(MPI_Request) * size);
	MPI_Status *st = malloc(sizeof(MPI_Status) * size);
	int *idx = malloc(sizeof(int) * size), *seen = malloc(sizeof(int) * size);
	for (int it = 0; it < iters; it++) {
		int left = 0, mode = it % 4;
		uint64_t step = 0;

		for (int p = 0; p < size; p++) {
			int cnt = 1 + (p + rank + it) % n;

			rr[p] = sr[p] = MPI_REQUEST_NULL;
			seen[p] = 0;
			if (p == rank)
				continue;
			MPI_Irecv(in + p * n, n, MPI_DOUBLE, p, it % 3, MPI_COMM_WORLD, &rr[p]);
			for (int i = 0; i < cnt; i++)
				out[p * n + i] = rank * 1e4 + p * 10 + it + i * 1e-3;
			MPI_Isend(out + p * n, cnt, MPI_DOUBLE, p, it % 3, MPI_COMM_WORLD, &sr[p]);
			left++;
		}
		while (left > 0) {
			int got = 0, flag = 0, one;

			if (mode == 0) {
				MPI_Waitany(size, rr, &one, &st[0]);
				idx[0] = one;
				got = one == MPI_UNDEFINED ? 0 : 1;
			} else if (mode == 1) {
				MPI_Waitsome(size, rr, &got, idx, st);
			} else if (mode == 2) {
				MPI_Testany(size, rr, &one, &flag, &st[0]);
				if (flag && one != MPI_UNDEFINED) {
					idx[0] = one;
					got = 1;
				}
			} else {
				MPI_Testsome(size, rr, &got, idx, st);
			}
			if (got == MPI_UNDEFINED)
				got = 0;
			for (int k = 0; k < got; k++) {
				int p = idx[k], cnt;
				uint64_t m = HASH_START;

				if (p < 0 || p >= size || p == rank || seen[p]++ || rr[p] != MPI_REQUEST_NULL) {
					fprintf(stderr, "anyof: rank %d step %d: index %d completed wrongly\n",
						rank, it, p);
					MPI_Abort(MPI_COMM_WORLD, 2);
				}
				MPI_Get_count(&st[k], MPI_DOUBLE, &cnt);
				m = hash_mix(m, in + p * n, sizeof(double) * cnt);
				m = hash_mix(m, &st[k].MPI_SOURCE, sizeof(int));
				m = hash_mix(m, &st[k].MPI_TAG, sizeof(int));
				step ^= m;
				left--;
				completions++;
			}
		}
		if (it % 2) {
			MPI_Waitall(size, sr, MPI_STATUSES_IGNORE);
		} else {
			int flag = 0;

			while (!flag)
				MPI_Testall(size, sr, &flag, MPI_STATUSES_IGNORE);
		}
		h = hash_mix(h, &step, sizeof(step));
	}
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	MPI_Reduce(&completions, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("anyof n=%d iters=%d ranks=%d completions %llu hash %016llx\n", n, iters, size,
		       (unsigned long long)total, (unsigned long long)all);
	free(in);
	free(out);
	free(rr);
	free(sr);
	free(st);
	free(idx);
	free(seen);
	MPI_Finalize();
	return 0;
}
