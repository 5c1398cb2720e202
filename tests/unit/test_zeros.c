/* Unit test of pages of zeros left out of images (REGION_ZEROS, format
 * version 6; format/image_write.c, format/image_read.c): full and partial
 * regions with zero pages round trip page for page (through image_pages_*,
 * as chain_compare and a restart walk them), the stack and regions with too
 * few zeros keep every page, a damaged zero bitmap is refused, a version 5
 * file is still read and one that claims zeros is refused. Exit 0 pass,
 * 1 fail, 77 skip. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <isa-l/crc64.h>

#include "check.h"
#include "image.h"

#define PG 4096u
#define NPAGES 300

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* NPAGES pages of random bytes, with pages of zeros: a run of 90, one
 * alone, a run of 100 at the end, and one whose only non-zero byte is its
 * last (a zero test that stopped early would call it zero). */
static char *make_memory(void)
{
	char *p = mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED)
		exit(77);
	for (size_t i = 0; i < NPAGES * PG / 8; i++)
		((uint64_t *)p)[i] = rnd();
	memset(p + 10 * PG, 0, 90 * PG);
	memset(p + 150 * PG, 0, PG);
	memset(p + 200 * PG, 0, 100 * PG);
	memset(p + 120 * PG, 0, PG);
	p[121 * PG - 1] = 1;
	return p;
}

static bool is_zero(const char *page)
{
	for (unsigned i = 0; i < PG; i++)
		if (page[i])
			return false;
	return true;
}

static int write_image(const char *path, const struct image_region *r, size_t n, uint32_t kind)
{
	struct image_header h = {.ckpt_id = 2, .kind = kind, .rank = 0, .nranks = 1};
	struct why w = WHY_INIT;
	int rc;

	h.parent_id = kind == IMAGE_INCREMENTAL ? 1 : 0;
	rc = image_write(path, &h, r, n, NULL, &w);
	CHECKF(!rc, "image_write: %s", w.msg);
	return rc;
}

/* Region i of path against memory: the pages saved (dirty, or all) given
 * in order, NULL exactly for the zero pages when zeros_expected, the
 * stored bytes those of the other pages and the bitmaps. */
static void check_region(const char *path, size_t i, const struct image_region *r,
			 bool zeros_expected)
{
	struct image *img;
	struct why w = WHY_INIT;
	const struct region_record *rec;
	struct page_walk pw;
	const void *data;
	uint64_t pg, npages = r->length / PG, want_pg = 0, stored = 0, nzero = 0;
	char *buf;

	if (image_open(path, &img, &w)) {
		CHECKF(0, "image_open: %s", w.msg);
		return;
	}
	CHECKF(!image_verify(img, &w), "image_verify: %s", w.msg);
	rec = &image_regions(img)[i];
	CHECKF(!!(rec->flags & REGION_ZEROS) == zeros_expected, "region %zu flags %#x", i,
	       rec->flags);
	CHECK(!!(rec->flags & REGION_PARTIAL) == !!r->dirty);
	buf = malloc(rec->stored_bytes + 1);
	CHECKF(!image_read_region(img, i, buf, &w), "read: %s", w.msg);
	image_pages_begin(&pw, rec, buf);
	while (image_pages_next(&pw, &pg, &data)) {
		const char *mem = (const char *)r->addr + pg * PG;

		while (r->dirty && want_pg < npages && !(r->dirty[want_pg / 64] >> (want_pg % 64) & 1))
			want_pg++;
		CHECKF(pg == want_pg, "region %zu: page %llu given, %llu expected", i,
		       (unsigned long long)pg, (unsigned long long)want_pg);
		want_pg = pg + 1;
		if (!data) {
			CHECKF(is_zero(mem), "region %zu: page %llu given as zeros", i,
			       (unsigned long long)pg);
			nzero++;
		} else {
			CHECKF(!memcmp(data, mem, PG), "region %zu: page %llu differs", i,
			       (unsigned long long)pg);
			CHECKF(!zeros_expected || !is_zero(mem),
			       "region %zu: page %llu of zeros stored", i, (unsigned long long)pg);
			stored++;
		}
	}
	while (r->dirty && want_pg < npages && !(r->dirty[want_pg / 64] >> (want_pg % 64) & 1))
		want_pg++;
	CHECKF(want_pg == npages, "region %zu: pages given up to %llu of %llu", i,
	       (unsigned long long)want_pg, (unsigned long long)npages);
	CHECK(rec->stored_bytes ==
	      (!!r->dirty + zeros_expected) * image_bitmap_bytes(r->length) + stored * PG);
	CHECK(zeros_expected || !nzero);
	free(buf);
	image_close(img);
}

