/* The invariant walker of the application arena (arena_check in arena.h):
 * walks every run and leaf below the bump pointer, every bin and every
 * partial slab list, and checks them against the invariants stated in
 * arena_int.h. Slow: for tests and debugging. */
#include <errno.h>

#define LOG_PREFIX "arena: "
#include "arena_int.h"
#include "log.h"

static bool is_leaf(struct root *r, uint64_t q)
{
	for (uint64_t reg = 0; reg < NREGIONS; reg++)
		if (r->dir[reg] == (struct pent *)page_addr(q))
			return true;
	return false;
}

static const char *check_slab(struct root *r, uint64_t q, struct arena_stats *st)
{
	const struct pent *e = arena_pent(q);
	const struct sclass *sc = &r->cls[e->cls < NCLASSES ? e->cls : 0];
	struct slab *sl = (struct slab *)(page_addr(q) + sc->hdr_off);
	uint32_t live = 0, nfree = 0;

	if (e->cls >= NCLASSES || e->npages != sc->pages)
		return "slab head entry";
	for (uint32_t i = 0; i < sc->pages; i++) {
		const struct pent *x = arena_pent(q + i);

		if (x->kind != PK_SLAB || x->cls != e->cls || x->npages != sc->pages ||
		    x->next != i || x->flags != (i ? 0 : PF_HEAD))
			return "slab page entry";
	}
	if (sl->start != page_addr(q) || sl->cls != e->cls || sl->bump > sc->nblocks ||
	    sl->nfree > sc->nblocks)
		return "slab header";
	for (uint32_t i = 0; i < sc->nblocks; i++) {
		bool set = sl->bits[i / 64] & (1ULL << (i % 64));

		if (set && i >= sl->bump)
			return "allocated bit above the bump index";
		live += set;
	}
	if (live + sl->nfree != sc->nblocks)
		return "slab free count";
	for (char *p = sl->free; p; p = *(char **)p) {
		uint64_t off = (uint64_t)(p - sl->start), idx = off / sc->size;

		if (p < sl->start || off % sc->size || idx >= sl->bump || ++nfree > sc->nblocks ||
		    (sl->bits[idx / 64] & (1ULL << (idx % 64))))
			return "slab free list";
	}
	if (nfree + sc->nblocks - sl->bump != sl->nfree)
		return "slab free list length";
	st->slabs++;
	st->small_live += live;
	st->small_live_bytes += (size_t)live * sc->size;
	return NULL;
}

/* Checks every invariant of the allocator; for tests and debugging. */
int arena_check(struct arena_stats *out)
{
	struct root *r = R;
	struct arena_stats st = {0};
	const char *bad = NULL;
	uint64_t q = ROOT_PAGES, nruns = 0, npartial = 0, nbinned = 0, kept = 0;

	if (!arena_state_ready())
		return -EINVAL;
	arena_lock(r);
	if (r->magic != ARENA_MAGIC || ((uint64_t)r->top << PAGE_SHIFT) > r->committed ||
	    r->keep < RELEASE_PAGES || r->keep > KEEP_MAX + 1 || r->kept > KEEP_BUDGET)
		bad = "root";
	else if (r->dirty_end > r->top && r->dirty_end - r->top >= 2 * (uint64_t)r->keep)
		bad = "dirty bump space beyond twice the threshold";
	while (!bad && q < r->top) {
		const struct pent *e = arena_pent_peek(q), *t;
		uint64_t n = e->npages;

		if (!e->kind && is_leaf(r, q)) {
			q += LEAF_PAGES;
			continue;
		}
		if (!e->kind || !(e->flags & PF_HEAD) || !n || q + n > r->top) {
			bad = "page is neither a run head nor a leaf";
			break;
		}
		if (e->kind == PK_SLAB) {
			bad = check_slab(r, q, &st);
			if (!bad && ((struct slab *)(page_addr(q) + r->cls[e->cls].hdr_off))->nfree)
				npartial++;
			q += n;
			continue;
		}
		t = arena_pent(q + n - 1);
		if (n > 1 && (t->kind != e->kind || t->npages != n ||
			      t->flags != ((e->flags & ~PF_HEAD) | PF_TAIL)))
			bad = "run tail entry";
		for (uint64_t i = 1; !bad && i + 1 < n; i++)
			if (arena_pent(q + i)->kind)
				bad = "non-zero interior entry";
		if (e->kind == PK_FREE) {
			if (arena_pent_peek(q - 1)->kind == PK_FREE || q + n == r->top)
				bad = "free run not coalesced";
			if ((e->flags & PF_DIRTY) && n >= r->keep)
				bad = "dirty free run not shorter than the threshold";
			if ((e->flags & PF_DIRTY) && n >= RELEASE_PAGES)
				kept += n;
			nruns++;
			st.free_bytes += n << PAGE_SHIFT;
		} else if (e->kind == PK_LARGE) {
			st.large_bytes += n << PAGE_SHIFT;
		} else if (e->kind == PK_MAP) {
			st.map_bytes += n << PAGE_SHIFT;
		} else {
			bad = "unknown run kind";
		}
		q += n;
	}
	for (unsigned b = 0; !bad && b < NBINS; b++) {
		uint32_t prev = 0;

		if (!!r->bins[b] != !!(r->binmap[b / 64] & (1ULL << (b % 64))))
			bad = "bin bitmap";
		for (uint32_t s = r->bins[b]; !bad && s; prev = s, s = arena_pent(s)->next) {
			const struct pent *e = arena_pent(s);

			if (s >= r->top || e->kind != PK_FREE || !(e->flags & PF_HEAD) ||
			    bin_of(e->npages) != b || e->prev != prev || ++nbinned > nruns)
				bad = "bin list";
		}
	}
	if (!bad && nbinned != nruns)
		bad = "free run missing from its bin";
	if (!bad && kept != r->kept)
		bad = "count of pages in long dirty free runs";
	for (unsigned c = 0; !bad && c < NCLASSES; c++) {
		struct slab *prev = NULL;

		for (struct slab *sl = r->partial[c]; !bad && sl; prev = sl, sl = sl->next)
			if (sl->cls != c || !sl->nfree || sl->prev != prev || !npartial--)
				bad = "partial slab list";
	}
	if (!bad && npartial)
		bad = "slab with free blocks missing from its partial list";
	st.heap_bytes = (size_t)r->top << PAGE_SHIFT;
	st.committed = r->committed;
	arena_unlock(r);
	if (bad) {
		pr_err("check: %s (page %llu)", bad, (unsigned long long)q);
		return -EUCLEAN;
	}
	if (out)
		*out = st;
	return 0;
}
