/* Exit handlers the program registers after MPI_Init: atexit(),
 * __cxa_atexit() (a C++ function-local static object built on first use,
 * a singleton whose destructor calls MPI_Finalize), on_exit(), and the
 * main thread's thread_local destructors. libc keeps them in its own
 * memory, which a restart does not bring back (preload/exit.c says why),
 * so a restarted program would exit without them: IQ-TREE's ranks then
 * end without MPI_Finalize and mpirun reports them "exiting improperly".
 * What the program registers before MPI_Init its restart registers again
 * itself; these are saved in SECTION_EXITS and registered again, in their
 * order, when a restart resumes.
 *
 * Not recorded: handlers registered by the constructors of a library the
 * program loads with dlopen() (the restart loads it again and they run
 * again), and the runtime's own. Limits: a restart registers the recorded
 * handlers after those of such libraries, so at exit they run before them
 * where the first run may have interleaved them; the thread_local
 * destructors of the program's other threads are not kept. */
#ifndef STASIS_EXITS_H
#define STASIS_EXITS_H

#include <stdint.h>

#include "format.h"
#include "part.h"

/* The preload layer registered a handler for the program (kind: enum
 * exit_kind); recorded if MPI_Init has run and no library is loading. */
void exits_registered(uint32_t kind, uintptr_t fn, uintptr_t arg, uintptr_t dso);

/* The exits part (session/part.h). */
extern const struct part_ops exits_part;

#endif
