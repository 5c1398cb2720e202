/* Unit test of the image writer and reader (format/image_write.c,
 * format/image_read.c): round trip of full and partial regions (on the
 * O_DIRECT path of a disk filesystem and the buffered path of tmpfs), then
 * every kind of damage the reader must refuse, each with its message, and
 * the fault points. Exit 0 pass, 1 fail, 77 skip. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <isa-l/crc64.h>

#include "check.h"
#include "fault.h"
#include "image.h"

/* One struct why reused by the checks below, cleared before each call: the
 * first cause set is kept, and each check wants the call's own. */
static struct why *fresh(struct why *w)
{
	why_clear(w);
	return w;
}

#define PG 4096u

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static void *map_pages(size_t pages)
{
	void *p =
	    mmap(NULL, pages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(77);
	}
	for (size_t i = 0; i < pages * PG / 8; i++)
		((uint64_t *)p)[i] = rnd();
	return p;
}

#define NREG 6
static struct image_region regs[NREG];
static uint64_t bm2[5], bm3[(2000 + 63) / 64], bm4[1];

static void make_regions(void)
{
	void *p;

	regs[0] = (struct image_region){(uintptr_t)map_pages(64), 64 * PG, REGION_DATA, NULL};
	if (posix_memalign(&p, PG, 8 * PG))
		exit(77);
	for (size_t i = 0; i < 8 * PG; i++)
		((unsigned char *)p)[i] = rnd();
	regs[1] = (struct image_region){(uintptr_t)p, 8 * PG, REGION_STACK, NULL};

	/* Random pages, and garbage past page 300 that the writer must drop. */
	for (int i = 0; i < 5; i++)
		bm2[i] = rnd();
	regs[2] = (struct image_region){(uintptr_t)map_pages(300), 300 * PG, REGION_ARENA, bm2};

	/* Every other page (many iovecs per write), then a 600-page run
	 * (several writes of one run). */
	for (int pg = 0; pg < 2000; pg++)
		if ((pg < 1000 && pg % 2 == 0) || (pg >= 1200 && pg < 1800))
			bm3[pg / 64] |= 1ull << (pg % 64);
	regs[3] = (struct image_region){(uintptr_t)map_pages(2000), 2000 * PG, REGION_ARENA, bm3};

	regs[4] = (struct image_region){(uintptr_t)map_pages(16), 16 * PG, REGION_ARENA, bm4};
	/* More than the reader's 4 MiB streaming chunk. */
	regs[5] = (struct image_region){(uintptr_t)map_pages(1029), 1029 * PG, REGION_DATA, NULL};
}

static void fill_header(struct image_header *h, uint64_t id)
{
	memset(h, 0, sizeof(*h));
	h->ckpt_id = id;
	h->parent_id = id - 1;
	h->kind = IMAGE_INCREMENTAL;
	h->rank = 1;
	h->nranks = 4;
	h->exe_hash = 0x1234abcdull;
	h->state_size = 100;
	for (int i = 0; i < 100; i++)
		h->state[i] = i * 7;
}

static bool bit(const uint64_t *map, size_t pg)
{
	return map[pg / 64] >> (pg % 64) & 1;
}

