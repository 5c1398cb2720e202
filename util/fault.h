/* Named fault points (after CRIU's fault_injected(FI_...)): every step of
 * checkpoint, encode, commit, rebuild and restore can be made to fail at
 * its real failure site, so that tests reach every error path.
 *
 *   STASIS_FAULT=<point>:<checkpoint id>[@<rank>][,...]
 *
 * A point fires when the step named works on that checkpoint (and, with
 * @rank, only on that rank). The points and what each does are listed once,
 * in fault.c; `STASIS_FAULT=help` is refused with that list. */
#ifndef STASIS_FAULT_H
#define STASIS_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "why.h"

enum fault_point {
	/* checkpoint: the image */
	FAULT_FAIL_COLLECT,
	FAULT_STALL_WRITE,
	FAULT_FAIL_WRITE,
	FAULT_BUFFERED_WRITE,
	FAULT_FAIL_IMAGE_SYNC,
	FAULT_FAIL_IMAGE_INSTALL,
	/* encode: the redundancy file */
	FAULT_FAIL_ENCODE_READ,
	FAULT_FAIL_ENCODE_CREATE,
	FAULT_FAIL_ENCODE_RUN,
	FAULT_FAIL_ENCODE_FINISH,
	FAULT_FAIL_ENCODE_INSTALL,
	FAULT_TRUNCATE_ENCODE,
	/* commit */
	FAULT_FAIL_COMMIT,
	FAULT_FAIL_PRUNE,
	/* rebuild (restart) */
	FAULT_FAIL_REBUILD_CREATE,
	FAULT_FAIL_REBUILD_RUN,
	FAULT_CORRUPT_REBUILD,
	FAULT_FAIL_REBUILD_INSTALL,
	/* restore (restart) */
	FAULT_FAIL_RESTORE_OPEN,
	FAULT_FAIL_RESTORE_READ,
	FAULT_POINTS
};

/* Parse and install spec (NULL or "" clears). Returns 0, or -EINVAL with
 * why = "STASIS_FAULT: '<spec>' ..." naming what is accepted. */
int fault_configure(const char *spec, struct why *why);

/* The checkpoint the current step works on (checkpoint, restore and
 * rebuild set it), for the points checked by fault_hit(). */
void fault_set_checkpoint(uint64_t id);

/* True (and one warning line naming it) when point p is set for the
 * current checkpoint on this rank. errno is then EIO, so that
 * `fault_hit(P) || rename(a, b) < 0` reads as the call itself failing. */
bool fault_hit(enum fault_point p);
/* The same for checkpoint id. */
bool fault_hit_at(enum fault_point p, uint64_t id);

/* Say "fault <name> hit in checkpoint <id>" and sleep until killed: a
 * stalled step for the tests that kill a job in the middle of it. */
void fault_stall(enum fault_point p, uint64_t id) __attribute__((noreturn));

const char *fault_name(enum fault_point p);

#endif
