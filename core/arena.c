/* The application arena: a segregated-fit allocator whose whole state lives
 * inside the reserved range (DESIGN.md section 2, "The application heap").
 *
 * Layout of the range, in 4 KiB pages numbered from STASIS_ARENA_BASE:
 *
 *   [0, ROOT_PAGES)   struct root: lock, committed length, bump pointer, free
 *                     run bins, size-class table, partial slab lists, and the
 *                     directory of page-map leaves.
 *   [ROOT_PAGES, top) runs of pages and page-map leaves, in any order.
 *   [top, NPAGES)     never handed out (bump space).
 *
 * The page map has one 16-byte entry (struct pent) per page, in leaves of
 * REG_PAGES entries; a leaf is carved from the bump space when the first run
 * reaching its region is made. Every run (free, large block, slab, mapping)
 * has its kind and length in the entries of its first and last page; the
 * entries of interior pages are zero, so that a pointer into the middle of a
 * block is recognised as invalid, except in slabs, where every page entry
 * holds the class and the distance to the slab's first page (free() of a
 * small block must find the slab header from any page of the slab).
 *
 * Small blocks (<= SMALL_MAX) come from slabs: a run of pages cut into blocks
 * of one size class, with a header at the END of the run (so that blocks
 * start at the page-aligned run start, which gives memalign() aligned blocks
 * for free) holding a free list threaded through the free blocks, a bump
 * index for blocks never used, and one bit per block (set = allocated) that
 * catches double frees. Large blocks are whole runs, found in bins of free
 * runs by size (good fit) or carved from the bump space; freed runs coalesce
 * with free neighbours and merge back into the bump space when they end at
 * top. Nothing points outside the arena: restoring its bytes restores it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define LOG_PREFIX "arena: "
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arena.h"
#include "log.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define PAGE_SHIFT 12
#define PAGE ((size_t)1 << PAGE_SHIFT)
#define NPAGES ((uint64_t)(STASIS_ARENA_SIZE >> PAGE_SHIFT))
#define COMMIT_STEP ((size_t)2 << 20)
#define REG_SHIFT 15 /* one page-map leaf per 128 MiB region */
#define REG_PAGES ((uint32_t)1 << REG_SHIFT)
#define NREGIONS (NPAGES >> REG_SHIFT)
#define LEAF_PAGES (REG_PAGES * sizeof(struct pent) / PAGE)
#define SMALL_MAX 32768
#define NCLASSES 40
#define NBINS 128
#define RELEASE_PAGES 32 /* freed runs this long (128 KiB) are given back with madvise */
#define TOP_SLACK 64	 /* dirty bump space tolerated before madvise */
#define ARENA_MAGIC 0x53544153494e4131ULL
#define BASE ((char *)STASIS_ARENA_BASE)
#define R ((struct root *)STASIS_ARENA_BASE)

enum { PK_NONE, PK_FREE, PK_LARGE, PK_SLAB, PK_MAP };
enum { PF_HEAD = 1, PF_TAIL = 2, PF_DIRTY = 4 };

struct pent {
	uint8_t kind;
	uint8_t flags;
	uint16_t cls;	 /* PK_SLAB: size class */
	uint32_t npages; /* run length (head and tail entries; every slab page) */
	uint32_t next;	 /* PK_FREE head: next run in its bin; PK_SLAB: page offset in slab */
	uint32_t prev;	 /* PK_FREE head: previous run in its bin */
};

struct sclass {
	uint32_t size, magic, nblocks, hdr_off, pages;
};

struct slab {
	struct slab *next, *prev; /* partial list of the class (slabs with nfree > 0) */
	void *free;		  /* free blocks, linked through their first word */
	char *start;
	uint32_t bump, nfree; /* blocks [bump, nblocks) were never handed out */
	uint32_t cls, pad;
	uint64_t bits[]; /* bit set = block allocated */
};

