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
/* Internals shared by the arena's files: arena.c (reservation, commit, the
 * malloc family, mmap, restore), arena_runs.c (page runs, bins, large block
 * resizing), arena_slab.c (size classes, slabs) and arena_check.c (the
 * invariant walker). Not installed. */
#ifndef STASIS_ARENA_INT_H
#define STASIS_ARENA_INT_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "arena.h"

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
/* Which freed pages go back to the kernel (madvise) and which stay dirty
 * for the next allocation: a dynamic threshold, as glibc's mmap threshold.
 * A dirty free run shorter than r->keep pages stays dirty; r->keep starts at
 * RELEASE_PAGES (128 KiB), and a run given back for its length raises it
 * past that length (up to KEEP_MAX + 1), so that a program that frees and
 * allocates such blocks again is served from resident pages instead of
 * faulting them in anew each time (numpy's temporaries: the faults and TLB
 * shootdowns made it 10x slower). The bump space keeps fewer than
 * 2 * r->keep dirty pages above top (glibc's trim threshold is twice its
 * mmap threshold); trimming more raises r->keep to half of it. What stays
 * resident unused is bounded all the same: dirty free runs of RELEASE_PAGES
 * or more hold at most KEEP_BUDGET pages together (r->kept), the bump space
 * fewer than 2 * (KEEP_MAX + 1). The threshold waits for reuse: a block
 * freed once and never again goes back at once (a budget alone would keep
 * it); the budget bounds a heap fragmented into many kept runs. */
#define RELEASE_PAGES 32  /* 128 KiB: r->keep's start */
#define KEEP_MAX 8192	  /* 32 MiB: longest dirty free run kept (glibc's max) */
#define KEEP_BUDGET 16384 /* 64 MiB: in dirty free runs of RELEASE_PAGES or more */
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
	uint32_t keep;	    /* dirty free runs are shorter; dirty_end < top + 2 * keep */
	size_t committed;   /* [BASE, BASE + committed) is read-write */
	uint64_t kept;	    /* pages in dirty free runs of RELEASE_PAGES or more */
	uint64_t binmap[NBINS / 64];
	uint32_t bins[NBINS]; /* first page of the first free run, 0 = empty */
	struct sclass cls[NCLASSES];
	struct slab *partial[NCLASSES];
	struct pent *dir[NREGIONS];
};

#define ROOT_PAGES ((sizeof(struct root) + PAGE - 1) / PAGE)

/* Whether this process reserved the arena (arena.c): 0 no, 1 being
 * initialised, 2 ready. */
extern atomic_int arena_state;

static const struct pent PENT_ZERO;

static inline char *page_addr(uint64_t pg)
{
	return BASE + (pg << PAGE_SHIFT);
}

/* The page-map entry of page pg, whose leaf exists. */
static inline struct pent *arena_pent(uint64_t pg)
{
	return &R->dir[pg >> REG_SHIFT][pg & (REG_PAGES - 1)];
}

/* The entry of a page that may be allocator metadata: a leaf can lie in a
 * region that has no leaf of its own yet (it was carved just before the
 * run that needed it, and that run failed). Such pages read as zero. */
static inline const struct pent *arena_pent_peek(uint64_t pg)
{
	const struct pent *leaf = R->dir[pg >> REG_SHIFT];

	return likely(leaf) ? &leaf[pg & (REG_PAGES - 1)] : &PENT_ZERO;
}

/* arena_ready() (arena.h) for the arena's own files, inline. */
static inline bool arena_state_ready(void)
{
	return likely(atomic_load_explicit(&arena_state, memory_order_acquire) == 2);
}

static inline void arena_lock(struct root *r)
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

static inline void arena_unlock(struct root *r)
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

static inline unsigned bin_of(uint64_t n)
{
	unsigned k;

	if (n <= 16)
		return n - 1;
	k = 63 - __builtin_clzll(n);
	return 16 + (k - 4) * 4 + ((n >> (k - 2)) & 3);
}

/* arena.c: madvise(MADV_DONTNEED) pages [pg, pg + n) and tell the discard
 * hook; make [BASE, page end_pg) read-write. */
void arena_discard(uint64_t pg, uint64_t n);
int arena_commit(struct root *r, uint64_t end_pg);

/* arena_runs.c, all under the lock. */
void arena_set_run(uint64_t s, uint64_t n, uint8_t kind, uint8_t flags);
void arena_free_run(struct root *r, uint64_t s, uint64_t n, bool dirty);
uint64_t arena_alloc_run(struct root *r, uint64_t n, uint64_t align, uint8_t kind, uint64_t *dirty);
bool arena_large_resize(struct root *r, uint64_t s, uint64_t n, uint64_t m);
uint64_t arena_run_head(uint64_t q);

/* arena_slab.c; arena_small_alloc takes the lock, arena_small_free runs
 * under it. */
void arena_init_classes(struct root *r);
void *arena_small_alloc(unsigned c);
void arena_small_free(struct root *r, struct slab *sl, uint32_t idx, void *p);

#endif
