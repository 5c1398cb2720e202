/* Size classes and slabs of the application arena (layout in arena_int.h):
 * small blocks (<= SMALL_MAX) are cut from slabs of one class, a slab with
 * free blocks sits on its class's partial list, and an empty slab is given
 * back as a free run (keeping at most one empty slab per class). */
#include <errno.h>
#include <string.h>

#include "arena_int.h"

static size_t slab_hdr_size(uint32_t nblocks)
{
	return (sizeof(struct slab) + 8 * ((nblocks + 63) / 64) + 15) & ~(size_t)15;
}

/* Chooses the slab length of each class: the first page count holding at
 * least 8 blocks with at most 1/16 of the run lost to the header and the
 * tail, else the least wasteful length up to 128 pages. */
void arena_init_classes(struct root *r)
{
	for (unsigned c = 0; c < NCLASSES; c++) {
		size_t size = class_size(c), best_waste = SIZE_MAX;
		struct sclass *sc = &r->cls[c];

		for (uint32_t p = 1; p <= 128; p++) {
			size_t bytes = p * PAGE, nb = bytes / size, waste;

			while (nb && nb * size + slab_hdr_size(nb) > bytes)
				nb--;
			if (!nb)
				continue;
			waste = bytes - nb * size;
			if (waste * 128 / bytes < best_waste) {
				best_waste = waste * 128 / bytes;
				*sc = (struct sclass){.size = size, .nblocks = nb, .pages = p};
			}
			if (nb >= 8 && waste * 16 <= bytes)
				break;
		}
		sc->hdr_off = sc->pages * PAGE - slab_hdr_size(sc->nblocks);
		/* idx = off * magic >> 32 is exact for off = idx * size, off < 2^19. */
		sc->magic = (uint32_t)((((uint64_t)1 << 32) + size - 1) / size);
	}
}

static struct slab *new_slab(struct root *r, unsigned c)
{
	const struct sclass *sc = &r->cls[c];
	struct slab *sl;
	uint64_t dirty, s = arena_alloc_run(r, sc->pages, 1, PK_SLAB, &dirty);

	if (!s)
		return NULL;
	for (uint32_t i = 0; i < sc->pages; i++)
		*arena_pent(s + i) = (struct pent){.kind = PK_SLAB,
						   .flags = i ? 0 : PF_HEAD,
						   .cls = c,
						   .npages = sc->pages,
						   .next = i};
	sl = (struct slab *)(page_addr(s) + sc->hdr_off);
	memset(sl, 0, sc->pages * PAGE - sc->hdr_off);
	sl->start = page_addr(s);
	sl->nfree = sc->nblocks;
	sl->cls = c;
	sl->next = r->partial[c];
	if (sl->next)
		sl->next->prev = sl;
	r->partial[c] = sl;
	return sl;
}

static void partial_remove(struct root *r, struct slab *sl)
{
	if (sl->prev)
		sl->prev->next = sl->next;
	else
		r->partial[sl->cls] = sl->next;
	if (sl->next)
		sl->next->prev = sl->prev;
	sl->next = sl->prev = NULL;
}

static void release_slab(struct root *r, struct slab *sl)
{
	uint64_t s = (uint64_t)(sl->start - BASE) >> PAGE_SHIFT, n = r->cls[sl->cls].pages;

	partial_remove(r, sl);
	for (uint64_t i = 0; i < n; i++)
		*arena_pent(s + i) = PENT_ZERO;
	arena_free_run(r, s, n, true);
}

void *arena_small_alloc(unsigned c)
{
	struct root *r = R;
	struct slab *sl;
	uint32_t idx;
	void *p;

	arena_lock(r);
	sl = r->partial[c];
	if (unlikely(!sl) && !(sl = new_slab(r, c))) {
		arena_unlock(r);
		errno = ENOMEM;
		return NULL;
	}
	if (sl->free) {
		p = sl->free;
		sl->free = *(void **)p;
		idx = (uint32_t)(((uint64_t)((char *)p - sl->start) * r->cls[c].magic) >> 32);
	} else {
		idx = sl->bump++;
		p = sl->start + (size_t)idx * r->cls[c].size;
	}
	sl->bits[idx / 64] |= 1ULL << (idx % 64);
	if (--sl->nfree == 0) {
		r->partial[c] = sl->next;
		if (sl->next)
			sl->next->prev = NULL;
		sl->next = NULL;
	}
	arena_unlock(r);
	return p;
}

/* Frees block idx (at p) of slab sl, under the lock: a slab that was full
 * goes back to the head of its partial list, an empty one back to the
 * runs. */
void arena_small_free(struct root *r, struct slab *sl, uint32_t idx, void *p)
{
	unsigned c = sl->cls;

	sl->bits[idx / 64] &= ~(1ULL << (idx % 64));
	*(void **)p = sl->free;
	sl->free = p;
	if (sl->nfree++ == 0) {
		struct slab *h = r->partial[c];

		/* Keep at most one empty slab per class, at the head. */
		if (h && h->nfree == r->cls[c].nblocks)
			release_slab(r, h);
		sl->prev = NULL;
		sl->next = r->partial[c];
		if (sl->next)
			sl->next->prev = sl;
		r->partial[c] = sl;
	} else if (sl->nfree == r->cls[c].nblocks && r->partial[c] != sl) {
		release_slab(r, sl);
	}
}
