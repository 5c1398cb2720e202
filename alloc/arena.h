/* The application arena: a fixed, reserved virtual range from which stasis
 * serves the application's heap (malloc family) and its anonymous mmaps.
 *
 * Contract (DESIGN.md section 2, "The application heap"): the allocator keeps
 * ALL of its state inside the range - its root structure at STASIS_ARENA_BASE,
 * size-class tables and free lists in the arena's own pages, no pointer into
 * memory outside the range. Restoring the bytes of [base, base + committed)
 * from a checkpoint therefore restores the allocator exactly.
 *
 * Layout: [base, base + committed) is readable and writable; the rest of the
 * reservation is PROT_NONE. The committed length only grows (in 2 MiB steps)
 * and is recorded inside the root structure, so that it is restored too.
 *
 * Thread safety: one lock (an atomic spinlock word inside the arena) guards
 * every call. Functions return NULL/-errno like libc; errno is set on NULL.
 */
#ifndef STASIS_ARENA_H
#define STASIS_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Overridable only for tests (AddressSanitizer's shadow covers 16 TiB); every
 * object of a program must then be built with the same value. */
#ifndef STASIS_ARENA_BASE
#define STASIS_ARENA_BASE ((uintptr_t)0x100000000000ULL) /* 16 TiB */
#endif
#ifndef STASIS_ARENA_SIZE
#define STASIS_ARENA_SIZE ((size_t)1 << 40) /* 1 TiB reserved */
#endif

/* Reserve the range (MAP_FIXED_NOREPLACE | MAP_NORESERVE, PROT_NONE) and set
 * up the root structure. Idempotent. Returns 0 or -errno (-EEXIST when
 * something else already occupies the range). */
int arena_init(void);
/* Whether arena_init succeeded in this process. */
bool arena_ready(void);
/* Whether p points into the reserved range. Cheap; usable before init. */
static inline bool arena_contains(const void *p)
{
	return (uintptr_t)p - STASIS_ARENA_BASE < STASIS_ARENA_SIZE;
}

/* The malloc family. Blocks are 16-byte aligned; malloc(0) gives a minimal
 * block. The allocating functions call arena_init() on first use. */
void *arena_malloc(size_t size);
void *arena_calloc(size_t nmemb, size_t size); /* NULL + ENOMEM on overflow */
/* realloc(NULL, n) = malloc(n); realloc(p, 0) frees p and returns NULL (glibc);
 * an invalid p is reported and gives NULL + EINVAL. */
void *arena_realloc(void *ptr, size_t size);
/* Double frees (small and large blocks) and pointers that are not a block
 * start are reported with pr_err and ignored. */
void arena_free(void *ptr);
/* alignment: a power of two (others are rounded up, like glibc's memalign),
 * up to half the reservation. */
void *arena_memalign(size_t alignment, size_t size);
size_t arena_usable_size(const void *ptr); /* 0 for a pointer that is not a block */

/* Page-aligned, zero-filled pages for the application's anonymous mmap(). */
void *arena_map(size_t length);
int arena_unmap(void *addr, size_t length);

/* The program mmap()ed with MAP_FIXED over [addr, addr + length): every page
 * must lie in an arena_map() mapping of its own (else -EINVAL, nothing
 * done); the pages become zero-filled and read-write again, as a fresh
 * mapping's (the discard hook hears of them). */
int arena_remap(void *addr, size_t length);
/* Drop the committed pages of [addr, addr + length) (madvise(MADV_DONTNEED)
 * by the program): they read back as zero; the discard hook hears of them.
 * -EINVAL unless the range lies in the committed part. */
int arena_zero(void *addr, size_t length);

/* The committed range [base, base + *length) that a checkpoint must save. */
size_t arena_committed(void);
/* Make [base, base + length) accessible before a restore writes it. Bytes
 * already committed beyond length are left as they are. */
int arena_commit_to(size_t length);

/* Restore protocol, for an image of length bytes saved from
 * [base, base + arena_committed()):
 *   arena_prepare_restore(length); copy the image to base; arena_finish_restore();
 * prepare = arena_commit_to(length), and drops (madvise) every committed page
 * beyond length, because the restored allocator takes everything above its
 * bump pointer to be zero. finish checks the root structure and clears the
 * lock word (the image may have been saved while a thread held it). No other
 * thread may use the arena in between. */
int arena_prepare_restore(size_t length);
int arena_finish_restore(void);

/* Called (possibly under the arena lock: it must not use the arena) for
 * every range the allocator drops with madvise(MADV_DONTNEED): it reads back
 * as zero without having been written, which dirty-page tracking does not
 * see (dirty.h). arena_unmap() also resets the protection of the range it
 * frees to PROT_READ|PROT_WRITE before reporting it. Not saved in images. */
typedef void (*arena_discard_fn)(uintptr_t addr, size_t length);
void arena_set_discard_hook(arena_discard_fn fn);

/* Walks the whole arena and checks every invariant of the allocator; fills
 * *stats (may be NULL). Returns 0, or -EUCLEAN after logging the first
 * inconsistency. Slow: for tests and debugging. */
struct arena_stats {
	size_t committed;	 /* bytes read-write from base */
	size_t heap_bytes;	 /* bytes below the bump pointer, metadata included */
	size_t free_bytes;	 /* bytes in free runs below the bump pointer */
	size_t large_bytes;	 /* bytes in large blocks (whole pages) */
	size_t map_bytes;	 /* bytes in arena_map() regions */
	size_t slabs;		 /* slabs (runs cut into small blocks) */
	size_t small_live;	 /* allocated small blocks */
	size_t small_live_bytes; /* their usable bytes */
};
int arena_check(struct arena_stats *stats);

#endif
