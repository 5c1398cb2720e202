/* files_perf: what the program's file calls cost, run plain and under
 * stasis-run side by side by files_perf.sh: writes to a file it keeps open
 * (looked at for writes below a checkpointed length), opens and closes (moved
 * into the program's range of descriptors, the placeholder put back), and the
 * same through stdio. Then the cost of undo records (process/undo.h): a
 * file of UNDO_MIB MiB written, a checkpoint asked for (SIGUSR1 to mpirun,
 * under stasis only), and the file overwritten in place: 64-byte writes
 * each the first over its bytes (each saves them), the same writes again
 * (saved already), and 1 MiB writes the first over theirs; then, still
 * after the checkpoint, a log opened in append mode, written 64 bytes and
 * closed again (the first open of a file after a checkpoint keeps its
 * length for a restart), and a directory made and removed (each named in
 * the undo record, process/names.h). Rank 0 prints one line per case:
 *   <case> <ns per call>        (overwrite_1MiB: ns per MiB,
 *                                mkdir_rmdir: ns per pair)
 */
#include <fcntl.h>
#include <glob.h>
#include <mpi.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

#define UNDO_MIB 64
#define STRIDE 1024 /* between the 64-byte writes: each saves its own */

/* Under stasis: ask for a checkpoint and wait until it is committed. */
static void checkpoint(int rank)
{
	const char *pre = getenv("LD_PRELOAD"), *dir = getenv("STASIS_DIR");
	char pattern[4200];
	size_t before;
	int done = 0;
	glob_t g;

	if (!pre || !strstr(pre, "stasis") || !dir)
		return;
	snprintf(pattern, sizeof(pattern), "%s/*/ckpt-*.r0.done", dir);
	before = glob(pattern, 0, NULL, &g) ? 0 : g.gl_pathc;
	if (before)
		globfree(&g);
	if (rank == 0)
		kill(getppid(), SIGUSR1);
	/* A checkpoint of this run: one commit record more. */
	for (int i = 0; i < 1000 && !done; i++) {
		done = !glob(pattern, 0, NULL, &g) && g.gl_pathc > before;
		globfree(&g);
		MPI_Allreduce(MPI_IN_PLACE, &done, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
		usleep(10000);
	}
}

static void undo_cases(int rank, long n)
{
	static char mib[1 << 20];
	char path[64], buf[64] = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba98765432";
	long calls = n * STRIDE > (UNDO_MIB / 2) << 20 ? ((UNDO_MIB / 2) << 20) / STRIDE : n;
	double t0;
	int fd;

	snprintf(path, sizeof(path), "%s/files_undo.%d", getenv("TMPDIR") ?: "/tmp", rank);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		MPI_Abort(MPI_COMM_WORLD, 2);
	memset(mib, 'a' + rank, sizeof(mib));
	for (int i = 0; i < UNDO_MIB; i++)
		if (write(fd, mib, sizeof(mib)) != sizeof(mib))
			MPI_Abort(MPI_COMM_WORLD, 2);
	checkpoint(rank);

	t0 = now();
	for (long i = 0; i < calls; i++)
		if (pwrite(fd, buf, sizeof(buf), (off_t)i * STRIDE) != sizeof(buf))
			MPI_Abort(MPI_COMM_WORLD, 2);
	if (rank == 0)
		printf("overwrite_first_64B %.0f\n", (now() - t0) / calls);
	t0 = now();
	for (long i = 0; i < calls; i++)
		if (pwrite(fd, buf, sizeof(buf), (off_t)i * STRIDE) != sizeof(buf))
			MPI_Abort(MPI_COMM_WORLD, 2);
	if (rank == 0)
		printf("overwrite_again_64B %.0f\n", (now() - t0) / calls);
	t0 = now();
	for (int i = UNDO_MIB / 2; i < UNDO_MIB; i++)
		if (pwrite(fd, mib, sizeof(mib), (off_t)i << 20) != sizeof(mib))
			MPI_Abort(MPI_COMM_WORLD, 2);
	if (rank == 0)
		printf("overwrite_1MiB %.0f\n", (now() - t0) / (UNDO_MIB / 2));
	close(fd);
	unlink(path);

	t0 = now();
	for (long i = 0; i < n; i++) {
		FILE *fp = fopen(path, "a");

		if (!fp || fwrite(buf, sizeof(buf), 1, fp) != 1 || fclose(fp))
			MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (rank == 0)
		printf("append_reopen_64B %.0f\n", (now() - t0) / n);
	unlink(path);
	t0 = now();
	for (long i = 0; i < n; i++)
		if (mkdir(path, 0700) || rmdir(path))
			MPI_Abort(MPI_COMM_WORLD, 2);
	if (rank == 0)
		printf("mkdir_rmdir %.0f\n", (now() - t0) / n);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	char path[64], buf[64] = "0123456789abcdef0123456789abcdef0123456789abcdef012345678";
	int rank, fd;
	double t0;
	FILE *fp;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	snprintf(path, sizeof(path), "%s/files_perf.%d", getenv("TMPDIR") ?: "/tmp", rank);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		MPI_Abort(MPI_COMM_WORLD, 2);

	t0 = now();
	for (long i = 0; i < n; i++)
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			MPI_Abort(MPI_COMM_WORLD, 2);
	if (rank == 0)
		printf("write_64B %.0f\n", (now() - t0) / n);

	t0 = now();
	for (long i = 0; i < n; i++)
		if (pwrite(fd, buf, sizeof(buf), (off_t)i * sizeof(buf)) != sizeof(buf))
			MPI_Abort(MPI_COMM_WORLD, 2);
	if (rank == 0)
		printf("pwrite_64B %.0f\n", (now() - t0) / n);
	close(fd);

	t0 = now();
	for (long i = 0; i < n; i++) {
		int f = open(path, O_RDONLY);

		if (f < 0 || close(f))
			MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (rank == 0)
		printf("open_close %.0f\n", (now() - t0) / n);

	t0 = now();
	for (long i = 0; i < n; i++) {
		fp = fopen(path, "r");
		if (!fp || fclose(fp))
			MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (rank == 0)
		printf("fopen_fclose %.0f\n", (now() - t0) / n);

	unlink(path);
	undo_cases(rank, n);
	MPI_Finalize();
	return 0;
}
