/* partner: full copies of each member's logical file on the next R members
 * of the set (1 <= R <= p - 1). Payload section q - 1 of member x is the
 * copy of member x - q, at its own (unpadded) logical size. The copies
 * travel in exchange_copies.c. */
#include <errno.h>
#include <stdio.h>

#include "internal.h"

static int partner_check(const struct redundancy_params *prm, int p, int *param, struct why *why)
{
	if (prm->replicas < 1 || prm->replicas > p - 1) {
		return why_set(
		    why, -EINVAL,
		    "scheme partner needs 1 <= STASIS_PARTNER_REPLICAS <= set size - 1 = "
		    "%d, got %d",
		    p - 1, prm->replicas);
	}
	*param = prm->replicas;
	return 0;
}

static int partner_tolerance(const struct set_geometry *g)
{
	return g->param;
}

static uint64_t partner_chunk(const struct set_geometry *g, uint64_t max_logical)
{
	(void)g;
	(void)max_logical;
	return 0;
}

static int partner_nsections(const struct set_geometry *g)
{
	return g->param;
}

static uint64_t partner_section_size(const struct set_geometry *g, const struct set_meta *m, int x,
				     int sec)
{
	return m->m[(x - (sec + 1) + g->p) % g->p].logical;
}

int partner_source(const struct set_geometry *g, int y, const bool *data_lost, const bool *red_lost,
		   int *sec)
{
	*sec = -1;
	if (!data_lost[y])
		return y;
	for (int j = 1; j <= g->param; j++) {
		int h = (y + j) % g->p;

		if (!red_lost[h]) {
			*sec = j - 1;
			return h;
		}
	}
	return -1;
}

/* Exact rather than "at most R lost": every file needed by a lost member
 * (its own, and for a lost redundancy file its R left neighbours') must
 * have an intact source. */
static bool partner_feasible(const struct set_geometry *g, const bool *data_lost,
			     const bool *red_lost)
{
	int sec;

	for (int x = 0; x < g->p; x++) {
		if (data_lost[x] && partner_source(g, x, data_lost, red_lost, &sec) < 0)
			return false;
		for (int q = 1; red_lost[x] && q <= g->param; q++)
			if (partner_source(g, (x - q + g->p) % g->p, data_lost, red_lost, &sec) < 0)
				return false;
	}
	return true;
}

const struct scheme_ops scheme_partner = {
    .name = "partner",
    .id = 2,
    .check = partner_check,
    .tolerance = partner_tolerance,
    .chunk = partner_chunk,
    .nsections = partner_nsections,
    .section_size = partner_section_size,
    .feasible = partner_feasible,
    .exchange = EXCHANGE_COPIES,
};
