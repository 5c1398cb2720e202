/* nbc: non-blocking collectives as real programs use them, in flight while
 * the program computes and while a checkpoint may come:
 *  - a pipelined reduction (PETSc's pipelined Krylov methods): an
 *    MPI_Iallreduce started, local work done, then waited for;
 *  - the NBX sparse exchange (PETSc's PetscCommBuildTwoSided, and many
 *    graph codes): MPI_Issend to a few ranks, MPI_Iprobe for what comes,
 *    and an MPI_Ibarrier entered once the own sends completed, tested
 *    until every rank is done;
 *  - MPI_Ibcast, MPI_Ialltoall and MPI_Igatherv finished together by one
 *    MPI_Waitall, and MPI_Iscan finished by an MPI_Test loop, on a
 *    duplicate of the world.
 *
 *   nbc [N [ITERS [PARTS]]]   N: doubles per rank in the reductions; PARTS:
 *                             which of the above, a bit each (default 15)
 *
 * Output (rank 0, stdout, at the end): one line hashing every result.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"

static double work(double *v, int n, int it)
{
	double s = 0;

	for (int i = 0; i < n; i++) {
		v[i] = v[i] * 0.999 + (it % 7) * 1e-3 + i * 1e-6;
		s += v[i];
	}
	return s;
}

/* NBX: each rank sends one message to each of a few ranks chosen by the
 * step, without any rank knowing how many it will receive. */
static uint64_t nbx(MPI_Comm comm, int rank, int size, int it, uint64_t h)
{
	/* A rank that saw this round's barrier complete may send the next
	 * round's messages to one still in this round: rounds alternate tags. */
	int nsend = 1 + (rank + it) % 3, done = 0, barrier_started = 0, tag = 77 + it % 2;
	int dest[3], payload[3][4];
	MPI_Request sends[3], barrier = MPI_REQUEST_NULL;

	for (int k = 0; k < nsend; k++) {
		dest[k] = (rank + 1 + k * (it % 5 + 1)) % size;
		for (int j = 0; j < 4; j++)
			payload[k][j] = rank * 1000 + it * 10 + k + j;
		MPI_Issend(payload[k], 4, MPI_INT, dest[k], tag, comm, &sends[k]);
	}
	while (!done) {
		int flag;
		MPI_Status st;

		MPI_Iprobe(MPI_ANY_SOURCE, tag, comm, &flag, &st);
		if (flag) {
			int in[4];

			MPI_Recv(in, 4, MPI_INT, st.MPI_SOURCE, tag, comm, MPI_STATUS_IGNORE);
			/* Arrival order varies: mix commutatively. */
			h ^= hash_mix(HASH_START, in, sizeof(in));
		}
		if (!barrier_started) {
			int sent;

			MPI_Testall(nsend, sends, &sent, MPI_STATUSES_IGNORE);
			if (sent) {
				MPI_Ibarrier(comm, &barrier);
				barrier_started = 1;
			}
		} else {
			MPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
		}
	}
	return h;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096, iters = argc > 2 ? atoi(argv[2]) : 2000;
	int parts = argc > 3 ? atoi(argv[3]) : 15;
	int rank, size;
	uint64_t h = HASH_START, all;
	MPI_Comm comm;

	MPI_Init(&argc, &argv);
	MPI_Comm_dup(MPI_COMM_WORLD, &comm);
	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	double *v = malloc(sizeof(double) * n), *w = malloc(sizeof(double) * n), *red = calloc(n, sizeof(double));
	int *a2a_out = malloc(sizeof(int) * size), *a2a_in = malloc(sizeof(int) * size);
	int *gcounts = malloc(sizeof(int) * size), *gdispls = malloc(sizeof(int) * size);
	double *gathered = malloc(sizeof(double) * size * 4);
	for (int i = 0; i < n; i++)
		v[i] = rank + i * 1e-3;
	for (int it = 0; it < iters; it++) {
		MPI_Request r[4];
		double local, bc[8], mine[4];
		long scan_in = rank + it, scan_out = 0;
		int flag = 0;

		/* Pipelined: the reduction of this step's vector overlaps the
		 * next step's local work, on another one. */
		double *next = it % 2 ? v : w, *now = it % 2 ? w : v;
		local = work(now, n, it);
		for (int i = 0; i < n; i++)
			next[i] = now[i];
		if (parts & 1) {
			MPI_Iallreduce(now, red, n, MPI_DOUBLE, MPI_SUM, comm, &r[0]);
			local += work(next, n, it + 1);
			MPI_Wait(&r[0], MPI_STATUS_IGNORE);
		}
		h = hash_mix(h, red, sizeof(double) * n);
		h = hash_mix(h, &local, sizeof(local));

		if (parts & 2)
			h = nbx(comm, rank, size, it, h);

		for (int i = 0; i < 8; i++)
			bc[i] = rank == it % size ? it * 8.0 + i : -1;
		for (int i = 0; i < size; i++)
			a2a_out[i] = rank * 100 + i + it;
		int cnt = 1 + (rank + it) % 4;
		for (int i = 0; i < cnt; i++)
			mine[i] = rank + it * 0.25 + i;
		for (int i = 0, d = 0; i < size; i++) {
			gcounts[i] = 1 + (i + it) % 4;
			gdispls[i] = d;
			d += gcounts[i];
		}
		if (!(parts & 4))
			goto scan;
		MPI_Ibcast(bc, 8, MPI_DOUBLE, it % size, comm, &r[1]);
		MPI_Ialltoall(a2a_out, 1, MPI_INT, a2a_in, 1, MPI_INT, comm, &r[2]);
		MPI_Igatherv(mine, cnt, MPI_DOUBLE, gathered, gcounts, gdispls, MPI_DOUBLE, 0, comm,
			     &r[3]);
		MPI_Waitall(3, &r[1], MPI_STATUSES_IGNORE);
		h = hash_mix(h, bc, sizeof(bc));
		h = hash_mix(h, a2a_in, sizeof(int) * size);
		if (rank == 0)
			h = hash_mix(h, gathered, sizeof(double) * (gdispls[size - 1] + gcounts[size - 1]));

	scan:
		if (!(parts & 8))
			continue;
		MPI_Iscan(&scan_in, &scan_out, 1, MPI_LONG, MPI_SUM, comm, &r[0]);
		while (!flag)
			MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
		h = hash_mix(h, &scan_out, sizeof(scan_out));
	}
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, comm);
	if (rank == 0)
		printf("nbc n=%d iters=%d ranks=%d hash %016llx\n", n, iters, size,
		       (unsigned long long)all);
	free(v);
	free(w);
	free(red);
	free(a2a_out);
	free(a2a_in);
	free(gcounts);
	free(gdispls);
	free(gathered);
	MPI_Comm_free(&comm);
	MPI_Finalize();
	return 0;
}
