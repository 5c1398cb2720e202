/* Whether write-protecting a block of application memory pays for itself
 * (DESIGN.md section 11). Pure decisions, no system calls: tracking.c and
 * track_blocks.c measure and apply them.
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
 * block is watched by its content instead: a few sample pages are hashed
 * at every checkpoint, and the share that changed since the last one
 * stands for the share written. No fault, and no huge page split: write-
 * protecting a page of a transparent huge page splits it (both backends),
 * and on a VM a rewrite of 4 KiB-mapped memory ran 2x slower than of huge
 * pages. It is protected again once that share says protecting pays by a
 * margin of two (the samples' error). */
#ifndef STASIS_TRACK_POLICY_H
#define STASIS_TRACK_POLICY_H

#include <stdbool.h>
#include <stdint.h>

struct track_costs {
	double fault_ns; /* a first write to a protected page */
	double page_ns;	 /* one page's share of a checkpoint's blocking time */
};

enum block_mode { BLOCK_PROTECTED = 0, BLOCK_WHOLE = 1 };

struct block {
	uint8_t mode;  /* enum block_mode, for the interval under way */
	uint8_t phase; /* WHOLE: where its sample pages sit this interval */
};

/* A block nothing is known of yet. One mapped as a huge page starts WHOLE
 * (protecting it would split it at its first write). Another starts in the
 * mode whose worst case is cheaper: PROTECTED when a fault costs no more than
 * writing a page (its worst case, every page written, costs pages * f),
 * else WHOLE (its worst case, a quiet block saved whole once, pages * p). */
struct block policy_initial(const struct track_costs *c, bool huge);

/* End of an interval: decide b's mode for the next one. A PROTECTED block
 * had `written` of its `pages` pages written; `changed` of the `samples`
 * sample pages of a WHOLE block changed (samples 0: not watched). */
void policy_decide(struct block *b, const struct track_costs *c, unsigned pages, unsigned written,
		   unsigned samples, unsigned changed);

#endif
