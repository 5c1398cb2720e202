/* Stripe layout and per-stripe decoding plans for xor and rs (see the
 * layout in internal.h). Pure arithmetic, no MPI: the tests run it in
 * one process over every erasure pattern. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define LOG_PREFIX "redset: "
#include "log.h"
#include "internal.h"

uint64_t stripe_chunk(int p, int k, uint64_t max_logical)
{
	uint64_t d = (uint64_t)(p - k);
	uint64_t c = (max_logical + d - 1) / d;

	/* Page multiples keep every piece whole pages, in the buffers and in
	 * the files (no partial page in the page cache), and aligned for
	 * xor_gen and the ISA-L vector kernels. */
	return (c + 4095) & ~(uint64_t)4095;
}

size_t stripe_piece(int p, int k)
{
	/* A member holds 2 slots for each stripe it sends to, gathers (p
	 * pieces a slot) or receives a row of: about 4p pieces in all, kept
	 * near 4 MiB, pieces between 64 KiB and 1 MiB (128 KiB for a set of
	 * 8). Every piece costs a message per link, but smaller pieces stay
	 * in cache and keep the pipeline full: with 8 ranks on 2 cores,
	 * 128 KiB encoded fastest, 64 KiB and 256 KiB close, 512 KiB slower
	 * (measured on a 2-core VM). */
	size_t b = ((size_t)4 << 20) / ((size_t)4 * p), piece = 64 * 1024;

	(void)k;
	while (piece * 2 <= b && piece < 1024 * 1024)
		piece *= 2;
	return piece;
}

static bool same_pattern(const struct stripe_plan *a, const struct stripe_plan *b)
{
	return a->ncontrib == b->ncontrib && a->nerased == b->nerased &&
	       !memcmp(a->contrib, b->contrib, a->ncontrib * sizeof(a->contrib[0])) &&
	       !memcmp(a->erased, b->erased, a->nerased * sizeof(a->erased[0]));
}

/* Position pos of stripe s is erased when its member lost what that
 * position lives in: its files for a data position, its redundancy file
 * for a checksum position. The contributors are the first p - k surviving
 * positions in codeword order (with no loss, encode: the data positions). */
int stripe_plans_make(int p, int k, const struct stripe_kernel *kern, const bool *data_lost,
		      const bool *red_lost, struct stripe_plan *plans)
{
	int s, pos, ret = 0;

	memset(plans, 0, sizeof(*plans) * p);
	for (s = 0; s < p; s++) {
		struct stripe_plan *pl = &plans[s];

		for (pos = 0; pos < p; pos++) {
			int x = stripe_member(p, k, s, pos);
			bool lost = pos < p - k ? data_lost[x] : red_lost[x];

			if (lost)
				pl->erased[pl->nerased++] = pos;
			else if (pl->ncontrib < p - k)
				pl->contrib[pl->ncontrib++] = pos;
		}
		if (pl->nerased > k) {
			ret = -EUCLEAN;
			goto err;
		}
		if (!pl->nerased) {
			pl->ncontrib = 0;
			continue;
		}
		if (s > 0 && plans[s - 1].tables && same_pattern(pl, &plans[s - 1])) {
			pl->tables = plans[s - 1].tables;
			continue;
		}
		ret = kern->prepare(p, k, pl);
		if (ret)
			goto err;
		pl->owns_tables = pl->tables != NULL;
	}
	return 0;
err:
	stripe_plans_free(p, plans);
	return ret;
}

void stripe_plans_free(int p, struct stripe_plan *plans)
{
	for (int s = 0; s < p; s++) {
		if (plans[s].owns_tables)
			free(plans[s].tables);
		plans[s].tables = NULL;
		plans[s].owns_tables = false;
	}
}

bool stripe_feasible(int p, int k, const bool *data_lost, const bool *red_lost)
{
	for (int s = 0; s < p; s++) {
		int n = 0;

		for (int pos = 0; pos < p; pos++) {
			int x = stripe_member(p, k, s, pos);

			n += pos < p - k ? data_lost[x] : red_lost[x];
		}
		if (n > k)
			return false;
	}
	return true;
}
