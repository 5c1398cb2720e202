/* Redundancy sets (DESIGN.md section 6): failure domains, set formation
 * and the agreement that ends each collective step. The rest of the
 * folder: the schemes behind struct scheme_ops (scheme_*.c, listed once in
 * scheme.c), the redundancy file (file_format.c, its format in internal.h)
 * and its reader (info.c), the parts of encode and rebuild common to all
 * schemes (encode.c, rebuild.c), the exchanges that move a scheme's data
 * between members (exchange.c, exchange_copies.c, on stripe_plan.c's
 * math), and the data path (io.c: kept buffers, reads, io_uring writes;
 * crc_combine.c: crc64 on the way). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_PREFIX "redset: "
#include "log.h"
#include "internal_mpi.h"

/* ---- failure domains and sets ---- */

int redundancy_domain(MPI_Comm world, const char *spec, int *domain, struct why *why)
{
	char name[MPI_MAX_PROCESSOR_NAME + 1] = "", *all = NULL, *end;
	int rank, size, len, first, ret = 0;
	long n;

	PMPI_Comm_rank(world, &rank);
	PMPI_Comm_size(world, &size);
	if (!spec)
		spec = "host";
	if (strcmp(spec, "host")) {
		errno = 0;
		n = strtol(spec, &end, 10);
		if (errno || end == spec || *end || n < 1 || n > INT_MAX) {
			return why_set(
			    why, -EINVAL,
			    "STASIS_FAILURE_DOMAIN: '%s' is not 'host' or a positive integer",
			    spec);
		}
		*domain = rank / (int)n;
		return 0;
	}

	/* Domains numbered 0.. in order of their lowest rank: a rank's domain
	 * is the number of hosts whose first rank precedes its host's. */
	PMPI_Get_processor_name(name, &len);
	all = calloc((size_t)size, sizeof(name));
	if (!all)
		return why_set(why, -ENOMEM, "out of memory gathering host names");
	ret = mpi_ret(
	    PMPI_Allgather(name, sizeof(name), MPI_CHAR, all, sizeof(name), MPI_CHAR, world));
	if (ret) {
		why_set(why, ret, "gathering host names failed");
		goto out;
	}
	for (first = 0; strcmp(all + first * sizeof(name), name); first++)
		;
	*domain = 0;
	for (int r = 0; r < first; r++) {
		int f;

		for (f = 0; strcmp(all + f * sizeof(name), all + r * sizeof(name)); f++)
			;
		*domain += f == r;
	}
out:
	free(all);
	return ret;
}

struct slot {
	int rank;
	int domain;
	int nth; /* rank's index within its domain */
};

static int by_domain(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;

	if (x->domain != y->domain)
		return x->domain < y->domain ? -1 : 1;
	return x->rank - y->rank;
}

static int by_round(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;

	if (x->nth != y->nth)
		return x->nth - y->nth;
	return by_domain(a, b);
}

/* Set g holds seq[start[g] .. start[g + 1]). seq lists the ranks round-robin
 * over the domains (the first rank of each domain, then the second, ...);
 * cutting it into runs of set_size consecutive slots puts at most one rank
 * of a domain in a set whenever set_size <= the number of domains. A
 * remainder too small for the scheme is merged into the last set. */
static int plan_sets(const struct scheme_ops *ops, const struct redundancy_params *prm,
		     struct slot *seq, int n, int *start, int *nsets, struct why *why)
{
	int q = prm->set_size < n ? prm->set_size : n, full = n / q, rem = n % q, param, ret;
	int ndomains = 0, *seen;
	struct set_geometry last = {.ops = ops};
	struct why scratch = WHY_INIT;

	*nsets = full;
	for (int g = 0; g <= full; g++)
		start[g] = g * q;
	if (rem) {
		if (ops->check(prm, rem, &param, &scratch) == 0) {
			start[++*nsets] = n;
		} else {
			start[full] = n;
		}
	}
	for (int g = 0; g < *nsets; g++) {
		ret = ops->check(prm, start[g + 1] - start[g], &param, why);
		if (ret)
			return ret;
	}
	/* A set that protects nothing gains nothing from its domains. */
	last.p = start[*nsets] - start[*nsets - 1];
	last.param = param;
	if (!set_protects(&last))
		return 0;

	seen = calloc((size_t)n, sizeof(int));
	if (!seen)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		ndomains = seq[i].domain + 1 > ndomains ? seq[i].domain + 1 : ndomains;
	for (int g = 0; g < *nsets; g++) {
		for (int i = start[g]; i < start[g + 1]; i++) {
			int dom = seq[i].domain;

			if (dom >= 0 && dom < n && seen[dom] == g + 1) {
				free(seen);
				return why_set(
				    why, -EINVAL,
				    "scheme %s: a set of %d ranks needs %d failure domains, but "
				    "STASIS_FAILURE_DOMAIN gives %d for %d ranks (set %d would "
				    "hold two ranks of domain %d)",
				    ops->name, start[g + 1] - start[g], start[g + 1] - start[g],
				    ndomains, n, g, dom);
			}
			if (dom >= 0 && dom < n)
				seen[dom] = g + 1;
		}
	}
	free(seen);
	return 0;
}

