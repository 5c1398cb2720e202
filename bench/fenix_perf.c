/* Fenix store + commit_barrier of N MiB per rank, beside a plain memcpy
 * and a plain MPI_Sendrecv (to the next rank) of the same bytes, in the
 * same run; and istore: how long it takes to return, and istore, a memcpy
 * of the bytes as the program's work meanwhile, wait and commit_barrier,
 * beside store + commit_barrier + the same memcpy one after the other.
 * And the floor a store cannot go under on that filesystem: writing the
 * bytes it must write, its data and its share of the redundancy (partner:
 * as much again; xor over p ranks: 1/(p-1) of it; rs: k/(p-k)), to fresh
 * files in FLOOR_DIR with fsync, as store does, and nothing else. Usage:
 *   mpirun -np P fenix_perf MIB SCHEME(partner|xor|rs) REPS [FLOOR_DIR]
 * with STASIS_DIR naming where the snapshots go (/dev/shm/... or disk).
 * Prints MB/s per rank and the ratio of Fenix to the slower of the two. */
#include <fcntl.h>
#include <fenix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double best(double a, double b)
{
	return a < b ? a : b;
}

/* Write n bytes of p to a new file path, fsync'd; 0 or -1. */
static int write_new(const char *path, const char *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	for (size_t off = 0; off < n;) {
		ssize_t w = write(fd, p + off, n - off > (8u << 20) ? 8u << 20 : n - off);
		if (w <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	int ret = fsync(fd);
	close(fd);
	return ret;
}

/* The floor of one store: this rank's data and its redundancy share
 * written to new files in dir (removed after). Seconds, or -1. */
static double write_floor(const char *dir, int rank, const char *a, size_t data, size_t red)
{
	char f1[4200], f2[4200];
	snprintf(f1, sizeof(f1), "%s/floor-data.%d", dir, rank);
	snprintf(f2, sizeof(f2), "%s/floor-red.%d", dir, rank);
	double t0 = MPI_Wtime();
	int bad = write_new(f1, a, data) || write_new(f2, a, red);
	double t = MPI_Wtime() - t0;
	unlink(f1);
	unlink(f2);
	return bad ? -1 : t;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	if (argc < 4) {
		fprintf(stderr, "usage: fenix_perf MIB SCHEME REPS\n");
		return 2;
	}
	size_t bytes = (size_t)atoi(argv[1]) << 20;
	int reps = atoi(argv[3]), role, err, rank, size, flag;
	MPI_Comm comm;
	Fenix_Init(&role, MPI_COMM_WORLD, &comm, &argc, &argv, 0, 0, MPI_INFO_NULL, &err);
	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	char *a = malloc(bytes), *b = malloc(bytes);
	for (size_t i = 0; i < bytes; i++)
		a[i] = (char)(i * 131 + (size_t)rank);
	memset(b, 0, bytes);
	int pol[3] = {!strcmp(argv[2], "partner") ? 0 : !strcmp(argv[2], "xor") ? 1 : 2, size, 2};
	Fenix_Data_group_create(1, comm, 0, 0, FENIX_DATA_POLICY_STASIS, pol, &flag);
	Fenix_Data_member_create(1, 0, a, (int)(bytes / 8), MPI_DOUBLE);
	double t_copy = 1e30, t_mpi = 1e30, t_fx = 1e30, t_ret = 1e30, t_async = 1e30,
	       t_floor = 1e30;
	const char *floor_dir = argc > 4 ? argv[4] : NULL;
	size_t red = pol[0] == 0 ? bytes : pol[0] == 1 ? bytes / (size_t)(size > 1 ? size - 1 : 1)
			: bytes * 2 / (size_t)(size > 2 ? size - 2 : 1);
	for (int r = 0; r < reps; r++) {
		MPI_Barrier(comm);
		double t0 = MPI_Wtime();
		memcpy(b, a, bytes);
		MPI_Barrier(comm);
		double t1 = MPI_Wtime();
		MPI_Sendrecv(a, (int)(bytes / 8), MPI_DOUBLE, (rank + 1) % size, 0, b, (int)(bytes / 8),
			     MPI_DOUBLE, (rank + size - 1) % size, 0, comm, MPI_STATUS_IGNORE);
		MPI_Barrier(comm);
		double t2 = MPI_Wtime();
		Fenix_Data_member_store(1, 0, FENIX_DATA_SUBSET_FULL);
		Fenix_Data_commit_barrier(1, NULL);
		double t3 = MPI_Wtime();
		Fenix_Request req;
		MPI_Barrier(comm);
		double t4 = MPI_Wtime();
		Fenix_Data_member_istore(1, 0, FENIX_DATA_SUBSET_FULL, &req);
		double t5 = MPI_Wtime();
		memcpy(b, a, bytes);
		Fenix_Data_wait(req);
		Fenix_Data_commit_barrier(1, NULL);
		double t6 = MPI_Wtime();
		t_copy = best(t_copy, t1 - t0);
		t_mpi = best(t_mpi, t2 - t1);
		t_fx = best(t_fx, t3 - t2);
		t_ret = best(t_ret, t5 - t4);
		t_async = best(t_async, t6 - t4);
		if (floor_dir) {
			MPI_Barrier(comm);
			double t = write_floor(floor_dir, rank, a, bytes, red);
			MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
			t_floor = t < 0 ? t_floor : best(t_floor, t);
		}
	}
	if (rank == 0) {
		double mb = (double)bytes / 1e6;
		printf("fenix_perf: %d ranks, %zu MiB per rank, %s, best of %d\n", size, bytes >> 20,
		       argv[2], reps);
		printf("  memcpy          %8.1f MB/s per rank\n", mb / t_copy);
		printf("  MPI_Sendrecv    %8.1f MB/s per rank\n", mb / t_mpi);
		printf("  store+commit_b  %8.1f MB/s per rank  (%.2f of the slower of the two)\n",
		       mb / t_fx, best(mb / t_copy, mb / t_mpi) > 0 ? (mb / t_fx) / best(mb / t_copy, mb / t_mpi) : 0);
		if (floor_dir && t_floor < 1e30)
			printf("  floor: write    %8.1f MB/s per rank  (%.1f MiB data + %.1f MiB "
			       "redundancy to new files, fsync; %.2f of the slower of the two; "
			       "store+commit_b is %.2f of it)\n",
			       mb / t_floor, bytes / 1048576.0, red / 1048576.0,
			       (mb / t_floor) / best(mb / t_copy, mb / t_mpi), t_floor / t_fx);
		printf("  istore returns  %8.1f ms  (memcpy %.1f ms, store+commit_b %.1f ms)\n",
		       t_ret * 1e3, t_copy * 1e3, t_fx * 1e3);
		printf("  istore, work, wait+commit_b %8.1f ms  beside store+commit_b, then work: "
		       "%.1f ms\n",
		       t_async * 1e3, (t_fx + t_copy) * 1e3);
	}
	Fenix_Finalize();
	MPI_Finalize();
	return 0;
}