struct root {
	uint64_t magic;
	atomic_uint lock;
	uint32_t top;	    /* first page of the bump space */
	uint32_t dirty_end; /* pages in [top, dirty_end) may hold old bytes */
	uint32_t pad;
	size_t committed; /* [BASE, BASE + committed) is read-write */
	uint64_t binmap[NBINS / 64];
	uint32_t bins[NBINS]; /* first page of the first free run, 0 = empty */
	struct sclass cls[NCLASSES];
	struct slab *partial[NCLASSES];
	struct pent *dir[NREGIONS];
};

#define ROOT_PAGES ((sizeof(struct root) + PAGE - 1) / PAGE)

/* The only state outside the arena: whether this process reserved it
 * (0 no, 1 being initialised, 2 ready), and a hook that is not restored. */
static atomic_int arena_state;
static arena_discard_fn discard_hook;

static const struct pent PENT_ZERO;

static inline char *page_addr(uint64_t pg)
{
	return BASE + (pg << PAGE_SHIFT);
}

static inline struct pent *ent(uint64_t pg)
{
	return &R->dir[pg >> REG_SHIFT][pg & (REG_PAGES - 1)];
}

/* The entry of a page that may be allocator metadata: a leaf can lie in a
 * region that has no leaf of its own yet (it was carved just before the
 * run that needed it, and that run failed). Such pages read as zero. */
static inline const struct pent *peek(uint64_t pg)
{
	const struct pent *leaf = R->dir[pg >> REG_SHIFT];

	return likely(leaf) ? &leaf[pg & (REG_PAGES - 1)] : &PENT_ZERO;
}

static inline bool ready(void)
{
	return likely(atomic_load_explicit(&arena_state, memory_order_acquire) == 2);
}

