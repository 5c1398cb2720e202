/* single: no redundancy; any lost member is beyond tolerance. A set of it
 * writes no redundancy file (set_protects(), internal.h). Its file would
 * hold only the set's records (names, sizes, crc64), and the reader still
 * reads one. */
#include <errno.h>
#include <stdio.h>

#include "internal.h"

static int single_check(const struct redundancy_params *prm, int p, int *param, struct why *why)
{
	(void)prm;
	(void)why;
	(void)p;
	*param = 0;
	return 0;
}

static int single_tolerance(const struct set_geometry *g)
{
	(void)g;
	return 0;
}

static uint64_t single_chunk(const struct set_geometry *g, uint64_t max_logical)
{
	(void)g;
	(void)max_logical;
	return 0;
}

static int single_nsections(const struct set_geometry *g)
{
	(void)g;
	return 0;
}

static uint64_t single_section_size(const struct set_geometry *g, const struct set_meta *m, int x,
				    int sec)
{
	(void)g;
	(void)m;
	(void)x;
	(void)sec;
	return 0;
}

/* A lost redundancy file is only metadata, which every valid one holds. */
static bool single_feasible(const struct set_geometry *g, const bool *data_lost,
			    const bool *red_lost)
{
	(void)red_lost;
	for (int x = 0; x < g->p; x++)
		if (data_lost[x])
			return false;
	return true;
}

const struct scheme_ops scheme_single = {
    .name = "single",
    .id = 1,
    .check = single_check,
    .tolerance = single_tolerance,
    .chunk = single_chunk,
    .nsections = single_nsections,
    .section_size = single_section_size,
    .feasible = single_feasible,
    .exchange = EXCHANGE_NONE,
};
