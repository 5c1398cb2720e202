/* The threads of the application at a checkpoint and at a restart
 * (DESIGN.md section 10, "The rest of a process").
 *
 * A thread the application creates (pthread_create from its code outside
 * MPI wrappers, OpenMP's workers in libgomp, OpenBLAS's from its library)
 * gets its stack, and with it glibc's descriptor and static TLS, which
 * glibc puts at the top of a stack it is given, from a zone stasis reserves
 * at start: at a restart the same thread is made again on the same block,
 * so its pthread_t, its thread pointer and its TLS are where they were.
 * Stacks are not in the arena: the mprotect backend write-protects the
 * arena, and a thread faulting on its own stack could not take the signal.
 *
 * At a checkpoint every application thread is brought to a stop in a
 * handler of stasis's signal (SIGRTMIN+3): its registers are the
 * handler's (getcontext), and the interrupted ones sit in the signal frame
 * on its stack, so a restart that puts the stack back and jumps into the
 * handler returns from it (rt_sigreturn) exactly where the thread was; a
 * system call it was in is restarted (SA_RESTART) or returns EINTR, as
 * the same signal would have made it in the checkpointed run. What is
 * saved of a stack is the part in use, from below the handler up to
 * stasis's frame that called the thread's start routine: above it lie
 * glibc's frames, descriptor and TLS, which the new thread has of its own
 * (its thread-local storage of the application is tls.h's).
 *
 * A thread is never stopped inside stasis (the arena's lock, the tables of
 * this module), the MPI library, malloc, dlopen() or ld.so: it is marked
 * and stops itself on the way out. Nor while it holds a stdio lock or
 * libc's list of streams, which the checkpoint's fflush needs: then all are
 * let go and stopped again a moment later.
 *
 * checkpoint.c and restore.c call, in this order:
 *   threads_stop      every application thread stopped (before the
 *                     program's output is flushed)
 *   threads_save      data regions: thread-local storage and keys of every
 *                     thread, the main one included (SECTION_TLS), and the
 *                     threads (SECTION_THREADS)
 *   threads_resume    once the image is written (not after a restart)
 * Restart, on the main thread, before the memory comes back:
 *   threads_restore   keys made again, the main thread's TLS put back, the
 *                     threads made again (or found made by this run's own
 *                     start) and parked with their stacks and TLS back
 * and once it is back, just before the main thread jumps:
 *   threads_release
 */
#ifndef STASIS_THREADS_H
#define STASIS_THREADS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image.h"
#include "part.h"
#include "regions.h"

/* The zone of the application threads' stacks. */
#define STASIS_STACKS_BASE ((uintptr_t)0x7d0000000000ULL)
#define STASIS_STACKS_SIZE ((size_t)256 << 30)

/* At load: reserve the zone, install the stop signal's handler. 0 or
 * -errno (application threads then switch checkpoints off). */
int threads_init(void);
/* The signal that stops application threads (0 before threads_init). */
int threads_stop_signal(void);

int threads_stop(struct why *why);
/* Fills up to max entries of out; returns their number or -errno (why set). */
int threads_save(struct image_region *out, int max, struct why *why);
void threads_resume(void);

/* tls, thr: the image's SECTION_TLS and SECTION_THREADS (NULL when absent).
 * 0, or -errno with why set to one line. */
int threads_restore(const void *tls, size_t tls_len, const void *thr, size_t thr_len,
		    struct why *why);
void threads_release(void);

/* --- what the preload layer uses ------------------------------------------ */

/* slot + 1 on an application thread, 0 elsewhere. */
extern __thread int stasis_app_thread __attribute__((tls_model("initial-exec")));
/* > 0 while the thread is inside stasis: a stop waits until it leaves. */
extern __thread int stasis_busy __attribute__((tls_model("initial-exec")));
/* A stop is under way. */
extern volatile int threads_stopping;

void threads_stop_self(void);

static inline void stasis_busy_enter(void)
{
	stasis_busy++;
}

static inline void stasis_busy_leave(void)
{
	if (--stasis_busy == 0 && __builtin_expect(threads_stopping, 0))
		threads_stop_self();
}

/* pthread_create() of the application: on a stack of the zone, started
 * through stasis. Returns what pthread_create returns. */
int threads_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
		   void *arg);
/* pthread_join and its kin returned 0 for t; pthread_detach(t) returned 0;
 * an application thread calls pthread_exit(retval). */
void threads_joined(pthread_t t);
void threads_detached(pthread_t t);
void threads_exiting(void *retval);
/* An application thread entered an MPI wrapper: refused (the coordinator
 * stops the main thread only). */
void threads_mpi_call(void);

/* The threads part (session/part.h): stopped before a checkpoint, saved
 * as SECTION_TLS and SECTION_THREADS, made again by a restart and released
 * last. */
extern const struct part_ops threads_part;

#endif
