/* Reading the chain of images a restart resumes, at the speed of the disk
 * and of memory (DESIGN.md section 11: never a fault per page, never a
 * copy through fresh memory). restore.c decides what to restore; this
 * module reads it. Two passes over each image:
 *
 * - verify: every region read once through io_uring (readq.h) into a few
 *   warm buffers, its crc64 checked in file order (image_check_*). The
 *   files come into the page cache; nothing of them into the program's
 *   memory. Kept: what the restore needs later and is small (the records
 *   that are not memory: MPI state, signals, mappings; the stacks; the
 *   page bitmaps of partial regions).
 * - apply: once every rank verified its chain and the MPI objects exist
 *   again, the program's memory is populated in bulk (MADV_POPULATE_WRITE,
 *   huge pages in the arena), then the memory regions are read again, from
 *   the page cache, straight into their addresses: the full image first,
 *   each increment's pages on top, the crc checked once more on the way.
 *   Populating while the cold read runs would save its time on paper; on
 *   this VM it made the read 4-5x slower (the two compete in the host), so
 *   they follow each other. Pages holding
 *   copy-relocated runtime objects (regions_exclusions) go through a
 *   bounce page and are copied around them. The stacks are left to the
 *   jump (restore_read_stacks), which runs on another stack.
 *
 * A failure of verify leaves the program's memory as it was (populated,
 * not written): the caller may try an older checkpoint. A failure of apply
 * leaves it half written: the caller must stop the process. */
#ifndef STASIS_RESTORE_READ_H
#define STASIS_RESTORE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "image.h"

struct restore_image {
	struct image *img;
	void **kept; /* per region: what verify kept of it, else NULL */
};

/* The memory every image of chain[0..n) (newest first) restores into:
 * the arena committed to the newest's length (pages above dropped), and
 * asked for huge pages; restore_read_apply populates it and the data
 * regions. 0 or -errno. */
int restore_read_prepare(const struct restore_image *chain, int n);

/* Read and check every region of ri->img, keeping what the restore needs.
 * The fault point fail-restore-read (checkpoint id) fails it half way.
 * 0, or -errno with why naming the file and the cause. */
int restore_read_verify(struct restore_image *ri, uint64_t id, struct why *why);

/* The record of the given kind verify kept of ri->img (SECTION_MPI,
 * SECTION_SIGNALS, ...: a region that is not memory), or NULL; *len its
 * bytes. */
const void *restore_read_kept(const struct restore_image *ri, uint32_t kind, size_t *len);

/* Put the memory regions of chain[0..n) (newest first) except the stacks
 * into place, oldest first. 0, or -errno with why set: memory is then
 * half written. */
int restore_read_apply(const struct restore_image *chain, int n, struct why *why);

/* Copy the stacks verify kept into place, oldest first. For a function
 * that runs on another stack; uses almost none of its own. */
void restore_read_stacks(const struct restore_image *chain, int n);

/* Free what verify kept and close the image. */
void restore_read_release(struct restore_image *ri);

#endif
