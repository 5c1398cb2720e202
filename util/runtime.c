#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "runtime.h"

bool stasis_active;
bool stasis_forked;
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
