/* The malloc family, split between the application arena and libc
 * (DESIGN.md section 2, "The application heap").
 *
 * An allocation is the application's when stasis is active in this process
 * (an MPI rank), it happens on the main thread or a thread of the
 * application's (process/threads.h) outside every stasis MPI wrapper, and its
 * caller is application code (the executable, an application library, or
 * libc on the application's behalf). Everything else - the MPI library,
 * threads it made, ld.so - gets libc's allocator. free() and realloc()
 * decide by address. A thread is never stopped for a checkpoint inside
 * one of these (stasis_busy): it may hold the arena's lock or libc's. The
 * application's mmap() is in mappings.c. */
#define LOG_PREFIX "alloc: "
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>

#include "runtime.h"
#include "arena.h"
#include "log.h"
#include "interpose.h"
#include "regions.h"
#include "threads.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

EXPORT void *malloc(size_t size)
{
	void *p;

	stasis_busy_enter();
	p = for_application(CALLER) ? arena_malloc(size) : __libc_malloc(size);
	stasis_busy_leave();
	return p;
}

EXPORT void *calloc(size_t nmemb, size_t size)
{
	void *p;

	stasis_busy_enter();
	p = for_application(CALLER) ? arena_calloc(nmemb, size) : __libc_calloc(nmemb, size);
	stasis_busy_leave();
	return p;
}

EXPORT void free(void *ptr)
{
	stasis_busy_enter();
	if (arena_contains(ptr))
		arena_free(ptr);
	else
		__libc_free(ptr);
	stasis_busy_leave();
}

EXPORT void *realloc(void *ptr, size_t size)
{
	void *p;

	stasis_busy_enter();
	if (arena_contains(ptr))
		p = arena_realloc(ptr, size);
	else if (!ptr && for_application(CALLER))
		p = arena_malloc(size);
	else
		p = __libc_realloc(ptr, size);
	stasis_busy_leave();
	return p;
}

static void *aligned(uintptr_t caller, size_t alignment, size_t size)
{
	void *p;

	stasis_busy_enter();
	p = for_application(caller) ? arena_memalign(alignment, size)
				    : __libc_memalign(alignment, size);
	stasis_busy_leave();
	return p;
}

EXPORT int posix_memalign(void **out, size_t alignment, size_t size)
{
	void *p;

	if (alignment < sizeof(void *) || (alignment & (alignment - 1)))
		return EINVAL;
	p = aligned(CALLER, alignment, size);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

EXPORT void *aligned_alloc(size_t alignment, size_t size)
{
	if (!alignment || (alignment & (alignment - 1))) {
		errno = EINVAL;
		return NULL;
	}
	return aligned(CALLER, alignment, size);
}

EXPORT void *memalign(size_t alignment, size_t size)
{
	return aligned(CALLER, alignment, size);
}

EXPORT void *valloc(size_t size)
{
	return aligned(CALLER, STASIS_PAGE, size);
}

EXPORT void *pvalloc(size_t size)
{
	return aligned(CALLER, STASIS_PAGE,
		       (size + STASIS_PAGE - 1) & ~(size_t)(STASIS_PAGE - 1));
}

EXPORT size_t malloc_usable_size(void *ptr)
{
	extern size_t __malloc_usable_size(void *) __attribute__((weak));

	if (arena_contains(ptr)) {
		size_t n;

		stasis_busy_enter();
		n = arena_usable_size(ptr);
		stasis_busy_leave();
		return n;
	}
	/* glibc exports no __libc_ name for it; the real one is found once. */
	REAL(malloc_usable_size);
	return real ? real(ptr) : 0;
}
