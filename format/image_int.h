/* Internals shared by the checkpoint image writer (image_write.c) and reader
 * (image_read.c). Not installed. */
#ifndef STASIS_IMAGE_INT_H
#define STASIS_IMAGE_INT_H

#include <stddef.h>
#include <stdint.h>

#include <isa-l/crc64.h>

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


#endif
