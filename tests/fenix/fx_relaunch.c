/* Process recovery by relaunch (stasis-run --fenix), reference dialect:
 * spares, roles, the fail list and shrinking, with the data of a ring
 * restored from a partner-protected Fenix group.
 *
 * Every step each active rank passes its vector to the next one, mixes in
 * its rank, stores the vector and the step, and commits with a barrier. On
 * a relaunch (role not INITIAL) every active rank restores both and goes
 * on, so the final checksums equal an uninterrupted run's. After a shrink
 * (FENIX_WARNING_SPARE_RANKS_DEPLETED) restore must refuse (the
 * communicator is smaller than at store time) and the ranks start over.
 *
 * Usage: fx_relaunch STEPS N_DOUBLES SPARES KILLS [implicit]
 *   implicit: a relaunched rank restores without member_create (the
 *   relaunch recreated the members) and then sets their buffers.
 *   KILLS: "-" or a comma list of P:E:K, "world rank P SIGKILLs itself in
 *   launch E (STASIS_FENIX_EPOCH) after committing step K" (K -1: just
 *   after Fenix_Init and the restore).
 *   FX_PID_DIR: write pid.E.P there (for kills from outside); rank 0 then
 *   prints "committed E K" after each commit. */
#include <fenix.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int dies_now(const char *kills, int world, int epoch, int step)
{
	const char *k = kills;
	while (k && *k && *k != '-') {
		int p, e, s;
		if (sscanf(k, "%d:%d:%d", &p, &e, &s) == 3 && p == world && e == epoch && s == step)
			return 1;
		k = strchr(k, ',');
		k = k ? k + 1 : NULL;
	}
	return 0;
}

static void start(double *v, int n, int rank)
{
	for (int i = 0; i < n; i++)
		v[i] = rank * 0.25 + i * 1e-3;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	if (argc < 5) {
		fprintf(stderr, "usage: fx_relaunch STEPS N SPARES KILLS\n");
		return 2;
	}
	int steps = atoi(argv[1]), n = atoi(argv[2]), spares = atoi(argv[3]);
	const char *kills = argv[4], *ep = getenv("STASIS_FENIX_EPOCH"), *pd = getenv("FX_PID_DIR");
	int epoch = ep ? atoi(ep) : 0, world;
	MPI_Comm_rank(MPI_COMM_WORLD, &world);
	if (pd) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/pid.%d.%d", pd, epoch, world);
		FILE *f = fopen(path, "w");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
	}
	int role, error, rank, size;
	MPI_Comm comm;
	Fenix_Init(&role, MPI_COMM_WORLD, &comm, &argc, &argv, spares, 0, MPI_INFO_NULL, &error);
	if (error != FENIX_SUCCESS && error != FENIX_WARNING_SPARE_RANKS_DEPLETED)
		return 1;
	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	int *fails, nfails = Fenix_Process_fail_list(&fails), cnt[3], r0role = -1;
	for (int r = 0; r < 3; r++)
		Fenix_Get_number_of_ranks_with_role(comm, r, &cnt[r]);
	Fenix_Get_role(comm, 0, &r0role);
	char fl[256] = "";
	for (int i = 0; i < nfails; i++)
		snprintf(fl + strlen(fl), sizeof(fl) - strlen(fl), "%s%d", i ? "," : "", fails[i]);
	printf("launch %d world %d rank %d/%d role %d error %d fails [%s] roles %d/%d/%d rank0 %d\n",
	       epoch, world, rank, size, role, error, fl, cnt[0], cnt[1], cnt[2], r0role);
	fflush(stdout);

	int flag, pol[3] = {1, size / 2, 0};
	Fenix_Data_group_create(5, comm, 0, 1, FENIX_DATA_POLICY_IN_MEMORY_RAID, pol, &flag);
	double *v = malloc(sizeof(double) * (size_t)n), *in = malloc(sizeof(double) * (size_t)n);
	int step = 0, implicit = argc > 5 && !strcmp(argv[5], "implicit");
	if (role == FENIX_ROLE_INITIAL_RANK || !implicit) {
		Fenix_Data_member_create(5, 1, v, n, MPI_DOUBLE);
		Fenix_Data_member_create(5, 2, &step, 1, MPI_INT);
	}
	start(v, n, rank);
	if (role != FENIX_ROLE_INITIAL_RANK) {
		int r1 = Fenix_Data_member_restore(5, 1, v, n, FENIX_DATA_SNAPSHOT_LATEST, NULL);
		int r2 = Fenix_Data_member_restore(5, 2, &step, 1, FENIX_DATA_SNAPSHOT_LATEST, NULL);
		if (implicit) {
			/* The relaunch recreated the members: give them buffers. */
			int f1 = 0, f2 = 0, c = -1;
			Fenix_Data_member_attr_set(5, 1, FENIX_DATA_MEMBER_ATTRIBUTE_BUFFER, v, &f1);
			Fenix_Data_member_attr_set(5, 2, FENIX_DATA_MEMBER_ATTRIBUTE_BUFFER, &step, &f2);
			Fenix_Data_member_attr_get(5, 1, FENIX_DATA_MEMBER_ATTRIBUTE_COUNT, &c, &f1, 0);
			printf("launch %d rank %d implicit members: buffers %d %d, count %d\n", epoch,
			       rank, f1, f2, c);
		}
		printf("launch %d rank %d restore %d %d step %d\n", epoch, rank, r1, r2, step);
		if (error == FENIX_WARNING_SPARE_RANKS_DEPLETED) {
			/* Fewer ranks than at store time: start over. */
			start(v, n, rank);
			step = 0;
		} else if (r1 || r2) {
			return 1;
		}
	}
	if (dies_now(kills, world, epoch, -1))
		raise(SIGKILL); /* K = -1: as soon as the data is back */
	for (; step < steps;) {
		MPI_Sendrecv(v, n, MPI_DOUBLE, (rank + 1) % size, 0, in, n, MPI_DOUBLE,
			     (rank + size - 1) % size, 0, comm, MPI_STATUS_IGNORE);
		for (int i = 0; i < n; i++)
			v[i] = in[i] * 0.999 + rank + i * 1e-6;
		step++;
		Fenix_Data_member_store(5, FENIX_DATA_MEMBER_ALL, FENIX_DATA_SUBSET_FULL);
		Fenix_Data_commit_barrier(5, NULL);
		if (rank == 0 && pd) {
			printf("committed %d %d\n", epoch, step);
			fflush(stdout);
		}
		if (dies_now(kills, world, epoch, step))
			raise(SIGKILL);
		if (pd)
			usleep(50000); /* room for a kill from outside */
	}
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < n; i++) {
		unsigned char b[8];
		memcpy(b, &v[i], 8);
		for (int k = 0; k < 8; k++)
			h = (h ^ b[k]) * 1099511628211ull;
	}
	printf("rank %d of %d steps %d checksum %016llx\n", rank, size, step, (unsigned long long)h);
	Fenix_Finalize();
	MPI_Finalize();
	return 0;
}
