/* Where the application was when a checkpoint was taken (format.h,
 * SECTION_CALLSTACK): its call stack above stasis's MPI wrapper, captured with
 * libunwind on the main thread inside the checkpoint and carried in the
 * image as a non-memory region, for stasis-inspect --where. */
#ifndef STASIS_CALLSTACK_H
#define STASIS_CALLSTACK_H

#include <stdbool.h>

#include "image.h"
#include "part.h"

/* Capture the stack now into a buffer of stasis's (runtime memory, reused
 * by the next capture) and describe it as a region to write. False, with
 * nothing to write, when the stack cannot be walked. */
bool callstack_capture(struct image_region *out);

/* The call-stack part (session/part.h): saved as SECTION_CALLSTACK for
 * stasis-inspect --where; a restart does nothing with it. */
extern const struct part_ops callstack_part;

#endif
