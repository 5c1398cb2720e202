/* The program's signal dispositions, alternate stack, interval timers and
 * pending signals, saved and put back (sigstate.h). */
#define LOG_PREFIX "signals: "
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <unistd.h>

#include "runtime.h"
#include "dirty.h"
#include "format.h"
#include "log.h"
#include "regions.h"
#include "session.h"
#include "sigstate.h"

#define NSIGS STASIS_SIGNALS_MAX /* signals 1..64 */
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000 /* glibc sets it on every action (x86_64) */
#endif

enum owner { NOBODY, PROGRAM, RUNTIME };

/* The last disposition set through the preload layer, and by whom. */
static struct {
	enum owner owner;
	struct sigaction act;
} shadow[NSIGS];

/* stasis's own signals: its handler, and what the program asked for. */
static struct {
	sigstate_handler_fn handler;
	enum owner owner; /* NOBODY: the program asked nothing */
	struct sigaction prog;
	const char *use;
	bool said, warned;
} claims[NSIGS];

static uint64_t interrupts; /* siginterrupt(), bit sig - 1 */

/* While a checkpoint is taken or a restart puts memory back (see "hold"
 * below): the program's handlers swapped out, and the signals noted. */
static struct sigaction held[NSIGS];
static bool is_held[NSIGS];
static sigset_t held_mask;
static volatile int holding;
static uint64_t deferred; /* bit sig - 1 */

static void defer(int sig, siginfo_t *si, void *ctx)
{
	(void)si;
	(void)ctx;
	__atomic_fetch_or(&deferred, 1ull << (sig - 1), __ATOMIC_RELAXED);
}

static atomic_flag locked = ATOMIC_FLAG_INIT;
static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);

/* Found while the library loads (or at the first call, when a library
 * loaded before stasis's constructors ran calls first), not in a handler. */
__attribute__((constructor)) static void find_real(void)
{
	if (!real_sigaction)
		real_sigaction = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(
		    RTLD_NEXT, "sigaction");
}

static void lock(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
	while (atomic_flag_test_and_set_explicit(&locked, memory_order_acquire))
		sched_yield();
}

