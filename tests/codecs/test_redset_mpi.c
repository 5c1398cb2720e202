/* Redundancy sets end to end, under mpirun (-np 8, domain spec "2": four
 * simulated nodes of two ranks, sets of 4). Each rank writes files of
 * random sizes (0, odd, unequal) in <base>/node<n>/ and keeps a shadow
 * copy; for each scheme it encodes, deletes the files of as many nodes as
 * the scheme tolerates, rebuilds and compares byte for byte. Also: a
 * corrupted byte in a file and in a redundancy file, a lost redundancy
 * file next to lost files, one node more than tolerated (-EUCLEAN on every
 * rank with the message, nothing deleted), a file truncated by another
 * process during an encode (an error, never SIGBUS), and placement errors.
 * Exit 0 pass, 1 fail, 77 skip. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "fault.h"
#include "log.h"
#include "redundancy.h"

#define MAXF 3

static int rank, nranks, failures;
static char base[256], dir[512];

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__);                \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

struct files {
	int n;
	char name[MAXF][64];
	const char *names[MAXF];
	unsigned char *data[MAXF];
	size_t size[MAXF];
	char red[64];
};

static unsigned long long rng;

static unsigned long long next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int write_file(const char *name, const void *buf, size_t len)
{
	char path[700];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || (len && write(fd, buf, len) != (ssize_t)len)) {
		FAIL("write %s: %s", path, strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

/* 1: present and equal to the shadow copy. */
static int same_file(const char *name, const void *buf, size_t len)
{
	char path[700];
	struct stat st;
	unsigned char *got;
	int fd, same;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) || (size_t)st.st_size != len || (st.st_mode & 0777) != 0600) {
		close(fd);
		return 0;
	}
	got = malloc(len + 1);
	same = read(fd, got, len) == (ssize_t)len && !memcmp(got, buf, len);
	free(got);
	close(fd);
	return same;
}

static bool exists(const char *name)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static void make_files(struct files *f, const char *tag)
{
	static const size_t special[] = {0, 1, 4095, 4097, 65536, 200003};

	f->n = 1 + next() % MAXF;
	for (int i = 0; i < f->n; i++) {
		snprintf(f->name[i], sizeof(f->name[i]), "%s-f%d.r%d", tag, i, rank);
		f->names[i] = f->name[i];
		f->size[i] = next() % 3 ? next() % 300000 : special[next() % 6];
		if (rank == 1 && i == 0)
			f->size[i] = 0; /* a member whose first file is empty */
		if (rank == 2)
			f->size[i] = 1000003 + i; /* the largest logical file */
		f->data[i] = malloc(f->size[i] + 1);
		for (size_t j = 0; j < f->size[i]; j++)
			f->data[i][j] = (unsigned char)next();
		write_file(f->name[i], f->data[i], f->size[i]);
	}
	snprintf(f->red, sizeof(f->red), "%s.r%d.red", tag, rank);
}

static void free_files(struct files *f)
{
	for (int i = 0; i < f->n; i++)
		free(f->data[i]);
}

static bool have_mine(const struct files *f)
{
	for (int i = 0; i < f->n; i++)
		if (!same_file(f->name[i], f->data[i], f->size[i]))
			return false;
	return true;
}

static void delete_mine(const struct files *f)
{
	char path[700];

	for (int i = 0; i < f->n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, f->name[i]);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/%s", dir, f->red);
	unlink(path);
}

static void flip_byte(const char *name, off_t off)
{
	char path[700];
	unsigned char c;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR);
	if (fd < 0 || pread(fd, &c, 1, off) != 1) {
		FAIL("flip %s", path);
		return;
	}
	c ^= 0x40;
	if (pwrite(fd, &c, 1, off) != 1)
		FAIL("flip %s", path);
	close(fd);
}

static int node_of(int r)
{
	return r / 2;
}

