/* xor: the k = 1 case of the stripe layout (internal.h), as in LLNL's redset:
 * each logical file is cut into p - 1 chunks, each member stores one
 * parity chunk, the XOR of one chunk of every other member, and any one
 * lost member is the XOR of everything the others hold. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <isa-l.h>

#include "internal.h"

static int xor_prepare(int p, int k, struct stripe_plan *pl)
{
	(void)p;
	(void)k;
	/* All coefficients are 1: no tables. */
	pl->tables = NULL;
	return 0;
}

static void xor_combine(const struct stripe_plan *pl, int len, unsigned char **src,
			unsigned char **rows)
{
	void *v[MAX_SET + 1];

	if (pl->ncontrib == 1) {
		memcpy(rows[0], src[0], len);
		return;
	}
	/* All sources in one pass, the destination last. */
	memcpy(v, src, sizeof(*v) * pl->ncontrib);
	v[pl->ncontrib] = rows[0];
	xor_gen(pl->ncontrib + 1, len, v);
}

const struct stripe_kernel stripe_kernel_xor = {
    .prepare = xor_prepare,
    .combine = xor_combine,
};

static int xor_params(const struct redundancy_params *prm, int p, int *param, struct why *why)
{
	(void)prm;
	if (p < 2)
		return why_set(why, -EINVAL,
			       "scheme xor needs a set of at least 2 ranks, the set has %d", p);
	*param = 1;
	return 0;
}

static int xor_tolerance(const struct set_geometry *g)
{
	(void)g;
	return 1;
}

static uint64_t xor_chunk(const struct set_geometry *g, uint64_t max_logical)
{
	return stripe_chunk(g->p, 1, max_logical);
}

static int xor_nsections(const struct set_geometry *g)
{
	(void)g;
	return 1;
}

static uint64_t xor_section_size(const struct set_geometry *g, const struct set_meta *m, int x,
				 int sec)
{
	(void)g;
	(void)x;
	(void)sec;
	return m->chunk;
}

static bool xor_feasible(const struct set_geometry *g, const bool *data_lost, const bool *red_lost)
{
	return stripe_feasible(g->p, 1, data_lost, red_lost);
}

const struct scheme_ops scheme_xor = {
    .name = "xor",
    .id = 3,
    .check = xor_params,
    .tolerance = xor_tolerance,
    .chunk = xor_chunk,
    .nsections = xor_nsections,
    .section_size = xor_section_size,
    .feasible = xor_feasible,
    .exchange = EXCHANGE_STRIPES,
    .kernel = &stripe_kernel_xor,
};
