/* What every layer may ask about the process stasis runs in: whether this
 * is an MPI rank under stasis, whether the calling thread is inside stasis
 * (or an MPI wrapper), whether it is the main thread, and the next
 * definition of an interposed symbol. No MPI, no allocation. */
#ifndef STASIS_RUNTIME_H
#define STASIS_RUNTIME_H

#include <stdbool.h>

/* True in an MPI rank started under stasis (decided when the library loads). */
extern bool stasis_active;
/* The rank's pid (0 in other processes), set when the library loads. A
 * process a rank made with fork() has another: no rank, whatever it
 * inherited; what it does (a child's dup2() before its exec) is not the
 * rank's state, and stasis says nothing of it. */
extern int stasis_pid;
/* A vfork() child runs in the rank's memory until it execs (Python's
 * subprocess makes its children so): what it calls (dup2, close, signal)
 * must leave stasis's state, which is the rank's, alone. vfork() marks
 * the calling thread (preload/vfork.S); the mark goes at the first call
 * that finds itself in the rank and on that thread again. */
extern volatile int stasis_vfork_tid;
bool stasis_vfork_child_slow(void);

static inline bool stasis_in_vfork_child(void)
{
	return __builtin_expect(stasis_vfork_tid != 0, 0) && stasis_vfork_child_slow();
}
/* > 0 while the thread is inside a stasis MPI wrapper (or stasis itself):
 * allocations made then belong to the runtime. */
extern __thread int stasis_depth;

bool stasis_on_main_thread(void);
/* The next definition of an interposed symbol (dlsym(RTLD_NEXT)), cached by
 * the caller. */
void *stasis_next_symbol(const char *name);

#endif
