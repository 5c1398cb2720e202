/* The program's signals (DESIGN.md section 10, "the rest of a process").
 *
 * What the kernel keeps of them - the dispositions the program sets
 * (through any libc entry point: sigaction, signal, bsd_signal, sysv_signal,
 * sigset, ...), the main thread's alternate signal stack, the interval
 * timers (setitimer, alarm), the parent-death signal (prctl) and the
 * signals pending for the main thread -
 * is saved in SECTION_SIGNALS and put back by a restart. The main thread's
 * signal mask travels in its saved context (setcontext restores it).
 *
 * A disposition is the program's when code of the program (the executable,
 * an application library, libc on its behalf) set it outside stasis's MPI
 * wrappers, or when the handler found at a checkpoint is code of the
 * executable or an application library, however it got there. Handlers the
 * MPI library installs (inside MPI_Init, from its threads) are the
 * runtime's: the restart's own MPI_Init installs them again.
 *
 * stasis's own signals (SIGUSR1 for checkpoint requests, the checkpoint
 * timer's real-time signal, ...) are claimed: stasis's handler stays
 * installed, and what the program asks for such a signal is recorded and
 * run after stasis's handler (chained), with the program's sa_mask and
 * SA_RESTART, SA_ONSTACK, SA_NODEFER, SA_RESETHAND, SA_SIGINFO honoured. */
#ifndef STASIS_SIGSTATE_H
#define STASIS_SIGSTATE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image.h"
#include "part.h"

typedef void (*sigstate_handler_fn)(int, siginfo_t *, void *);

/* Install handler (SA_SIGINFO) for sig and keep it first from now on; use
 * says what stasis uses sig for, in warnings. Returns 0 or -errno. */
int sigstate_claim(int sig, sigstate_handler_fn handler, const char *use);
/* From stasis's handler of a claimed signal: run what the program asked for
 * sig, as the kernel would have (nothing for SIG_DFL and SIG_IGN). */
void sigstate_chain(int sig, siginfo_t *si, void *ctx);

/* The preload layer's sigaction(), for a call from code at caller: returns
 * as sigaction(). Async-signal-safe. */
int sigstate_sigaction(int sig, const struct sigaction *act, struct sigaction *old,
		       uintptr_t caller);
/* The program takes the signals of set itself (how: sigwait, signalfd,
 * ...), which it can only do with them blocked: stasis's handler of a
 * claimed one then never runs. One warning per signal naming the conflict;
 * the call goes on. */
void sigstate_program_waits(const sigset_t *set, const char *how);
/* siginterrupt() state that signal() and bsd_signal() honour, as glibc's. */
bool sigstate_interrupts(int sig);
void sigstate_set_interrupts(int sig, bool on);

/* A checkpoint: the program's asynchronous signals are held while it is
 * taken, so that the image is one instant of the program (held ones are
 * delivered by release). Not the synchronous ones (SIGSEGV, ...). */
void sigstate_hold(void);
void sigstate_release(void);
/* The SECTION_SIGNALS record of the program now, in a buffer of stasis's. */
bool sigstate_capture(struct image_region *out);

/* Restart. load: check the image's record and keep it (why: one line).
 * before_jump: hold every asynchronous signal, stop this run's interval
 * timers and drop its pending signals (the image brings its own). resumed:
 * on the main thread after the jump, put the image's dispositions,
 * alternate stack, timers and pending signals back. */
int sigstate_load(const void *rec, size_t len, struct why *why);
void sigstate_before_jump(void);
void sigstate_resumed(void);

/* The signals part (session/part.h): held while a checkpoint saves,
 * checked and held again by a restart, given back once it resumed. */
extern const struct part_ops signals_part;

#endif
