/* Aggregate throughput of the xor and rs redundancy schemes (redundancy_encode
 * and redundancy_rebuild) over all ranks, side by side with a plain cp of the
 * same files to the same filesystem, measured in the same run:
 *
 *   mpirun -np 8 --oversubscribe --mca mpi_yield_when_idle 1 codec_perf [MiB per rank] [dir]
 *
 * The data path was tuned for: 8 ranks, one set of all 8, 32 MiB per
 * rank in /dev/shm (the defaults), on a 2-core VM. Aggregate GB/s = bytes of checkpoint of all
 * ranks (ranks x MiB per rank) / time from the first rank's start to the
 * last rank's end; the same bytes for encode, rebuild and cp.
 *
 *  - cp: every rank runs /bin/cp (a child process, posix_spawn) of its
 *    image to a new file in the same directory at the same moment; the copy
 *    is removed between repetitions, as the redundancy file is rewritten
 *    by every encode.
 *  - encode: every rank's redundancy file written anew (crc64 of the
 *    images included).
 *  - rebuild: members 1 (xor) or 1..k (rs) of every set lose their image
 *    and redundancy file; includes what a restart's rebuild does besides
 *    the decoding (the survivors' crc64 check of their files and
 *    redundancy files, writing and checking the rebuilt ones).
 *
 * Repetitions alternate cp, encode and rebuild, so that the noise of a
 * shared machine falls on all three alike; best and median of REPS. The
 * load average is printed before and after. A second table gives time
 * against the set size p and k, beside ISA-L's ec_encode_data run by all
 * ranks at once over the same bytes (same p - k data vectors and k rows:
 * the bare kernel under the same contention). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <isa-l.h>
#include <mpi.h>

#include "redundancy.h"

extern char **environ;

static int rank, nranks;

#define REPS 5 /* repetitions per configuration */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* From the first rank's start to the last rank's end (one node: the
 * ranks share CLOCK_MONOTONIC), so that ranks which ran one after the
 * other on the shared cores count as long as they took together. */
