/* Whether write-protecting a block pays for itself: see track_policy.h. */
#include "track_policy.h"

struct block policy_initial(const struct track_costs *c)
{
	struct block b = {.mode = c->fault_ns < c->page_ns ? BLOCK_PROTECTED : BLOCK_WHOLE};

	return b;
}

static void go_whole(struct block *b)
{
	*b = (struct block){.mode = BLOCK_WHOLE};
}

void policy_decide(struct block *b, const struct track_costs *c, unsigned pages, unsigned written,
		   unsigned samples, unsigned hits)
{
	double f = c->fault_ns, p = c->page_ns, est;

	if (b->mode == BLOCK_PROTECTED) {
		if (written * (f + p) > pages * p)
			go_whole(b);
		return;
	}
	if (!b->probing || !samples)
		return;
	b->probing = 0;
	est = (double)pages * hits / samples;
	if (est * (f + p) < pages * p / 2) {
		*b = (struct block){.mode = BLOCK_PROTECTED};
		return;
	}
	if (b->backoff < POLICY_MAX_BACKOFF)
		b->backoff++;
	b->wait = (uint8_t)((1u << b->backoff) - 1);
}

bool policy_probe_now(struct block *b)
{
	if (b->mode != BLOCK_WHOLE)
		return false;
	if (b->wait) {
		b->wait--;
		return false;
	}
	b->probing = 1;
	return true;
}
