/* Room on the checkpoint disks when they fill up. A checkpoint needs room for its
 * files while every checkpoint kept stays whole; when a filesystem is
 * nearly full, an incremental image can leave a chain that no full image
 * can ever replace (the chain stays until a full one is complete). So,
 * before an incremental image, the ranks that share a filesystem check
 * that a full image would still fit after it; if not, and a full one fits
 * now (counting what retention_make_room could free), this checkpoint is
 * written full instead, so that the chain can go once it is complete. */
#ifndef STASIS_DISKSPACE_H
#define STASIS_DISKSPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "image.h"

struct session;

/* Bytes of an image of these regions: as given (with their dirty
 * bitmaps), or full. */
uint64_t diskspace_image_bytes(const struct image_region *r, int n, bool full);

/* Collective over s->comm. full_bytes / incr_bytes: this rank's image, full
 * or incremental. True on every rank when the checkpoint should be full. */
bool diskspace_prefer_full(struct session *s, uint64_t full_bytes, uint64_t incr_bytes);

#endif
