/* Synchronous sends across a checkpoint's drain. An MPI_Issend (MPI_Ssend
 * runs as one, blocking.h) completes only once its receiver matched the
 * message, and programs count on it: the NBX exchange (MPI_Issend, then
 * MPI_Ibarrier once the sends completed; PETSc's PetscCommBuildTwoSided)
 * ends a round when every rank's sends completed. The drain (drain.c)
 * matches a message in its receiver's stead and sends it again after the
 * checkpoint: the program's request must then complete only once the
 * message sent again (as MPI_Issend) is matched.
 *
 * Which of a sender's messages were drained: MPI matches the messages of
 * one stream (communicator, destination, tag) in the order they were sent,
 * so those a receiver drains are the newest k of the stream. The sender
 * numbers the sends of every stream on which a synchronous send of its is
 * pending; the j-th of the k drained messages of a stream sent back to it
 * is the one numbered count - k + j. */
#ifndef STASIS_MPI_SYNC_SENDS_H
#define STASIS_MPI_SYNC_SENDS_H

#include <mpi.h>
#include <stdint.h>

#include "handles.h"
#include "record.h"

/* Streams numbered now: none in the common case (the program's thread). */
extern int sync_streams;

/* A send of the program started on comm to dest with tag; sync: its
 * request, when it is a synchronous send (a virtual one with VH_SYNC). */
void sync_sends_started(MPI_Request sync, MPI_Comm comm, int dest, int tag);

static inline void sync_sends_note(MPI_Comm comm, int dest, int tag)
{
	if (sync_streams)
		sync_sends_started(MPI_REQUEST_NULL, comm, dest, tag);
}

/* e's number leaves its stream: the program took its completion, or
 * freed it. */
void sync_sends_forget(struct vh_entry *e);

/* The j-th (from 1) of the k messages drained from stream (gid, dest,
 * tag) came back to this rank, their sender: the program's synchronous
 * send it was, still waiting for the program to see it complete; NULL when
 * it was none (or a persistent one, said once). */
struct vh_entry *sync_sends_drained(uint64_t gid, int dest, int tag, int j, int k);

/* Whether a stream (gid, dest, tag) is numbered. */
int sync_sends_watched(uint64_t gid, int dest, int tag);

/* The numbers, carried across a restart in the MPI state. */
int sync_sends_save(struct rec_builder *b);
int sync_sends_load(struct rec_reader *r);

#endif
