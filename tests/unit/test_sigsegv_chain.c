/* The mprotect backend's SIGSEGV handler shares the signal with the
 * program: writes to tracked pages are stasis's, every other fault reaches
 * the program's own handler, and with no handler a crash is still a crash.
 * Exit 0 pass, 1 fail. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "dirty.h"

static const struct dirty_backend *be;
static size_t ps;
static char *tracked; /* 16 tracked pages */
static sigjmp_buf env;
static volatile sig_atomic_t app_calls, plain_calls;
static void *volatile fault_addr;

/* What the preload layer's sigaction() does. */
static int app_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (dirty_sigaction_hook(sig, act, old))
		return 0;
	return sigaction(sig, act, old);
}

static void app_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	app_calls++;
	fault_addr = si->si_addr;
	/* The program's handler writes to its own (tracked) data: this nested
	 * fault must be stasis's even though we are inside a SIGSEGV handler. */
	tracked[5 * ps] = 1;
	siglongjmp(env, 1);
}

static void plain_handler(int sig)
{
	(void)sig;
	plain_calls++;
	siglongjmp(env, 1);
}

static char *unmapped_address(void)
{
	char *p = mmap(NULL, ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	munmap(p, ps);
	return p;
}

/* Run fn in a child; return its wait status. */
static int in_child(void (*fn)(void))
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		struct rlimit no_core = {0, 0};

		setrlimit(RLIMIT_CORE, &no_core);
		fn();
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

static void child_null_dfl(void)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};

	app_sigaction(SIGSEGV, &dfl, NULL);
	tracked[ps] = 2; /* still tracked in the child: handled, no crash */
	*(volatile int *)0 = 1;
}

static void child_null_ign(void)
{
	struct sigaction ign = {.sa_handler = SIG_IGN};

	app_sigaction(SIGSEGV, &ign, NULL);
	*(volatile int *)0 = 1;
}

static void child_raise_dfl(void)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};

	app_sigaction(SIGSEGV, &dfl, NULL);
	raise(SIGSEGV);
}

static void child_write_only(void)
{
	tracked[2 * ps] = 3;
	_exit(7);
}

static void expect_segv(const char *what, int status)
{
	CHECKF(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
	      "%s: child status %#x, wanted death by SIGSEGV", what, status);
}

int main(void)
{
	struct sigaction sa, got;
	uint64_t bits = 0;
	struct why why = WHY_INIT;
	char *bad;
	int ret;

	ps = (size_t)sysconf(_SC_PAGESIZE);
	be = dirty_select("mprotect", &why);
	if (!be) {
		fprintf(stderr, "%s\n", why.msg);
		return 1;
	}
	tracked = mmap(NULL, 16 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ret = be->track((uintptr_t)tracked, 16 * ps);
	CHECKF(ret == 0, "track: %s", strerror(-ret));

	/* The program installs its handler after stasis. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = app_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	CHECKF(app_sigaction(SIGSEGV, &sa, &got) == 0, "app sigaction");
	CHECKF(got.sa_handler == SIG_DFL, "old action was not SIG_DFL");
	CHECKF(app_sigaction(SIGSEGV, NULL, &got) == 0 && (got.sa_flags & SA_SIGINFO) &&
		  got.sa_sigaction == app_handler,
	      "the program does not see its own handler");
	CHECKF(sigaction(SIGSEGV, NULL, &got) == 0 && got.sa_sigaction != app_handler,
	      "stasis's handler was replaced");

	/* A tracked page: stasis's fault. */
	tracked[3 * ps] = 1;
	CHECKF(app_calls == 0, "program handler called for a tracked write");

	/* Not ours: the program's handler runs, with the fault's siginfo. */
	bad = unmapped_address();
	if (!sigsetjmp(env, 1))
		*(volatile char *)bad = 1;
	CHECKF(app_calls == 1, "program handler calls %d, wanted 1", (int)app_calls);
	CHECKF(fault_addr == bad, "si_addr %p, wanted %p", fault_addr, (void *)bad);
	/* A read of an unmapped page, too. */
	if (!sigsetjmp(env, 1))
		(void)*(volatile char *)bad;
	CHECKF(app_calls == 2, "program handler calls %d, wanted 2", (int)app_calls);

	ret = be->collect((uintptr_t)tracked, 16 * ps, &bits);
	CHECKF(ret == 0 && bits == ((1ULL << 3) | (1ULL << 5)), "collected %#llx, wanted %#llx",
	      (unsigned long long)bits, (unsigned long long)((1ULL << 3) | (1ULL << 5)));

	/* A handler without SA_INFO is called as handler(sig). */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = plain_handler;
	sigemptyset(&sa.sa_mask);
	app_sigaction(SIGSEGV, &sa, NULL);
	if (!sigsetjmp(env, 1))
		*(volatile char *)bad = 1;
	CHECKF(plain_calls == 1, "plain handler calls %d, wanted 1", (int)plain_calls);

	/* No handler: a real crash still kills with SIGSEGV. */
	expect_segv("NULL write under SIG_DFL", in_child(child_null_dfl));
	expect_segv("NULL write under SIG_IGN", in_child(child_null_ign));
	expect_segv("raise(SIGSEGV) under SIG_DFL", in_child(child_raise_dfl));
	ret = in_child(child_write_only);
	CHECKF(WIFEXITED(ret) && WEXITSTATUS(ret) == 7, "tracked write in a child: status %#x", ret);

	/* fini gives SIGSEGV back to the program's last choice. */
	be->fini();
	CHECKF(sigaction(SIGSEGV, NULL, &got) == 0 && got.sa_handler == plain_handler,
	      "fini did not restore the program's handler");
	CHECKF(dirty_sigaction_hook(SIGSEGV, NULL, &got) == 0, "hook active after fini");

	if (failures) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	printf("ok - SIGSEGV chaining\n");
	return 0;
}
