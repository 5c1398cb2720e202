/* Messages in flight at a checkpoint: drained, not waited for.
 * Once every rank has stopped (coord.h), each learns how many messages
 * are on their way to it (the counts of traffic.h) and receives them into
 * stasis's memory, carried in the checkpoint's MPI state; receives the
 * program posted are cancelled. After the checkpoint (and after a restart)
 * the receives are posted again, and each drained message goes back to
 * its sender, which sends it again on its communicator, with its tag,
 * before anything newer: the program receives it as if it had never been
 * drained, in MPI's order. A synchronous send's message is sent again as
 * one, and the program's request completes with it (sync_sends.h). */
#ifndef STASIS_MPI_DRAIN_H
#define STASIS_MPI_DRAIN_H

#include <mpi.h>
#include <stdbool.h>

#include "coord.h"
#include "record.h"

struct session;

/* Collective over the world, every rank stopped: drain, take the
 * checkpoint, post receives again, send drained messages again. Returns
 * true in a restarted process that has just resumed here. */
bool drain_and_checkpoint(struct session *s, coord_take_fn take);
/* After a checkpoint (and in a restarted process): post the receives the
 * drain cancelled and send the drained messages again, in MPI's order. */
void drain_resume(struct session *s);
/* Sends stasis made again that the program has not received yet: free
 * those that completed (at every poll). */
void drain_progress(void);
bool drain_pending(void);
/* A message sent again as a synchronous send the program freed before it
 * completed (requests.c): kept, with its request real, until MPI is done
 * with it. buf is what mpi_req_hold() was given. */
void drain_keep(MPI_Request real, void *buf);
/* MPI_Finalize: wait for them all. */
void drain_finish(void);

/* The drained messages, in the MPI state of a checkpoint, and back. */
int drain_save(struct rec_builder *b);
int drain_load(struct rec_reader *r);

#endif
