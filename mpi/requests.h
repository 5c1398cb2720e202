/* Requests (DESIGN.md sections 3 and 10): every request the program holds
 * is virtual. Each carries what stasis needs to take a checkpoint while it
 * is in progress: a receive keeps its arguments, to be cancelled
 * at the checkpoint and posted again after it (and after a restart) under
 * the same handle; a collective keeps its communicator's collective counts; one that
 * stasis completed itself while the program was elsewhere keeps its status
 * until the program's Wait or Test asks. A persistent request is recorded
 * by the call that made it and made again, inactive, at restart. */
#ifndef STASIS_MPI_REQUESTS_H
#define STASIS_MPI_REQUESTS_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "record.h"

struct comm_info;

/* Fortran statuses are the C struct seen as INTEGERs. */
#define F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))

/* What stasis keeps for one request (vh_entry.aux). */
struct req_info {
	struct comm_info *coll; /* a collective: its counts */
	MPI_Comm comm;		/* the program's communicator */
	int peer;		/* destination or source */
	/* a receive (VH_RECV): what posts it again */
	void *buf;
	int count, tag;
	MPI_Datatype type;     /* the program's (virtual) datatype */
	MPI_Fint ftype, fcomm; /* Fortran's, for one posted through the bindings */
	uint64_t posted;       /* order of posting (or of the last start): MPI
				* matches receives in that order, so they are
				* posted again in it */
	MPI_Status status;     /* VH_DONE: what the program's Wait returns */
	/* a generalized request (VH_GREQ): its query, free and cancel
	 * functions and extra state (for one started through the Fortran
	 * bindings, the address of the program's INTEGER), and whether the
	 * program completed it */
	void *greq_fn[3];
	MPI_Aint greq_extra;
	bool greq_completed;
	/* a synchronous send (VH_SYNC): its stream's communicator and its
	 * number in the stream (sync_sends.h); held: the buffer of its
	 * message drained and sent again, freed with the request */
	uint64_t sync_gid, sync_pos;
	void *held;
};

/* kind: VH_SEND, VH_RECV or 0, with VH_NOPEER for MPI_PROC_NULL. */
static inline uint32_t mpi_req_kind(uint32_t kind, int peer)
{
	return kind | (peer == MPI_PROC_NULL ? VH_NOPEER : 0);
}

/* A request MPI just started (a send, a non-blocking collective with
 * kind VH_COLL, ...): its virtual handle; null passes unchanged. */
MPI_Request mpi_req_new(MPI_Request real, uint32_t kind, MPI_Comm comm, int peer);
MPI_Fint mpi_req_new_f(MPI_Fint real_f, uint32_t kind, MPI_Comm comm, int peer);
/* A receive MPI just posted: kept to be posted again. */
MPI_Request mpi_req_recv(MPI_Request real, void *buf, int count, MPI_Datatype type, int source,
			 int tag, MPI_Comm comm);
MPI_Fint mpi_req_recv_f(MPI_Fint real_f, void *buf, int count, MPI_Fint ftype, int source, int tag,
			MPI_Fint fcomm);
/* A persistent request (inactive), recorded with the arguments in b. */
MPI_Request mpi_req_persistent(MPI_Request real, uint32_t kind, MPI_Comm comm, int peer,
			       struct rec_builder *b, const char *call);
MPI_Fint mpi_req_persistent_f(MPI_Fint real_f, uint32_t kind, MPI_Comm comm, int peer,
			      struct rec_builder *b, const char *call);

/* A generalized request MPI just started (grequest.c): fn are its query,
 * free and cancel functions, extra its extra state; flags VH_FORTRAN for
 * one started through the Fortran bindings. Kept until the program's
 * Wait or Test completes it, never completed by stasis; a restart starts
 * it again (completed again if the program had). */
MPI_Request mpi_req_greq(MPI_Request real, void *const fn[3], MPI_Aint extra, uint32_t flags);
/* MPI_Grequest_complete of the program's handle v succeeded. */
void mpi_req_greq_completed(MPI_Request v);
/* grequest.c: start the generalized request ri describes again, in a
 * restarted process; 0 or -EIO. */
int grequest_start_again(const struct req_info *ri, bool fortran, MPI_Request *real,
			 MPI_Fint *real_f);

/* After a Wait/Test call: *app held the program's handle, real is what
 * MPI left in the call's copy; done says whether the call completed it
 * (what tells it for a persistent request). Writes the program's handle
 * back (MPI_REQUEST_NULL once a request is gone) and, for a request stasis
 * completed earlier, its status into st (may be MPI_STATUS_IGNORE). */
void mpi_req_settle(MPI_Request *app, MPI_Request real, bool done, MPI_Status *st);
void mpi_req_settle_f(MPI_Fint *app, MPI_Fint real_f, bool done, MPI_Fint *st);
/* Requests stasis completed early, for Waitany/Testany/Waitsome/Testsome:
 * if one of reqs[0..n) is, settle it (into st) and give its index. */
bool mpi_req_take_done(MPI_Request *reqs, int n, int *index, MPI_Status *st);
bool mpi_req_take_done_f(MPI_Fint *reqs, int n, MPI_Fint *index, MPI_Fint *st);
/* MPI_Start of the program's handle v succeeded. */
void mpi_req_started(MPI_Request v);
void mpi_req_started_f(MPI_Fint v);
/* MPI_Request_free of *app succeeded. */
void mpi_req_freed(MPI_Request *app);
void mpi_req_freed_f(MPI_Fint *app);

/* The program's synchronous send e, completed by a checkpoint's drain
 * (VH_DONE), was drained: it is in progress again, as real, the message
 * sent again from buf (sync_sends.h). */
void mpi_req_hold(struct vh_entry *e, MPI_Request real, void *buf);

/* MPI_Mprobe matched a message: pending until MPI_Mrecv takes it. */
void mpi_message_matched(MPI_Message m);
void mpi_message_received(MPI_Message m);

/* Requests in progress and matched messages not yet received. */
int64_t mpi_pending(void);
/* Matched messages not yet received. */
int64_t mpi_matched(void);
/* Non-blocking collectives in progress. */
int64_t mpi_coll_pending(void);

/* For the coordinator (coord.c, drain.c): test every request in progress
 * of kind (VH_RECV, VH_SEND, VH_COLL, or 0 for all) and complete the ones
 * MPI finished, keeping their status for the program; returns how many
 * are still in progress. */
int mpi_req_progress(uint32_t kind);
/* Cancel every receive in progress, to be posted again by mpi_req_repost;
 * one MPI completed meanwhile is kept as completed. 0 or -errno. */
int mpi_req_cancel_receives(void);
/* Post every cancelled receive again (after a checkpoint, or after a
 * restart has put memory back). */
int mpi_req_repost(void);
/* The receives to post again, for the MPI state of a checkpoint, and back
 * (replay: bound, not posted). */
int mpi_req_save(struct rec_builder *b);
int mpi_req_load(struct rec_reader *r);
/* A persistent request the replay made again (bound to v). */
int mpi_req_replayed(struct mpi_record *rec, MPI_Request v);

#endif
