#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "runtime.h"

bool stasis_active;
int stasis_pid;
volatile int stasis_vfork_tid;
__thread int stasis_depth;
static __thread signed char main_thread = -1;

bool stasis_on_main_thread(void)
{
	if (main_thread < 0)
		main_thread = syscall(SYS_gettid) == getpid();
	return main_thread;
}

void *stasis_next_symbol(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (!p)
		pr_err("cannot find the real %s: %s", name, dlerror());
	return p;
}

bool stasis_vfork_child_slow(void)
{
	int tid;

	if (getpid() != stasis_pid)
		return true;
	tid = (int)syscall(SYS_gettid);
	/* The thread that called vfork() runs again: its child is gone. */
	if (tid == stasis_vfork_tid)
		__atomic_compare_exchange_n(&stasis_vfork_tid, &tid, 0, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	return false;
}
