/* Internals shared by the checkpoint image writer (image_write.c) and reader
 * (image_read.c). Not installed. */
#ifndef STASIS_IMAGE_INT_H
#define STASIS_IMAGE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <isa-l/crc64.h>

#include "codec.h"
#include "image.h"

#define PAGE ((uint64_t)STASIS_PAGE)
#define MAX_REGIONS (UINT64_C(1) << 20) /* more is a corrupt table, not a program */

static inline uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static inline uint64_t crc64(uint64_t crc, const void *buf, uint64_t len)
{
	return crc64_ecma_refl(crc, buf, len);
}

/* Mask of the bits of the last bitmap word that name real pages. */
static inline uint64_t tail_mask(uint64_t npages)
{
	unsigned r = npages % 64;

	return r ? (UINT64_C(1) << r) - 1 : ~UINT64_C(0);
}

/* Pages a region saves: those its page bitmap names (bits of them), or
 * every page. */
static inline uint64_t region_saved(const struct region_record *r, uint64_t bits)
{
	return (r->flags & REGION_PARTIAL) ? bits : r->length / PAGE;
}

/* Bytes a region of flags r->flags stores for saved pages of which zeros
 * are left out (REGION_ZEROS): its bitmaps and the other pages. */
static inline uint64_t region_stored(const struct region_record *r, uint64_t saved, uint64_t zeros)
{
	uint64_t heads = (!!(r->flags & REGION_PARTIAL) + !!(r->flags & REGION_ZEROS)) *
			 image_bitmap_bytes(r->length);

	return heads + (saved - zeros) * PAGE;
}

/* Whether r's stored_bytes fit the pages its bitmaps name (bits saved,
 * zbits of them zeros); *bytes: what it holds unpacked (bitmaps and
 * pages). A packed region's frames take a page multiple, none when it has
 * no page, at most a page more than their pages each. */
static inline bool region_fits(const struct region_record *r, uint64_t bits, uint64_t zbits,
			       uint64_t *bytes)
{
	uint64_t saved = region_saved(r, bits), heads, raw, data, frames;

	if (zbits > saved)
		return false;
	*bytes = region_stored(r, saved, zbits);
	if (!(r->flags & REGION_PACKED))
		return *bytes == r->stored_bytes;
	heads = *bytes - (saved - zbits) * PAGE;
	if (r->stored_bytes < heads)
		return false;
	raw = *bytes - heads;
	data = r->stored_bytes - heads;
	frames = (raw + CODEC_FRAME_RAW - 1) / CODEC_FRAME_RAW;
	return data % PAGE == 0 && (raw ? data > 0 : data == 0) && data <= raw + frames * PAGE;
}
#endif
