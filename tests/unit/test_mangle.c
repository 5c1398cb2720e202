/* Unit test: the image reader (format/image_read.c) never trusts what it
 * reads. A valid image is damaged thousands of times, seeded and
 * repeatable (argv[1] = seed, argv[2] = rounds):
 *   - plain damage: bytes flipped, the file cut short or grown with
 *     garbage. The reader must refuse it, or (when the damage hit bytes
 *     nothing reads, such as padding) deliver exactly the original
 *     header, table and region bytes;
 *   - crafted damage: one field of the header or of a region record, or a
 *     bitmap word, set to an extreme or inconsistent value with every
 *     checksum recomputed, so that it gets past them (what a writer bug
 *     would produce). The reader must refuse it, or accept only what keeps
 *     its promises: regions page aligned, inside the file, in order, full
 *     regions whole, partial regions whose bitmap counts their pages.
 * Under ASan (the -asan variant) any read out of bounds fails the test.
 * Exit 0 pass, 1 fail, 77 skip. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l/crc64.h>

#include "check.h"
#include "image.h"

/* One struct why reused by the checks below, cleared before each call: the
 * first cause set is kept, and each check wants the call's own. */
static struct why *fresh(struct why *w)
{
	why_clear(w);
	return w;
}

#define PG 4096u
#define MAX_FILE (1u << 20)

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* The good image: a full data region, a partial arena region, a stack. */
static unsigned char good[MAX_FILE], bad[MAX_FILE];
static size_t good_len;
static unsigned char *truth[3]; /* each region's stored bytes, as written */
static uint64_t truth_len[3];

static void *pages(size_t n)
{
	unsigned char *p = aligned_alloc(PG, n * PG);

	if (!p)
		exit(77);
	for (size_t i = 0; i < n * PG; i++)
		p[i] = rnd();
	return p;
}

static void load(const char *path, unsigned char *buf, size_t *len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, MAX_FILE);

	if (n <= 0 || n == MAX_FILE) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(1);
	}
	*len = n;
	close(fd);
}

static void store(const char *path, const unsigned char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, buf, len) != (ssize_t)len || close(fd)) {
		perror(path);
		exit(1);
	}
}

static void make_good(const char *path)
{
	static uint64_t bm[1] = {0x8000000000f0f00full}; /* 13 of 64 pages */
	struct image_region r[3] = {
		{(uintptr_t)pages(8), 8 * PG, REGION_DATA, NULL},
		{(uintptr_t)pages(64), 64 * PG, REGION_ARENA, bm},
		{(uintptr_t)pages(4), 4 * PG, REGION_STACK, NULL},
	};
	struct image_header h = {.ckpt_id = 7, .parent_id = 6, .kind = IMAGE_INCREMENTAL,
				 .rank = 0, .nranks = 2, .exe_hash = 1, .state_size = 16};
	struct image *img;
	struct why w = WHY_INIT;

	if (image_write(path, &h, r, 3, NULL, fresh(&w))) {
		fprintf(stderr, "image_write: %s\n", w.msg);
		exit(1);
	}
	load(path, good, &good_len);
	if (image_open(path, &img, fresh(&w))) {
		fprintf(stderr, "image_open of the good image: %s\n", w.msg);
		exit(1);
	}
	for (int i = 0; i < 3; i++) {
		truth_len[i] = image_regions(img)[i].stored_bytes;
		truth[i] = malloc(truth_len[i]);
		if (!truth[i] || image_read_region(img, i, truth[i], fresh(&w))) {
			fprintf(stderr, "reading the good image: %s\n", w.msg);
			exit(1);
		}
	}
	image_close(img);
}

/* Recompute the table and header checksums of bad[] (crafted damage). */
static void reseal(void)
{
	struct image_header *h = (struct image_header *)bad;
	uint64_t n = h->nregions < 16 ? h->nregions : 16;

	h->table_crc = crc64_ecma_refl(0, bad + PG, n * sizeof(struct region_record));
	h->header_crc = 0;
	h->header_crc = crc64_ecma_refl(0, (unsigned char *)h, sizeof(*h));
}

