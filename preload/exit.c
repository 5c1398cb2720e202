/* Exit handlers (atexit, __cxa_atexit, on_exit, thread_local destructors):
 * libc keeps them in blocks it allocates itself, with the functions'
 * addresses mangled by the process's pointer guard (random per process,
 * glibc's PTR_MANGLE). A block in the arena would come back from the image
 * mangled with the first run's guard and be called with the restart's:
 * LAMMPS (hundreds of C++ static objects) crashed in __run_exit_handlers.
 * So libc's blocks stay in its own heap, with the list that links them:
 * what the program registers before MPI_Init, its restart registers again
 * before the checkpoint is put back; what it registers after is recorded
 * (process/exits.h) and registered again when a restart resumes. */
#include <stdint.h>

#include "exits.h"
#include "runtime.h"
#include "interpose.h"

extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);
extern int __cxa_thread_atexit_impl(void (*fn)(void *), void *obj, void *dso);
extern int on_exit(void (*fn)(int, void *), void *arg);

EXPORT int __cxa_atexit(void (*fn)(void *), void *arg, void *dso)
{
	bool record = for_application_fds(CALLER);
	int ret;

	REAL(__cxa_atexit);
	stasis_depth++;
	ret = real(fn, arg, dso);
	stasis_depth--;
	if (!ret && record)
		exits_registered(EXIT_CXA, (uintptr_t)fn, (uintptr_t)arg, (uintptr_t)dso);
	return ret;
}

EXPORT int __cxa_thread_atexit_impl(void (*fn)(void *), void *obj, void *dso)
{
	/* The main thread's only: another thread's run when it ends. */
	bool record = for_application_fds(CALLER) && stasis_on_main_thread();
	int ret;

	REAL(__cxa_thread_atexit_impl);
	stasis_depth++;
	ret = real(fn, obj, dso);
	stasis_depth--;
	if (!ret && record)
		exits_registered(EXIT_THREAD, (uintptr_t)fn, (uintptr_t)obj, (uintptr_t)dso);
	return ret;
}

EXPORT int on_exit(void (*fn)(int, void *), void *arg)
{
	bool record = for_application_fds(CALLER);
	int ret;

	REAL(on_exit);
	stasis_depth++;
	ret = real(fn, arg);
	stasis_depth--;
	if (!ret && record)
		exits_registered(EXIT_ON_EXIT, (uintptr_t)fn, (uintptr_t)arg, 0);
	return ret;
}
