/* The application arena (DESIGN.md section 2, "The application heap"):
 * reservation and commit, the malloc family, the application's anonymous
 * mmaps, and the restore protocol. The layout of the allocator's state and
 * its invariants are described in arena_int.h; page runs and bins are in
 * arena_runs.c, size classes and slabs in arena_slab.c, the invariant walker
 * in arena_check.c. */
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

#include "arena_int.h"
#include "log.h"

/* The only state outside the arena: whether this process reserved it
 * (0 no, 1 being initialised, 2 ready), and a hook that is not restored. */
atomic_int arena_state;
static arena_discard_fn discard_hook;

void arena_discard(uint64_t pg, uint64_t n)
{
	int saved = errno;

	if (madvise(page_addr(pg), n << PAGE_SHIFT, MADV_DONTNEED))
		pr_debug("madvise(%p, %zu): %d", (void *)page_addr(pg), n << PAGE_SHIFT, errno);
	if (discard_hook)
		discard_hook((uintptr_t)page_addr(pg), n << PAGE_SHIFT);
	errno = saved;
}

/* Makes [BASE, page end_pg) read-write, in COMMIT_STEP steps. */
int arena_commit(struct root *r, uint64_t end_pg)
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
	arena_init_classes(r);
	/* Leaf 0 right after the root; both fit in the first commit step. */
	r->dir[0] = (struct pent *)page_addr(ROOT_PAGES);
	r->top = r->dirty_end = ROOT_PAGES + LEAF_PAGES;
	r->keep = RELEASE_PAGES;
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
	return arena_state_ready();
}

/* Runs of at least HUGE_RUN pages ask for transparent huge pages over the
 * 2 MiB-aligned part of them: one fault fills 2 MiB instead of 4 KiB, and
 * a block of dirty tracking (track_blocks.h) is one huge page. Small
 * blocks stay on 4 KiB pages, where a huge page would hold mostly free
 * memory. Advice only: the kernel may say no (THP "never"). */
#define HUGE_RUN (COMMIT_STEP >> PAGE_SHIFT)

static void advise_huge(uint64_t s, uint64_t n)
{
	uintptr_t a = ((uintptr_t)page_addr(s) + COMMIT_STEP - 1) & ~(COMMIT_STEP - 1);
	uintptr_t b = (uintptr_t)page_addr(s + n) & ~(COMMIT_STEP - 1);

	if (n >= HUGE_RUN && a < b)
		madvise((void *)a, b - a, MADV_HUGEPAGE);
}

/* Large blocks are whole runs: size rounded up to pages, no header. */
static void *large_alloc(size_t size, size_t align, bool zero)
{
	struct root *r = R;
	uint64_t s, dirty;

	if (size > STASIS_ARENA_SIZE || align > STASIS_ARENA_SIZE / 2) {
		errno = ENOMEM;
		return NULL;
	}
	if (!size) /* memalign(big, 0) */
		size = 1;
	arena_lock(r);
	s = arena_alloc_run(r, (size + PAGE - 1) >> PAGE_SHIFT,
			    align > PAGE ? align >> PAGE_SHIFT : 1, PK_LARGE, &dirty);
	arena_unlock(r);
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	advise_huge(s, (size + PAGE - 1) >> PAGE_SHIFT);
	if (zero && dirty)
		memset(page_addr(s), 0, size < dirty << PAGE_SHIFT ? size : dirty << PAGE_SHIFT);
	return page_addr(s);
}

void *arena_malloc(size_t size)
{
	if (unlikely(!arena_state_ready()) && arena_init()) {
		errno = ENOMEM;
		return NULL;
	}
	if (likely(size <= SMALL_MAX))
		return arena_small_alloc(size_class(size));
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
	if (unlikely(!arena_state_ready()) && arena_init()) {
		errno = ENOMEM;
		return NULL;
	}
	if (total > SMALL_MAX)
		return large_alloc(total, PAGE, true);
	p = arena_small_alloc(size_class(total));
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
	if (unlikely(!arena_state_ready()) && arena_init()) {
		errno = ENOMEM;
		return NULL;
	}
	if (size <= SMALL_MAX && alignment <= PAGE) {
		for (unsigned c = size_class(size); c < NCLASSES; c++)
			if (!(class_size(c) & (alignment - 1)))
				return arena_small_alloc(c);
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
	e = arena_pent_peek(pg);
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
		arena_small_free(r, b->sl, b->idx, p);
		return;
	}
	arena_free_run(r, b->pg, b->size >> PAGE_SHIFT, true);
}

void arena_free(void *ptr)
{
	struct root *r = R;
	const char *why;
	struct blk b;

	if (!ptr)
		return;
	if (!arena_state_ready()) {
		pr_err("free(%p) before the arena exists", ptr);
		return;
	}
	arena_lock(r);
	why = lookup(r, ptr, &b);
	if (likely(!why))
		free_locked(r, ptr, &b);
	arena_unlock(r);
	if (why)
		pr_err("free(%p): %s, ignored", ptr, why);
}

