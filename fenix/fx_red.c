/* A Fenix group's redundancy: a stasis redundancy set over the group's
 * communicator (partner, xor or rs, redundancy/), made at the first store
 * (the policy is frozen then) and protecting each snapshot's .dat inside
 * store, which is collective; commit then completes locally. Each rank is
 * its own failure domain here: the group's ranks are what a set spreads
 * over (STASIS_DIR with %r or %n puts them in separate directories). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agree.h"
#include "fault.h"
#include "fenix_int.h"
#include "redundancy.h"

static const char *const scheme_of[] = {"partner", "xor", "rs"};

int fx_set(struct fx_group *g, struct why *why)
{
	if (g->set)
		return 0;
	int pol[3];
	if (!fx_read_meta(g->gid, pol)) /* frozen across relaunches */
		memcpy(g->policy, pol, sizeof(pol));
	int sch = g->policy[0] >= 0 && g->policy[0] <= 2 ? g->policy[0] : 1;
	struct redundancy_params prm = {
		.scheme = scheme_find(g->size < 2 ? "single" : scheme_of[sch]),
		.set_size = g->policy[1] > 0 ? g->policy[1] : g->size,
		.rs_k = g->policy[2] > 0 ? g->policy[2] : 2,
		.replicas = 1,
	};
	if (prm.set_size > g->size)
		prm.set_size = g->size;
	int ret = redundancy_set_create(g->comm, g->rank, &prm, &g->set, why);
	if (ret)
		why_prefix(why, "fenix group %d", g->gid);
	return ret;
}

static void red_name(struct fx_group *g, int ts, char *buf, size_t len)
{
	snprintf(buf, len, "g%d-t%d.c%d.red", g->gid, ts, g->rank);
}

int fx_encode(struct fx_group *g, int ts, struct why *why)
{
	char dat[64], red[64];
	snprintf(dat, sizeof(dat), "g%d-t%d.c%d.dat", g->gid, ts, g->rank);
	red_name(g, ts, red, sizeof(red));
	const char *names[1] = {dat};
	return redundancy_encode(g->set, fx.dir, names, 1, red, why);
}

int fx_protect(struct fx_group *g, int ts, const char *call, int error_code)
{
	struct why why = WHY_INIT;
	int ret = fx_set(g, &why);
	/* Tests reach the failures through STASIS_FAULT's encode points, the
	 * id being the snapshot's timestamp + 1 (util/fault.h). */
	fault_set_checkpoint((uint64_t)ts + 1);
	if (!ret)
		ret = fx_encode(g, ts, &why);
	fault_set_checkpoint(0);
	/* Agreed in each redundancy set, not across sets: the group agrees,
	 * and the rank whose why every rank now holds says it. */
	if (!why_agree(g->comm, call, ret, &why))
		return 0;
	return fx_say_before_return(g->comm, g->rank == why.rank, error_code,
				    "%s of group %d: %s", call, g->gid, why.msg);
}

int fx_rebuild(struct fx_group *g, int ts, bool have_mine, struct why *why)
{
	char red[64];
	red_name(g, ts, red, sizeof(red));
	return redundancy_rebuild(g->set, fx.dir, red, have_mine, why);
}
