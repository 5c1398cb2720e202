/* Shared by the interposed functions of the preload layer. */
#ifndef STASIS_PRELOAD_H
#define STASIS_PRELOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "format.h"
#include "regions.h"
#include "session.h"

/* Interposed symbols are the only ones libstasis.so exports (with the
 * version script); everything else is hidden. */
#define EXPORT __attribute__((visibility("default")))

/* Whether a call from code at caller is the application's, for the
 * allocator and mmap() (preload/alloc.c): in an MPI rank under stasis, on
 * the main thread, outside every stasis MPI wrapper, from application code
 * (the executable, an application library, or libc on their behalf). */
static inline bool for_application(uintptr_t caller)
{
	return __builtin_expect(stasis_active, 0) && stasis_depth == 0 && stasis_on_main_thread() &&
	       regions_app_code(caller);
}

/* A Fortran wrapper name_ under the other spellings compilers use for the
 * same symbol (name__, name, NAME): a call under any of them is seen. */
#define FORTRAN_ALIASES(name, NAME)                                                                \
	EXPORT __typeof__(name##_) name##__ __attribute__((alias(#name "_")));                     \
	EXPORT __typeof__(name##_) name __attribute__((alias(#name "_")));                         \
	EXPORT __typeof__(name##_) NAME __attribute__((alias(#name "_")));

#endif
