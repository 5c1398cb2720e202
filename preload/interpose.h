/* What every interposed function of the preload layer needs: the real
 * function it stands in front of, its caller's address, and the two rules
 * for whether a call is the application's. As DMTCP does, an interposed
 * function keeps its libc name and finds the real one once. */
#ifndef STASIS_INTERPOSE_H
#define STASIS_INTERPOSE_H

#include <stdbool.h>
#include <stdint.h>

#include "preload.h"
#include "regions.h"
#include "runtime.h"
#include "threads.h"

/* The address the interposed function returns to: whose code called it.
 * Valid only in the interposed function itself, not in a helper. */
#define CALLER ((uintptr_t)__builtin_return_address(0))

/* Declares `real`, the next definition of fn (libc's, or the MPI
 * library's), looked up at the first call and cached. A statement: use it
 * inside the function, before calling real(...). */
#define REAL(fn)                                                                                   \
	static __typeof__(fn) *real;                                                               \
	if (!real)                                                                                 \
	real = (__typeof__(fn) *)stasis_next_symbol(#fn)

/* Two rules, both "stasis is active, no stasis MPI wrapper is running on
 * this thread, and the caller is application code (the executable, an
 * application library, or libc on their behalf)". They differ in:
 *
 * for_application(): memory (the allocator and mmap(), alloc.c and
 * mappings.c). The application's threads (process/threads.h) count too,
 * since their heap must be saved like the main thread's; and the first
 * such call sets stasis up if it is not yet (stasis_load_early), so that
 * even an allocation made before libstasis.so's constructor lands in the
 * arena.
 *
 * for_application_fds(): descriptors (files.c, writes.c): the main
 * thread's and the application's threads' calls (process/fds.h locks its
 * table for them). Nothing is set up here: before stasis is loaded
 * (stasis_active false) a call passes through. */
static inline bool for_application_fds(uintptr_t caller)
{
	return __builtin_expect(stasis_active, 0) && stasis_depth == 0 &&
	       (stasis_app_thread || stasis_on_main_thread()) && regions_app_code(caller) &&
	       !stasis_in_vfork_child();
}

static inline bool for_application(uintptr_t caller)
{
	if (__builtin_expect(!stasis_loaded, 0))
		stasis_load_early(caller);
	return for_application_fds(caller);
}

#endif
