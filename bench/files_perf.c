/* files_perf: what the program's file calls cost, run plain and under
 * stasis-run side by side by files_perf.sh: writes to a file it keeps open
 * (looked at for writes below a checkpointed length), opens and closes (moved
 * into the program's range of descriptors, the placeholder put back), and the
 * same through stdio. Rank 0 prints one line per case:
 *   <case> <ns per call>
 */
#include <fcntl.h>
#include <mpi.h>
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
	MPI_Finalize();
	return 0;
}
