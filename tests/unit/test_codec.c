/* Unit test of compressed images (STASIS_COMPRESS, REGION_PACKED, format
 * version 7; format/codec.c, format/image_write.c, format/image_read.c):
 * full and partial regions of several frames, with pages that compress,
 * pages that do not (frames stored as they are) and pages of zeros, round
 * trip page for page under lz4 and zstd and take fewer bytes than
 * unpacked; the stack is never packed; a frame whose header lies is
 * refused even with its crc made right; a version 6 file claiming packed
 * regions is refused; an unknown codec is refused at write. Exit 0 pass,
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
#define NPAGES 700 /* three frames */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Pages 0-299 text-like (compress), 300-399 random (do not), 400-499
 * zeros, 500-699 a counter pattern (compress). */
static char *make_memory(void)
{
	char *p = mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED)
		exit(77);
	for (size_t i = 0; i < 300 * PG; i++)
		p[i] = "the quick brown fox jumps over the lazy dog "[i % 44] ^ (char)(i / 9000);
	for (size_t i = 300 * PG / 8; i < 400 * PG / 8; i++)
		((uint64_t *)p)[i] = rnd();
	for (size_t i = 500 * PG / 8; i < NPAGES * PG / 8; i++)
		((uint64_t *)p)[i] = i / 3;
	return p;
}

static int write_image(const char *path, const struct image_region *r, size_t n, uint32_t kind,
		       uint32_t codec, struct why *w)
{
	struct image_header h = {.ckpt_id = 2, .kind = kind, .rank = 0, .nranks = 1};

	h.parent_id = kind == IMAGE_INCREMENTAL ? 1 : 0;
	h.codec = codec;
	return image_write(path, &h, r, n, NULL, w);
}

/* Region i of path against memory, page for page; returns its stored
 * bytes (0 on failure). */
static uint64_t check_region(const char *path, size_t i, const struct image_region *r,
			     bool packed)
{
	struct image *img;
	struct why w = WHY_INIT;
	const struct region_record *rec;
	struct page_walk pw;
	const void *data;
	uint64_t pg, npages = r->length / PG, want_pg = 0, stored;
	char *buf;

	if (image_open(path, &img, &w)) {
		CHECKF(0, "image_open: %s", w.msg);
		return 0;
	}
	CHECKF(!image_verify(img, &w), "image_verify: %s", w.msg);
	rec = &image_regions(img)[i];
	CHECKF(!!(rec->flags & REGION_PACKED) == packed, "region %zu flags %#x", i, rec->flags);
	buf = malloc(image_region_bytes(img, i) + 1);
	CHECKF(!image_read_region(img, i, buf, &w), "read: %s", w.msg);
	image_pages_begin(&pw, rec, buf);
	while (image_pages_next(&pw, &pg, &data)) {
		const char *mem = (const char *)r->addr + pg * PG;

		while (r->dirty && want_pg < npages && !(r->dirty[want_pg / 64] >> (want_pg % 64) & 1))
			want_pg++;
		CHECKF(pg == want_pg, "region %zu: page %llu given, %llu expected", i,
		       (unsigned long long)pg, (unsigned long long)want_pg);
		want_pg = pg + 1;
		if (data)
			CHECKF(!memcmp(data, mem, PG), "region %zu: page %llu differs", i,
			       (unsigned long long)pg);
		else
			for (unsigned k = 0; k < PG; k++)
				CHECKF(!mem[k], "region %zu: page %llu given as zeros", i,
				       (unsigned long long)pg);
	}
	while (r->dirty && want_pg < npages && !(r->dirty[want_pg / 64] >> (want_pg % 64) & 1))
		want_pg++;
	CHECKF(want_pg == npages, "region %zu: pages given up to %llu of %llu", i,
	       (unsigned long long)want_pg, (unsigned long long)npages);
	stored = rec->stored_bytes;
	free(buf);
	image_close(img);
	return stored;
}

/* Patch path's header (version v) or a region's first frame header, crcs
 * made right again, as a writer of its own would. */
