/* Threads and thread-local storage of the application (process/threads.h,
 * process/tls.h): the threads it creates, joins and ends, the pthread keys it
 * makes, and dl_iterate_phdr(), inside which a thread holds ld.so's lock
 * (it is not stopped there). Threads the MPI library or stasis creates
 * (inside a wrapper, or from their own code) pass unchanged. */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "runtime.h"
#include "interpose.h"
#include "regions.h"
#include "threads.h"
#include "tls.h"

EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
			  void *(*start)(void *), void *arg)
{
	int ret;

	if (!(stasis_active && stasis_depth == 0 && regions_ready() && regions_app_code(CALLER))) {
		REAL(pthread_create);
		return real(thread, attr, start, arg);
	}
	stasis_busy_enter();
	ret = threads_create(thread, attr, start, arg);
	stasis_busy_leave();
	return ret;
}

EXPORT int pthread_join(pthread_t t, void **retval)
{
	int ret;

	REAL(pthread_join);
	ret = real(t, retval);
	if (!ret) {
		stasis_busy_enter();
		threads_joined(t);
		stasis_busy_leave();
	}
	return ret;
}

EXPORT int pthread_tryjoin_np(pthread_t t, void **retval)
{
	int ret;

	REAL(pthread_tryjoin_np);
	ret = real(t, retval);
	if (!ret) {
		stasis_busy_enter();
		threads_joined(t);
		stasis_busy_leave();
	}
	return ret;
}

EXPORT int pthread_timedjoin_np(pthread_t t, void **retval, const struct timespec *abstime)
{
	int ret;

	REAL(pthread_timedjoin_np);
	ret = real(t, retval, abstime);
	if (!ret) {
		stasis_busy_enter();
		threads_joined(t);
		stasis_busy_leave();
	}
	return ret;
}

EXPORT int pthread_detach(pthread_t t)
{
	int ret;

	REAL(pthread_detach);
	ret = real(t);
	if (!ret) {
		stasis_busy_enter();
		threads_detached(t);
		stasis_busy_leave();
	}
	return ret;
}

EXPORT void pthread_exit(void *retval)
{
	REAL(pthread_exit);
	threads_exiting(retval);
	real(retval);
	__builtin_unreachable();
}

/* Who made a key: a function that ends by tail-calling pthread_key_create
 * (HDF5's thread-safety set-up, run by pthread_once) returns to libc, so
 * the first frame out of libc and stasis is the one that asked. Without
 * it the key was taken for the runtime's, its values were not saved, and
 * HDF5 crashed after a restart on a NULL per-thread counter. */
static uintptr_t key_maker(uintptr_t caller)
{
	void *frames[12];
	int n;

	if (!regions_libc_code(caller))
		return caller;
	n = unw_backtrace(frames, 12);
	for (int i = 0; i < n; i++) {
		uintptr_t pc = (uintptr_t)frames[i];

		if (regions_self_code(pc) && i > 1)
			return caller; /* libc on stasis's behalf */
		if (!regions_libc_code(pc) && !regions_self_code(pc))
			return pc;
	}
	return caller;
}

/* Every key is seen, whoever makes it: the caller decides whose it is. */
EXPORT int pthread_key_create(pthread_key_t *key, void (*destructor)(void *))
{
	int ret;

	REAL(pthread_key_create);
	stasis_busy_enter();
	ret = real(key, destructor);
	if (!ret)
		tls_key_created(*key, destructor, key_maker(CALLER));
	stasis_busy_leave();
	return ret;
}

EXPORT int pthread_key_delete(pthread_key_t key)
{
	int ret;

	REAL(pthread_key_delete);
	stasis_busy_enter();
	tls_key_deleting(key);
	ret = real(key);
	if (ret)
		tls_key_kept(key);
	stasis_busy_leave();
	return ret;
}

EXPORT int dl_iterate_phdr(int (*callback)(struct dl_phdr_info *, size_t, void *), void *data)
{
	int ret;

	REAL(dl_iterate_phdr);
	stasis_busy_enter();
	ret = real(callback, data);
	stasis_busy_leave();
	return ret;
}
