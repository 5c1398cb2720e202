/* halves: every collective on communicators that do not span the world:
 * the ranks split into two halves, each half makes a cartesian ring of its
 * own; halos travel with MPI_Sendrecv on the ring, sums with
 * MPI_Allreduce on the half, maxima with MPI_Allreduce on the ring. The
 * halves run at different speeds (the second half works twice as much per
 * step), so at any instant they are at different steps.
 *
 *   halves [N [ITERS [--create]]]
 *
 * --create: every 64th step each half also makes a communicator of its
 * own with MPI_Comm_create_group (collective over the half only) and sums
 * on it, and every 256th the halves make an intercommunicator
 * (MPI_Intercomm_create, which waits for the other half's leader) and
 * swap their sums over it; both are freed at once. Neither call is a
 * collective on one communicator of all its members (calls.def "ungated").
 *
 * Output (rank 0, stdout, at the end): one line hashing both halves'
 * results (one message from the second half's first rank).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096, iters = argc > 2 ? atoi(argv[2]) : 4000;
	int create = argc > 3 && !strcmp(argv[3], "--create");
	int rank, size, half_id, hrank, hsize, left, right, dims[1] = {0}, periods[1] = {1};
	MPI_Comm half, ring;
	MPI_Group world_group, half_group;
	uint64_t h = HASH_START, other;
	double *u;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	half_id = rank >= size / 2;
	MPI_Comm_split(MPI_COMM_WORLD, half_id, rank, &half);
	MPI_Comm_size(half, &hsize);
	MPI_Dims_create(hsize, 1, dims);
	MPI_Cart_create(half, 1, dims, periods, 0, &ring);
	MPI_Comm_rank(ring, &hrank);
	MPI_Cart_shift(ring, 0, 1, &left, &right);
	MPI_Comm_group(MPI_COMM_WORLD, &world_group);
	MPI_Comm_group(half, &half_group);
	u = malloc(sizeof(double) * (n + 2));
	for (int i = 0; i <= n + 1; i++)
		u[i] = (double)((rank * 5 + i) % 11);
	for (int it = 0; it < iters; it++) {
		double s = 0, m;

		for (int rep = 0; rep <= half_id; rep++)
			for (int i = 1; i <= n; i++)
				u[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
		MPI_Sendrecv(&u[n], 1, MPI_DOUBLE, right, 0, &u[0], 1, MPI_DOUBLE, left, 0, ring,
			     MPI_STATUS_IGNORE);
		MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 1, &u[n + 1], 1, MPI_DOUBLE, right, 1,
			     ring, MPI_STATUS_IGNORE);
		for (int i = 1; i <= n; i++)
			s += u[i];
		MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, half);
		m = u[1 + it % n];
		MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, ring);
		h = hash_mix(h, &s, sizeof(s));
		h = hash_mix(h, &m, sizeof(m));
		if (create && it % 64 == 0) {
			MPI_Comm made;
			double t = s + it;

			MPI_Comm_create_group(MPI_COMM_WORLD, half_group, 5, &made);
			MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_SUM, made);
			h = hash_mix(h, &t, sizeof(t));
			MPI_Comm_free(&made);
		}
		if (create && it % 256 == 0) {
			MPI_Comm inter;
			double theirs;

			MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, half_id ? 0 : size / 2, 6,
					     &inter);
			MPI_Allreduce(&s, &theirs, 1, MPI_DOUBLE, MPI_SUM, inter);
			h = hash_mix(h, &theirs, sizeof(theirs));
			MPI_Comm_free(&inter);
		}
	}
	if (hrank == 0 && half_id == 1)
		MPI_Send(&h, 1, MPI_UINT64_T, 0, 9, MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Recv(&other, 1, MPI_UINT64_T, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
		printf("halves: n=%d iters=%d ranks=%d hash=%016llx/%016llx\n", n, iters, size,
		       (unsigned long long)h, (unsigned long long)other);
	}
	MPI_Group_free(&half_group);
	MPI_Group_free(&world_group);
	MPI_Comm_free(&ring);
	MPI_Comm_free(&half);
	MPI_Finalize();
	return 0;
}
