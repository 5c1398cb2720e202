/* What every layer may ask about the process stasis runs in: whether this
 * is an MPI rank under stasis, whether the calling thread is inside stasis
 * (or an MPI wrapper), whether it is the main thread, and the next
 * definition of an interposed symbol. No MPI, no allocation. */
#ifndef STASIS_RUNTIME_H
#define STASIS_RUNTIME_H

#include <stdbool.h>

/* True in an MPI rank started under stasis (decided when the library loads). */
extern bool stasis_active;
/* True in a process a rank made with fork(): no rank, whatever it inherited.
 * What it does (a child's dup2() before its exec) is not the rank's state,
 * and stasis says nothing of it. */
extern bool stasis_forked;
/* > 0 while the thread is inside a stasis MPI wrapper (or stasis itself):
 * allocations made then belong to the runtime. */
extern __thread int stasis_depth;

bool stasis_on_main_thread(void);
/* The next definition of an interposed symbol (dlsym(RTLD_NEXT)), cached by
 * the caller. */
void *stasis_next_symbol(const char *name);

#endif
