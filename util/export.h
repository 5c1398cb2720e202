/* How stasis exports what it interposes: libstasis.so exports only these
 * symbols (hidden visibility everywhere else, plus preload/libstasis.map).
 * Used by the preload layer and by the MPI wrappers (mpi/). */
#ifndef STASIS_EXPORT_H
#define STASIS_EXPORT_H

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
