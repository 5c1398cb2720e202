/* Threads and thread-local storage of the application (core/threads.h,
 * core/tls.h): threads it creates and the pthread keys it makes.
 *
 * Threads the application creates would need their own stacks and
 * registers saved: not supported yet, so checkpoints stop with a warning.
 * Threads the MPI library creates (inside a wrapper, or from its own code)
 * are runtime and pass. */
#include <pthread.h>
#include <stdint.h>

#include "preload.h"
#include "regions.h"
#include "tls.h"

#define CALLER ((uintptr_t)__builtin_return_address(0))

EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
			  void *(*start)(void *), void *arg)
{
	static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

	if (stasis_active && stasis_depth == 0 && regions_app_code(CALLER))
		session_unsupported("application threads (pthread_create)");
	if (!real)
		real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
				void *))stasis_next_symbol("pthread_create");
	return real(thread, attr, start, arg);
}

/* Every key is seen, whoever makes it: the caller decides whose it is. */
EXPORT int pthread_key_create(pthread_key_t *key, void (*destructor)(void *))
{
	static int (*real)(pthread_key_t *, void (*)(void *));
	int ret;

	if (!real)
		real = (int (*)(pthread_key_t *, void (*)(void *)))stasis_next_symbol(
		    "pthread_key_create");
	ret = real(key, destructor);
	if (!ret)
		tls_key_created(*key, destructor, CALLER);
	return ret;
}

EXPORT int pthread_key_delete(pthread_key_t key)
{
	static int (*real)(pthread_key_t);
	int ret;

	if (!real)
		real = (int (*)(pthread_key_t))stasis_next_symbol("pthread_key_delete");
	tls_key_deleting(key);
	ret = real(key);
	if (ret)
		tls_key_kept(key);
	return ret;
}
