/* The threads of the application at a checkpoint and at a restart
 * (DESIGN.md section 10, "The rest of a process"): what checkpoint.c and
 * restore.c call, in this order.
 *
 * Checkpoint, on the main thread inside an MPI wrapper:
 *   threads_stop      every application thread stopped where it may be
 *                     (before the program's output is flushed)
 *   threads_collect   their stacks, as memory regions of the image
 *   threads_save      data regions: thread-local storage and keys of every
 *                     thread, the main one included (REGION_TLS)
 *   threads_resume    once the image is written (not after a restart)
 *
 * Restart, on the main thread, before the memory comes back:
 *   threads_restore   keys made again, the main thread's TLS put back
 * and once it is back, just before the main thread jumps:
 *   threads_release
 */
#ifndef STASIS_THREADS_H
#define STASIS_THREADS_H

#include <stddef.h>

#include "image.h"
#include "regions.h"

int threads_stop(char *err, size_t errlen);
int threads_collect(struct region *out, int max);
/* Fills up to max entries of out; returns their number or -errno (err set). */
int threads_save(struct image_region *out, int max, char *err, size_t errlen);
void threads_resume(void);

/* tls: the image's REGION_TLS (NULL if it has none). 0, or -errno with why
 * set to one line. */
int threads_restore(const void *tls, size_t tls_len, char *why, size_t whylen);
void threads_release(void);

#endif