/* Patch the header of path: version v, crc recomputed. */
static void set_version(const char *path, uint32_t v)
{
	struct image_header h;
	int fd = open(path, O_RDWR);

	CHECK(fd >= 0 && pread(fd, &h, sizeof(h), 0) == sizeof(h));
	h.version = v;
	h.header_crc = 0;
	h.header_crc = crc64_ecma_refl(0, (const unsigned char *)&h, sizeof(h));
	CHECK(pwrite(fd, &h, sizeof(h), 0) == sizeof(h));
	close(fd);
}

static int open_verify(const char *path, struct why *w)
{
	struct image *img;
	int rc = image_open(path, &img, w);

	if (!rc) {
		rc = image_verify(img, w);
		image_close(img);
	}
	return rc;
}

int main(void)
{
	char dir[] = "/tmp/test_zeros.XXXXXX", path[256];
	char *mem = make_memory(), *stack, *few;
	static uint64_t dirty[(NPAGES + 63) / 64];
	struct why w = WHY_INIT;
	struct image *img;
	uint64_t off;
	int fd, rc;

	if (!mkdtemp(dir))
		return 77;
	snprintf(path, sizeof(path), "%s/ckpt-2.r0.img", dir);
	/* The stack and a region with one zero page (less than its bitmap)
	 * keep every page. */
	stack = mmap(NULL, 64 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	few = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (stack == MAP_FAILED || few == MAP_FAILED)
		return 77;
	memset(stack, 7, PG); /* the rest zeros */
	memset(few, 5, 7 * PG);

	/* Full. */
	struct image_region full[] = {
	    {(uintptr_t)mem, NPAGES * PG, REGION_ARENA, NULL},
	    {(uintptr_t)stack, 64 * PG, REGION_STACK, NULL},
	    {(uintptr_t)few, 8 * PG, REGION_DATA, NULL},
	    {(uintptr_t)mem, NPAGES * PG, REGION_DATA, NULL},
	};
	if (write_image(path, full, 4, IMAGE_FULL))
		return 1;
	check_region(path, 0, &full[0], true);
	check_region(path, 1, &full[1], false);
	check_region(path, 2, &full[2], false);
	check_region(path, 3, &full[3], true);

	/* Partial: dirty pages among zeros and data, and garbage past the last
	 * page that the writer drops. */
	for (int pg = 0; pg < NPAGES; pg++)
		if (pg % 3 == 0 || (pg >= 190 && pg < 260))
			dirty[pg / 64] |= 1ull << (pg % 64);
	dirty[NPAGES / 64] |= ~0ull << (NPAGES % 64);
	struct image_region part[] = {{(uintptr_t)mem, NPAGES * PG, REGION_ARENA, dirty}};
	if (write_image(path, part, 1, IMAGE_INCREMENTAL))
		return 1;
	check_region(path, 0, &part[0], true);

	/* A page of data claimed to be zeros: the table check refuses the
	 * file (the counts no longer match), whatever the crc. */
	if (write_image(path, full, 4, IMAGE_FULL))
		return 1;
	CHECK(!image_open(path, &img, &w));
	off = image_regions(img)[0].file_offset; /* its zero bitmap: not partial */
	image_close(img);
	fd = open(path, O_RDWR);
	{
		uint8_t b;

		CHECK(fd >= 0 && pread(fd, &b, 1, off) == 1);
		b ^= 1; /* page 0: data, now "zero" */
		CHECK(pwrite(fd, &b, 1, off) == 1);
		close(fd);
	}
	rc = open_verify(path, &w);
	CHECKF(rc == -EBADMSG && strstr(w.msg, "bitmap does not match"), "flipped bit: %d %s", rc,
	       w.msg);

	/* A version 5 file is read as before; one that leaves zeros out
	 * cannot be version 5. */
	struct image_region plain[] = {{(uintptr_t)few, 8 * PG, REGION_DATA, NULL}};
	if (write_image(path, plain, 1, IMAGE_FULL))
		return 1;
	set_version(path, 5);
	why_clear(&w);
	rc = open_verify(path, &w);
	CHECKF(rc == 0, "version 5: %s", w.msg);
	if (write_image(path, full, 4, IMAGE_FULL))
		return 1;
	set_version(path, 5);
	why_clear(&w);
	rc = open_verify(path, &w);
	CHECKF(rc == -EBADMSG && strstr(w.msg, "has unknown kind 2 or flags 0x2"), "version 5 zeros: %d %s",
	       rc, w.msg);

	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	if (system(path))
		(void)0;
	if (failures) {
		fprintf(stderr, "test_zeros: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_zeros: ok\n");
	return 0;
}
