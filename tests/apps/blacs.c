/* blacs: communication the way BLACS (under ScaLAPACK) does it, on a 2 x Q
 * process grid: broadcasts on row and column communicators, point-to-point
 * on the grid's own communicator received from MPI_ANY_SOURCE (and
 * MPI_ANY_TAG), nonblocking exchanges finished by MPI_Waitall, and now and
 * then a sum over the world. The ranks work unequal amounts, so that at any
 * instant some are a broadcast ahead of others and some wait in a receive
 * for a message a rank sends only after its next broadcast: a rank held at
 * the entry of a collective there must not be the one another waits for.
 *
 *   blacs [N [ITERS]]
 *
 * Output (rank 0, stdout, at the end): one line hashing every rank's
 * results; on stderr the time per step ("step_us").
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"

static void work(double *a, int n, int reps)
{
	for (int r = 0; r < reps; r++)
		for (int i = 1; i < n; i++)
			a[i] = 0.5 * a[i] + 0.25 * (a[i - 1] + a[(i + 1) % n]);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1024, iters = argc > 2 ? atoi(argv[2]) : 2000;
	int rank, size, q, myrow, mycol, grank;
	MPI_Comm grid, row, col;
	uint64_t h = HASH_START, all;
	double *a, *panel, *in, t0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2 || size % 2) {
		if (!rank)
			fprintf(stderr, "blacs: an even number of ranks, please\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	q = size / 2;
	/* BLACS duplicates the world for its grid and splits it in rows and
	 * columns. */
	MPI_Comm_dup(MPI_COMM_WORLD, &grid);
	MPI_Comm_rank(grid, &grank);
	myrow = grank / q;
	mycol = grank % q;
	MPI_Comm_split(grid, myrow, mycol, &row);
	MPI_Comm_split(grid, mycol, myrow, &col);
	a = malloc(sizeof(double) * n);
	panel = malloc(sizeof(double) * n);
	in = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++)
		a[i] = (double)((rank * 7 + i) % 13);
	t0 = MPI_Wtime();
	for (int it = 0; it < iters; it++) {
		int rroot = it % q, partner = ((myrow + 1) % 2) * q + mycol;
		MPI_Request rq[4];
		MPI_Status st;
		double s;

		work(a, n, 1 + (rank + it) % 3);
		if (myrow == 0) {
			/* The row above broadcasts down its column, then sends its
			 * part to the rank below (the broadcast's root: it never
			 * waits for the row below there). */
			MPI_Bcast(a, 8, MPI_DOUBLE, 0, col);
			MPI_Send(a + 8, n / 4, MPI_DOUBLE, partner, it % 5, grid);
		} else {
			/* The row below takes it from whoever sends (BLACS's receive
			 * from any source), sums along its row, then takes the
			 * column's broadcast. While one rank of it waits here, the
			 * other may already be in the sum, waiting for this one. */
			MPI_Recv(in, n / 4, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, grid, &st);
			h = hash_mix(h, &st.MPI_SOURCE, sizeof(st.MPI_SOURCE));
			h = hash_mix(h, &st.MPI_TAG, sizeof(st.MPI_TAG));
			for (int i = 0; i < n / 4; i++)
				a[i] += 1e-3 * in[i];
			s = a[it % n];
			MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, row);
			a[1] += 1e-6 * s;
			MPI_Bcast(a + 24, 8, MPI_DOUBLE, 0, col);
		}
		/* A panel along the row, from the column whose turn it is. */
		if (mycol == rroot)
			for (int i = 0; i < n; i++)
				panel[i] = a[i];
		MPI_Bcast(panel, 32, MPI_DOUBLE, rroot, row);
		for (int i = 0; i < 32; i++)
			a[32 + i] += 1e-3 * panel[i];
		/* Neighbours along the row, nonblocking, finished together. */
		if (q > 1) {
			int left = (mycol + q - 1) % q, right = (mycol + 1) % q;

			MPI_Irecv(in, 4, MPI_DOUBLE, MPI_ANY_SOURCE, 7, row, &rq[0]);
			MPI_Irecv(in + 4, 4, MPI_DOUBLE, MPI_ANY_SOURCE, 8, row, &rq[1]);
			MPI_Isend(a + 8, 4, MPI_DOUBLE, right, 7, row, &rq[2]);
			MPI_Isend(a + 12, 4, MPI_DOUBLE, left, 8, row, &rq[3]);
			MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
			for (int i = 0; i < 8; i++)
				a[16 + i] += 1e-3 * in[i];
		}
		if (it % 8 == 7) {
			s = a[it % n];
			MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			a[0] += 1e-6 * s;
		}
		h = hash_mix(h, a, sizeof(double) * 24);
	}
	t0 = MPI_Wtime() - t0;
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (!rank)
		fprintf(stderr, "blacs: step_us %.1f\n", 1e6 * t0 / iters);
	if (!rank)
		printf("blacs %dx%d n=%d iters=%d hash %016llx\n", 2, q, n, iters,
		       (unsigned long long)all);
	MPI_Comm_free(&row);
	MPI_Comm_free(&col);
	MPI_Comm_free(&grid);
	free(a);
	free(panel);
	free(in);
	MPI_Finalize();
	return 0;
}
