/* Every libc entry point that sets a signal disposition, routed to
 * process/sigstate.c, which records the program's and keeps stasis's own
 * signals (and, under the mprotect backend, its SIGSEGV handler) first.
 *
 * glibc's signal(), bsd_signal(), ssignal(), sysv_signal(), sigset(),
 * sigignore() and siginterrupt() call its internal __sigaction, not the
 * interposed sigaction(), and __sigaction is exported too: each is
 * interposed here with glibc's semantics (sysdeps/posix/signal.c,
 * sysv_signal.c, sigset.c, sigignore.c, siginterp.c, glibc 2.36). A raw
 * rt_sigaction system call still passes unseen; a checkpoint then keeps a
 * handler that is code of the program (sigstate.h).
 *
 * A program that takes stasis's own signals synchronously (sigwait,
 * sigwaitinfo, sigtimedwait, signalfd) gets a warning naming the conflict.
 *
 * The program's POSIX timers (timer_create, timer_delete) are noted for
 * process/ptimers.c, which saves them and makes them again under the ids
 * the program holds (SIGEV_THREAD ones are refused there). */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "runtime.h"
#include "interpose.h"
#include "ptimers.h"
#include "regions.h"
#include "sigstate.h"

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return sigstate_sigaction(sig, act, old, CALLER);
}

EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return sigstate_sigaction(sig, act, old, CALLER);
}

/* signal(), bsd_signal(), ssignal(): BSD semantics, handler kept,
 * SA_RESTART unless siginterrupt() said otherwise. */
static sighandler_t bsd_signal_from(int sig, sighandler_t handler, uintptr_t caller)
{
	struct sigaction act, old;

	if (handler == SIG_ERR || sig < 1 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = sigstate_interrupts(sig) ? 0 : SA_RESTART;
	sigemptyset(&act.sa_mask);
	sigaddset(&act.sa_mask, sig);
	if (sigstate_sigaction(sig, &act, &old, caller))
		return SIG_ERR;
	return old.sa_handler;
}

EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	return bsd_signal_from(sig, handler, CALLER);
}

EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return bsd_signal_from(sig, handler, CALLER);
}

EXPORT sighandler_t ssignal(int sig, sighandler_t handler)
{
	return bsd_signal_from(sig, handler, CALLER);
}

/* System V semantics: reset to SIG_DFL when delivered, not blocked in the
 * handler, system calls interrupted. */
static sighandler_t sysv_signal_from(int sig, sighandler_t handler, uintptr_t caller)
{
	struct sigaction act, old;

	if (handler == SIG_ERR || sig < 1 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = SA_RESETHAND | SA_NODEFER;
	sigemptyset(&act.sa_mask);
	if (sigstate_sigaction(sig, &act, &old, caller))
		return SIG_ERR;
	return old.sa_handler;
}

EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	return sysv_signal_from(sig, handler, CALLER);
}

EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
	return sysv_signal_from(sig, handler, CALLER);
}

/* SIG_HOLD blocks sig; any other disposition is set and unblocks it. The
 * previous disposition, or SIG_HOLD when sig was blocked. */
