/* Taking one coordinated checkpoint (DESIGN.md sections 3 and 5). */
#ifndef STASIS_CHECKPOINT_H
#define STASIS_CHECKPOINT_H

#include <stdint.h>
#include <ucontext.h>

#include "coord.h"
#include "format.h"

struct session;


/* What a checkpoint carries besides memory, in the image header's opaque
 * state: where to resume, and the counters stasis must carry across. */
struct saved_state {
	ucontext_t context; /* captured in checkpoint_take */
	uint64_t canary;    /* the main thread's stack-protector value */
	uint64_t ckpt_id;
	int depth; /* stasis_depth at the capture */
};
_Static_assert(sizeof(struct saved_state) <= STASIS_STATE_MAX, "saved state too big");

/* Collective over the world, once the coordinator stopped every rank and
 * the drain left no message in flight (mpi/coord.h, mpi/drain.h): the
 * parts' STOP and QUIESCE stages, the registers captured, this rank's image
 * written, a commit in two phases, checkpoints beyond STASIS_KEEP dropped,
 * then THAW and RESUMED (session/part.h). Handed to the coordinator as its
 * coord_take_fn. Returns 0 when committed,
 * CHECKPOINT_RESUMED when a restart has just resumed here, or -errno when
 * this checkpoint failed (logged; the previous ones stay intact and the
 * run goes on). */
int checkpoint_take(struct session *s);

/* Called by restore just before it jumps into the image. */
void checkpoint_prepare_resume(uint64_t id);

#endif