static void patch(const char *path, int version, size_t region, uint32_t raw_bytes)
{
	struct image_header h;
	struct region_record t[8];
	int fd = open(path, O_RDWR);

	CHECK(fd >= 0 && pread(fd, &h, sizeof(h), 0) == sizeof(h) && h.nregions <= 8);
	CHECK(pread(fd, t, h.nregions * sizeof(t[0]), PG) == (ssize_t)(h.nregions * sizeof(t[0])));
	if (version)
		h.version = version;
	if (raw_bytes) {
		const struct region_record *r = &t[region];
		uint64_t off = r->file_offset + (!!(r->flags & REGION_PARTIAL) +
						 !!(r->flags & REGION_ZEROS)) *
							image_bitmap_bytes(r->length);
		char *all = malloc(r->stored_bytes);

		CHECK(pwrite(fd, &raw_bytes, 4, off) == 4);
		CHECK(pread(fd, all, r->stored_bytes, r->file_offset) == (ssize_t)r->stored_bytes);
		t[region].data_crc = crc64_ecma_refl(0, (unsigned char *)all, r->stored_bytes);
		free(all);
		CHECK(pwrite(fd, t, h.nregions * sizeof(t[0]), PG) ==
		      (ssize_t)(h.nregions * sizeof(t[0])));
		h.table_crc = crc64_ecma_refl(0, (unsigned char *)t, h.nregions * sizeof(t[0]));
	}
	h.header_crc = 0;
	h.header_crc = crc64_ecma_refl(0, (const unsigned char *)&h, sizeof(h));
	CHECK(pwrite(fd, &h, sizeof(h), 0) == sizeof(h));
	close(fd);
}

int main(void)
{
	char dir[] = "/tmp/test_codec.XXXXXX", path[256];
	char *mem = make_memory(), *stack;
	static uint64_t dirty[(NPAGES + 63) / 64];
	struct why w = WHY_INIT;
	struct image *img;
	char *buf;
	int rc;

	if (!mkdtemp(dir))
		return 77;
	snprintf(path, sizeof(path), "%s/ckpt-2.r0.img", dir);
	stack = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (stack == MAP_FAILED)
		return 77;
	memset(stack, 3, 16 * PG);
	for (int pg = 0; pg < NPAGES; pg++)
		if (pg % 3 == 0 || (pg >= 350 && pg < 520))
			dirty[pg / 64] |= 1ull << (pg % 64);

	struct image_region full[] = {
	    {(uintptr_t)mem, NPAGES * PG, REGION_ARENA, NULL},
	    {(uintptr_t)stack, 16 * PG, REGION_STACK, NULL},
	    {(uintptr_t)mem, NPAGES * PG, REGION_DATA, dirty},
	};
	for (uint32_t codec = CODEC_LZ4; codec <= CODEC_ZSTD; codec++) {
		uint64_t packed, plain;

		CHECKF(!write_image(path, full, 3, IMAGE_INCREMENTAL, CODEC_NONE, &w), "write: %s",
		       w.msg);
		plain = check_region(path, 0, &full[0], false);
		CHECKF(!write_image(path, full, 3, IMAGE_INCREMENTAL, codec, &w), "write: %s",
		       w.msg);
		packed = check_region(path, 0, &full[0], true);
		check_region(path, 1, &full[1], false);
		check_region(path, 2, &full[2], true);
		CHECKF(packed && packed < plain / 2, "%s: %llu bytes packed, %llu plain",
		       codec == CODEC_LZ4 ? "lz4" : "zstd", (unsigned long long)packed,
		       (unsigned long long)plain);

		/* A frame that says it holds more than it does: the crc
		 * matches (made right), the frames do not unpack. */
		patch(path, 0, 0, 2 * PG);
		CHECK(!image_open(path, &img, &w));
		CHECKF(!image_verify(img, &w), "verify of a frame lie: %s", w.msg);
		buf = malloc(image_region_bytes(img, 0) + 1);
		why_clear(&w);
		rc = image_read_region(img, 0, buf, &w);
		CHECKF(rc == -EBADMSG && strstr(w.msg, "frames do not unpack"), "frame lie: %d %s",
		       rc, w.msg);
		free(buf);
		image_close(img);
	}

	/* Packed regions cannot be version 6. */
	CHECK(!write_image(path, full, 3, IMAGE_INCREMENTAL, CODEC_ZSTD, &w));
	patch(path, 6, 0, 0);
	why_clear(&w);
	rc = image_open(path, &img, &w);
	CHECKF(rc == -EBADMSG && strstr(w.msg, "unknown kind"), "version 6 packed: %d %s", rc,
	       w.msg);
	if (!rc)
		image_close(img);
	/* A codec this stasis does not know is refused before anything is
	 * written. */
	why_clear(&w);
	rc = write_image(path, full, 3, IMAGE_INCREMENTAL, 9, &w);
	CHECKF(rc == -EINVAL, "codec 9: %d", rc);

	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	if (system(path))
		(void)0;
	if (failures) {
		fprintf(stderr, "test_codec: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_codec: ok\n");
	return 0;
}
