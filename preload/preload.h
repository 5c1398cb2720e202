/* Shared by the interposed functions of the preload layer. */
#ifndef STASIS_PRELOAD_H
#define STASIS_PRELOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "export.h"
#include "format.h"
#include "regions.h"
#include "runtime.h"
#include "session.h"
#include "threads.h"

/* Set up stasis (once) if it is not yet: at libstasis.so's constructor, or
 * earlier, at the first allocation not made by ld.so (caller: the
 * allocation's return address), from the constructor of a library that
 * ld.so initialises first (load.c). */
extern bool stasis_loaded;
void stasis_load_early(uintptr_t caller);

/* Whether a call from code at caller is the application's, for the
 * allocator and mmap() (preload/alloc.c, mappings.c): in an MPI rank under
 * stasis, on the main thread or a thread of the application's
 * (process/threads.h), outside every stasis MPI wrapper, from
 * application code (the executable, an application library, or libc on
 * their behalf). The first such call may set stasis up. */
static inline bool for_application(uintptr_t caller)
{
	if (__builtin_expect(!stasis_loaded, 0))
		stasis_load_early(caller);
	return __builtin_expect(stasis_active, 0) && stasis_depth == 0 &&
	       (stasis_app_thread || stasis_on_main_thread()) && regions_app_code(caller);
}

#endif
