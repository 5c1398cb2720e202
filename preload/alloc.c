/* The malloc family and anonymous mmap, split between the application arena
 * and libc (DESIGN.md section 2, "The application heap").
 *
 * An allocation is the application's when stasis is active in this process
 * (an MPI rank), it happens on the main thread or a thread of the
 * application's (core/threads.h) outside every stasis MPI wrapper, and its
 * caller is application code (the executable, an application library, or
 * libc on the application's behalf). Everything else - the MPI library,
 * threads it made, ld.so - gets libc's allocator. free() and realloc()
 * decide by address. A thread is never stopped for a checkpoint inside
 * one of these (stasis_busy): it may hold the arena's lock or libc's. */
#define LOG_PREFIX "alloc: "
/* Meson builds with 64-bit off_t, which renames mmap to mmap64 in the
 * headers; both names are defined here, the second as an alias. */
#undef _FILE_OFFSET_BITS
#include <errno.h>
#include <stdarg.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arena.h"
#include "log.h"
#include "preload.h"
#include "regions.h"
#include "threads.h"
#include "tracking.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

#define CALLER ((uintptr_t)__builtin_return_address(0))

static inline bool for_application(uintptr_t caller)
{
	return __builtin_expect(stasis_active, 0) && stasis_depth == 0 &&
	       (stasis_app_thread || stasis_on_main_thread()) && regions_app_code(caller);
}

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
	static size_t (*real)(void *);
	if (!real)
		real = (size_t(*)(void *))stasis_next_symbol("malloc_usable_size");
	return real ? real(ptr) : 0;
}

/* Anonymous private mappings of the application are placed in the arena, so
 * that the restart's runtime can never take their addresses. A file or
 * shared mapping of the application cannot be restored: checkpoints stop. */
EXPORT void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
	if (for_application(CALLER)) {
		bool anon_private = (flags & MAP_ANONYMOUS) && (flags & MAP_PRIVATE);

		if (anon_private && !addr && !(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE))) {
			void *p;

			stasis_busy_enter();
			p = arena_map(length);
			if (p && prot != (PROT_READ | PROT_WRITE) && mprotect(p, length, prot)) {
				arena_unmap(p, length);
				p = NULL;
			}
			stasis_busy_leave();
			return p ? p : MAP_FAILED;
		}
		if (!(flags & MAP_ANONYMOUS))
			session_unsupported("mmap() of a file");
		else
			session_unsupported("shared or fixed anonymous mmap()");
	}
	return (void *)syscall(SYS_mmap, addr, length, prot, flags, fd, offset);
}

EXPORT void *mmap64(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
	__attribute__((alias("mmap")));

/* The program's own mprotect() of tracked memory: see tracking_forget(). */
EXPORT int mprotect(void *addr, size_t length, int prot)
{
	static pthread_mutex_t forget = PTHREAD_MUTEX_INITIALIZER;
	struct session *s;

	if (for_application(CALLER) && (s = session_get())) {
		/* Application threads call it too; tracking is one thread's. */
		stasis_busy_enter();
		pthread_mutex_lock(&forget);
		tracking_forget(s, (uintptr_t)addr, length);
		pthread_mutex_unlock(&forget);
		stasis_busy_leave();
	}
	return syscall(SYS_mprotect, addr, length, prot);
}

EXPORT int munmap(void *addr, size_t length)
{
	if (arena_contains(addr)) {
		int ret;

		stasis_busy_enter();
		ret = arena_unmap(addr, length);
		stasis_busy_leave();
		return ret ? (errno = EINVAL, -1) : 0;
	}
	return syscall(SYS_munmap, addr, length);
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL, *p;

	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	if (!arena_contains(old))
		return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
	/* Inside the arena a mapping moves like a realloc of whole pages. */
	if ((flags & MREMAP_FIXED) || !(flags & MREMAP_MAYMOVE)) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	stasis_busy_enter();
	p = arena_map(new_len);
	if (p) {
		memcpy(p, old, old_len < new_len ? old_len : new_len);
		arena_unmap(old, old_len);
	}
	stasis_busy_leave();
	return p ? p : MAP_FAILED;
}