/* Read every region back and compare it with memory. */
static void check_contents(const char *path)
{
	struct image *img;
	struct why w = WHY_INIT;
	int rc = image_open(path, &img, fresh(&w));

	CHECK_ERR(rc, 0, w.msg, "%s", "");
	if (rc)
		return;
	const struct image_header *h = image_header(img);
	const struct region_record *rr = image_regions(img);

	CHECK(h->ckpt_id == 3 && h->parent_id == 2 && h->kind == IMAGE_INCREMENTAL);
	CHECK(h->rank == 1 && h->nranks == 4 && h->exe_hash == 0x1234abcdull);
	CHECK(h->uid == getuid() && h->created_ns > 0 && h->nregions == NREG);
	CHECK(h->state_size == 100 && h->state[99] == (uint8_t)(99 * 7));
	for (size_t i = 0; i < NREG; i++) {
		const struct image_region *r = &regs[i];
		size_t npages = r->length / PG;
		char *buf;

		CHECK(rr[i].addr == r->addr && rr[i].length == r->length && rr[i].kind == r->kind);
		CHECK(rr[i].flags == (r->dirty ? REGION_PARTIAL : 0u));
		CHECK(rr[i].file_offset % PG == 0);
		buf = malloc(rr[i].stored_bytes + 1);
		rc = image_read_region(img, i, buf, fresh(&w));
		CHECK_ERR(rc, 0, w.msg, "%s", "");
		if (!r->dirty) {
			CHECK(rr[i].stored_bytes == r->length);
			CHECK(!memcmp(buf, (void *)r->addr, r->length));
		} else {
			const uint64_t *map = (const uint64_t *)buf;
			const char *page = buf + image_bitmap_bytes(r->length);
			size_t stored = 0;

			for (size_t pg = 0; pg < (npages + 63) / 64 * 64; pg++) {
				CHECK(bit(map, pg) == (pg < npages && bit(r->dirty, pg)));
				if (pg < npages && bit(r->dirty, pg)) {
					CHECK(!memcmp(page, (char *)r->addr + pg * PG, PG));
					page += PG;
					stored++;
				}
			}
			CHECK(rr[i].stored_bytes == image_bitmap_bytes(r->length) + stored * PG);
		}
		free(buf);
	}
	rc = image_read_region(img, NREG, w.msg, fresh(&w));
	CHECK(rc == -EINVAL);
	why_clear(&w);
	rc = image_verify(img, fresh(&w));
	CHECK_ERR(rc, 0, w.msg, "%s", "");
	image_close(img);
}

static int write_good(const char *path, uint64_t id, uint64_t *size)
{
	struct image_header h;
	struct why w = WHY_INIT;
	int rc;

	fill_header(&h, id);
	rc = image_write(path, &h, regs, NREG, size, fresh(&w));
	CHECK_ERR(rc, 0, w.msg, "%s", "");
	return rc;
}

static void round_trip(const char *dir)
{
	char path[4096], tmp[4200];
	uint64_t size = 0;
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/ckpt-3.r1.img", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	/* A stale tmp file with a loose mode must not pass its mode on. */
	fd = open(tmp, O_CREAT | O_WRONLY, 0644);
	CHECK(fd >= 0 && fchmod(fd, 0644) == 0 && write(fd, "junk", 4) == 4);
	close(fd);
	if (write_good(path, 3, &size))
		return;
	CHECK(stat(path, &st) == 0);
	CHECK((st.st_mode & 07777) == 0600);
	CHECK((uint64_t)st.st_size == size);
	CHECK(access(tmp, F_OK) < 0 && errno == ENOENT);
	check_contents(path);

	/* Overwriting an existing image. */
	if (write_good(path, 3, &size))
		return;
	check_contents(path);
}

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out = open(to, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	ssize_t n;

	CHECK(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		CHECK(write(out, buf, n) == n);
	close(in);
	close(out);
}

static void poke(const char *path, uint64_t off, uint8_t xor)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	CHECK(fd >= 0 && pread(fd, &b, 1, off) == 1);
	b ^= xor;
	CHECK(pwrite(fd, &b, 1, off) == 1);
	close(fd);
}

/* Rewrite the header through `edit` with a valid crc, to reach the checks
 * behind the crc check. */
static void edit_header(const char *path, void (*edit)(struct image_header *))
{
	struct image_header h;
	int fd = open(path, O_RDWR);

	CHECK(fd >= 0 && pread(fd, &h, sizeof(h), 0) == sizeof(h));
	edit(&h);
	h.header_crc = 0;
	h.header_crc = crc64_ecma_refl(0, (const unsigned char *)&h, sizeof(h));
	CHECK(pwrite(fd, &h, sizeof(h), 0) == sizeof(h));
	close(fd);
}

static void set_version(struct image_header *h)
{
	h->version = STASIS_FORMAT_VERSION + 1;
}

static void set_uid(struct image_header *h)
{
	h->uid = getuid() + 12345;
}

static void set_header_size(struct image_header *h)
{
	h->header_size = 4000;
}

static void set_nregions(struct image_header *h)
{
	h->nregions = 1ull << 40;
}

static int open_err(const char *path, struct why *why)
{
	struct image *img = NULL;
	int rc;

	rc = image_open(path, &img, why);
	CHECK(rc ? img == NULL : img != NULL);
	image_close(img);
	return rc;
}