int redundancy_set_create(MPI_Comm world, int domain, const struct redundancy_params *prm,
			  struct redundancy_set **out, struct why *why)
{
	const struct scheme_ops *ops = prm->scheme;
	struct slot *seq = NULL;
	struct redundancy_set *rs = NULL;
	int *doms = NULL, *start = NULL;
	int rank, n, nsets, g, key = 0, ret;

	*out = NULL;
	if (!ops)
		return why_set(why, -EINVAL, "no redundancy scheme (one of %s)", scheme_names());
	if (prm->set_size < 1)
		return why_set(why, -EINVAL, "set size %d: must be >= 1", prm->set_size);
	PMPI_Comm_rank(world, &rank);
	PMPI_Comm_size(world, &n);
	doms = malloc(sizeof(int) * n);
	seq = malloc(sizeof(*seq) * n);
	start = malloc(sizeof(int) * (n + 2));
	rs = calloc(1, sizeof(*rs));
	if (!doms || !seq || !start || !rs) {
		ret = why_set(why, -ENOMEM, "out of memory forming sets");
		goto err;
	}
	ret = mpi_ret(PMPI_Allgather(&domain, 1, MPI_INT, doms, 1, MPI_INT, world));
	if (ret) {
		why_set(why, ret, "gathering failure domains failed");
		goto err;
	}
	for (int r = 0; r < n; r++)
		seq[r] = (struct slot){.rank = r, .domain = doms[r]};
	qsort(seq, n, sizeof(*seq), by_domain);
	for (int i = 0; i < n; i++)
		seq[i].nth = i > 0 && seq[i - 1].domain == seq[i].domain ? seq[i - 1].nth + 1 : 0;
	qsort(seq, n, sizeof(*seq), by_round);

	/* Every rank evaluates every set from the same gathered data, so all
	 * agree on success or failure without another collective. */
	ret = plan_sets(ops, prm, seq, n, start, &nsets, why);
	if (ret)
		goto err;
	for (g = 0; g + 1 < nsets; g++) {
		bool mine = false;

		for (int i = start[g]; i < start[g + 1]; i++)
			mine = mine || seq[i].rank == rank;
		if (mine)
			break;
	}
	for (int i = start[g]; i < start[g + 1]; i++)
		if (seq[i].rank == rank)
			key = i - start[g];
	rs->g.ops = ops;
	rs->g.set_id = g;
	rs->g.me = key;
	rs->g.p = start[g + 1] - start[g];
	ops->check(prm, rs->g.p, &rs->g.param, NULL); /* passed in plan_sets() */
	rs->g.world = malloc(sizeof(int) * rs->g.p);
	if (!rs->g.world) {
		ret = why_set(why, -ENOMEM, "out of memory forming sets");
		goto err;
	}
	for (int i = 0; i < rs->g.p; i++)
		rs->g.world[i] = seq[start[g] + i].rank;
	ret = mpi_ret(PMPI_Comm_split(world, g, key, &rs->comm));
	if (ret) {
		why_set(why, ret, "splitting the set communicator failed");
		rs->comm = MPI_COMM_NULL;
		goto err;
	}
	pr_debug("set %d: member %d of %d, scheme %s", g, key, rs->g.p, ops->name);
	*out = rs;
	rs = NULL;
err:
	redundancy_set_free(rs);
	free(doms);
	free(seq);
	free(start);
	return ret;
}

int set_agree(const struct redundancy_set *rs, const char *step, int ret, struct why *why)
{
	ret = why_agree(rs->comm, step, ret, why);
	/* A member's own cause rarely names its rank: the others say whose. */
	if (ret && why->rank >= 0 && why->rank < rs->g.p && why->rank != rs->g.me)
		why_prefix(why, "%s failed on rank %d (set %d)", step, rs->g.world[why->rank],
			   rs->g.set_id);
	return ret;
}

int redundancy_tolerance(const struct redundancy_set *rs)
{
	return rs ? rs->g.ops->tolerance(&rs->g) : 0;
}

void redundancy_set_free(struct redundancy_set *rs)
{
	if (!rs)
		return;
	if (rs->comm != MPI_COMM_NULL && rs->comm != 0)
		PMPI_Comm_free(&rs->comm);
	free(rs->g.world);
	free(rs);
}
