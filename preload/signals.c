/* sigaction() and signal(): while the mprotect backend tracks dirty pages,
 * its SIGSEGV handler must stay first; a handler installed later by the
 * application or the MPI library becomes the one it chains to. */
#include <signal.h>
#include <string.h>

#include "dirty.h"
#include "preload.h"

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	static int (*real)(int, const struct sigaction *, struct sigaction *);

	if (sig == SIGSEGV && dirty_sigaction_hook(sig, act, old))
		return 0;
	if (!real)
		real = (int (*)(int, const struct sigaction *, struct sigaction *))
			stasis_next_symbol("sigaction");
	return real(sig, act, old);
}

/* glibc's signal() calls its internal sigaction, not ours: route it here,
 * with glibc's BSD semantics (SA_RESTART, handler kept). */
EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction act, old;

	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = SA_RESTART;
	sigemptyset(&act.sa_mask);
	sigaddset(&act.sa_mask, sig);
	if (sigaction(sig, &act, &old))
		return SIG_ERR;
	return old.sa_handler;
}
