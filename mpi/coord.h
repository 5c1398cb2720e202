/* Where and when all ranks stop for a checkpoint (DESIGN.md section 10,
 * after MANA's collective clocks): a checkpoint can start while
 * ranks wait inside MPI, whatever communicator their collectives use, with
 * messages in flight and requests pending.
 *
 * Each rank runs a coordinator thread (coord_thread.c) that talks to rank
 * 0's over stasis's own network (oob.h), never through MPI, so it answers
 * for its rank wherever the program's thread is, even inside a blocking
 * collective:
 * 1. Rank 0's timer (or SIGUSR1) starts an attempt: every rank reports how
 *    many collectives it entered on each communicator
 *    (collective_counts.h); the target of each is the most any member
 *    entered.
 * 2. A rank behind on some communicator runs on, entering collectives
 *    freely (one it enters beyond a target raises it, and the members
 *    follow); a rank level on all of them waits at the entry of its next
 *    collective. Blocking collectives stay MPI's own (a blocking and a
 *    non-blocking collective never match): ranks inside one are counted
 *    and waited for.
 * 3. Rounds of queries until every rank is level and none is inside a
 *    collective (nor in an epoch on a window, windows.h); then STOP: every
 *    rank stops at its next MPI call (blocking point-to-point calls always
 *    run as non-blocking ones plus a loop, blocking.h, so a rank waiting
 *    for a message stops too). Each coordinator thread answers STOP with
 *    whether an epoch is open on a window of its rank's (one may have
 *    opened since the last round); stopped ranks wait for GO, which comes
 *    when none was, or else the attempt is given up and tried again.
 * 4. Drain and checkpoint (drain.h), all together, on the program's
 *    thread.
 *
 * The cost in normal operation is one flag per MPI call, and an atomic
 * increment per collective. */
#ifndef STASIS_MPI_COORD_H
#define STASIS_MPI_COORD_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "threads.h"

struct session;

/* Something for the program's thread to do at its next MPI call: an
 * attempt is under way, every rank stops, messages drained at the last
 * checkpoint are still being sent again. */
extern volatile int coord_flag;

/* The engine's checkpoint (engine/checkpoint.h), handed down at start so
 * that this layer never calls up: collective over the world, every rank
 * stopped and no message in flight. Returns 0 when committed, -errno when
 * this checkpoint was skipped, or CHECKPOINT_RESUMED in a restarted process
 * that has just resumed inside it. */
#define CHECKPOINT_RESUMED 1
typedef int (*coord_take_fn)(struct session *s);

/* Start (MPI_Init, collective: connects the coordinator threads) and end
 * (MPI_Finalize: takes part in an attempt under way first). */
void coord_start(struct session *s, coord_take_fn take);
void coord_finalize(void);

void coord_poll(void);

/* Rank 0's timer or SIGUSR1 wants a checkpoint: wake the coordinator
 * (async-signal-safe). */
void coord_wanted(void);

/* At the entry of every wrapper. A thread of the program's other than the
 * main one is refused (threads.h), and never takes part in an attempt. */
static inline void coord_entry(void)
{
	if (__builtin_expect(stasis_app_thread, 0)) {
		threads_mpi_call();
		return;
	}
	if (__builtin_expect(coord_flag, 0))
		coord_poll();
}

/* At the entry of a blocking collective on the program's communicator
 * comm: counts it; during an attempt, waits here while this rank is level
 * with every member. coord_collective_done once it returns. */
void coord_collective(MPI_Comm comm);
void coord_collective_done(MPI_Comm comm);
/* The same for a non-blocking collective (in progress until its request
 * completes). */
void coord_icollective(MPI_Comm comm);

/* Around a blocking collective no single communicator's count can cover
 * (calls.def "ungated"): during an attempt, a rank level everywhere waits
 * at its entry as at a collective's; a rank found inside one makes rank 0
 * give the attempt up (a member of it may be waiting at another gate) and
 * try again shortly. */
void coord_ungated(void);
void coord_ungated_done(void);

/* For the calls that open an epoch on a window which other ranks' calls
 * must meet (MPI_Win_post, MPI_Win_start: windows.c), before the epoch is
 * counted. coord_epoch_gate: during an attempt, a rank level with every
 * member and with no epoch open waits here as at a collective's entry
 * (every rank of a loop of epochs comes to the same point, out of them
 * all). Then, once the epoch is counted (a sequentially consistent
 * increment the coordinator thread reads after it marks STOP): if
 * coord_stopping() and no other epoch of the rank's is open, the count is
 * taken back and the rank stops here (coord_stop_here: the checkpoint, or
 * the attempt given up, after which the caller counts again); else the
 * rank's answer to STOP said an epoch was open, and the attempt will be
 * given up. */
void coord_epoch_gate(void);
bool coord_stopping(void);
void coord_stop_here(void);

/* In a blocking point-to-point call's loop, and at a Test or an Iprobe:
 * where the rank takes the checkpoint once every rank may stop. */
void coord_wait_point(void);

/* Around a call that may match a message (MPI_Improbe, and MPI_Mprobe's
 * loop of them), right before MPI is called and once the match is
 * counted (mpi_message_matched). A rank that holds a matched message
 * cannot stop, and goes through the gates of collectives (it may be the
 * one its peers wait for); so a STOP must never find a rank that matched
 * one after it answered the last round: the coordinator thread, having
 * stored the stop, waits for the call to end and acknowledges with the
 * matched count (REPLY_MATCHED gives the attempt up), and a call that
 * begins once the stop is stored takes the checkpoint first. During an
 * attempt, a rank level everywhere with no matched message waits at its
 * entry as at a collective's (else, matching each time the others could
 * stop, a rank that holds its message across a collective never lets the
 * ranks meet). */
void coord_match_begin(void);
void coord_match_end(void);

#endif
