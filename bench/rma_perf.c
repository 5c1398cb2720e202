/* rma_perf N [--create]: per-call latency of MPI_Put, MPI_Get, MPI_Accumulate and
 * MPI_Fetch_and_op on a window (MPI_Win_allocate), rank 0 to rank 1 under
 * one MPI_Win_lock_all, each call followed by MPI_Win_flush, and of a
 * fence-synchronised Put; --create: on a window MPI_Win_create made over
 * malloc'd memory (the component stasis's MPI_Win_allocate gets too: it
 * makes its windows so, over arena memory). Prints "case microseconds" lines on rank 0;
 * rma_perf.sh runs it plain and under stasis-run side by side. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000, rank, size;
	double *base, v = 1.0, r = 0;
	MPI_Win win;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc > 2 && !strcmp(argv[2], "--create")) {
		base = calloc(64, sizeof(double));
		MPI_Win_create(base, 64 * sizeof(double), sizeof(double), MPI_INFO_NULL,
			       MPI_COMM_WORLD, &win);
	} else {
		MPI_Win_allocate(64 * sizeof(double), sizeof(double), MPI_INFO_NULL,
				 MPI_COMM_WORLD, &base, &win);
	}
	for (int c = 0; c < 5; c++) {
		static const char *names[] = {"put_flush", "get_flush", "acc_flush", "fop_flush",
					      "put_fence"};
		double t;
		int reps = c == 4 ? n / 10 : n;

		MPI_Barrier(MPI_COMM_WORLD);
		if (c < 4)
			MPI_Win_lock_all(0, win);
		else
			MPI_Win_fence(0, win);
		t = MPI_Wtime();
		for (int i = 0; i < reps; i++) {
			if (c == 4) {
				MPI_Put(&v, 1, MPI_DOUBLE, (rank + 1) % size, 1, 1, MPI_DOUBLE, win);
				MPI_Win_fence(0, win);
				continue;
			}
			if (rank != 0)
				continue;
			if (c == 0)
				MPI_Put(&v, 1, MPI_DOUBLE, 1, 0, 1, MPI_DOUBLE, win);
			else if (c == 1)
				MPI_Get(&r, 1, MPI_DOUBLE, 1, 0, 1, MPI_DOUBLE, win);
			else if (c == 2)
				MPI_Accumulate(&v, 1, MPI_DOUBLE, 1, 0, 1, MPI_DOUBLE, MPI_SUM, win);
			else
				MPI_Fetch_and_op(&v, &r, MPI_DOUBLE, 1, 2, MPI_SUM, win);
			MPI_Win_flush(1, win);
		}
		t = MPI_Wtime() - t;
		if (c < 4)
			MPI_Win_unlock_all(win);
		else
			MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 0)
			printf("%s %.3f\n", names[c], t * 1e6 / reps);
	}
	MPI_Win_free(&win);
	MPI_Finalize();
	return 0;
}
