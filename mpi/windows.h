/* One-sided communication: windows as virtual handles, recorded and made
 * again by a restart over the same memory, and the epochs that decide where
 * a checkpoint may be taken.
 *
 * Memory: MPI_Win_create's and MPI_Win_attach's is the program's own (saved
 * with it, at the same address); MPI_Win_allocate's is served from the
 * arena and the window made over it with MPI_Win_create, so a restart makes
 * it the same way (MPI_WIN_CREATE_FLAVOR then says "create").
 *
 * Epochs: a checkpoint needs every RMA operation complete at its origin and
 * its target. Fences are collectives counted on a communicator of stasis's
 * (coord.h), so no rank is inside one when all stop; operations issued
 * since the last fence are completed by a fence of stasis's in the drain
 * (windows_settle), which a program may always meet (an extra fence only
 * completes operations early). A passive-target epoch (MPI_Win_lock, or
 * MPI_Win_lock_all with operations not yet flushed by MPI_Win_flush_all)
 * cannot be closed for the program: the ranks are not told to stop while
 * one has such an epoch open (windows_busy: it may enter a collective, an
 * MPI_Allreduce under a lock, where it could not stop), for at most
 * WINDOWS_HOLD_SECONDS, past which rank 0 says so and skips the checkpoint;
 * a rank whose epoch opened after it was told does not stop at its MPI
 * calls (windows_hold_stop) until the epoch ends. A lock_all with nothing unflushed is made
 * again by the restart.
 *
 * Generalized active target (post/start/complete/wait) is a pair of
 * epochs each rank's peers must meet: an origin waits in MPI_Win_complete
 * (in MPI_Win_start with Open MPI's osc/rdma) for its targets' MPI_Win_post,
 * a target in MPI_Win_wait for its origins' MPI_Win_complete. A rank held
 * where it stops while a peer waits there for it would hang the job, so:
 * an open epoch is busy as a passive one (the leader does not stop the
 * ranks while one is open); MPI_Win_post and MPI_Win_start are where a
 * rank waits during an attempt as at a collective's entry, out of every
 * epoch (windows_opening, coord_epoch_gate), which gives a loop of epochs
 * a point where all can stop; and an epoch opened after the last round,
 * as STOP was on its way, is seen by the rank's answer to STOP (coord.h),
 * on which the attempt is given up and the ranks go on.
 *
 * MPI_Win_allocate_shared's memory is one mapping shared by the ranks of a
 * node: stasis makes it itself (windows_shared.c says how), saves each
 * rank's part and maps it again, shared, at a restart.
 *
 * Windows made through the Fortran bindings are made by the C wrappers
 * (windows_f.c); attributes cached on windows are snapshot.c's, as those
 * on communicators and datatypes. */
#ifndef STASIS_MPI_WINDOWS_H
#define STASIS_MPI_WINDOWS_H

#include <mpi.h>
#include <stdbool.h>

#include "part.h"
#include "record.h"
#include "why.h"

#define WINDOWS_HOLD_SECONDS 10

/* The communicator of stasis's that counts v's fences. */
MPI_Comm windows_comm(MPI_Win v);

/* Hooks of the generated wrappers (calls.def): an RMA operation is about
 * to be issued on v; a synchronisation call on v succeeded. */
void windows_op(MPI_Win v);
void windows_fenced(MPI_Win v, int assert_, int unused);
void windows_locked(MPI_Win v, int unused1, int unused2);
void windows_unlocked(MPI_Win v, int unused1, int unused2);
void windows_locked_all(MPI_Win v, int unused1, int unused2);
void windows_unlocked_all(MPI_Win v, int unused1, int unused2);
void windows_flushed_all(MPI_Win v, int unused1, int unused2);
/* Around MPI_Win_start (WIN_ACCESS) and MPI_Win_post (WIN_EXPOSURE):
 * windows_opening at the entry, before the program's handles are
 * translated (a checkpoint may be taken in it, coord_epoch_gate), and
 * windows_opened after the call, ok when it succeeded. */
enum { WIN_ACCESS, WIN_EXPOSURE };
void windows_opening(void);
void windows_opened(MPI_Win v, int ok, int epoch);
void windows_completed(MPI_Win v, int unused1, int unused2);
/* A library's section that no checkpoint may fall inside (libfenix's
 * store: its files half written, its descriptors open), counted as an
 * epoch of post/start/complete/wait: begun where a rank may wait as at a
 * collective's entry, never stopped in, a checkpoint attempt given up if
 * one was under way. end may be called on another thread. */
void windows_section_begin(void);
/* The ranks' parts of shared-memory windows (windows_shared.c), saved in
 * SECTION_SHARED_WINDOWS and written back after the windows are made again
 * (session/part.h). */
extern const struct part_ops shared_windows_part;
void windows_section_end(void);
void windows_waited(MPI_Win v, int unused1, int unused2);
void windows_tested(MPI_Win v, int *flag, int unused);
void windows_attached(MPI_Win v, void *base, MPI_Aint size);
void windows_detached(MPI_Win v, const void *base, int unused);

/* For the coordinator thread's replies (coord_int.h): a passive-target
 * epoch with work MPI has not completed is open on a window of this rank's.
 * Such a rank is not told to stop, nor held at a collective's entry: it
 * could enter a collective before the epoch ends (a lock held around an
 * MPI_Allreduce), where it cannot stop. */
bool windows_busy(void);
/* An epoch of post/start/complete/wait is open (or opening) on one of this
 * rank's windows (sequentially consistent: coord.h). */
bool windows_pscw(void);
/* Epochs of post/start/complete/wait opened and closed so far: the leader
 * sees from it that a rank moves. */
uint64_t windows_progress(void);

/* For the coordinator (coord.h), where a rank would stop: true while a
 * passive-target epoch with work MPI has not completed is open on one of
 * this rank's windows and it has waited less than WINDOWS_HOLD_SECONDS
 * (said at STASIS_VERBOSE=1). */
bool windows_hold_stop(void);

/* In the drain, every rank together: fence the windows in a fence epoch;
 * 0 when no rank has an epoch open that a checkpoint cannot hold, else
 * -EBUSY (rank 0 has said which). Collective over comm. */
int windows_settle(MPI_Comm comm);

/* After a checkpoint was taken (or resumed), every rank together: under
 * the mprotect backend, window memory other ranks write is made writable
 * again before any rank goes on. Collective over comm. */
void windows_checkpointed(MPI_Comm comm);

/* A checkpoint: each window's record gets its epoch, name, error handler
 * and attached regions. */
int windows_refresh(void);
/* Replay: make the window of rec (collective over its members), then,
 * once every object is made, its state (windows_apply). */
int windows_replay(struct mpi_record *rec, MPI_Win *real, struct why *why);
int windows_apply(struct why *why);

#endif
