/* Whether write-protecting a block of application memory pays for itself
 * (DESIGN.md section 11). Pure decisions, no system calls: tracking.c
 * measures and applies them.
 *
 * A block (2 MiB, aligned: one transparent huge page) is either
 * PROTECTED (every first write to a page in an interval faults once, and
 * the image holds only the pages written) or WHOLE (left writable: no
 * fault, and the image holds every page of it). For `pages` pages of which
 * `written` are written per interval, with f the cost of one fault and p
 * the cost of writing one page into an image:
 *
 *   PROTECTED costs written * (f + p), WHOLE costs pages * p,
 *
 * so protecting pays while written / pages < p / (f + p): below 11% where
 * faults cost 16 us and pages 2 us, below 70% where faults cost 1 us.
 *
 * A PROTECTED block knows its written count exactly (collect()). A WHOLE
 * block learns it from a probe: a few sample pages protected for one
 * interval; it is protected again when the probe says it went quiet
 * (half the margin above, for the sampling error). A probe that finds the
 * block still busy doubles the wait before the next one, up to every
 * 1 << POLICY_MAX_BACKOFF checkpoints, so that a block rewritten forever
 * costs a handful of faults every few intervals. */
#ifndef STASIS_TRACK_POLICY_H
#define STASIS_TRACK_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#define POLICY_MAX_BACKOFF 2

struct track_costs {
	double fault_ns; /* a first write to a protected page */
	double page_ns;	 /* one page's share of a checkpoint's blocking time */
};

enum block_mode { BLOCK_PROTECTED = 0, BLOCK_WHOLE = 1 };

struct block {
	uint8_t mode;	 /* enum block_mode, for the interval under way */
	uint8_t probing; /* WHOLE: its sample pages are protected this interval */
	uint8_t backoff; /* WHOLE: probe every 1 << backoff checkpoints */
	uint8_t wait;	 /* WHOLE: checkpoints to go before the next probe */
	uint8_t phase;	 /* WHOLE: where in the block its sample pages sit */
};

/* A block nothing is known of yet starts in the mode whose worst case is
 * cheaper: PROTECTED when a fault costs less than writing a page (its
 * worst case, every page written, costs pages * f), else WHOLE (its worst
 * case, a quiet block saved whole, costs pages * p) with a probe. */
struct block policy_initial(const struct track_costs *c);

/* End of an interval: decide b's mode for the next one. A PROTECTED block
 * had `written` of its `pages` pages written; a WHOLE block that probed had
 * `hits` of its `samples` sample pages written (samples 0: no probe). */
void policy_decide(struct block *b, const struct track_costs *c, unsigned pages, unsigned written,
		   unsigned samples, unsigned hits);

/* Whether a WHOLE block probes in the coming interval; counts its wait
 * down otherwise. */
bool policy_probe_now(struct block *b);

#endif