static void bad_files(const char *dir)
{
	char good[4096], bad[4096];
	struct why w = WHY_INIT;
	struct region_record rr[NREG];
	struct image *img;
	uint64_t size;
	int fd, rc;

	snprintf(good, sizeof(good), "%s/good.img", dir);
	snprintf(bad, sizeof(bad), "%s/bad.img", dir);
	if (write_good(good, 3, &size))
		return;
	fd = open(good, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, rr, sizeof(rr), PG) == sizeof(rr));
	close(fd);

	/* Truncation at several points. */
	uint64_t cuts[] = {0,
			   100,
			   PG - 1,
			   PG + 20,
			   rr[0].file_offset,
			   rr[2].file_offset + 100,
			   rr[5].file_offset + 5 * PG,
			   size - PG,
			   size - 1};
	for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
		uint64_t cut = cuts[c];
		size_t first = NREG;

		copy_file(good, bad);
		CHECK(truncate(bad, cut) == 0);
		rc = open_err(bad, fresh(&w));
		if (cut < PG) {
			CHECK_ERR(rc, -EBADMSG, w.msg, "%s: truncated (%llu bytes)", bad,
				  (unsigned long long)cut);
			continue;
		}
		if (cut < PG + NREG * sizeof(struct region_record)) {
			CHECK_ERR(
			    rc, -EBADMSG, w.msg,
			    "%s: truncated: region table needs bytes up to %zu, file has %llu", bad,
			    PG + NREG * sizeof(struct region_record), (unsigned long long)cut);
			continue;
		}
		for (size_t i = 0; i < NREG && first == NREG; i++)
			if (rr[i].file_offset + rr[i].stored_bytes > cut)
				first = i;
		CHECK(first < NREG);
		if (first < NREG)
			CHECK_ERR(
			    rc, -EBADMSG, w.msg,
			    "%s: truncated: region %zu needs bytes up to %llu, file has %llu", bad,
			    first,
			    (unsigned long long)(rr[first].file_offset + rr[first].stored_bytes),
			    (unsigned long long)cut);
	}

	/* One byte of data: the image opens, the region is refused. */
	uint64_t spots[][2] = {{5, 5000},
			       {3, image_bitmap_bytes(regs[3].length) + 3 * PG + 7},
			       {0, 0},
			       {1, 8 * PG - 1}};
	for (size_t s = 0; s < sizeof(spots) / sizeof(spots[0]); s++) {
		size_t i = spots[s][0];
		char *buf = malloc(rr[i].stored_bytes);

		copy_file(good, bad);
		poke(bad, rr[i].file_offset + spots[s][1], 0x40);
		why_clear(&w);
		rc = image_open(bad, &img, fresh(&w));
		CHECK_ERR(rc, 0, w.msg, "%s", "");
		if (rc) {
			free(buf);
			continue;
		}
		rc = image_read_region(img, i, buf, fresh(&w));
		CHECK_ERR(rc, -EBADMSG, w.msg, "%s: region %zu (addr 0x%llx) checksum mismatch",
			  bad, i, (unsigned long long)rr[i].addr);
		rc = image_verify(img, fresh(&w));
		CHECK_ERR(rc, -EBADMSG, w.msg, "%s: region %zu (addr 0x%llx) checksum mismatch",
			  bad, i, (unsigned long long)rr[i].addr);
		/* The other regions still read. */
		rc = image_read_region(img, 4, buf, fresh(&w));
		CHECK(rc == 0 || i == 4);
		image_close(img);
		free(buf);
	}

	/* A bit of a bitmap: the stored size no longer matches. */
	copy_file(good, bad);
	poke(bad, rr[2].file_offset + 3, 0x01);
	rc = open_err(bad, fresh(&w));
	CHECK_ERR(rc, -EBADMSG, w.msg,
		  "%s: region 2 (addr 0x%llx): bitmap does not match its %llu stored bytes", bad,
		  (unsigned long long)rr[2].addr, (unsigned long long)rr[2].stored_bytes);

	copy_file(good, bad);
	poke(bad, PG + sizeof(struct region_record) + 10, 0x01);
	rc = open_err(bad, fresh(&w));
	CHECK_ERR(rc, -EBADMSG, w.msg, "%s: region table checksum mismatch", bad);

	copy_file(good, bad);
	poke(bad, offsetof(struct image_header, state) + 50, 0x80);
	rc = open_err(bad, fresh(&w));
	CHECK_ERR(rc, -EBADMSG, w.msg, "%s: header checksum mismatch", bad);

	copy_file(good, bad);
	poke(bad, offsetof(struct image_header, nregions), 0x01);
	rc = open_err(bad, fresh(&w));
	CHECK_ERR(rc, -EBADMSG, w.msg, "%s: header checksum mismatch", bad);

	copy_file(good, bad);
	poke(bad, 0, 0x20);
	rc = open_err(bad, fresh(&w));
	CHECK_ERR(rc, -EBADMSG, w.msg, "%s: not a stasis image (bad magic)", bad);

	copy_file(good, bad);
	edit_header(bad, set_version);
	rc = open_err(bad, fresh(&w));
	CHECK_ERR(rc, -EBADMSG, w.msg, "%s: format version %u, this stasis reads %u", bad,
		  STASIS_FORMAT_VERSION + 1, STASIS_FORMAT_VERSION);

	copy_file(good, bad);
	edit_header(bad, set_uid);
	rc = open_err(bad, fresh(&w));
	CHECK_ERR(rc, -EBADMSG, w.msg, "%s: written by uid %u, not by you", bad, getuid() + 12345);

	copy_file(good, bad);
	edit_header(bad, set_header_size);
	rc = open_err(bad, fresh(&w));
	CHECK_ERR(rc, -EBADMSG, w.msg, "%s: header size 4000, this stasis expects %zu", bad,
		  sizeof(struct image_header));

	copy_file(good, bad);
	edit_header(bad, set_nregions);
	rc = open_err(bad, fresh(&w));
	CHECK_ERR(rc, -EBADMSG, w.msg, "%s: implausible region count %llu", bad, 1ull << 40);

	/* A foreign file shorter and longer than a header. */
	fd = open(bad, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	CHECK(fd >= 0 && ftruncate(fd, 3 * PG) == 0);
	close(fd);
	rc = open_err(bad, fresh(&w));
	CHECK_ERR(rc, -EBADMSG, w.msg, "%s: not a stasis image (bad magic)", bad);

	CHECK(unlink(bad) == 0);
	rc = open_err(bad, fresh(&w));
	CHECK_ERR(rc, -ENOENT, w.msg, "%s: missing", bad);

	/* file_crc64 against a one-shot crc of the same bytes. */
	{
		uint64_t crc = 1;
		char *all = malloc(size);

		fd = open(good, O_RDONLY);
		CHECK(fd >= 0 && pread(fd, all, size, 0) == (ssize_t)size);
		close(fd);
		CHECK(file_crc64(good, &crc) == 0);
		CHECK(crc == crc64_ecma_refl(0, (unsigned char *)all, size));
		CHECK(file_crc64(bad, &crc) == -ENOENT);
		free(all);
	}
	unlink(good);
}