/* Nodes 1..n lost (node 0 last, when all four go). */
static bool gone(int r, int n)
{
	int node = node_of(r);

	return (node >= 1 && node <= n) || (node == 0 && n >= 4);
}

/* w with nothing said yet: each call's cause is its own (why.h keeps
 * the first one said). */
static struct why *fresh(struct why *w)
{
	why_clear(w);
	return w;
}

static int rebuild(struct redundancy_set *rs, const struct files *f, struct why *w)
{
	return redundancy_rebuild(rs, dir, f->red, have_mine(f), w);
}

/* Whether the scheme under test writes redundancy files (single does not). */
static bool writes_red = true;

static void expect_intact(const struct files *f, const char *what)
{
	if (!have_mine(f))
		FAIL("%s: files differ from the shadow copy", what);
	if (writes_red != exists(f->red))
		FAIL("%s: redundancy file %s %s", what, f->red, writes_red ? "missing" : "written");
}

/* One scheme: encode, lose `lose` nodes, rebuild; extras on request. */
static void run_scheme(const char *scheme, int k, int lose, bool extras)
{
	struct redundancy_params prm = {
	    .scheme = scheme_find(scheme), .set_size = 4, .rs_k = k, .replicas = k};
	struct redundancy_set *rs = NULL;
	struct files f;
	char tag[32], what[64];
	struct why w = WHY_INIT;
	int ret, domain;

	snprintf(tag, sizeof(tag), "%s%d", scheme, k);
	snprintf(what, sizeof(what), "%s k/R %d", scheme, k);
	writes_red = strcmp(scheme, "single") != 0;
	redundancy_domain(MPI_COMM_WORLD, "2", &domain, fresh(&w));
	ret = redundancy_set_create(MPI_COMM_WORLD, domain, &prm, &rs, fresh(&w));
	if (ret) {
		FAIL("%s: create: %s", what, w.msg);
		return;
	}
	make_files(&f, tag);
	MPI_Barrier(MPI_COMM_WORLD);
	ret = redundancy_encode(rs, dir, f.names, f.n, f.red, fresh(&w));
	if (ret)
		FAIL("%s: encode %d: %s", what, ret, w.msg);

	/* nothing lost: a no-op */
	ret = rebuild(rs, &f, fresh(&w));
	if (ret)
		FAIL("%s: rebuild with nothing lost: %d %s", what, ret, w.msg);

	/* lose nodes 1..lose */
	if (lose > 0) {
		MPI_Barrier(MPI_COMM_WORLD);
		if (node_of(rank) >= 1 && node_of(rank) <= lose)
			delete_mine(&f);
		MPI_Barrier(MPI_COMM_WORLD);
		ret = rebuild(rs, &f, fresh(&w));
		if (ret)
			FAIL("%s: rebuild of %d node(s): %d %s", what, lose, ret, w.msg);
		expect_intact(&f, what);
		if (!rank)
			printf("ok %-8s k/R %d: encode, lose %d node(s), rebuild, compare\n", scheme,
			       k, lose);
	}

	if (extras) {
		/* a flipped byte the caller did not notice, and one in a
		 * redundancy file */
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 3 && f.size[0] > 0)
			flip_byte(f.name[0], f.size[0] / 2);
		if (rank == 3 && f.size[0] == 0)
			flip_byte(f.red, 5000);
		if (rank == 4)
			flip_byte(f.red, 4096 + 16);
		MPI_Barrier(MPI_COMM_WORLD);
		ret = redundancy_rebuild(rs, dir, f.red, true, fresh(&w));
		if (ret)
			FAIL("%s: rebuild of corrupted bytes: %d %s", what, ret, w.msg);
		expect_intact(&f, "corrupted byte");

		/* files of rank 2 and the redundancy file of rank 6, both in
		 * set 0 (ranks 0,2,4,6) */
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 2)
			for (int i = 0; i < f.n; i++) {
				char path[700];

				snprintf(path, sizeof(path), "%s/%s", dir, f.name[i]);
				unlink(path);
			}
		if (rank == 6) {
			char path[700];

			snprintf(path, sizeof(path), "%s/%s", dir, f.red);
			unlink(path);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		ret = rebuild(rs, &f, fresh(&w));
		/* set 1 (odd ranks) lost nothing */
		if ((k >= 2 || rank % 2) && ret)
			FAIL("%s: files of 2 + redundancy file of 6: %d %s", what, ret, w.msg);
		if (k < 2 && rank % 2 == 0 && ret != -EUCLEAN)
			FAIL("%s: files of 2 + redundancy file of 6 want -EUCLEAN, got %d", what,
			     ret);
		if (k < 2 && rank == 0)
			printf("   (lost files of 2 + redundancy file of 6: %s)\n", w.msg);
		if (k < 2) {
			/* put the files back and encode again */
			if (rank == 2)
				for (int i = 0; i < f.n; i++)
					write_file(f.name[i], f.data[i], f.size[i]);
			MPI_Barrier(MPI_COMM_WORLD);
			ret = redundancy_encode(rs, dir, f.names, f.n, f.red, fresh(&w));
			if (ret)
				FAIL("%s: re-encode: %d %s", what, ret, w.msg);
		} else {
			expect_intact(&f, "files + redundancy file");
		}
		if (!rank)
			printf("ok %-8s k/R %d: corrupted bytes, lost files + redundancy file\n",
			       scheme, k);
	}

	if (extras && k >= 2) {
		/* Node 1 lost (ranks 2, 3) and, unnoticed by the caller, a
		 * byte flipped in a survivor's file in set 0 (rank 4) and in a
		 * survivor's redundancy data in set 1 (rank 5): the decoding
		 * reads them before their checksums are known, so the damage
		 * must be found and the set rebuilt without them. */
		struct stat st;
		char path[700];

		MPI_Barrier(MPI_COMM_WORLD);
		if (node_of(rank) == 1)
			delete_mine(&f);
		for (int i = 0; rank == 4 && i < f.n; i++)
			if (f.size[i] > 0) {
				flip_byte(f.name[i], f.size[i] / 3);
				break;
			}
		snprintf(path, sizeof(path), "%s/%s", dir, f.red);
		/* C is a multiple of 4096: the file's last page is payload. */
		if (rank == 5 && !stat(path, &st))
			flip_byte(f.red, st.st_size - 100);
		MPI_Barrier(MPI_COMM_WORLD);
		ret = redundancy_rebuild(rs, dir, f.red, node_of(rank) != 1, fresh(&w));
		if (ret)
			FAIL("%s: lost node + damaged sources: %d %s", what, ret, w.msg);
		expect_intact(&f, "lost node + damaged sources");
		if (!rank)
			printf("ok %-8s k/R %d: lost node + unnoticed damage in a file and in "
			       "redundancy data\n",
			       scheme, k);
	}

	/* one node more than tolerated: -EUCLEAN everywhere, nothing deleted */
	MPI_Barrier(MPI_COMM_WORLD);
	if (gone(rank, lose + 1))
		delete_mine(&f);
	MPI_Barrier(MPI_COMM_WORLD);
	ret = rebuild(rs, &f, fresh(&w));
	if (ret != -EUCLEAN)
		FAIL("%s: %d node(s) lost: want -EUCLEAN, got %d (%s)", what, lose + 1, ret, w.msg);
	if (!strstr(w.msg, "lost ranks") || !strstr(w.msg, "tolerates"))
		FAIL("%s: message '%s'", what, w.msg);
	if (!gone(rank, lose + 1))
		expect_intact(&f, "beyond tolerance");
	if (rank == 1)
		printf("ok %-8s k/R %d: %d node(s) lost -> -EUCLEAN: %s\n", scheme, k, lose + 1,
		       w.msg);
	fflush(stdout);
	MPI_Barrier(MPI_COMM_WORLD);
	free_files(&f);
	redundancy_set_free(rs);
}

