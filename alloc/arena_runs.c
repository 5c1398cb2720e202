/* Page runs of the application arena (layout and invariants in
 * arena_int.h): bins of free runs by length, carving runs from free runs or
 * from the bump space (with the page-map leaves they need), freeing runs with
 * coalescing, and resizing large blocks in place. Every function here runs
 * under the arena lock. */
#include <string.h>

#include "arena_int.h"

/* The pages a free run counts in r->kept. */
static uint64_t kept_pages(const struct pent *e)
{
	return (e->flags & PF_DIRTY) && e->npages >= RELEASE_PAGES ? e->npages : 0;
}

static void bin_insert(struct root *r, uint32_t s)
{
	struct pent *e = arena_pent(s);
	unsigned b = bin_of(e->npages);

	r->kept += kept_pages(e);
	e->next = r->bins[b];
	e->prev = 0;
	if (e->next)
		arena_pent(e->next)->prev = s;
	r->bins[b] = s;
	r->binmap[b / 64] |= 1ULL << (b % 64);
}

static void bin_remove(struct root *r, uint32_t s)
{
	struct pent *e = arena_pent(s);
	unsigned b = bin_of(e->npages);

	r->kept -= kept_pages(e);
	if (e->prev)
		arena_pent(e->prev)->next = e->next;
	else
		r->bins[b] = e->next;
	if (e->next)
		arena_pent(e->next)->prev = e->prev;
	if (!r->bins[b])
		r->binmap[b / 64] &= ~(1ULL << (b % 64));
}

/* A free run of at least `need` pages, or 0: the first fitting run among the
 * first 64 of need's own bin, else the first run of the next non-empty bin
 * (every run there is longer than need). */
static uint32_t bin_find(struct root *r, uint64_t need)
{
	unsigned b, budget = 64;

	if (need > NPAGES)
		return 0;
	b = bin_of(need);
	for (uint32_t s = r->bins[b]; s && budget--; s = arena_pent(s)->next)
		if (arena_pent(s)->npages >= need)
			return s;
	for (unsigned w = (b + 1) / 64; w < NBINS / 64; w++) {
		uint64_t m = r->binmap[w];

		if (w == (b + 1) / 64)
			m &= ~0ULL << ((b + 1) % 64);
		if (m)
			return r->bins[w * 64 + __builtin_ctzll(m)];
	}
	return 0;
}

void arena_set_run(uint64_t s, uint64_t n, uint8_t kind, uint8_t flags)
{
	*arena_pent(s) = (struct pent){.kind = kind, .flags = PF_HEAD | flags, .npages = n};
	if (n > 1)
		*arena_pent(s + n - 1) =
		    (struct pent){.kind = kind, .flags = PF_TAIL | flags, .npages = n};
}

/* Records [s, s + n) as a free run without coalescing: for pieces split off
 * a free run, whose neighbours are known not to be free. */
static void put_free(struct root *r, uint64_t s, uint64_t n, bool dirty)
{
	arena_set_run(s, n, PK_FREE, dirty ? PF_DIRTY : 0);
	bin_insert(r, s);
}

/* Whether a free run of n pages made of dirty pieces stays dirty (arena_int.h:
 * the dynamic threshold and the budget). When it is too long for the
 * threshold, the threshold rises past it for the next one. */
static bool keep_dirty(struct root *r, uint64_t n)
{
	if (n < r->keep)
		return n < RELEASE_PAGES || r->kept + n <= KEEP_BUDGET;
	if (n <= KEEP_MAX)
		r->keep = n + 1;
	return false;
}

/* Frees the run [s, s + n), whose head and tail entries may still describe
 * it (interior entries must be zero): coalesces it with free neighbours,
 * merges it into the bump space when it ends at top, and gives dirty pages
 * back to the kernel as keep_dirty() says. Invariants kept: no two free runs
 * are adjacent, no free run ends at top, a dirty free run is shorter than
 * r->keep, r->kept <= KEEP_BUDGET, dirty_end < top + 2 * r->keep. */
void arena_free_run(struct root *r, uint64_t s, uint64_t n, bool dirty)
{
	struct {
		uint64_t s, n;
	} piece[3]; /* dirty parts of the merged run */
	int npieces = 0;
	const struct pent *pe;

	*arena_pent(s) = PENT_ZERO;
	*arena_pent(s + n - 1) = PENT_ZERO;
	if (dirty)
		piece[npieces].s = s, piece[npieces++].n = n;
	pe = arena_pent_peek(s - 1);
	if (pe->kind == PK_FREE) {
		uint64_t ps = s - pe->npages;
		struct pent *ph = arena_pent(ps);

		if (ph->flags & PF_DIRTY)
			piece[npieces].s = ps, piece[npieces++].n = ph->npages;
		n += ph->npages;
		bin_remove(r, ps);
		*arena_pent(s - 1) = PENT_ZERO;
		*ph = PENT_ZERO;
		s = ps;
	}
	if (s + n != r->top) {
		pe = arena_pent_peek(s + n);
		if (pe->kind == PK_FREE) {
			uint64_t ns = s + n, nn = pe->npages;

			if (pe->flags & PF_DIRTY)
				piece[npieces].s = ns, piece[npieces++].n = nn;
			bin_remove(r, ns);
			*arena_pent(ns + nn - 1) = PENT_ZERO;
			*arena_pent(ns) = PENT_ZERO;
			n += nn;
		}
	}
	dirty = npieces > 0;
	if (s + n == r->top) {
		/* Back to the bump space, which must read as zero above dirty_end. */
		r->top = s;
		if (dirty && r->dirty_end < s + n)
			r->dirty_end = s + n;
		else if (!dirty && r->dirty_end <= s + n)
			r->dirty_end = s;
		if (r->dirty_end >= r->top + 2 * (uint64_t)r->keep) {
			uint64_t slack = r->dirty_end - r->top;

			arena_discard(r->top, slack);
			r->dirty_end = r->top;
			if (slack <= 2 * KEEP_MAX) /* keep as much next time */
				r->keep = slack / 2 + 1;
		}
		return;
	}
	if (dirty && !keep_dirty(r, n)) {
		for (int i = 0; i < npieces; i++)
			arena_discard(piece[i].s, piece[i].n);
		dirty = false;
	}
	put_free(r, s, n, dirty);
}