EXPORT sighandler_t sigset(int sig, sighandler_t disp)
{
	struct sigaction act, old;
	sigset_t set, was;

	if (sig < 1 || sig >= NSIG || disp == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	sigemptyset(&set);
	sigaddset(&set, sig);
	if (disp == SIG_HOLD) {
		if (sigprocmask(SIG_BLOCK, &set, &was) ||
		    sigstate_sigaction(sig, NULL, &old, CALLER))
			return SIG_ERR;
		return sigismember(&was, sig) ? SIG_HOLD : old.sa_handler;
	}
	memset(&act, 0, sizeof(act));
	act.sa_handler = disp;
	sigemptyset(&act.sa_mask);
	if (sigstate_sigaction(sig, &act, &old, CALLER) || sigprocmask(SIG_UNBLOCK, &set, &was))
		return SIG_ERR;
	return sigismember(&was, sig) ? SIG_HOLD : old.sa_handler;
}

EXPORT int sigignore(int sig)
{
	struct sigaction act;

	memset(&act, 0, sizeof(act));
	act.sa_handler = SIG_IGN;
	sigemptyset(&act.sa_mask);
	return sigstate_sigaction(sig, &act, NULL, CALLER);
}

EXPORT int siginterrupt(int sig, int interrupt)
{
	struct sigaction act;

	if (sigstate_sigaction(sig, NULL, &act, CALLER))
		return -1;
	sigstate_set_interrupts(sig, interrupt);
	if (interrupt)
		act.sa_flags &= ~SA_RESTART;
	else
		act.sa_flags |= SA_RESTART;
	return sigstate_sigaction(sig, &act, NULL, CALLER);
}

/* Taking signals synchronously: a conflict when stasis's own are among
 * them (sigstate.h). */
#define WAITS(set, how)                                                                            \
	do {                                                                                       \
		if (stasis_active && regions_app_code(CALLER))                                     \
			sigstate_program_waits(set, how);                                          \
	} while (0)

EXPORT int sigwait(const sigset_t *set, int *sig)
{
	WAITS(set, "sigwait");
	REAL(sigwait);
	return real(set, sig);
}

EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	WAITS(set, "sigwaitinfo");
	REAL(sigwaitinfo);
	return real(set, info);
}

EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *timeout)
{
	WAITS(set, "sigtimedwait");
	REAL(sigtimedwait);
	return real(set, info, timeout);
}

EXPORT int timer_create(clockid_t clock, struct sigevent *sev, timer_t *id)
{
	REAL(timer_create);
	int ret = real(clock, sev, id);

	if (!ret && stasis_active && stasis_depth == 0 && regions_app_code(CALLER))
		ptimers_created(clock, sev, *id);
	return ret;
}

EXPORT int timer_delete(timer_t id)
{
	REAL(timer_delete);
	int ret = real(id);

	if (!ret && stasis_active && stasis_depth == 0 && regions_app_code(CALLER))
		ptimers_deleted(id);
	return ret;
}

/* The program's signal masks never block the two signals stasis needs on
 * its threads: the stop signal (process/threads.h), sent to each thread at
 * a checkpoint, and SIGSEGV, which the mprotect backend raises on a write
 * to saved memory (a synchronous SIGSEGV that is blocked kills the
 * process). A thread that blocks every signal (Boehm GC's markers, Guile's
 * signal thread, the helper threads of many libraries, and every thread
 * they create, which inherits the mask) could otherwise not be stopped.
 * As DMTCP does, both are taken out of the set the program blocks, and the
 * mask it reads back shows them blocked when it asked so (per thread). A
 * raw rt_sigprocmask system call still passes unseen: that thread then
 * stops no checkpoint but its own, named (threads_stop). */
static __thread int program_blocked __attribute__((tls_model("initial-exec")));

static int kept_signal(int i)
{
	return i ? SIGSEGV : threads_stop_signal();
}

typedef int mask_fn(int how, const sigset_t *set, sigset_t *old);

static int program_mask(mask_fn *real, int how, const sigset_t *set, sigset_t *old,
			uintptr_t caller)
{
	int blocked = program_blocked, asked = 0, ret;
	sigset_t mine;

	if (stasis_depth || !regions_app_code(caller) || !threads_stop_signal())
		return real(how, set, old);
	if (set) {
		mine = *set;
		for (int i = 0; i < 2; i++)
			if (sigismember(set, kept_signal(i)) == 1) {
				asked |= 1 << i;
				sigdelset(&mine, kept_signal(i));
			}
		set = &mine;
	}
	ret = real(how, set, old);
	if (ret)
		return ret;
	if (old)
		for (int i = 0; i < 2; i++)
			if (blocked & 1 << i)
				sigaddset(old, kept_signal(i));
	if (set && how == SIG_BLOCK)
		program_blocked = blocked | asked;
	else if (set && how == SIG_UNBLOCK)
		program_blocked = blocked & ~asked;
	else if (set && how == SIG_SETMASK)
		program_blocked = asked;
	return 0;
}

EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	REAL(pthread_sigmask);
	return program_mask(real, how, set, old, CALLER);
}

EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	REAL(sigprocmask);
	return program_mask(real, how, set, old, CALLER);
}