static unsigned char *slurp(const char *name, size_t *len)
{
	char path[700];
	struct stat st;
	unsigned char *b = NULL;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	if (fd >= 0 && !fstat(fd, &st) && (b = malloc(st.st_size + 1)) &&
	    read(fd, b, st.st_size) == st.st_size)
		*len = st.st_size;
	else {
		free(b);
		b = NULL;
	}
	if (fd >= 0)
		close(fd);
	return b;
}

/* Rank 2's first file (the set's largest) cut to half its size by
 * "another process" once the encode knows its size (the truncate-encode
 * fault point): reading it through a mapping died of SIGBUS; now every
 * member of its set (0: ranks 0,2,4,6) fails with an error naming the
 * cause, the redundancy files of the previous encode stay as they were,
 * no temporary is left, and the other set encodes. With the file put
 * back, encode and rebuild work again. */
static void run_truncated(const char *scheme, int k)
{
	struct redundancy_params prm = {
	    .scheme = scheme_find(scheme), .set_size = 4, .rs_k = k, .replicas = k};
	struct redundancy_set *rs = NULL;
	struct files f;
	unsigned char *before, *after;
	size_t blen = 0, alen = 0;
	char tag[32], tmp[80];
	struct why w = WHY_INIT;
	int ret, domain;

	snprintf(tag, sizeof(tag), "trunc%s%d", scheme, k);
	writes_red = true;
	redundancy_domain(MPI_COMM_WORLD, "2", &domain, fresh(&w));
	if (redundancy_set_create(MPI_COMM_WORLD, domain, &prm, &rs, fresh(&w))) {
		FAIL("%s: create: %s", tag, w.msg);
		return;
	}
	/* One file each, rank 2's the largest (3 MiB): chunks that lie
	 * inside it, where a mapping was read without a pread fallback. */
	f.n = 1;
	snprintf(f.name[0], sizeof(f.name[0]), "%s.r%d", tag, rank);
	f.names[0] = f.name[0];
	f.size[0] = rank == 2 ? (3u << 20) + 12345 : next() % 300000;
	f.data[0] = malloc(f.size[0] + 1);
	for (size_t j = 0; j < f.size[0]; j++)
		f.data[0][j] = (unsigned char)next();
	write_file(f.name[0], f.data[0], f.size[0]);
	snprintf(f.red, sizeof(f.red), "%s.r%d.red", tag, rank);
	ret = redundancy_encode(rs, dir, f.names, f.n, f.red, fresh(&w));
	if (ret)
		FAIL("%s: first encode: %s", tag, w.msg);
	before = slurp(f.red, &blen);

	stasis_log_rank = rank;
	fault_set_checkpoint(7);
	if (fault_configure("truncate-encode:7@2", fresh(&w)))
		FAIL("%s: %s", tag, w.msg);
	ret = redundancy_encode(rs, dir, f.names, f.n, f.red, fresh(&w));
	fault_configure("", NULL);
	if (rank % 2 == 0 && (ret == 0 || !strstr(w.msg, rank == 2 ? "shrank" : "on rank 2")))
		FAIL("%s: encode of a truncated file: %d '%s'", tag, ret, w.msg);
	if (rank % 2 && ret)
		FAIL("%s: set 1 lost nothing: %d '%s'", tag, ret, w.msg);
	after = slurp(f.red, &alen);
	if (rank % 2 == 0 && (!before || !after || alen != blen || memcmp(before, after, blen)))
		FAIL("%s: the previous redundancy file changed", tag);
	snprintf(tmp, sizeof(tmp), "%s.tmp", f.red);
	if (exists(tmp))
		FAIL("%s: %s left behind", tag, tmp);
	if (rank == 2)
		printf("ok %-8s k %d: a file truncated during the encode: %s\n", scheme, k, w.msg);
	fflush(stdout);

	if (rank == 2)
		write_file(f.name[0], f.data[0], f.size[0]);
	MPI_Barrier(MPI_COMM_WORLD);
	ret = redundancy_encode(rs, dir, f.names, f.n, f.red, fresh(&w));
	if (ret)
		FAIL("%s: encode with the file put back: %s", tag, w.msg);
	if (node_of(rank) == 1)
		delete_mine(&f);
	MPI_Barrier(MPI_COMM_WORLD);
	ret = rebuild(rs, &f, fresh(&w));
	if (ret)
		FAIL("%s: rebuild after it: %s", tag, w.msg);
	expect_intact(&f, tag);
	free(before);
	free(after);
	free_files(&f);
	redundancy_set_free(rs);
}

