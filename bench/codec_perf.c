/* Throughput of the xor and rs redundancy codecs (redset_encode and
 * redset_rebuild), per rank, in bytes of checkpoint per second, side by
 * side with ISA-L's ec_encode_data alone on one core over the same bytes
 * (same p - k data vectors and k rows) and with a memcpy of the same
 * bytes, both measured in the same run on rank 0.
 *
 *   mpirun -np 8 --oversubscribe codec_perf [MiB per rank] [dir]
 *
 * Files live in a tmpfs (/dev/shm by default) to measure the codec, not
 * the disk. Each rank is its own failure domain; set sizes 4 and 8.
 * Rebuild loses 1 member (xor) or k members (rs) of every set and
 * includes the survivors' crc64 check of their files and redundancy file.
 * With more ranks than cores (8 on 2 here) a rank's time includes waiting
 * for the CPU: the per-rank figures are what the machine gives, not what
 * a rank with a core of its own would get. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <isa-l.h>
#include <mpi.h>

#include "redset.h"

static int rank, nranks;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ec_encode_data over size bytes cut into p - k vectors, k rows. */
static double ec_rate(int p, int k, size_t size)
{
	int d = p - k;
	size_t len = ((size + d - 1) / d + 63) & ~(size_t)63;
	unsigned char *a = malloc((size_t)p * d), *tbl = malloc((size_t)32 * d * k);
	unsigned char *data[256], *code[256];
	double t0, best = 1e30;

	gf_gen_cauchy1_matrix(a, p, d);
	ec_init_tables(d, k, a + (size_t)d * d, tbl);
	for (int i = 0; i < d; i++) {
		data[i] = aligned_alloc(64, len);
		memset(data[i], i + 1, len);
	}
	for (int i = 0; i < k; i++)
		code[i] = aligned_alloc(64, len);
	for (int rep = 0; rep < 8; rep++) {
		t0 = now();
		ec_encode_data((int)len, d, k, tbl, data, code);
		t0 = now() - t0;
		best = t0 < best ? t0 : best;
	}
	for (int i = 0; i < d; i++)
		free(data[i]);
	for (int i = 0; i < k; i++)
		free(code[i]);
	free(a);
	free(tbl);
	return size / best;
}

static double memcpy_rate(size_t size)
{
	unsigned char *a = malloc(size), *b = malloc(size);
	double t0, best = 1e30;

	memset(a, 1, size);
	memset(b, 2, size);
	for (int rep = 0; rep < 8; rep++) {
		t0 = now();
		memcpy(b, a, size);
		t0 = now() - t0;
		best = t0 < best ? t0 : best;
	}
	if (b[size / 2] != 1)
		fprintf(stderr, "memcpy?\n");
	free(a);
	free(b);
	return size / best;
}

/* A barrier that sleeps instead of spinning, so that rank 0's baselines
 * get a core while the other ranks wait. */
static void polite_barrier(void)
{
	struct timespec ms = {0, 1000000};
	MPI_Request req;
	int done = 0;

	MPI_Ibarrier(MPI_COMM_WORLD, &req);
	while (!done) {
		MPI_Test(&req, &done, MPI_STATUS_IGNORE);
		if (!done)
			nanosleep(&ms, NULL);
	}
}

static double max_time(double t)
{
	double m;

	MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return m;
}

