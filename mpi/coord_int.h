/* What the program's thread (coord.c) and stasis's coordinator thread
 * (coord_thread.c) of one rank share. Flags are read and written with
 * sequentially consistent atomics where one side's store must be seen
 * before its next load (entering a collective as an attempt begins); the
 * targets and the outgoing queue are under the lock. */
#ifndef STASIS_MPI_COORD_INT_H
#define STASIS_MPI_COORD_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "oob.h"

/* Messages between the coordinator threads (oob.h). */
enum coord_msg {
	/* rank 0 to all */
	MSG_INTENT = 1, /* a: attempt */
	MSG_TARGET,	/* a: communicator id, b: target */
	MSG_QUERY,	/* a: round */
	MSG_STOP,	/* a: attempt */
	MSG_ABORT,	/* a: attempt */
	MSG_RELEASE,	/* a: attempt: ranks held at gates go on, once */
	MSG_BYE_OK,	/* MPI_Finalize may go on: no attempt will start */
	/* all to rank 0 */
	MSG_SEQ,     /* a: communicator id, b: collectives entered */
	MSG_SEQ_END, /* a: attempt, b: the rank cannot be checkpointed */
	MSG_REPLY,   /* a: round, b: REPLY_* */
	MSG_RAISE,   /* a: communicator id, b: collectives entered */
	MSG_DONE,    /* a: attempt (checkpoint taken or given up) */
	MSG_BYE,     /* the rank is in MPI_Finalize */
	/* rank 0 to all: every rank acknowledged MSG_STOP with no epoch open
	 * on a window: take the checkpoint (a: attempt) */
	MSG_GO,
	/* all to rank 0: MSG_STOP seen (a: attempt); b: an epoch was open on
	 * a window of the rank's then, REPLY_WINDOW_*, or it held a matched
	 * message, REPLY_MATCHED */
	MSG_STOP_ACK,
};

/* REPLY_WINDOW_BUSY: an epoch open on a window that a checkpoint cannot
 * hold (windows.h): the rank may reach a collective before it ends, where it
 * could not stop, or wait in it for a peer's MPI_Win_post or
 * MPI_Win_complete. REPLY_WINDOW_PSCW: one of those is a generalized
 * active-target epoch (post/start/complete/wait). */
enum {
	REPLY_CONVERGED = 1,
	REPLY_IN_COLLECTIVE = 2,
	REPLY_IN_UNGATED = 4,
	REPLY_WINDOW_BUSY = 8,
	REPLY_WINDOW_PSCW = 16,
	/* (MSG_STOP_ACK) the rank holds a message it matched (MPI_Improbe,
	 * MPI_Mprobe) and has not received: it cannot stop (the drain could
	 * not take the message, nor a restart the handle), and may enter a
	 * collective before it receives it. */
	REPLY_MATCHED = 32,
};
/* Above the bits: the rank's collectives entered and completed, summed. */
#define REPLY_PROGRESS_SHIFT 8

struct coord_target {
	uint64_t gid, target;
};

struct coord_shared {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* targets changed, stop, abort, bye */
	int pending;	     /* an attempt is under way */
	int stop;	     /* every rank may stop: take the checkpoint */
	int in_collective;   /* inside a blocking collective */
	int in_ungated;	     /* inside an ungated one (coord.h) */
	int in_match;	     /* inside a call that may match a message (coord_match_begin) */
	int bye_ok;
	uint64_t attempt;
	uint64_t release; /* MSG_RELEASE received (coord.c, hold_while_level) */
	uint64_t go;	  /* the attempt MSG_GO was received for */
	struct coord_target *targets;
	size_t ntargets, targets_cap;
	struct oob_msg *out; /* to send, from the program's thread */
	size_t nout, out_cap;
	int wake[2]; /* a byte wakes the coordinator thread */
	int rank, size;
	int *fds;     /* oob_start() */
	bool blocked; /* the program used a feature stasis cannot restore */
	bool quit;
	/* Whether the program's thread runs on its own memory. False in a
	 * restarted process until the restore is done and the program has
	 * resumed. An attempt announced before then is kept in `deferred`
	 * and answered once ready: until then the restore is still
	 * overwriting the collective counts and handle tables an answer
	 * reads, and no attempt may be half agreed without this rank when
	 * the program resumes. */
	bool ready;
	uint64_t deferred; /* attempt to answer once ready; 0: none */
};

extern struct coord_shared coord_sh;

/* Under the lock. */
uint64_t coord_target_of(uint64_t gid);
void coord_set_target(uint64_t gid, uint64_t target);
bool coord_converged(void);
void coord_queue(uint32_t type, uint64_t a, uint64_t b);

/* Wake the coordinator thread (async-signal-safe). */
void coord_wake(void);
/* The thread (coord_thread.c). */
void *coord_thread_main(void *arg);

#endif
