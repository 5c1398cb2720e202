/* Shared by the interposed functions of the preload layer. */
#ifndef STASIS_PRELOAD_H
#define STASIS_PRELOAD_H

#include "format.h"
#include "session.h"

/* Interposed symbols are the only ones libstasis.so exports (with the
 * version script); everything else is hidden. */
#define EXPORT __attribute__((visibility("default")))

/* A Fortran wrapper name_ under the other spellings compilers use for the
 * same symbol (name__, name, NAME): a call under any of them is seen. */
#define FORTRAN_ALIASES(name, NAME)                                                                \
	EXPORT __typeof__(name##_) name##__ __attribute__((alias(#name "_")));                     \
	EXPORT __typeof__(name##_) name __attribute__((alias(#name "_")));                         \
	EXPORT __typeof__(name##_) NAME __attribute__((alias(#name "_")));

#endif