/* An extreme or nearby value for a field that holds v. */
static uint64_t odd_value(uint64_t v)
{
	switch (rnd() % 10) {
	case 0: return 0;
	case 1: return UINT64_MAX;
	case 2: return v + 1;
	case 3: return v - 1;
	case 4: return v + PG;
	case 5: return v * 2;
	case 6: return good_len;
	case 7: return (uint64_t)1 << (rnd() % 64);
	case 8: return v ^ (uint64_t)1 << (rnd() % 64);
	default: return rnd();
	}
}

static void set_field(unsigned char *at, size_t size, uint64_t v)
{
	if (size == 4) {
		uint32_t w = (uint32_t)v;
		memcpy(at, &w, 4);
	} else {
		memcpy(at, &v, 8);
	}
}

static uint64_t get_field(const unsigned char *at, size_t size)
{
	uint32_t w;
	uint64_t v;

	if (size == 4) {
		memcpy(&w, at, 4);
		return w;
	}
	memcpy(&v, at, 8);
	return v;
}

#define FIELD(type, f) {offsetof(type, f), sizeof(((type *)0)->f)}
static const struct { size_t off, size; } header_fields[] = {
	FIELD(struct image_header, version), FIELD(struct image_header, header_size),
	FIELD(struct image_header, kind), FIELD(struct image_header, rank),
	FIELD(struct image_header, nranks), FIELD(struct image_header, nregions),
	FIELD(struct image_header, data_bytes), FIELD(struct image_header, state_size),
}, record_fields[] = {
	FIELD(struct region_record, addr), FIELD(struct region_record, length),
	FIELD(struct region_record, kind), FIELD(struct region_record, flags),
	FIELD(struct region_record, file_offset), FIELD(struct region_record, stored_bytes),
	FIELD(struct region_record, bitmap_offset), FIELD(struct region_record, data_crc),
};
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Damage bad[] (a copy of good[]); returns its length and whether the
 * checksums were recomputed. */
static size_t mangle(bool *crafted)
{
	size_t len = good_len, off;
	int kind = rnd() % 6;

	memcpy(bad, good, good_len);
	*crafted = kind >= 3;
	switch (kind) {
	case 0: /* flip 1..4 bytes */
		for (int n = 1 + rnd() % 4; n > 0; n--)
			bad[rnd() % len] ^= 1 + rnd() % 255;
		break;
	case 1: /* cut short */
		len = rnd() % len;
		break;
	case 2: /* grow with garbage */
		off = 1 + rnd() % (3 * PG);
		for (size_t i = 0; i < off; i++)
			bad[len + i] = rnd();
		len += off;
		break;
	case 3: /* a header field */
		off = rnd() % N(header_fields);
		set_field(bad + header_fields[off].off, header_fields[off].size,
			  odd_value(get_field(bad + header_fields[off].off, header_fields[off].size)));
		reseal();
		break;
	case 4: { /* a field of a region record */
		size_t f = rnd() % N(record_fields);
		unsigned char *rec = bad + PG + (rnd() % 3) * sizeof(struct region_record);

		struct region_record *r = (struct region_record *)rec;

		set_field(rec + record_fields[f].off, record_fields[f].size,
			  odd_value(get_field(rec + record_fields[f].off, record_fields[f].size)));
		/* Mostly, make the region's bytes match its crc again, wherever
		 * they now are, so that the structural checks are what stops it. */
		if (f != N(record_fields) - 1 && rnd() % 4 &&
		    r->file_offset + r->stored_bytes >= r->file_offset &&
		    r->file_offset + r->stored_bytes <= len)
			r->data_crc = crc64_ecma_refl(0, bad + r->file_offset, r->stored_bytes);
		reseal();
		break;
	}
	case 5: { /* a bitmap word of the partial region, its crc recomputed */
		struct region_record *rec = (struct region_record *)(bad + PG) + 1;
		uint64_t *w = (uint64_t *)(bad + rec->bitmap_offset);

		*w = odd_value(*w);
		rec->data_crc = crc64_ecma_refl(0, bad + rec->file_offset, rec->stored_bytes);
		reseal();
		break;
	}
	}
	return len;
}

