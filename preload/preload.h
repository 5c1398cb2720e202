/* Shared by the interposed functions of the preload layer. */
#ifndef STASIS_PRELOAD_H
#define STASIS_PRELOAD_H

#include <stdint.h>

#include "format.h"
#include "session.h"

/* Interposed symbols are the only ones libstasis.so exports (with the
 * version script); everything else is hidden. */
#define EXPORT __attribute__((visibility("default")))

/* Set up stasis (once) if it is not yet: at libstasis.so's constructor, or
 * earlier, at the first allocation not made by ld.so (caller: the
 * allocation's return address), from the constructor of a library that
 * ld.so initialises first (load.c). */
extern bool stasis_loaded;
void stasis_load_early(uintptr_t caller);

/* A Fortran wrapper name_ under the other spellings compilers use for the
 * same symbol (name__, name, NAME): a call under any of them is seen. */
#define FORTRAN_ALIASES(name, NAME)                                                                \
	EXPORT __typeof__(name##_) name##__ __attribute__((alias(#name "_")));                     \
	EXPORT __typeof__(name##_) name __attribute__((alias(#name "_")));                         \
	EXPORT __typeof__(name##_) NAME __attribute__((alias(#name "_")));

#endif