/* Carves n pages from the bump space, the first one aligned to `align`
 * pages; the alignment gap becomes a free run. Page-map leaves for every
 * region the run touches are carved first. Returns the start or 0. */
static uint64_t take_top(struct root *r, uint64_t n, uint64_t align, uint64_t *dirty)
{
	for (;;) {
		uint64_t t = r->top, s = (t + align - 1) & ~(align - 1), e = s + n, reg;

		if (e > NPAGES)
			return 0;
		for (reg = t >> REG_SHIFT; reg <= (e - 1) >> REG_SHIFT; reg++)
			if (!r->dir[reg])
				break;
		if (reg <= (e - 1) >> REG_SHIFT) {
			if (t + LEAF_PAGES > NPAGES || arena_commit(r, t + LEAF_PAGES))
				return 0;
			if (t < r->dirty_end)
				memset(page_addr(t), 0, LEAF_PAGES * PAGE);
			r->dir[reg] = (struct pent *)page_addr(t);
			r->top = t + LEAF_PAGES;
			continue;
		}
		if (arena_commit(r, e))
			return 0;
		r->top = e;
		*dirty = s < r->dirty_end ? (e < r->dirty_end ? e : r->dirty_end) - s : 0;
		if (s > t) /* its next neighbour, [s, e), has zero entries: no merge */
			arena_free_run(r, t, s - t, t < r->dirty_end);
		return s;
	}
}

/* A run of n pages starting at a multiple of `align` pages, marked `kind`.
 * Its first *dirty pages may hold old bytes, the others are zero: a run
 * from the bump space is dirty only below dirty_end, which may lie up to
 * 64 MiB above top (calloc of a big block must not write all of it). */
uint64_t arena_alloc_run(struct root *r, uint64_t n, uint64_t align, uint8_t kind, uint64_t *dirty)
{
	uint64_t s = bin_find(r, n + align - 1);

	if (s) {
		struct pent *h = arena_pent(s);
		uint64_t len = h->npages, as = (s + align - 1) & ~(align - 1);
		bool d = h->flags & PF_DIRTY;

		bin_remove(r, s);
		*arena_pent(s + len - 1) = PENT_ZERO;
		*h = PENT_ZERO;
		if (as > s)
			put_free(r, s, as - s, d);
		if (as + n < s + len)
			put_free(r, as + n, s + len - as - n, d);
		s = as;
		*dirty = d ? n : 0;
	} else {
		s = take_top(r, n, align, dirty);
		if (!s)
			return 0;
	}
	arena_set_run(s, n, kind, 0);
	return s;
}

/* Grows or shrinks the large block at page s (n pages) to m pages in place:
 * into a free run that follows it, or into the bump space when it ends at
 * top; a shrink frees the tail. Returns false when it must move. */
bool arena_large_resize(struct root *r, uint64_t s, uint64_t n, uint64_t m)
{
	const struct pent *ne;

	if (m <= n) {
		if (m < n) {
			arena_set_run(s, m, PK_LARGE, 0);
			arena_free_run(r, s + m, n - m, true);
		}
		return true;
	}
	if (s + n == r->top) {
		for (uint64_t reg = s >> REG_SHIFT; reg <= (s + m - 1) >> REG_SHIFT; reg++)
			if (reg >= NREGIONS || !r->dir[reg])
				return false;
		if (s + m > NPAGES || arena_commit(r, s + m))
			return false;
		r->top = s + m;
	} else {
		ne = arena_pent_peek(s + n);
		if (ne->kind != PK_FREE || n + ne->npages < m)
			return false;
		uint64_t len = ne->npages;
		bool d = ne->flags & PF_DIRTY;

		bin_remove(r, s + n);
		*arena_pent(s + n + len - 1) = PENT_ZERO;
		*arena_pent(s + n) = PENT_ZERO;
		if (n + len > m)
			put_free(r, s + m, n + len - m, d);
	}
	if (n > 1)
		*arena_pent(s + n - 1) = PENT_ZERO;
	arena_set_run(s, m, PK_LARGE, 0);
	return true;
}

/* The first page of the run holding page q, or 0 for allocator metadata. */
uint64_t arena_run_head(uint64_t q)
{
	const struct pent *e = arena_pent_peek(q);

	if (e->kind == PK_SLAB)
		return q - e->next;
	if (e->kind)
		return (e->flags & PF_HEAD) ? q : q - e->npages + 1;
	while (--q >= ROOT_PAGES) {
		e = arena_pent_peek(q);
		if (e->kind)
			return e->kind != PK_SLAB && (e->flags & PF_HEAD) ? q : 0;
	}
	return 0;
}