/* What an accepted image promises, checked independently. */
static void check_promises(struct image *img, const char *path, int round)
{
	const struct image_header *h = image_header(img);
	const struct region_record *r = image_regions(img);
	struct stat st;
	uint64_t prev_end = 0, sum = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0 && !fstat(fd, &st));
	for (uint64_t i = 0; i < h->nregions; i++) {
		uint64_t end = r[i].file_offset + r[i].stored_bytes, pages = r[i].length / PG;
		bool ok = r[i].addr % PG == 0 && r[i].length % PG == 0 && r[i].file_offset % PG == 0 &&
			  end >= r[i].file_offset && end <= (uint64_t)st.st_size &&
			  r[i].file_offset >= prev_end;

		if ((r[i].flags & REGION_PARTIAL) && ok) {
			uint64_t words = (pages + 63) / 64, bits = 0, w;

			for (uint64_t k = 0; k < words; k++) {
				ok = ok && pread(fd, &w, 8, r[i].bitmap_offset + 8 * k) == 8;
				bits += __builtin_popcountll(w);
			}
			ok = ok && r[i].stored_bytes == ((words * 8 + PG - 1) / PG * PG) + bits * PG;
		} else if (ok) {
			ok = r[i].stored_bytes == r[i].length;
		}
		if (!ok) {
			fprintf(stderr, "round %d: accepted region %llu breaks a promise\n", round,
				(unsigned long long)i);
			failures++;
		}
		prev_end = end;
		sum += r[i].stored_bytes;
	}
	CHECK(sum == h->data_bytes);
	close(fd);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/test_mangle.XXXXXX", path[64], badpath[64];
	struct why w = WHY_INIT;
	int rounds = argc > 2 ? atoi(argv[2]) : 4000, refused = 0, same = 0, kept = 0;

	rng = argc > 1 ? strtoull(argv[1], NULL, 0) : 0x5eed5eed5eedull;
	printf("seed %#llx, %d rounds (rerun: test_mangle SEED ROUNDS)\n", (unsigned long long)rng,
	       rounds);
	if (!mkdtemp(dir))
		return 77;
	snprintf(path, sizeof(path), "%s/good.img", dir);
	snprintf(badpath, sizeof(badpath), "%s/bad.img", dir);
	make_good(path);

	for (int round = 0; round < rounds; round++) {
		bool crafted, equal = true;
		size_t len = mangle(&crafted);
		struct image *img = NULL;
		unsigned char *buf = NULL;

		store(badpath, bad, len);
		why_clear(&w);
		if (image_open(badpath, &img, fresh(&w)) || image_verify(img, fresh(&w))) {
			if (!w.msg[0] || !strstr(w.msg, badpath)) {
				fprintf(stderr, "round %d: refused without naming the file: '%s'\n",
					round, w.msg);
				failures++;
			}
			if (img)
				image_close(img);
			refused++;
			continue;
		}
		if (crafted) {
			check_promises(img, badpath, round);
			kept++;
		} else {
			/* Plain damage that got through must have changed nothing read. */
			equal = image_header(img)->nregions == 3 &&
				!memcmp(image_header(img), good, sizeof(struct image_header));
			for (int i = 0; equal && i < 3; i++) {
				equal = image_regions(img)[i].stored_bytes == truth_len[i] &&
					(buf = malloc(truth_len[i])) &&
					!image_read_region(img, i, buf, fresh(&w)) &&
					!memcmp(buf, truth[i], truth_len[i]);
				free(buf);
				buf = NULL;
			}
			if (!equal) {
				fprintf(stderr, "round %d: damaged image accepted with other contents\n",
					round);
				failures++;
			}
			same++;
		}
		image_close(img);
	}
	printf("%d refused, %d plain damages read back unchanged, %d crafted accepted within promises\n",
	       refused, same, kept);
	unlink(path);
	unlink(badpath);
	rmdir(dir);
	if (failures)
		fprintf(stderr, "test_mangle: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
