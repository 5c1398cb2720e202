/* Threads the application creates would need their own stacks and
 * registers saved: not supported yet, so checkpoints stop with a warning.
 * Threads the MPI library creates (inside a wrapper, or from its own code)
 * are runtime and pass. */
#include <pthread.h>
#include <stdint.h>

#include "regions.h"
#include "preload.h"


EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
			  void *(*start)(void *), void *arg)
{
	static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	uintptr_t caller = (uintptr_t)__builtin_return_address(0);

	if (stasis_active && stasis_depth == 0 && regions_app_code(caller))
		session_unsupported("application threads (pthread_create)");
	if (!real)
		real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
				void *))stasis_next_symbol("pthread_create");
	return real(thread, attr, start, arg);
}