static void edge_cases(const char *dir)
{
	char path[4096], tmp[4200];
	struct why w = WHY_INIT;
	struct image_header h;
	struct image_region r;
	struct image *img;
	uint64_t size = 0;
	int rc;

	snprintf(path, sizeof(path), "%s/edge.img", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);

	/* No region at all. */
	fill_header(&h, 1);
	h.kind = IMAGE_FULL;
	rc = image_write(path, &h, NULL, 0, &size, fresh(&w));
	CHECK(rc == 0 && size == PG);
	rc = open_err(path, fresh(&w));
	CHECK_ERR(rc, 0, w.msg, "%s", "");

	/* Not page aligned. */
	r = regs[0];
	r.addr += 16;
	rc = image_write(path, &h, &r, 1, NULL, fresh(&w));
	CHECK_ERR(rc, -EINVAL, w.msg, "cannot write %s: %s", path, strerror(EINVAL));
	CHECK(access(tmp, F_OK) < 0);

	/* Unwritable directory component. */
	snprintf(tmp, sizeof(tmp), "%s/no/such/x.img", dir);
	rc = image_write(tmp, &h, regs, 1, NULL, fresh(&w));
	CHECK_ERR(rc, -ENOENT, w.msg, "cannot write %s: %s", tmp, strerror(ENOENT));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);

	/* Fault points: matching id (and rank) only, lists; garbage refused
	 * with one line naming STASIS_FAULT, the value and the points, and
	 * the faults installed before it kept. */
	CHECK(fault_configure("stall-write:12,fail-write:7,fail-commit:3@2", fresh(&w)) == 0);
	CHECK(fault_hit_at(FAULT_FAIL_WRITE, 7) && fault_hit_at(FAULT_STALL_WRITE, 12));
	CHECK(!fault_hit_at(FAULT_FAIL_WRITE, 12) && !fault_hit_at(FAULT_STALL_WRITE, 1));
	CHECK(!fault_hit_at(FAULT_FAIL_COMMIT, 3)); /* rank -1 here, not 2 */
	fault_set_checkpoint(7);
	CHECK(fault_hit(FAULT_FAIL_WRITE) && errno == EIO && !fault_hit(FAULT_STALL_WRITE));
	{
		static const char *const bad[] = {"bogus",
						  "stall-write:",
						  "fail-write:x",
						  "fail-write:7x",
						  "fail-write:0",
						  ":3",
						  "fail-write:3,",
						  "fail-write:3@",
						  "fail-write:3@x",
						  "fail-write:99999999999999999999",
						  NULL};

		for (int i = 0; bad[i]; i++) {
			why_clear(&w);
			CHECK(fault_configure(bad[i], fresh(&w)) == -EINVAL);
			CHECK(!strncmp(w.msg, "STASIS_FAULT: '", 15) && strstr(w.msg, bad[i]) &&
			      strstr(w.msg, "fail-rebuild-run"));
		}
	}
	CHECK(fault_hit_at(FAULT_FAIL_WRITE, 7));
	CHECK(fault_configure("", fresh(&w)) == 0 && !fault_hit_at(FAULT_FAIL_WRITE, 7));

	unlink(path);
	CHECK(fault_configure("fail-write:7", fresh(&w)) == 0);
	fill_header(&h, 7);
	rc = image_write(path, &h, regs, NREG, NULL, fresh(&w));
	CHECK_ERR(rc, -EIO, w.msg, "cannot write %s: injected fault", path);
	CHECK(access(path, F_OK) < 0 && errno == ENOENT);
	CHECK(access(tmp, F_OK) < 0 && errno == ENOENT);
	fill_header(&h, 8);
	rc = image_write(path, &h, regs, NREG, NULL, fresh(&w));
	CHECK(rc == 0);
	CHECK(image_open(path, &img, fresh(&w)) == 0 && image_verify(img, fresh(&w)) == 0);
	image_close(img);
	fault_configure(NULL, NULL);
	unlink(path);
}

