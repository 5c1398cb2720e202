/* objects_many COMMS TYPES ITERS: a program holding many MPI objects, for
 * the replay time of a restart (bench/replay_perf.sh): COMMS communicators
 * (duplicates and splits of the world, one in three freed again) and TYPES
 * derived datatypes (chains of vectors, contiguous and struct types of
 * earlier ones), then ITERS small allreduces on MPI_COMM_WORLD.
 * Rank 0 prints a checksum of the types' sizes at the end. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int ncomms = argc > 1 ? atoi(argv[1]) : 1000, ntypes = argc > 2 ? atoi(argv[2]) : 10000;
	long iters = argc > 3 ? atol(argv[3]) : 100000;
	MPI_Comm *comms = malloc(sizeof(MPI_Comm) * (ncomms + 1));
	MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (ntypes + 1));
	int rank, size;
	long sum = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int i = 0; i < ncomms; i++) {
		if (i % 2)
			MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &comms[i]);
		else
			MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]);
		if (i % 3 == 2)
			MPI_Comm_free(&comms[i]);
	}
	for (int i = 0; i < ntypes; i++) {
		MPI_Datatype base = i < 3 ? MPI_DOUBLE : types[i - 3];

		switch (i % 3) {
		case 0:
			MPI_Type_vector(2, 1, 2, base, &types[i]);
			break;
		case 1:
			MPI_Type_contiguous(2, base, &types[i]);
			break;
		default: {
			int lens[2] = {1, 1};
			MPI_Aint disp[2] = {0, 64};
			MPI_Datatype two[2] = {MPI_INT, base};

			MPI_Type_create_struct(2, lens, disp, two, &types[i]);
		}
		}
		/* Chains get long: restart them from a predefined type now and
		 * then, so the sizes stay finite. */
		if (i % 30 == 29)
			types[i - 2] = MPI_DOUBLE, types[i - 1] = MPI_DOUBLE, types[i] = MPI_INT;
		else
			MPI_Type_commit(&types[i]);
	}
	for (long it = 0; it < iters; it++) {
		long x = it, y;

		MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
		sum += y;
	}
	for (int i = 0; i < ntypes; i += 97) {
		int s;

		MPI_Type_size(types[i], &s);
		sum += s;
	}
	if (rank == 0)
		printf("objects_many: %d communicators, %d datatypes, checksum %ld\n", ncomms, ntypes,
		       sum);
	MPI_Finalize();
	return 0;
}
