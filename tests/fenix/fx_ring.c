/* A ring on Fenix (reference dialect): each step every rank passes its
 * vector to the next rank, adds its rank to it, stores the vector and the
 * step in a Fenix group (store, or istore completed by wait or by the
 * commit) and commits with a barrier. Rank <kill> SIGKILLs
 * itself after step <kill_step> of the first launch; the job is launched
 * again (STASIS_FENIX_EPOCH=1; spawn 1: the relaunched rank takes its place
 * back, role RECOVERED, the others SURVIVOR), restores and goes on. The
 * final line per rank is a checksum of its vector, identical with and
 * without the failure.
 * A store, wait or commit that fails ends every rank with a line naming
 * the step, the call and its code (they must agree). FX_SET_SIZE sets the
 * redundancy sets' size (default: one set of all ranks).
 * Usage: fx_ring STEPS N_DOUBLES KILL_RANK KILL_STEP SCHEME(partner|xor|rs) */
#include <fenix.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	if (argc < 6) {
		fprintf(stderr, "usage: fx_ring STEPS N KILL_RANK KILL_STEP SCHEME\n");
		return 2;
	}
	int steps = atoi(argv[1]), n = atoi(argv[2]), kill_rank = atoi(argv[3]),
	    kill_step = atoi(argv[4]);
	int role, error, rank, size;
	MPI_Comm comm;
	Fenix_Init(&role, MPI_COMM_WORLD, &comm, &argc, &argv, 0, 1, MPI_INFO_NULL, &error);
	if (error)
		return 1;
	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	int flag, pol[3];
	int scheme = !strcmp(argv[5], "partner") ? 0 : !strcmp(argv[5], "xor") ? 1 : 2;
	pol[0] = scheme, pol[1] = getenv("FX_SET_SIZE") ? atoi(getenv("FX_SET_SIZE")) : size;
	pol[2] = 2;
	Fenix_Data_group_create(7, comm, 0, 1, FENIX_DATA_POLICY_STASIS, pol, &flag);
	/* The harness kills a rank from outside: it reads the pids here. */
	const char *pd = getenv("FX_PID_DIR");
	if (pd) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/pid.%d", pd, rank);
		FILE *f = fopen(path, "w");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
	}
	double *v = malloc(sizeof(double) * (size_t)n), *in = malloc(sizeof(double) * (size_t)n);
	int step = 0;
	Fenix_Data_member_create(7, 1, v, n, MPI_DOUBLE);
	Fenix_Data_member_create(7, 2, &step, 1, MPI_INT);
	if (role == FENIX_ROLE_INITIAL_RANK) {
		for (int i = 0; i < n; i++)
			v[i] = rank * 0.5 + i * 1e-3;
	} else if (getenv("FX_SHRUNK")) {
		/* Launched again on fewer ranks than stored: restore is refused
		 * on every rank, restore_from_rank gives each its old data. */
		int r0 = Fenix_Data_member_restore(7, 1, v, n, FENIX_DATA_SNAPSHOT_LATEST, NULL);
		int r1 = Fenix_Data_member_restore_from_rank(7, 1, v, n, FENIX_DATA_SNAPSHOT_LATEST, NULL,
							     rank);
		printf("rank %d shrunk: restore %d, restore_from_rank %d\n", rank, r0, r1);
		step = steps;
	} else {
		int r1 = Fenix_Data_member_restore(7, 1, v, n, FENIX_DATA_SNAPSHOT_LATEST, NULL);
		if (r1)
			return 1;
		int r2 = Fenix_Data_member_restore(7, 2, &step, 1, FENIX_DATA_SNAPSHOT_LATEST, NULL);
		printf("rank %d restored step %d (%d %d)\n", rank, step, r1, r2);
		if (r1 || r2)
			return 1;
	}
	for (; step < steps;) {
		MPI_Sendrecv(v, n, MPI_DOUBLE, (rank + 1) % size, 0, in, n, MPI_DOUBLE,
			     (rank + size - 1) % size, 0, comm, MPI_STATUS_IGNORE);
		for (int i = 0; i < n; i++)
			v[i] = in[i] * 0.999 + rank + i * 1e-6;
		step++;
		/* Stored three ways in turn: store; istore then wait; istore
		 * tested until written, completed by the commit. */
		const char *call = "store";
		int code;
		if (step % 3 == 0) {
			code = Fenix_Data_member_store(7, FENIX_DATA_MEMBER_ALL, FENIX_DATA_SUBSET_FULL);
		} else {
			Fenix_Request req;
			int written = 0;
			code = Fenix_Data_member_istore(7, FENIX_DATA_MEMBER_ALL, FENIX_DATA_SUBSET_FULL,
							&req);
			call = "istore";
			if (!code && step % 3 == 1)
				call = "wait", code = Fenix_Data_wait(req);
			else
				while (!code && !written)
					code = Fenix_Data_test(req, &written);
		}
		if (!code)
			call = "commit_barrier", code = Fenix_Data_commit_barrier(7, NULL);
		if (code) {
			printf("rank %d step %d: %s returned %d\n", rank, step, call, code);
			fflush(stdout);
			MPI_Barrier(comm);
			return 3;
		}
		if (rank == 0 && pd) {
			printf("committed %d\n", step);
			fflush(stdout);
		}
		if (role == FENIX_ROLE_INITIAL_RANK && rank == kill_rank && step == kill_step)
			raise(SIGKILL);
	}
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < n; i++) {
		unsigned char b[8];
		memcpy(b, &v[i], 8);
		for (int k = 0; k < 8; k++)
			h = (h ^ b[k]) * 1099511628211ull;
	}
	printf("rank %d steps %d checksum %016llx\n", rank, step, (unsigned long long)h);
	/* What the group holds now, as the program sees it (the queries are
	 * collective): fenix.sh compares stasis-inspect's listing with it. */
	int ns = 0, nm = 0, cnt, sz;
	Fenix_Data_group_get_number_of_snapshots(7, &ns);
	Fenix_Data_group_get_number_of_members(7, &nm);
	char line[512];
	size_t at = (size_t)snprintf(line, sizeof(line), "stored group 7 ts");
	for (int p = ns - 1; p >= 0 && at < sizeof(line); p--) {
		int t = -1;
		Fenix_Data_group_get_snapshot_at_position(7, p, &t);
		at += (size_t)snprintf(line + at, sizeof(line) - at, " %d", t);
	}
	at += (size_t)snprintf(line + at, at < sizeof(line) ? sizeof(line) - at : 0, " members");
	for (int p = 0; p < nm; p++) {
		int mid = -1;
		Fenix_Data_group_get_member_at_position(7, &mid, p);
		Fenix_Data_member_attr_get(7, mid, FENIX_DATA_MEMBER_ATTRIBUTE_COUNT, &cnt, &flag, 0);
		Fenix_Data_member_attr_get(7, mid, FENIX_DATA_MEMBER_ATTRIBUTE_SIZE, &sz, &flag, 0);
		if (at < sizeof(line))
			at += (size_t)snprintf(line + at, sizeof(line) - at, " %d:%dx%dB", mid, cnt, sz);
	}
	if (rank == 0)
		printf("%s\n", line);
	Fenix_Finalize();
	MPI_Finalize();
	return 0;
}
