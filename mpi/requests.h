/* Requests (DESIGN.md sections 3 and 10): every request the program holds
 * is virtual. A request in progress defers checkpoints (until "checkpoint
 * anywhere" drains them); a persistent request is recorded by the call
 * that made it and made again, inactive, at restart. Receives are counted
 * when they complete, persistent sends when they start (core/traffic.c
 * counts the rest). */
#ifndef STASIS_MPI_REQUESTS_H
#define STASIS_MPI_REQUESTS_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "record.h"

/* kind: VH_SEND, VH_RECV or 0, with VH_NOPEER for MPI_PROC_NULL. */
static inline uint32_t mpi_req_kind(uint32_t kind, int peer)
{
	return kind | (peer == MPI_PROC_NULL ? VH_NOPEER : 0);
}

/* A request MPI just started (Isend, Irecv, a non-blocking collective):
 * its virtual handle; null passes unchanged. */
MPI_Request mpi_req_new(MPI_Request real, uint32_t kind);
MPI_Fint mpi_req_new_f(MPI_Fint real_f, uint32_t kind);
/* A persistent request (inactive), recorded with the arguments in b. */
MPI_Request mpi_req_persistent(MPI_Request real, uint32_t kind, struct rec_builder *b,
			       const char *call);
MPI_Fint mpi_req_persistent_f(MPI_Fint real_f, uint32_t kind, struct rec_builder *b,
			      const char *call);

/* After a Wait/Test call: *app held the program's handle, real is what
 * MPI left in the call's copy; done says whether the call completed it
 * (what tells it for a persistent request). Writes the program's handle
 * back: MPI_REQUEST_NULL once a request is gone. */
void mpi_req_settle(MPI_Request *app, MPI_Request real, bool done);
void mpi_req_settle_f(MPI_Fint *app, MPI_Fint real_f, bool done);
/* MPI_Start of the program's handle v succeeded. */
void mpi_req_started(MPI_Request v);
void mpi_req_started_f(MPI_Fint v);
/* MPI_Request_free of *app succeeded. */
void mpi_req_freed(MPI_Request *app);
void mpi_req_freed_f(MPI_Fint *app);

/* MPI_Mprobe matched a message: pending until MPI_Mrecv takes it. */
void mpi_message_matched(MPI_Message m);
void mpi_message_received(MPI_Message m);

/* Requests in progress and matched messages not yet received. */
int64_t mpi_pending(void);

#endif