static inline void lock(struct root *r)
{
	unsigned spins = 0;

	while (atomic_exchange_explicit(&r->lock, 1, memory_order_acquire)) {
		while (atomic_load_explicit(&r->lock, memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
			/* The holder may have been preempted: let it run. */
			if (++spins % 1024 == 0)
				sched_yield();
		}
	}
}

static inline void unlock(struct root *r)
{
	atomic_store_explicit(&r->lock, 0, memory_order_release);
}

/* Size classes: 16..128 in steps of 16, then four per power of two up to
 * 32 KiB (waste below 25%). Every size is a multiple of 16. */
static inline unsigned size_class(size_t size)
{
	unsigned k;

	if (size <= 128)
		return size ? (unsigned)(size - 1) >> 4 : 0;
	k = 63 - __builtin_clzll(size - 1);
	return 8 + (k - 7) * 4 + (((size - 1) >> (k - 2)) & 3);
}

static inline size_t class_size(unsigned c)
{
	unsigned k = 7 + (c - 8) / 4;

	if (c < 8)
		return 16 * (c + 1);
	return ((size_t)1 << k) + (((c - 8) % 4 + 1) << (k - 2));
}

static size_t slab_hdr_size(uint32_t nblocks)
{
	return (sizeof(struct slab) + 8 * ((nblocks + 63) / 64) + 15) & ~(size_t)15;
}

/* Chooses the slab length of each class: the first page count holding at
 * least 8 blocks with at most 1/16 of the run lost to the header and the
 * tail, else the least wasteful length up to 128 pages. */
static void init_classes(struct root *r)
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

static void discard(uint64_t pg, uint64_t n)
{
	int saved = errno;

	if (madvise(page_addr(pg), n << PAGE_SHIFT, MADV_DONTNEED))
		pr_debug("madvise(%p, %zu): %d", (void *)page_addr(pg), n << PAGE_SHIFT, errno);
	if (discard_hook)
		discard_hook((uintptr_t)page_addr(pg), n << PAGE_SHIFT);
	errno = saved;
}

/* Makes [BASE, page end_pg) read-write, in COMMIT_STEP steps. */
static int commit(struct root *r, uint64_t end_pg)
{
	size_t need = end_pg << PAGE_SHIFT, len;

	if (need <= r->committed)
		return 0;
	len = (need + COMMIT_STEP - 1) & ~(COMMIT_STEP - 1);
	if (len > STASIS_ARENA_SIZE)
		len = STASIS_ARENA_SIZE;
	if (mprotect(BASE + r->committed, len - r->committed, PROT_READ | PROT_WRITE))
		return -ENOMEM;
	r->committed = len;
	return 0;
}

static unsigned bin_of(uint64_t n)
{
	unsigned k;

	if (n <= 16)
		return n - 1;
	k = 63 - __builtin_clzll(n);
	return 16 + (k - 4) * 4 + ((n >> (k - 2)) & 3);
}

static void bin_insert(struct root *r, uint32_t s)
{
	struct pent *e = ent(s);
	unsigned b = bin_of(e->npages);

	e->next = r->bins[b];
	e->prev = 0;
	if (e->next)
		ent(e->next)->prev = s;
	r->bins[b] = s;
	r->binmap[b / 64] |= 1ULL << (b % 64);
}

static void bin_remove(struct root *r, uint32_t s)
{
	struct pent *e = ent(s);
	unsigned b = bin_of(e->npages);

	if (e->prev)
		ent(e->prev)->next = e->next;
	else
		r->bins[b] = e->next;
	if (e->next)
		ent(e->next)->prev = e->prev;
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
	for (uint32_t s = r->bins[b]; s && budget--; s = ent(s)->next)
		if (ent(s)->npages >= need)
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

static void set_run(uint64_t s, uint64_t n, uint8_t kind, uint8_t flags)
{
	*ent(s) = (struct pent){.kind = kind, .flags = PF_HEAD | flags, .npages = n};
	if (n > 1)
		*ent(s + n - 1) =
		    (struct pent){.kind = kind, .flags = PF_TAIL | flags, .npages = n};
}

/* Records [s, s + n) as a free run without coalescing: for pieces split off
 * a free run, whose neighbours are known not to be free. */
static void put_free(struct root *r, uint64_t s, uint64_t n, bool dirty)
{
	set_run(s, n, PK_FREE, dirty ? PF_DIRTY : 0);
	bin_insert(r, s);
}

/* Frees the run [s, s + n), whose head and tail entries may still describe
 * it (interior entries must be zero): gives a long dirty run back to the
 * kernel, coalesces it with free neighbours, and merges it into the bump
 * space when it ends at top. Invariants kept: no two free runs are adjacent,
 * no free run ends at top, a dirty free run is shorter than RELEASE_PAGES. */
static void free_run(struct root *r, uint64_t s, uint64_t n, bool dirty)
{
	struct {
		uint64_t s, n;
	} piece[3]; /* dirty parts of the merged run, each shorter than RELEASE_PAGES */
	int npieces = 0;
	const struct pent *pe;

	*ent(s) = PENT_ZERO;
	*ent(s + n - 1) = PENT_ZERO;
	if (dirty && n >= RELEASE_PAGES)
		discard(s, n);
	else if (dirty)
		piece[npieces].s = s, piece[npieces++].n = n;
	pe = peek(s - 1);
	if (pe->kind == PK_FREE) {
		uint64_t ps = s - pe->npages;
		struct pent *ph = ent(ps);

		if (ph->flags & PF_DIRTY)
			piece[npieces].s = ps, piece[npieces++].n = ph->npages;
		n += ph->npages;
		bin_remove(r, ps);
		*ent(s - 1) = PENT_ZERO;
		*ph = PENT_ZERO;
		s = ps;
	}
	if (s + n != r->top) {
		pe = peek(s + n);
		if (pe->kind == PK_FREE) {
			uint64_t ns = s + n, nn = pe->npages;

			if (pe->flags & PF_DIRTY)
				piece[npieces].s = ns, piece[npieces++].n = nn;
			bin_remove(r, ns);
			*ent(ns + nn - 1) = PENT_ZERO;
			*ent(ns) = PENT_ZERO;
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
		if (r->dirty_end >= r->top + TOP_SLACK) {
			discard(r->top, r->dirty_end - r->top);
			r->dirty_end = r->top;
		}
		return;
	}
	if (dirty && n >= RELEASE_PAGES) {
		for (int i = 0; i < npieces; i++)
			discard(piece[i].s, piece[i].n);
		dirty = false;
	}
	put_free(r, s, n, dirty);
}

/* Carves n pages from the bump space, the first one aligned to `align`
 * pages; the alignment gap becomes a free run. Page-map leaves for every
 * region the run touches are carved first. Returns the start or 0. */
static uint64_t take_top(struct root *r, uint64_t n, uint64_t align, bool *dirty)
{
	for (;;) {
		uint64_t t = r->top, s = (t + align - 1) & ~(align - 1), e = s + n, reg;

		if (e > NPAGES)
			return 0;
		for (reg = t >> REG_SHIFT; reg <= (e - 1) >> REG_SHIFT; reg++)
			if (!r->dir[reg])
				break;
		if (reg <= (e - 1) >> REG_SHIFT) {
			if (t + LEAF_PAGES > NPAGES || commit(r, t + LEAF_PAGES))
				return 0;
			if (t < r->dirty_end)
				memset(page_addr(t), 0, LEAF_PAGES * PAGE);
			r->dir[reg] = (struct pent *)page_addr(t);
			r->top = t + LEAF_PAGES;
			continue;
		}
		if (commit(r, e))
			return 0;
		r->top = e;
		*dirty = s < r->dirty_end;
		if (s > t) /* its next neighbour, [s, e), has zero entries: no merge */
			free_run(r, t, s - t, t < r->dirty_end);
		return s;
	}
}

/* A run of n pages starting at a multiple of `align` pages, marked `kind`.
 * *dirty tells whether its pages may hold old bytes (else they are zero). */
static uint64_t alloc_run(struct root *r, uint64_t n, uint64_t align, uint8_t kind, bool *dirty)
{
	uint64_t s = bin_find(r, n + align - 1);

	if (s) {
		struct pent *h = ent(s);
		uint64_t len = h->npages, as = (s + align - 1) & ~(align - 1);
		bool d = h->flags & PF_DIRTY;

		bin_remove(r, s);
		*ent(s + len - 1) = PENT_ZERO;
		*h = PENT_ZERO;
		if (as > s)
			put_free(r, s, as - s, d);
		if (as + n < s + len)
			put_free(r, as + n, s + len - as - n, d);
		s = as;
		*dirty = d;
	} else {
		s = take_top(r, n, align, dirty);
		if (!s)
			return 0;
	}
	set_run(s, n, kind, 0);
	return s;
}

static int do_init(void)
{
	struct root *r = R;
	void *p;

	if (sysconf(_SC_PAGESIZE) != (long)PAGE)
		return -ENOTSUP;
	/* The raw system call: the preload layer interposes mmap() itself. */
	p = (void *)syscall(SYS_mmap, BASE, STASIS_ARENA_SIZE, PROT_NONE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1,
			    0);
	if (p == MAP_FAILED)
		return -errno;
	if (p != BASE) { /* a kernel older than 4.17 took the flag as a hint */
		syscall(SYS_munmap, p, STASIS_ARENA_SIZE);
		return -EEXIST;
	}
	if (mprotect(BASE, COMMIT_STEP, PROT_READ | PROT_WRITE)) {
		int err = -errno;

		syscall(SYS_munmap, p, STASIS_ARENA_SIZE);
		return err;
	}
	r->committed = COMMIT_STEP;
	init_classes(r);
	/* Leaf 0 right after the root; both fit in the first commit step. */
	r->dir[0] = (struct pent *)page_addr(ROOT_PAGES);
	r->top = r->dirty_end = ROOT_PAGES + LEAF_PAGES;
	r->magic = ARENA_MAGIC;
	pr_debug("reserved %zu GiB at %p", STASIS_ARENA_SIZE >> 30, (void *)BASE);
	return 0;
}

int arena_init(void)
{
	int st = 0, err;

	while (!atomic_compare_exchange_weak(&arena_state, &st, 1)) {
		if (st == 2)
			return 0;
		st = 0;
		sched_yield();
	}
	err = do_init();
	atomic_store_explicit(&arena_state, err ? 0 : 2, memory_order_release);
	if (err)
		pr_err("cannot reserve the arena at %p: %s", (void *)BASE, strerror(-err));
	return err;
}

bool arena_ready(void)
{
	return ready();
}

static struct slab *new_slab(struct root *r, unsigned c)
{
	const struct sclass *sc = &r->cls[c];
	struct slab *sl;
	bool dirty;
	uint64_t s = alloc_run(r, sc->pages, 1, PK_SLAB, &dirty);

	if (!s)
		return NULL;
	for (uint32_t i = 0; i < sc->pages; i++)
		*ent(s + i) = (struct pent){.kind = PK_SLAB,
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
		*ent(s + i) = PENT_ZERO;
	free_run(r, s, n, true);
}

static void *small_alloc(unsigned c)
{
	struct root *r = R;
	struct slab *sl;
	uint32_t idx;
	void *p;

	lock(r);
	sl = r->partial[c];
	if (unlikely(!sl) && !(sl = new_slab(r, c))) {
		unlock(r);
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
	unlock(r);
	return p;
}

/* Large blocks are whole runs: size rounded up to pages, no header. */
static void *large_alloc(size_t size, size_t align, bool zero)
{
	struct root *r = R;
	uint64_t s;
	bool dirty;

	if (size > STASIS_ARENA_SIZE || align > STASIS_ARENA_SIZE / 2) {
		errno = ENOMEM;
		return NULL;
	}
	if (!size) /* memalign(big, 0) */
		size = 1;
	lock(r);
	s = alloc_run(r, (size + PAGE - 1) >> PAGE_SHIFT, align > PAGE ? align >> PAGE_SHIFT : 1,
		      PK_LARGE, &dirty);
	unlock(r);
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	if (zero && dirty)
		memset(page_addr(s), 0, size);
	return page_addr(s);
}

void *arena_malloc(size_t size)
{
	if (unlikely(!ready()) && arena_init()) {
		errno = ENOMEM;
		return NULL;
	}
	if (likely(size <= SMALL_MAX))
		return small_alloc(size_class(size));
	return large_alloc(size, PAGE, false);
}

void *arena_calloc(size_t nmemb, size_t size)
{
	size_t total;
	void *p;

	if (__builtin_mul_overflow(nmemb, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	if (unlikely(!ready()) && arena_init()) {
		errno = ENOMEM;
		return NULL;
	}
	if (total > SMALL_MAX)
		return large_alloc(total, PAGE, true);
	p = small_alloc(size_class(total));
	if (p)
		memset(p, 0, total);
	return p;
}

/* A power-of-two alignment (others are rounded up, as glibc's memalign
 * does) up to half the arena. Alignments up to a page are served by the
 * first size class that is a multiple of the alignment (blocks start at
 * page-aligned slab starts), larger ones by an aligned run. */
void *arena_memalign(size_t alignment, size_t size)
{
	if (alignment <= 16)
		return arena_malloc(size);
	if (alignment & (alignment - 1)) {
		if (alignment > SIZE_MAX / 2) {
			errno = EINVAL;
			return NULL;
		}
		alignment = (size_t)1 << (64 - __builtin_clzll(alignment));
	}
	if (unlikely(!ready()) && arena_init()) {
		errno = ENOMEM;
		return NULL;
	}
	if (size <= SMALL_MAX && alignment <= PAGE) {
		for (unsigned c = size_class(size); c < NCLASSES; c++)
			if (!(class_size(c) & (alignment - 1)))
				return small_alloc(c);
	}
	return large_alloc(size, alignment, false);
}

struct blk {
	uint8_t kind; /* PK_SLAB or PK_LARGE; PK_NONE when invalid */
	uint64_t pg;  /* first page of the slab or run */
	struct slab *sl;
	uint32_t idx;
	size_t size; /* usable size */
};

/* Finds the live block that starts at p. On failure b->kind is PK_NONE and
 * the return value says why, for a message printed after unlocking. */
static const char *lookup(struct root *r, const void *p, struct blk *b)
{
	uint64_t pg = (uint64_t)((const char *)p - BASE) >> PAGE_SHIFT, off;
	const struct pent *e;

	b->kind = PK_NONE;
	if (!arena_contains(p) || pg >= r->top)
		return "pointer outside the heap";
	e = peek(pg);
	if (likely(e->kind == PK_SLAB)) {
		const struct sclass *sc = &r->cls[e->cls];

		b->pg = pg - e->next;
		off = (uint64_t)((const char *)p - page_addr(b->pg));
		b->idx = (uint32_t)((off * sc->magic) >> 32);
		if (b->idx >= sc->nblocks || (uint64_t)b->idx * sc->size != off)
			return "pointer into the middle of a small block";
		b->sl = (struct slab *)(page_addr(b->pg) + sc->hdr_off);
		if (!(b->sl->bits[b->idx / 64] & (1ULL << (b->idx % 64))))
			return "double free (small block not allocated)";
		b->size = sc->size;
		b->kind = PK_SLAB;
		return NULL;
	}
	if (((uintptr_t)p & (PAGE - 1)) || !(e->flags & PF_HEAD) || e->kind != PK_LARGE) {
		if (e->kind == PK_FREE && (e->flags & PF_HEAD) && !((uintptr_t)p & (PAGE - 1)))
			return "double free (large block not allocated)";
		if (e->kind == PK_MAP)
			return "pointer to an mmap()ed region";
		return "pointer that is not a heap block";
	}
	b->pg = pg;
	b->size = (size_t)e->npages << PAGE_SHIFT;
	b->kind = PK_LARGE;
	return NULL;
}

static void free_locked(struct root *r, void *p, struct blk *b)
{
	if (b->kind == PK_SLAB) {
		struct slab *sl = b->sl;
		unsigned c = sl->cls;

		sl->bits[b->idx / 64] &= ~(1ULL << (b->idx % 64));
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
		return;
	}
	free_run(r, b->pg, b->size >> PAGE_SHIFT, true);
}

void arena_free(void *ptr)
{
	struct root *r = R;
	const char *why;
	struct blk b;

	if (!ptr)
		return;
	if (!ready()) {
		pr_err("free(%p) before the arena exists", ptr);
		return;
	}
	lock(r);
	why = lookup(r, ptr, &b);
	if (likely(!why))
		free_locked(r, ptr, &b);
	unlock(r);
	if (why)
		pr_err("free(%p): %s, ignored", ptr, why);
}

size_t arena_usable_size(const void *ptr)
{
	struct root *r = R;
	struct blk b;

	if (!ptr || !ready())
		return 0;
	lock(r);
	if (lookup(r, ptr, &b))
		b.size = 0;
	unlock(r);
	return b.size;
}

/* Grows or shrinks the large block at page s (n pages) to m pages in place:
 * into a free run that follows it, or into the bump space when it ends at
 * top; a shrink frees the tail. Returns false when it must move. */
static bool large_resize(struct root *r, uint64_t s, uint64_t n, uint64_t m)
{
	const struct pent *ne;

	if (m <= n) {
		if (m < n) {
			set_run(s, m, PK_LARGE, 0);
			free_run(r, s + m, n - m, true);
		}
		return true;
	}
	if (s + n == r->top) {
		for (uint64_t reg = s >> REG_SHIFT; reg <= (s + m - 1) >> REG_SHIFT; reg++)
			if (reg >= NREGIONS || !r->dir[reg])
				return false;
		if (s + m > NPAGES || commit(r, s + m))
			return false;
		r->top = s + m;
	} else {
		ne = peek(s + n);
		if (ne->kind != PK_FREE || n + ne->npages < m)
			return false;
		uint64_t len = ne->npages;
		bool d = ne->flags & PF_DIRTY;

		bin_remove(r, s + n);
		*ent(s + n + len - 1) = PENT_ZERO;
		*ent(s + n) = PENT_ZERO;
		if (n + len > m)
			put_free(r, s + m, n + len - m, d);
	}
	if (n > 1)
		*ent(s + n - 1) = PENT_ZERO;
	set_run(s, m, PK_LARGE, 0);
	return true;
}

/* realloc(NULL, n) is malloc(n); realloc(p, 0) frees p and returns NULL
 * (glibc). A small block stays when the new size fits its class and uses at
 * least half of it; a large one is resized in place when possible, else the
 * block moves. An invalid p is reported and gives NULL + EINVAL. */
void *arena_realloc(void *ptr, size_t size)
{
	struct root *r = R;
	const char *why;
	struct blk b;
	void *q;

	if (!ptr)
		return arena_malloc(size);
	if (!size) {
		arena_free(ptr);
		return NULL;
	}
	if (!ready()) {
		errno = EINVAL;
		return NULL;
	}
	lock(r);
	why = lookup(r, ptr, &b);
	if (why) {
		unlock(r);
		pr_err("realloc(%p): %s", ptr, why);
		errno = EINVAL;
		return NULL;
	}
	if (b.kind == PK_SLAB && size <= b.size && (size > b.size / 2 || b.size == 16)) {
		unlock(r);
		return ptr;
	}
	if (b.kind == PK_LARGE && size > SMALL_MAX && size <= STASIS_ARENA_SIZE &&
	    large_resize(r, b.pg, b.size >> PAGE_SHIFT, (size + PAGE - 1) >> PAGE_SHIFT)) {
		unlock(r);
		return ptr;
	}
	unlock(r);
	q = arena_malloc(size);
	if (!q)
		return NULL;
	memcpy(q, ptr, size < b.size ? size : b.size);
	arena_free(ptr);
	return q;
}

void *arena_map(size_t length)
{
	struct root *r = R;
	uint64_t n = (length + PAGE - 1) >> PAGE_SHIFT, s;
	bool dirty;

	if (!length || length > STASIS_ARENA_SIZE) {
		errno = length ? ENOMEM : EINVAL;
		return NULL;
	}
	if (unlikely(!ready()) && arena_init()) {
		errno = ENOMEM;
		return NULL;
	}
	lock(r);
	s = alloc_run(r, n, 1, PK_MAP, &dirty);
	unlock(r);
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	if (dirty && n >= RELEASE_PAGES)
		discard(s, n);
	else if (dirty)
		memset(page_addr(s), 0, n << PAGE_SHIFT);
	return page_addr(s);
}

/* The first page of the run holding page q, or 0 for allocator metadata. */
static uint64_t run_head(uint64_t q)
{
	const struct pent *e = peek(q);

	if (e->kind == PK_SLAB)
		return q - e->next;
	if (e->kind)
		return (e->flags & PF_HEAD) ? q : q - e->npages + 1;
	while (--q >= ROOT_PAGES) {
		e = peek(q);
		if (e->kind)
			return e->kind != PK_SLAB && (e->flags & PF_HEAD) ? q : 0;
	}
	return 0;
}

/* munmap() of arena pages: any page range; the parts that are arena_map()
 * mappings are freed (a mapping cut in the middle leaves two mappings),
 * free space is ignored like munmap() ignores unmapped pages, and pages of
 * heap blocks or metadata are left alone and give -EINVAL. Freed pages get
 * PROT_READ|PROT_WRITE back (the application may have changed it). */
int arena_unmap(void *addr, size_t length)
{
	struct root *r = R;
	uint64_t q = (uint64_t)((char *)addr - BASE) >> PAGE_SHIFT, end;
	int err = 0;

	if (((uintptr_t)addr & (PAGE - 1)) || !length || !arena_contains(addr) ||
	    length > STASIS_ARENA_SIZE - ((char *)addr - BASE) || !ready())
		return -EINVAL;
	end = q + ((length + PAGE - 1) >> PAGE_SHIFT);
	lock(r);
	while (q < end && q < r->top) {
		uint64_t h = run_head(q), rend, cs, ce;

		if (!h) {
			err = -EINVAL;
			q++;
			continue;
		}
		rend = h + ent(h)->npages;
		if (ent(h)->kind != PK_MAP) {
			if (ent(h)->kind != PK_FREE)
				err = -EINVAL;
			q = rend;
			continue;
		}
		cs = q > h ? q : h;
		ce = end < rend ? end : rend;
		*ent(h) = PENT_ZERO;
		*ent(rend - 1) = PENT_ZERO;
		if (h < cs)
			set_run(h, cs - h, PK_MAP, 0);
		if (ce < rend)
			set_run(ce, rend - ce, PK_MAP, 0);
		mprotect(page_addr(cs), (ce - cs) << PAGE_SHIFT, PROT_READ | PROT_WRITE);
		discard(cs, ce - cs);
		free_run(r, cs, ce - cs, false);
		q = ce;
	}
	unlock(r);
	if (err)
		pr_err("munmap(%p, %zu) of pages that are not an mmap()ed region", addr, length);
	return err;
}

size_t arena_committed(void)
{
	size_t c;

	if (!ready())
		return 0;
	lock(R);
	c = R->committed;
	unlock(R);
	return c;
}

int arena_commit_to(size_t length)
{
	int err;

	if (length > STASIS_ARENA_SIZE)
		return -EINVAL;
	if (!ready() && (err = arena_init()))
		return err;
	lock(R);
	err = commit(R, (length + PAGE - 1) >> PAGE_SHIFT);
	unlock(R);
	return err;
}

int arena_prepare_restore(size_t length)
{
	size_t len = (length + PAGE - 1) & ~(PAGE - 1);
	int err = arena_commit_to(length);

	if (err)
		return err;
	lock(R);
	if (R->committed > len)
		discard(len >> PAGE_SHIFT, (R->committed - len) >> PAGE_SHIFT);
	unlock(R);
	return 0;
}

int arena_finish_restore(void)
{
	struct root *r = R;

	if (!ready() || r->magic != ARENA_MAGIC || r->committed > STASIS_ARENA_SIZE ||
	    r->top > NPAGES || ((uint64_t)r->top << PAGE_SHIFT) > r->committed) {
		pr_err("the restored arena has no valid root structure");
		return -EINVAL;
	}
	/* The image may have been saved while another thread held the lock. */
	atomic_store_explicit(&r->lock, 0, memory_order_release);
	return 0;
}

void arena_set_discard_hook(arena_discard_fn fn)
{
	discard_hook = fn;
}

static bool is_leaf(struct root *r, uint64_t q)
{
	for (uint64_t reg = 0; reg < NREGIONS; reg++)
		if (r->dir[reg] == (struct pent *)page_addr(q))
			return true;
	return false;
}

static const char *check_slab(struct root *r, uint64_t q, struct arena_stats *st)
{
	const struct pent *e = ent(q);
	const struct sclass *sc = &r->cls[e->cls < NCLASSES ? e->cls : 0];
	struct slab *sl = (struct slab *)(page_addr(q) + sc->hdr_off);
	uint32_t live = 0, nfree = 0;

	if (e->cls >= NCLASSES || e->npages != sc->pages)
		return "slab head entry";
	for (uint32_t i = 0; i < sc->pages; i++) {
		const struct pent *x = ent(q + i);

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
	uint64_t q = ROOT_PAGES, nruns = 0, npartial = 0, nbinned = 0;

	if (!ready())
		return -EINVAL;
	lock(r);
	if (r->magic != ARENA_MAGIC || ((uint64_t)r->top << PAGE_SHIFT) > r->committed)
		bad = "root";
	while (!bad && q < r->top) {
		const struct pent *e = peek(q), *t;
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
		t = ent(q + n - 1);
		if (n > 1 && (t->kind != e->kind || t->npages != n ||
			      t->flags != ((e->flags & ~PF_HEAD) | PF_TAIL)))
			bad = "run tail entry";
		for (uint64_t i = 1; !bad && i + 1 < n; i++)
			if (ent(q + i)->kind)
				bad = "non-zero interior entry";
		if (e->kind == PK_FREE) {
			if (peek(q - 1)->kind == PK_FREE || q + n == r->top)
				bad = "free run not coalesced";
			if ((e->flags & PF_DIRTY) && n >= RELEASE_PAGES)
				bad = "long dirty free run";
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
		for (uint32_t s = r->bins[b]; !bad && s; prev = s, s = ent(s)->next) {
			const struct pent *e = ent(s);

			if (s >= r->top || e->kind != PK_FREE || !(e->flags & PF_HEAD) ||
			    bin_of(e->npages) != b || e->prev != prev || ++nbinned > nruns)
				bad = "bin list";
		}
	}
	if (!bad && nbinned != nruns)
		bad = "free run missing from its bin";
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
	unlock(r);
	if (bad) {
		pr_err("check: %s (page %llu)", bad, (unsigned long long)q);
		return -EUCLEAN;
	}
	if (out)
		*out = st;
	return 0;
}
