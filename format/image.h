/* Writing and reading checkpoint image files (format.h). Writes go through
 * liburing (O_DIRECT when the filesystem allows it, buffered otherwise);
 * checksums are ISA-L crc64. Files are created 0600; an image is written to
 * "<path>.tmp", synced, then renamed to <path> and the directory synced, so
 * a file named <path> is always whole. Nothing in a file is trusted before
 * its checksum is checked. Functions return 0 or -errno; on failure `why`
 * (if not NULL) holds one line naming the cause and the file. */
#ifndef STASIS_IMAGE_H
#define STASIS_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "why.h"

/* One region to save, read straight from live memory. */
struct image_region {
	uintptr_t addr;          /* page aligned */
	size_t length;           /* page multiple */
	uint32_t kind;           /* enum region_kind */
	const uint64_t *dirty;   /* NULL: save every page; else 1 bit per page */
};

/* Write an image. hdr: caller fills ckpt_id, parent_id, kind, rank, nranks,
 * exe_hash, state/state_size; image_write fills magic, version, sizes,
 * uid, nregions, data_bytes, created_ns, checksums. On return *bytes_written
 * (may be NULL) is the file size. */
int image_write(const char *path, struct image_header *hdr, const struct image_region *regions,
		size_t nregions, uint64_t *bytes_written, struct why *why);

struct image; /* an open, header-verified image */

/* Open, read and verify the header and region table (magic, version,
 * owner uid, sizes against the file length, both crcs). */
int image_open(const char *path, struct image **out, struct why *why);
const struct image_header *image_header(const struct image *img);
const struct region_record *image_regions(const struct image *img);
/* Read region i's stored bytes into buf and check its crc: -EBADMSG with
 * why set when it does not match. A packed region (REGION_PACKED) is
 * unpacked: buf receives image_region_bytes(img, i) bytes, its bitmaps and
 * pages as an unpacked region stores them (stored_bytes for the others). */
int image_read_region(struct image *img, size_t i, void *buf, struct why *why);
uint64_t image_region_bytes(const struct image *img, size_t i);
/* The open file and its name, for readers of their own (restore_read.c):
 * nothing read through them is trusted before the checks below passed. */
int image_fd(const struct image *img);
const char *image_path(const struct image *img);

/* The checks of image_read_region, for bytes read by someone else: begin
 * with region i, feed its stored bytes in file order (any piece sizes),
 * end: 0, or -EBADMSG with why naming the file and what is wrong (short,
 * crc mismatch, a bitmap that does not match the stored pages). */
struct region_check {
	const struct region_record *r;
	uint64_t crc, pos, bits, zbits;
	bool bm_ok;
};
void image_check_begin(const struct image *img, size_t i, struct region_check *c);
void image_check_feed(struct region_check *c, const void *data, uint64_t n);
int image_check_end(const struct image *img, size_t i, const struct region_check *c,
		    struct why *why);

/* The pages of a memory region as image_read_region gave them (buf, whose
 * checks passed), in page order: image_pages_next gives each page the
 * region holds, its number in *page and its bytes in *data, or NULL for a
 * page of zeros (REGION_ZEROS); false after the last. The pages a partial
 * region does not hold (unchanged since its parent) are not given. */
struct page_walk {
	const struct region_record *r;
	const uint64_t *saved, *zero; /* NULL: every page / none */
	const char *next;	      /* the next stored page */
	uint64_t pg;
};
void image_pages_begin(struct page_walk *w, const struct region_record *r, const void *buf);
bool image_pages_next(struct page_walk *w, uint64_t *page, const void **data);

/* Read every region and check every crc, keeping nothing. */
int image_verify(struct image *img, struct why *why);
void image_close(struct image *img);

/* crc64 of a whole file (used for the executable hash). */
int file_crc64(const char *path, uint64_t *crc);

/* Bytes of the stored bitmap of a REGION_PARTIAL region of `length` bytes
 * (ceil(pages / 64) u64 words padded to a page): in the buffer filled by
 * image_read_region, the saved pages start at this offset, in page order. */
uint64_t image_bitmap_bytes(uint64_t length);

#endif
