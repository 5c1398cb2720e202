/* Exit handlers (atexit, __cxa_atexit, on_exit, thread_local destructors):
 * libc keeps them in blocks it allocates itself, with the functions'
 * addresses mangled by the process's pointer guard (random per process,
 * glibc's PTR_MANGLE). A block in the arena would come back from the image
 * mangled with the first run's guard and be called with the restart's:
 * LAMMPS (hundreds of C++ static objects) crashed in __run_exit_handlers.
 * So libc's blocks stay in its own heap, with the list that links them:
 * what the program registers before MPI_Init, its restart registers again
 * before the checkpoint is put back. */
#include <stdint.h>

#include "runtime.h"
#include "interpose.h"

extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);
extern int __cxa_thread_atexit_impl(void (*fn)(void *), void *obj, void *dso);
extern int on_exit(void (*fn)(int, void *), void *arg);

EXPORT int __cxa_atexit(void (*fn)(void *), void *arg, void *dso)
{
	int ret;

	REAL(__cxa_atexit);
	stasis_depth++;
	ret = real(fn, arg, dso);
	stasis_depth--;
	return ret;
}

EXPORT int __cxa_thread_atexit_impl(void (*fn)(void *), void *obj, void *dso)
{
	int ret;

	REAL(__cxa_thread_atexit_impl);
	stasis_depth++;
	ret = real(fn, obj, dso);
	stasis_depth--;
	return ret;
}

EXPORT int on_exit(void (*fn)(int, void *), void *arg)
{
	int ret;

	REAL(on_exit);
	stasis_depth++;
	ret = real(fn, arg);
	stasis_depth--;
	return ret;
}
