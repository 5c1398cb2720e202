/* Shared by threads.c (the table, stacks, creation, restart) and
 * threads_stop.c (stopping, saving, resuming). Runtime state: never saved,
 * made again by a restart from the image. */
#ifndef STASIS_THREADS_INT_H
#define STASIS_THREADS_INT_H

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <ucontext.h>

#include "format.h"
#include "why.h"

#define MAX_THREADS 256

enum slot_state {
	SLOT_FREE = 0,
	SLOT_STARTING, /* made, its start routine not called yet */
	SLOT_RUNNING,
	SLOT_EXITING, /* its start routine returned or it called pthread_exit */
	SLOT_ENDED,   /* gone, joinable: waits for pthread_join */
};

enum slot_mode {
	MODE_NORMAL = 0,
	MODE_RESTORE, /* made again by a restart: park, then resume the image */
	MODE_ENDED,   /* made again by a restart: return retval at once */
};

struct slot {
	volatile int state; /* enum slot_state */
	int mode;	    /* enum slot_mode */
	pthread_t pt;
	volatile pid_t tid;
	uintptr_t block, block_size; /* its stack block in the zone */
	uintptr_t top;		     /* just above thread_entry's frame */
	void *(*start)(void *);
	void *arg;
	void *retval;
	bool detached;
	int policy, priority, inherit;

	/* At a checkpoint. */
	volatile int stopped; /* in the handler, context captured */
	volatile int saved;   /* its TLS section written */
	volatile int resumed; /* a restart jumped back into the handler */
	uint32_t position;    /* its TLS section */
	ucontext_t ctx;
	uintptr_t low; /* bottom of the part of its stack saved */
	uint64_t canary;
	int errno_value;
	cpu_set_t affinity;

	/* At a restart. */
	const struct thread_record *rec;
	const uint8_t *stack_bytes;
	volatile int parked; /* 1 parked and ready, -1 failed (why says) */
	struct why why;	     /* cleared when it parks */
	void *temp_stack;
	ucontext_t park_ctx;
};

extern struct slot slots[MAX_THREADS];
extern int stop_signal;

/* threads_stop.c's command word: the stopped threads wait on it. */
enum command { CMD_NONE, CMD_SAVE, CMD_RELEASE };
void command_post(enum command c);

/* Whether the slot's kernel thread has gone (its tid no longer exists). */
bool slot_gone(const struct slot *t);
/* Free ended slots nobody will join, and their blocks. Under the lock. */
void reap_slots(void);
void table_lock(void);
bool table_trylock(void);
void table_unlock(void);

/* A restart's: the handler of a thread made by this run's start, asked to
 * take its place in the image (threads.c). */
extern volatile int restore_requested;
void park_for_restore(struct slot *t) __attribute__((noreturn));
/* Stop the threads this run's start made that the image has (t->rec set,
 * mode MODE_NORMAL) and have them park (threads_stop.c). */
int threads_park_started(struct why *why);

#endif