static void expect_create_error(const char *spec, const char *scheme, int set_size, int k,
				const char *want)
{
	struct redundancy_params prm = {
	    .scheme = scheme_find(scheme), .set_size = set_size, .rs_k = k, .replicas = k};
	struct redundancy_set *rs = NULL;
	struct why w = WHY_INIT;
	int domain = 0, ret;

	ret = redundancy_domain(MPI_COMM_WORLD, spec, &domain, fresh(&w));
	if (!ret)
		ret = redundancy_set_create(MPI_COMM_WORLD, domain, &prm, &rs, fresh(&w));
	if (ret != -EINVAL || !strstr(w.msg, want))
		FAIL("'%s' %s set %d k %d: got %d '%s', want -EINVAL '%s'", spec, scheme, set_size,
		     k, ret, w.msg, want);
	else if (!rank)
		printf("ok error: %s\n", w.msg);
	redundancy_set_free(rs);
}

int main(int argc, char **argv)
{
	int total;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 8) {
		if (!rank)
			fprintf(stderr, "SKIP: run with mpirun -np 8\n");
		MPI_Finalize();
		return 77;
	}
	rng = 0x9e3779b97f4a7c15ull * (rank + 1);
	if (!rank) {
		snprintf(base, sizeof(base), "%s/stasis-redset-XXXXXX",
			 argc > 1 ? argv[1] : "/tmp");
		if (!mkdtemp(base))
			base[0] = 0;
	}
	MPI_Bcast(base, sizeof(base), MPI_CHAR, 0, MPI_COMM_WORLD);
	if (!base[0]) {
		MPI_Finalize();
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/node%d", base, node_of(rank));
	mkdir(dir, 0700);
	MPI_Barrier(MPI_COMM_WORLD);

	run_scheme("single", 0, 0, false);
	run_scheme("partner", 1, 1, false);
	run_scheme("partner", 2, 2, false);
	run_scheme("xor", 1, 1, true);
	run_scheme("rs", 1, 1, false);
	run_scheme("rs", 2, 2, true);
	run_scheme("rs", 3, 3, false);
	run_truncated("xor", 1);
	run_truncated("rs", 2);
	run_truncated("partner", 1);

	expect_create_error("abc", "xor", 4, 1,
			    "STASIS_FAILURE_DOMAIN: 'abc' is not 'host' or a positive integer");
	expect_create_error("0", "xor", 4, 1, "is not 'host' or a positive integer");
	expect_create_error("2", "xor", 8, 1, "needs 8 failure domains");
	expect_create_error("host", "xor", 4, 1, "failure domains");
	expect_create_error("1", "rs", 4, 253, "> 256");
	expect_create_error("1", "rs", 4, 4, "at least 5 ranks");
	expect_create_error("1", "partner", 4, 4, "STASIS_PARTNER_REPLICAS");
	expect_create_error("1", "xor", 1, 1, "at least 2 ranks");
	expect_create_error("1", "raid6", 4, 1,
			    "no redundancy scheme (one of single, partner, xor, rs)");

	MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (!rank && !total) {
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
		if (system(cmd))
			(void)0;
	}
	if (!rank)
		printf("%s: %d failure(s)\n", total ? "FAIL" : "PASS", total);
	MPI_Finalize();
	return total ? 1 : 0;
}