static double span(double t0, double t1)
{
	double first, last;

	MPI_Allreduce(&t0, &first, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
	MPI_Allreduce(&t1, &last, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return last - first;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double best(const double *t, int n)
{
	double b = t[0];

	for (int i = 1; i < n; i++)
		b = t[i] < b ? t[i] : b;
	return b;
}

static double median(const double *t, int n)
{
	double s[REPS];

	memcpy(s, t, sizeof(double) * n);
	qsort(s, n, sizeof(double), cmp_double);
	return s[n / 2];
}

static void loadavg(char *buf, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "r");

	if (!f || !fgets(buf, (int)len, f))
		snprintf(buf, len, "?\n");
	if (f)
		fclose(f);
	buf[strcspn(buf, "\n")] = 0;
}

/* ---- the baselines ---- */

/* Every rank copies src to dst with /bin/cp at once; the time of all
 * (span()). dst is removed afterwards (outside the time). */
static double cp_all(const char *src, const char *dst)
{
	char *argv[] = {"cp", (char *)src, (char *)dst, NULL};
	double t0, t1;
	pid_t pid;
	int status = -1;

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = now();
	if (!posix_spawn(&pid, "/bin/cp", NULL, NULL, argv, environ))
		waitpid(pid, &status, 0);
	t1 = now();
	if (status)
		fprintf(stderr, "rank %d: cp %s %s failed\n", rank, src, dst);
	unlink(dst);
	return span(t0, t1);
}

/* ec_encode_data over size bytes cut into p - k vectors, k rows, run by
 * every rank at once: the best time of all of them (span()) of 3. */
static double ec_contended(int p, int k, size_t size)
{
	int d = p - k;
	size_t len = ((size + d - 1) / d + 63) & ~(size_t)63;
	unsigned char *a = malloc((size_t)p * d), *tbl = malloc((size_t)32 * d * k);
	unsigned char *data[256], *code[256];
	double bt = 1e30;

	gf_gen_cauchy1_matrix(a, p, d);
	ec_init_tables(d, k, a + (size_t)d * d, tbl);
	for (int i = 0; i < d; i++) {
		data[i] = aligned_alloc(64, len);
		memset(data[i], i + 1, len);
	}
	for (int i = 0; i < k; i++) {
		code[i] = aligned_alloc(64, len);
		memset(code[i], 0, len);
	}
	for (int rep = 0; rep < 3; rep++) {
		double t0;

		MPI_Barrier(MPI_COMM_WORLD);
		t0 = now();
		ec_encode_data((int)len, d, k, tbl, data, code);
		t0 = span(t0, now());
		bt = t0 < bt ? t0 : bt;
	}
	for (int i = 0; i < d; i++)
		free(data[i]);
	for (int i = 0; i < k; i++)
		free(code[i]);
	free(a);
	free(tbl);
	return bt;
}

/* ---- the redundancy set ---- */

struct result {
	double enc[REPS], reb[REPS], cp[REPS];
	int n;
};

static int run(const char *dir, const char *scheme, int p, int k, bool with_cp, struct result *res)
{
	struct redundancy_params prm = {
	    .scheme = scheme_find(scheme), .set_size = p, .rs_k = k, .replicas = 1};
	struct redundancy_set *rs;
	struct why w = WHY_INIT;
	char img[700], red[700], copy[700], name[64], redname[64];
	const char *names[1] = {name};
	int domain, ret, me_in_set = rank % p;
	bool lose = me_in_set >= 1 && me_in_set <= k;
	double t0;

	redundancy_domain(MPI_COMM_WORLD, "1", &domain, &w);
	ret = redundancy_set_create(MPI_COMM_WORLD, domain, &prm, &rs, &w);
	if (ret) {
		if (!rank)
			fprintf(stderr, "create: %s\n", w.msg);
		return ret;
	}
	snprintf(name, sizeof(name), "img.r%d", rank);
	snprintf(redname, sizeof(redname), "red.r%d", rank);
	snprintf(img, sizeof(img), "%s/%s", dir, name);
	snprintf(red, sizeof(red), "%s/%s", dir, redname);
	snprintf(copy, sizeof(copy), "%s/cp.r%d", dir, rank);
	res->n = 0;
	for (int rep = 0; rep < REPS && !ret; rep++) {
		if (with_cp)
			res->cp[rep] = cp_all(img, copy);
		/* Every encode writes a new redundancy file, as a checkpoint
		 * does (ckpt-<id>.r<rank>.red): the last one goes first,
		 * outside the time. */
		unlink(red);
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = now();
		ret = redundancy_encode(rs, dir, names, 1, redname, &w);
		res->enc[rep] = span(t0, now());
		if (ret) {
			fprintf(stderr, "rank %d: encode: %s\n", rank, w.msg);
			break;
		}
		/* one domain per rank: set g is ranks g*p .. g*p+p-1 */
		if (lose) {
			unlink(img);
			unlink(red);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = now();
		ret = redundancy_rebuild(rs, dir, redname, !lose, &w);
		res->reb[rep] = span(t0, now());
		if (ret)
			fprintf(stderr, "rank %d: rebuild: %s\n", rank, w.msg);
		res->n = rep + 1;
	}
	redundancy_set_free(rs);
	return ret;
}

static int write_image(const char *dir, size_t size)
{
	char path[700];
	unsigned char *buf = malloc(size);
	int fd, ret = 0;

	for (size_t i = 0; i < size; i++)
		buf[i] = (unsigned char)((i + rank * 7919) * 2654435761u >> 13);
	snprintf(path, sizeof(path), "%s/img.r%d", dir, rank);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, buf, size) != (ssize_t)size)
		ret = -1;
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *scheme;
		int k;
		double target; /* aggregate encode GB/s the data path was tuned to reach */
	} cfg[] = {{"xor", 1, 3.1}, {"rs", 1, 0}, {"rs", 2, 2.5}, {"rs", 3, 2.4}};
	static const int psz[] = {2, 4};
	struct {
		int p, k, xor;
		double enc, reb, kern;
	} tab[16];
	int ntab = 0, fails = 0;
	size_t size;
	char base[256] = "", dir[600], load[128];
	double tstart, gb;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	tstart = now();
	size = (size_t)(argc > 1 ? atoi(argv[1]) : 32) << 20;
	if (nranks % 4 || nranks > 256) {
		if (!rank)
			fprintf(stderr, "run with mpirun -np 8 (a multiple of 4)\n");
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
	fails += write_image(dir, size) != 0;
	gb = (double)nranks * size / 1e9;

	if (!rank) {
		loadavg(load, sizeof(load));
		printf("codec_perf: %d ranks, one set of %d, %.1f MiB per rank, files in %s\n",
		       nranks, nranks, size / 1048576.0, base);
		printf("load average before: %s\n", load);
		printf(
		    "aggregate GB/s over all ranks (%d x %.1f MiB / first start to last end), best "
		    "and median of %d;\ncp: /bin/cp of every rank's image to the same filesystem "
		    "at once (a child process per rank)\n",
		    nranks, size / 1048576.0, REPS);
		printf("%-4s %2s | %6s %6s | %6s %6s | %6s %6s | %7s %7s | %s\n", "sch", "k",
		       "encode", "median", "rebld", "median", "cp", "median", "enc/cp", "reb/cp",
		       "target encode");
	}
	for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
		struct result r = {0};
		int k = cfg[c].k, ret;
		double e, b, cp;

		ret = run(dir, cfg[c].scheme, nranks, k, true, &r);
		fails += ret != 0;
		if (rank || !r.n)
			continue;
		e = gb / best(r.enc, r.n);
		b = gb / best(r.reb, r.n);
		cp = gb / best(r.cp, r.n);
		printf("%-4s %2d | %6.2f %6.2f | %6.2f %6.2f | %6.2f %6.2f | %7.2f %7.2f | ",
		       cfg[c].scheme, k, e, gb / median(r.enc, r.n), b, gb / median(r.reb, r.n), cp,
		       gb / median(r.cp, r.n), e / cp, b / cp);
		if (cfg[c].target > 0)
			printf(">= %.1f: %s\n", cfg[c].target,
			       e >= cfg[c].target ? "met" : "not met");
		else
			printf("-\n");
		fflush(stdout);
		tab[ntab].p = nranks;
		tab[ntab].k = k;
		tab[ntab].xor = !strcmp(cfg[c].scheme, "xor");
		tab[ntab].enc = best(r.enc, r.n);
		tab[ntab].reb = best(r.reb, r.n);
		ntab++;
	}
	if (!rank) {
		loadavg(load, sizeof(load));
		printf("load average after: %s\n", load);
	}

	/* Time against p and k: the sets of 8 above, and sets of 2 and 4. */
	for (size_t pi = 0; pi < sizeof(psz) / sizeof(psz[0]); pi++) {
		for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
			struct result r = {0};
			int p = psz[pi], k = cfg[c].k;

			if (k >= p || nranks % p)
				continue;
			fails += run(dir, cfg[c].scheme, p, k, false, &r) != 0;
			if (rank || !r.n)
				continue;
			tab[ntab].p = p;
			tab[ntab].k = k;
			tab[ntab].xor = !strcmp(cfg[c].scheme, "xor");
			tab[ntab].enc = best(r.enc, r.n);
			tab[ntab].reb = best(r.reb, r.n);
			ntab++;
		}
	}
	MPI_Bcast(&ntab, 1, MPI_INT, 0, MPI_COMM_WORLD);
	for (int i = 0; i < ntab; i++) {
		int pk[2] = {tab[i].p, tab[i].k};

		MPI_Bcast(pk, 2, MPI_INT, 0, MPI_COMM_WORLD);
		tab[i].kern = ec_contended(pk[0], pk[1], size);
	}
	if (!rank) {
		printf(
		    "\ntime against set size p and k (ms, best of %d; kern: ec_encode_data by all "
		    "ranks at once, same bytes)\n",
		    REPS);
		printf("%-4s %2s %2s | %8s %8s %8s | %8s %8s\n", "sch", "p", "k", "encode", "rebuild",
		       "kern", "enc/kern", "reb/kern");
		for (int i = 0; i < ntab; i++)
			printf("%-4s %2d %2d | %8.1f %8.1f %8.1f | %8.2f %8.2f\n",
			       tab[i].xor ? "xor" : "rs", tab[i].p, tab[i].k, tab[i].enc * 1e3,
			       tab[i].reb * 1e3, tab[i].kern * 1e3, tab[i].enc / tab[i].kern,
			       tab[i].reb / tab[i].kern);
		printf("total %.1f s\n", now() - tstart);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (!rank) {
		char cmd[700];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
		if (system(cmd))
			(void)0;
	}
	MPI_Finalize();
	return fails ? 1 : 0;
}