static int run(const char *dir, const char *scheme, int p, int k, double *enc, double *reb)
{
	struct redset_params prm = {.scheme = scheme, .set_size = p, .rs_k = k, .replicas = 1};
	struct redset *rs;
	char err[512], path[700], name[64], red[64];
	const char *names[1] = {name};
	int domain, ret, me_in_set = rank % p;
	double t0;
	bool lose;

	redset_domain(MPI_COMM_WORLD, "1", &domain, err, sizeof(err));
	ret = redset_create(MPI_COMM_WORLD, domain, &prm, &rs, err, sizeof(err));
	if (ret) {
		if (!rank)
			fprintf(stderr, "create: %s\n", err);
		return ret;
	}
	snprintf(name, sizeof(name), "img.r%d", rank);
	snprintf(red, sizeof(red), "red.r%d", rank);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = now();
	ret = redset_encode(rs, dir, names, 1, red, err, sizeof(err));
	*enc = max_time(now() - t0);
	if (ret) {
		fprintf(stderr, "rank %d: encode: %s\n", rank, err);
		goto out;
	}
	/* one domain per rank: set g is ranks g*p .. g*p+p-1; lose members
	 * 1..k of every set */
	lose = me_in_set >= 1 && me_in_set <= k;
	if (lose) {
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s", dir, red);
		unlink(path);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = now();
	ret = redset_rebuild(rs, dir, red, !lose, err, sizeof(err));
	*reb = max_time(now() - t0);
	if (ret)
		fprintf(stderr, "rank %d: rebuild: %s\n", rank, err);
out:
	redset_free(rs);
	return ret;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *scheme;
		int k;
	} cfg[] = {{"xor", 1}, {"rs", 1}, {"rs", 2}, {"rs", 3}};
	size_t size;
	char base[256] = "", dir[600], path[700];
	unsigned char *buf;
	int fd, fails = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	size = (size_t)(argc > 1 ? atoi(argv[1]) : 32) << 20;
	if (nranks % 8) {
		if (!rank)
			fprintf(stderr, "run with mpirun -np 8 (or a multiple)\n");
		MPI_Finalize();
		return 77;
	}
	if (!rank) {
		snprintf(base, sizeof(base), "%s/stasis-bench-XXXXXX", argc > 2 ? argv[2] : "/dev/shm");
		if (!mkdtemp(base))
			base[0] = 0;
	}
	MPI_Bcast(base, sizeof(base), MPI_CHAR, 0, MPI_COMM_WORLD);
	if (!base[0]) {
		MPI_Finalize();
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/r%d", base, rank);
	mkdir(dir, 0700);
	/* an odd size, so that chunks and pieces do not divide it */
	size += 12345;
	buf = malloc(size);
	for (size_t i = 0; i < size; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 13);
	snprintf(path, sizeof(path), "%s/img.r%d", dir, rank);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, buf, size) != (ssize_t)size)
		fails++;
	close(fd);
	free(buf);

	if (!rank) {
		printf("codec_perf: %d ranks, %.1f MiB per rank, files in %s\n", nranks,
		       size / 1048576.0, base);
		printf("per-rank throughput (MB/s of checkpoint, slowest rank); ratios to ISA-L "
		       "ec_encode_data alone (1 core, same p-k x k geometry) and to memcpy\n");
		printf("%-4s %3s %2s | %9s %7s %7s | %9s %7s %7s | %9s %9s\n", "sch", "p", "k",
		       "encode", "/ec", "/memcpy", "rebuild", "/ec", "/memcpy", "ec MB/s",
		       "memcpy");
	}
	for (int p = 4; p <= 8; p += 4) {
		for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
			double enc = 0, reb = 0, ec = 0, mc = 0;
			int ret;

			ret = run(dir, cfg[c].scheme, p, cfg[c].k, &enc, &reb);
			fails += ret != 0;
			if (!rank) {
				ec = ec_rate(p, cfg[c].k, size);
				mc = memcpy_rate(size);
				polite_barrier();
				printf("%-4s %3d %2d | %9.1f %7.3f %7.3f | %9.1f %7.3f %7.3f | %9.1f "
				       "%9.1f\n",
				       cfg[c].scheme, p, cfg[c].k, size / enc / 1e6,
				       size / enc / ec, size / enc / mc, size / reb / 1e6,
				       size / reb / ec, size / reb / mc, ec / 1e6, mc / 1e6);
				fflush(stdout);
			} else {
				polite_barrier();
			}
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (!rank) {
		snprintf(path, sizeof(path), "rm -rf '%s'", base);
		if (system(path))
			(void)0;
	}
	MPI_Finalize();
	return fails ? 1 : 0;
}