size_t arena_usable_size(const void *ptr)
{
	struct root *r = R;
	struct blk b;

	if (!ptr || !arena_state_ready())
		return 0;
	arena_lock(r);
	if (lookup(r, ptr, &b))
		b.size = 0;
	arena_unlock(r);
	return b.size;
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
	if (!arena_state_ready()) {
		errno = EINVAL;
		return NULL;
	}
	arena_lock(r);
	why = lookup(r, ptr, &b);
	if (why) {
		arena_unlock(r);
		pr_err("realloc(%p): %s", ptr, why);
		errno = EINVAL;
		return NULL;
	}
	if (b.kind == PK_SLAB && size <= b.size && (size > b.size / 2 || b.size == 16)) {
		arena_unlock(r);
		return ptr;
	}
	if (b.kind == PK_LARGE && size > SMALL_MAX && size <= STASIS_ARENA_SIZE &&
	    arena_large_resize(r, b.pg, b.size >> PAGE_SHIFT, (size + PAGE - 1) >> PAGE_SHIFT)) {
		arena_unlock(r);
		return ptr;
	}
	arena_unlock(r);
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
	uint64_t n = (length + PAGE - 1) >> PAGE_SHIFT, s, dirty;

	if (!length || length > STASIS_ARENA_SIZE) {
		errno = length ? ENOMEM : EINVAL;
		return NULL;
	}
	if (unlikely(!arena_state_ready()) && arena_init()) {
		errno = ENOMEM;
		return NULL;
	}
	arena_lock(r);
	s = arena_alloc_run(r, n, 1, PK_MAP, &dirty);
	arena_unlock(r);
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	advise_huge(s, n);
	if (dirty >= RELEASE_PAGES)
		arena_discard(s, dirty);
	else if (dirty)
		memset(page_addr(s), 0, dirty << PAGE_SHIFT);
	return page_addr(s);
}

/* [addr, addr + length) is page-aligned, not empty and inside a ready arena. */
static bool page_range_in_arena(const void *addr, size_t length)
{
	return !((uintptr_t)addr & (PAGE - 1)) && length && arena_contains(addr) &&
	       length <= STASIS_ARENA_SIZE - ((const char *)addr - BASE) && arena_state_ready();
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

	if (!page_range_in_arena(addr, length))
		return -EINVAL;
	end = q + ((length + PAGE - 1) >> PAGE_SHIFT);
	arena_lock(r);
	while (q < end && q < r->top) {
		uint64_t h = arena_run_head(q), rend, cs, ce;

		if (!h) {
			err = -EINVAL;
			q++;
			continue;
		}
		rend = h + arena_pent(h)->npages;
		if (arena_pent(h)->kind != PK_MAP) {
			if (arena_pent(h)->kind != PK_FREE)
				err = -EINVAL;
			q = rend;
			continue;
		}
		cs = q > h ? q : h;
		ce = end < rend ? end : rend;
		*arena_pent(h) = PENT_ZERO;
		*arena_pent(rend - 1) = PENT_ZERO;
		if (h < cs)
			arena_set_run(h, cs - h, PK_MAP, 0);
		if (ce < rend)
			arena_set_run(ce, rend - ce, PK_MAP, 0);
		mprotect(page_addr(cs), (ce - cs) << PAGE_SHIFT, PROT_READ | PROT_WRITE);
		arena_discard(cs, ce - cs);
		arena_free_run(r, cs, ce - cs, false);
		q = ce;
	}
	arena_unlock(r);
	if (err)
		pr_err("munmap(%p, %zu) of pages that are not an mmap()ed region", addr, length);
	return err;
}

int arena_remap(void *addr, size_t length)
{
	struct root *r = R;
	uint64_t q = (uint64_t)((char *)addr - BASE) >> PAGE_SHIFT, first = q, end;
	int err = 0;

	if (!page_range_in_arena(addr, length))
		return -EINVAL;
	end = q + ((length + PAGE - 1) >> PAGE_SHIFT);
	arena_lock(r);
	while (!err && q < end) {
		uint64_t h = q < r->top ? arena_run_head(q) : 0;

		if (!h || arena_pent(h)->kind != PK_MAP)
			err = -EINVAL;
		else
			q = h + arena_pent(h)->npages;
	}
	if (!err) {
		mprotect(page_addr(first), (end - first) << PAGE_SHIFT, PROT_READ | PROT_WRITE);
		arena_discard(first, end - first);
	}
	arena_unlock(r);
	return err;
}

int arena_zero(void *addr, size_t length)
{
	uint64_t first = (uint64_t)((char *)addr - BASE) >> PAGE_SHIFT;
	uint64_t n = (length + PAGE - 1) >> PAGE_SHIFT;

	if (((uintptr_t)addr & (PAGE - 1)) || !length || !arena_contains(addr) ||
	    !arena_state_ready() || ((first + n) << PAGE_SHIFT) > arena_committed())
		return -EINVAL;
	arena_lock(R);
	arena_discard(first, n);
	arena_unlock(R);
	return 0;
}

size_t arena_committed(void)
{
	size_t c;

	if (!arena_state_ready())
		return 0;
	arena_lock(R);
	c = R->committed;
	arena_unlock(R);
	return c;
}

int arena_commit_to(size_t length)
{
	int err;

	if (length > STASIS_ARENA_SIZE)
		return -EINVAL;
	if (!arena_state_ready() && (err = arena_init()))
		return err;
	arena_lock(R);
	err = arena_commit(R, (length + PAGE - 1) >> PAGE_SHIFT);
	arena_unlock(R);
	return err;
}

int arena_prepare_restore(size_t length)
{
	size_t len = (length + PAGE - 1) & ~(PAGE - 1);
	int err = arena_commit_to(length);

	if (err)
		return err;
	arena_lock(R);
	if (R->committed > len)
		arena_discard(len >> PAGE_SHIFT, (R->committed - len) >> PAGE_SHIFT);
	arena_unlock(R);
	return 0;
}

int arena_finish_restore(void)
{
	struct root *r = R;

	if (!arena_state_ready() || r->magic != ARENA_MAGIC || r->committed > STASIS_ARENA_SIZE ||
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
