/* The blocks of one tracked range (tracking.c): each 2 MiB-aligned block
 * (one transparent huge page) is write-protected or left writable and saved
 * whole, as track_policy.h decides from what the last interval cost. Uses a
 * dirty backend's collect/protect/unprotect (dirty.h); bitmaps are one bit
 * per STASIS_PAGE. Memory comes from mmap(), never from the application's
 * heap. */
#ifndef STASIS_TRACK_BLOCKS_H
#define STASIS_TRACK_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "dirty.h"
#include "track_policy.h"

#define TRACK_BLOCK ((uintptr_t)2 << 20)
/* Pages of a writable block hashed at every checkpoint to see whether it
 * went quiet: 1 in 32, 128 KiB of crc64 per block and checkpoint. */
#define TRACK_SAMPLES 16

struct tracked_range {
	uintptr_t start, end; /* page aligned; tracked by the backend */
	uint32_t kind;	      /* enum region_kind */
	struct block *blocks; /* one per TRACK_BLOCK-aligned block meeting [start, end) */
	uint64_t *hashes;     /* TRACK_SAMPLES per block: its sample pages' crc64 */
	size_t nblocks;
	size_t cap; /* blocks the two arrays' mappings hold */
};

struct block_env {
	const struct dirty_backend *be;
	struct track_costs costs;
	unsigned round; /* checkpoints so far: moves the sample pages around */
};

/* Bytes per mode (blocks_tally), and what the last decisions changed
 * (blocks_collect), summed by the caller over ranges. */
struct block_tally {
	uint64_t protected_bytes, whole_bytes;
	unsigned to_whole, to_protected, collapsed;
};

/* t now reaches new_end (> t->end, or t->end == t->start for a new range),
 * and the backend tracks (and protects) [old end, new_end). Blocks that
 * appear start as policy_initial() says (huge: mapped as a huge page now);
 * a WHOLE block, old or new, is left writable over the new part. 0 or
 * -errno (t unchanged then). */
int blocks_grow(struct tracked_range *t, uintptr_t new_end, const struct block_env *env);

/* End of an interval: set in bits (bit 0 = the page at base <= t->start)
 * the pages of [t->start, end) written in it (every page of a WHOLE block),
 * decide each block's mode for the next interval and apply it, adding to
 * tally. A block that goes WHOLE with every page written is made one huge
 * page again (MADV_COLLAPSE: its writes split it). 0, or -errno when
 * collecting failed (bits then incomplete). */
int blocks_collect(struct tracked_range *t, uintptr_t end, uintptr_t base, uint64_t *bits,
		   const struct block_env *env, struct block_tally *tally);

/* Add the bytes of t's blocks in each mode to tally. */
void blocks_tally(const struct tracked_range *t, struct block_tally *tally);

/* Forget t's blocks (the backend's untrack is the caller's). */
void blocks_free(struct tracked_range *t);

/* Bit helpers on 1-bit-per-page bitmaps. */
void bits_set(uint64_t *bits, size_t first, size_t n);
size_t bits_count(const uint64_t *bits, size_t first, size_t n);

#endif
