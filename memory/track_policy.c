/* Whether write-protecting a block pays for itself: see track_policy.h. */
#include "track_policy.h"

struct block policy_initial(const struct track_costs *c, bool huge)
{
	struct block b = {.mode =
			      !huge && c->fault_ns <= c->page_ns ? BLOCK_PROTECTED : BLOCK_WHOLE};

	return b;
}

void policy_decide(struct block *b, const struct track_costs *c, unsigned pages, unsigned written,
		   unsigned samples, unsigned changed)
{
	double f = c->fault_ns, p = c->page_ns, est;

	if (b->mode == BLOCK_PROTECTED) {
		if (written * (f + p) > pages * p)
			b->mode = BLOCK_WHOLE;
		return;
	}
	if (!samples)
		return;
	est = (double)pages * changed / samples;
	if (est * (f + p) < pages * p / 2)
		b->mode = BLOCK_PROTECTED;
}