static void unlock(const sigset_t *old)
{
	atomic_flag_clear_explicit(&locked, memory_order_release);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static uint64_t set_bits(const sigset_t *set)
{
	uint64_t bits = 0;

	for (int s = 1; s < NSIGS; s++)
		if (sigismember(set, s) == 1)
			bits |= 1ull << (s - 1);
	return bits;
}

static void bits_set(uint64_t bits, sigset_t *set)
{
	sigemptyset(set);
	for (int s = 1; s < NSIGS; s++)
		if (bits >> (s - 1) & 1)
			sigaddset(set, s);
}

static bool is_function(const struct sigaction *a)
{
	return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

static bool synchronous(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
	       sig == SIGTRAP || sig == SIGSYS;
}

static bool same_action(const struct sigaction *a, const struct sigaction *b)
{
	return a->sa_handler == b->sa_handler &&
	       (a->sa_flags & ~SA_RESTORER) == (b->sa_flags & ~SA_RESTORER);
}

/* The kernel's action for a claimed signal: stasis's handler, with the
 * program's mask and the flags that only the kernel can honour. Under the
 * lock (or in a handler). */
static int reinstall(int sig)
{
	struct sigaction k;

	memset(&k, 0, sizeof(k));
	k.sa_sigaction = claims[sig].handler;
	k.sa_flags = SA_SIGINFO | SA_RESTART;
	if (claims[sig].owner != NOBODY && is_function(&claims[sig].prog)) {
		k.sa_flags = SA_SIGINFO |
			     (claims[sig].prog.sa_flags & (SA_RESTART | SA_ONSTACK | SA_NODEFER));
		k.sa_mask = claims[sig].prog.sa_mask;
	}
	return real_sigaction(sig, &k, NULL) ? -errno : 0;
}

/* Once per signal, on rank 0. */
static void say_chained(int sig)
{
	if (claims[sig].said || claims[sig].owner != PROGRAM || !is_function(&claims[sig].prog) ||
	    stasis_log_rank != 0)
		return;
	claims[sig].said = true;
	pr_info("the program's handler of signal %d (%s) runs after stasis's, which keeps the "
		"signal for its own use",
		sig, strsignal(sig));
}

int sigstate_claim(int sig, sigstate_handler_fn handler, const char *use)
{
	sigset_t old;
	int ret;

	if (sig < 1 || sig >= NSIGS)
		return -EINVAL;
	lock(&old);
	if (!claims[sig].handler) {
		/* What the program set before stasis came is its to chain to. */
		if (shadow[sig].owner == PROGRAM) {
			claims[sig].owner = PROGRAM;
			claims[sig].prog = shadow[sig].act;
		}
	}
	claims[sig].handler = handler;
	claims[sig].use = use;
	ret = reinstall(sig);
	say_chained(sig);
	unlock(&old);
	return ret;
}

void sigstate_chain(int sig, siginfo_t *si, void *ctx)
{
	struct sigaction a;

	if (sig < 1 || sig >= NSIGS || claims[sig].owner == NOBODY)
		return;
	a = claims[sig].prog;
	if (!is_function(&a))
		return;
	if (holding) {
		defer(sig, si, ctx);
		return;
	}
	if (a.sa_flags & SA_RESETHAND) {
		claims[sig].prog.sa_handler = SIG_DFL;
		claims[sig].prog.sa_flags &= ~SA_SIGINFO;
		reinstall(sig);
	}
	if (a.sa_flags & SA_SIGINFO)
		a.sa_sigaction(sig, si, ctx);
	else
		a.sa_handler(sig);
}

void sigstate_program_waits(const sigset_t *set, const char *how)
{
	for (int sig = 1; sig < NSIGS; sig++) {
		if (!claims[sig].handler || claims[sig].warned || sigismember(set, sig) != 1)
			continue;
		claims[sig].warned = true;
		pr_warn("the program takes signal %d (%s) itself (%s), which stasis uses for %s: "
			"those the program takes never reach stasis",
			sig, strsignal(sig), how, claims[sig].use);
	}
}

bool sigstate_interrupts(int sig)
{
	return sig > 0 && sig < NSIGS && (interrupts >> (sig - 1) & 1);
}

void sigstate_set_interrupts(int sig, bool on)
{
	if (sig < 1 || sig >= NSIGS)
		return;
	if (on)
		__atomic_fetch_or(&interrupts, 1ull << (sig - 1), __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(&interrupts, ~(1ull << (sig - 1)), __ATOMIC_RELAXED);
}

/* Set sig's disposition for owner, under the lock. */
static int set_action(int sig, const struct sigaction *act, struct sigaction *old, enum owner owner)
{
	static const struct sigaction dfl = {.sa_handler = SIG_DFL};
	int ret;

	if (claims[sig].handler) {
		if (old)
			*old = claims[sig].owner != NOBODY ? claims[sig].prog : dfl;
		if (!act)
			return 0;
		claims[sig].prog = *act;
		claims[sig].owner = owner;
		say_chained(sig);
		return reinstall(sig);
	}
	if (is_held[sig]) {
		/* Deferred for a checkpoint: the change waits with the rest. */
		if (old)
			*old = held[sig];
		if (act)
			held[sig] = *act;
		ret = 0;
	} else if (sig == SIGSEGV && dirty_sigaction_hook(sig, act, old))
		ret = 0;
	else
		ret = real_sigaction(sig, act, old) ? -errno : 0;
	if (!ret && act) {
		shadow[sig].owner = owner;
		shadow[sig].act = *act;
	}
	return ret;
}

int sigstate_sigaction(int sig, const struct sigaction *act, struct sigaction *old,
		       uintptr_t caller)
{
	enum owner owner;
	sigset_t mask;
	int ret;

	find_real();
	if (!stasis_active || sig < 1 || sig >= NSIGS || stasis_in_vfork_child())
		return real_sigaction(sig, act, old);
	owner = stasis_depth == 0 && regions_app_code(caller) ? PROGRAM : RUNTIME;
	lock(&mask);
	ret = set_action(sig, act, old, owner);
	unlock(&mask);
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

/* --- checkpoint --------------------------------------------------------------------------- */

/* While a checkpoint is taken (and while a restart puts memory back) the
 * program's handlers must not run anywhere: the image is one instant of
 * the program, and a process-directed signal goes to any thread that does
 * not block it, the MPI library's too, where the handler would write
 * memory being saved. So the main thread blocks them, and the program's
 * asynchronous handlers are swapped for one that only notes the signal;
 * noted signals are raised again at the main thread afterwards. */

static bool programs(int sig, const struct sigaction *cur)
{
	return is_function(cur) &&
	       ((shadow[sig].owner == PROGRAM && same_action(cur, &shadow[sig].act)) ||
		regions_app_text((uintptr_t)cur->sa_handler));
}

/* Under the lock: swap the program's asynchronous handlers for defer(). */
static void defer_handlers(void)
{
	struct sigaction d;

	memset(&d, 0, sizeof(d));
	d.sa_sigaction = defer;
	d.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&d.sa_mask);
	holding = 1;
	for (int sig = 1; sig < NSIGS; sig++) {
		struct sigaction cur;

		is_held[sig] = false;
		if (claims[sig].handler || synchronous(sig) || sig == SIGKILL || sig == SIGSTOP ||
		    real_sigaction(sig, NULL, &cur) || !programs(sig, &cur))
			continue;
		held[sig] = cur;
		is_held[sig] = !real_sigaction(sig, &d, NULL);
	}
}

static sigset_t async_signals(void)
{
	sigset_t s;

	sigfillset(&s);
	for (int sig = 1; sig < NSIGS; sig++)
		if (synchronous(sig))
			sigdelset(&s, sig);
	return s;
}

void sigstate_hold(void)
{
	sigset_t s = async_signals(), old;

	pthread_sigmask(SIG_BLOCK, &s, &held_mask);
	lock(&old);
	defer_handlers();
	unlock(&old);
}

/* Under the lock: the handlers defer_handlers() swapped out go back; the
 * signals noted meanwhile are returned. */
static uint64_t undefer_handlers(void)
{
	for (int sig = 1; sig < NSIGS; sig++) {
		if (is_held[sig])
			real_sigaction(sig, &held[sig], NULL);
		is_held[sig] = false;
	}
	holding = 0;
	return __atomic_exchange_n(&deferred, 0, __ATOMIC_RELAXED);
}

void sigstate_release(void)
{
	uint64_t raised;
	sigset_t old;

	lock(&old);
	raised = undefer_handlers();
	unlock(&old);
	for (int sig = 1; sig < NSIGS; sig++)
		if (raised >> (sig - 1) & 1)
			raise(sig);
	pthread_sigmask(SIG_SETMASK, &held_mask, NULL);
}

/* Page aligned: the image writer hands region data to O_DIRECT as it is. */
static union {
	struct signals_record rec;
	char bytes[(sizeof(struct signals_record) + STASIS_PAGE - 1) / STASIS_PAGE * STASIS_PAGE];
} buf __attribute__((aligned(STASIS_PAGE)));

static void put_action(struct signal_action *out, const struct sigaction *a)
{
	out->handler = (uintptr_t)a->sa_handler;
	out->flags = (uint64_t)(unsigned)a->sa_flags & ~(uint64_t)SA_RESTORER;
	out->mask = set_bits(&a->sa_mask);
	out->saved = 1;
}

static uint64_t us(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000000u + tv->tv_usec;
}

bool sigstate_capture(struct image_region *out)
{
	struct signals_record *rec = &buf.rec;
	struct itimerval it;
	stack_t ss;
	sigset_t mask, pending;

	memset(&buf, 0, sizeof(buf));
	memcpy(rec->magic, STASIS_SIGNALS_MAGIC, sizeof(rec->magic));
	rec->record_size = sizeof(*rec);
	rec->nsig = NSIGS;
	lock(&mask);
	for (int sig = 1; sig < NSIGS; sig++) {
		struct sigaction cur;

		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (claims[sig].handler) {
			if (claims[sig].owner == PROGRAM)
				put_action(&rec->action[sig], &claims[sig].prog);
			continue;
		}
		if (is_held[sig])
			cur = held[sig];
		else if (!(sig == SIGSEGV && dirty_sigaction_hook(sig, NULL, &cur)) &&
			 real_sigaction(sig, NULL, &cur))
			continue;
		/* The program's as it set it, or a handler of its code set some
		 * way the preload layer did not see (a raw system call). */
		if ((shadow[sig].owner == PROGRAM && same_action(&cur, &shadow[sig].act)) ||
		    (is_function(&cur) && regions_app_text((uintptr_t)cur.sa_handler)))
			put_action(&rec->action[sig], &cur);
	}
	unlock(&mask);
	for (int w = 0; w < 3; w++) {
		if (getitimer(w, &it))
			continue;
		/* An interval timer that expired with its SIGALRM still
		 * pending reads 0 left (the kernel arms it again when the
		 * signal is taken; a disarmed one reads interval 0 too), and
		 * setitimer would take that 0 as "disarm": the restarted
		 * program would lose its timer. Saved as the kernel will arm
		 * it, one interval on; the pending signal is saved below. */
		if (!it.it_value.tv_sec && !it.it_value.tv_usec)
			it.it_value = it.it_interval;
		rec->itimer[w].value_us = us(&it.it_value);
		rec->itimer[w].interval_us = us(&it.it_interval);
	}
	rec->altstack_flags = SS_DISABLE;
	if (!sigaltstack(NULL, &ss) && !(ss.ss_flags & SS_DISABLE)) {
		rec->altstack_sp = (uintptr_t)ss.ss_sp;
		rec->altstack_size = ss.ss_size;
		rec->altstack_flags = ss.ss_flags & ~SS_ONSTACK;
	}
	{
		int pdeath = 0;

		if (!prctl(PR_GET_PDEATHSIG, &pdeath, 0, 0, 0) && pdeath > 0 && pdeath < NSIGS)
			rec->pdeathsig = pdeath;
	}
	if (!sigpending(&pending)) {
		/* Noted while held: raised again after this checkpoint, and
		 * after a restart from it. */
		rec->pending = set_bits(&pending) | __atomic_load_n(&deferred, __ATOMIC_RELAXED);
		for (int sig = 1; sig < NSIGS; sig++)
			if (claims[sig].handler)
				rec->pending &= ~(1ull << (sig - 1));
	}
	*out = (struct image_region){(uintptr_t)&buf, sizeof(buf), SECTION_SIGNALS, NULL};
	return true;
}

/* --- restart ----------------------------------------------------------------------------- */

static struct signals_record restored;
static bool have_restored;

int sigstate_load(const void *data, size_t len, struct why *why)
{
	const struct signals_record *rec = data;

	have_restored = false;
	if (!rec || len < sizeof(*rec) || memcmp(rec->magic, STASIS_SIGNALS_MAGIC, 8) ||
	    rec->record_size != sizeof(*rec) || rec->nsig != NSIGS) {
		return why_set(why, -EBADMSG,
			       "the image has no valid record of the program's signals");
	}
	for (int w = 0; w < 3; w++)
		if (rec->itimer[w].value_us / 1000000u > (uint64_t)INT32_MAX ||
		    rec->itimer[w].interval_us / 1000000u > (uint64_t)INT32_MAX ||
		    rec->pdeathsig >= NSIGS) {
			return why_set(why, -EBADMSG,
				       "the record of the program's signals is damaged");
		}
	restored = *rec;
	have_restored = true;
	return 0;
}

void sigstate_before_jump(void)
{
	static const struct itimerval zero;
	sigset_t s = async_signals(), pending, old;

	pthread_sigmask(SIG_BLOCK, &s, NULL);
	for (int w = 0; w < 3; w++)
		setitimer(w, &zero, NULL);
	/* Until sigstate_resumed() installs the image's: what arrives for
	 * the program meanwhile is noted and raised then. */
	lock(&old);
	defer_handlers();
	unlock(&old);
	/* Setting SIG_IGN discards a pending signal (POSIX); stasis's own stay
	 * pending, a checkpoint request among them. */
	if (sigpending(&pending))
		return;
	for (int sig = 1; sig < NSIGS; sig++) {
		struct sigaction ign = {.sa_handler = SIG_IGN}, cur;

		if (sigismember(&pending, sig) != 1 || claims[sig].handler || synchronous(sig) ||
		    sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (!real_sigaction(sig, &ign, &cur))
			real_sigaction(sig, &cur, NULL);
	}
}

static struct timeval tv(uint64_t us)
{
	return (struct timeval){(time_t)(us / 1000000u), (suseconds_t)(us % 1000000u)};
}

void sigstate_resumed(void)
{
	sigset_t mask;
	stack_t ss;

	if (!have_restored)
		return;
	/* Everything blocked until all is back; mask is the program's. */
	lock(&mask);
	restored.pending |= undefer_handlers();
	for (int sig = 1; sig < NSIGS; sig++) {
		const struct signal_action *a = &restored.action[sig];
		struct sigaction act;

		if (!a->saved || sig == SIGKILL || sig == SIGSTOP)
			continue;
		memset(&act, 0, sizeof(act));
		act.sa_handler = (void (*)(int))(uintptr_t)a->handler;
		act.sa_flags = (int)a->flags;
		bits_set(a->mask, &act.sa_mask);
		if (set_action(sig, &act, NULL, PROGRAM))
			pr_warn("cannot give signal %d (%s) the program's disposition back", sig,
				strsignal(sig));
	}
	atomic_flag_clear_explicit(&locked, memory_order_release);
	ss = (stack_t){(void *)(uintptr_t)restored.altstack_sp, (int)restored.altstack_flags,
		       restored.altstack_size};
	if (restored.altstack_flags & SS_DISABLE)
		ss = (stack_t){NULL, SS_DISABLE, 0};
	if (sigaltstack(&ss, NULL))
		pr_warn("cannot give the main thread its alternate signal stack back: %s",
			strerror(errno));
	for (int w = 0; w < 3; w++) {
		struct itimerval it = {tv(restored.itimer[w].interval_us),
				       tv(restored.itimer[w].value_us)};

		if (setitimer(w, &it, NULL))
			pr_warn("cannot arm interval timer %d again: %s", w, strerror(errno));
	}
	if (restored.pdeathsig && prctl(PR_SET_PDEATHSIG, restored.pdeathsig, 0, 0, 0))
		pr_warn("cannot set the parent-death signal again: %s", strerror(errno));
	/* Pending for the main thread: raised to it again, delivered once the
	 * program's mask lets them through. */
	for (int sig = 1; sig < NSIGS; sig++)
		if (restored.pending >> (sig - 1) & 1 && sig != SIGKILL && sig != SIGSTOP)
			raise(sig);
	have_restored = false;
	pthread_sigmask(SIG_SETMASK, &mask, NULL);
}

/* --- the signals part (session/part.h) ------------------------------------------------ */

static int signals_part_quiesce(struct why *why)
{
	(void)why;
	sigstate_hold();
	return 0;
}

static int signals_part_save(uint64_t id, struct section_list *out, struct why *why)
{
	struct image_region r;

	(void)id;
	if (!sigstate_capture(&r))
		return 0;
	return section_add(out, r.kind, (const void *)r.addr, r.length, why);
}

static int signals_part_verify(const struct restart_input *in, struct why *why)
{
	const struct section *sec = restart_section(in, SECTION_SIGNALS);
	return sigstate_load(sec->data, sec->len, why);
}

static int signals_part_reattach(const struct restart_input *in, struct why *why)
{
	(void)in;
	(void)why;
	sigstate_before_jump();
	return 0;
}

static void signals_part_resumed(bool restarted)
{
	if (restarted)
		sigstate_resumed();
}

const struct part_ops signals_part = {
    .name = "signals",
    .quiesce = signals_part_quiesce,
    .save = signals_part_save,
    .thaw = sigstate_release,
    .verify = signals_part_verify,
    .reattach = signals_part_reattach,
    .resumed = signals_part_resumed,
};