/* A writer stalled half way must have announced it and left no <path>. */
static void stall(const char *dir)
{
	char path[4096], tmp[4200], line[256] = "", want[128];
	int pfd[2], status;
	struct pollfd p;
	ssize_t n = 0;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/stall.img", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	CHECK(pipe(pfd) == 0);
	pid = fork();
	if (pid == 0) {
		struct image_header h;
		struct why w = WHY_INIT;

		dup2(pfd[1], STDERR_FILENO);
		fault_configure("stall-write:9", NULL);
		fill_header(&h, 9);
		image_write(path, &h, regs, NREG, NULL, fresh(&w));
		_exit(3);
	}
	close(pfd[1]);
	p = (struct pollfd){.fd = pfd[0], .events = POLLIN};
	if (poll(&p, 1, 60000) == 1)
		n = read(pfd[0], line, sizeof(line) - 1);
	line[n > 0 ? n : 0] = '\0';
	snprintf(want, sizeof(want), "stasis: fault stall-write hit in checkpoint 9\n");
	CHECK(!strcmp(line, want));
	CHECK(access(path, F_OK) < 0 && errno == ENOENT);
	CHECK(access(tmp, F_OK) == 0);
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
	close(pfd[0]);
	unlink(tmp);
}

static void rmtree(const char *dir)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		(void)0;
}

int main(void)
{
	char disk[] = "/tmp/test_image.XXXXXX", shm[] = "/dev/shm/test_image.XXXXXX";
	bool have_shm;

	if (!mkdtemp(disk)) {
		perror("mkdtemp");
		return 77;
	}
	have_shm = mkdtemp(shm) != NULL;
	make_regions();

	round_trip(disk);
	if (have_shm)
		round_trip(shm);
	/* The buffered path, as on a filesystem without O_DIRECT. */
	fault_configure("buffered-write:3", NULL);
	round_trip(disk);
	fault_configure(NULL, NULL);
	bad_files(disk);
	edge_cases(disk);
	stall(disk);

	rmtree(disk);
	if (have_shm)
		rmtree(shm);
	if (failures) {
		fprintf(stderr, "test_image: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_image: ok%s\n", have_shm ? "" : " (no /dev/shm: tmpfs path not run)");
	return 0;
}
