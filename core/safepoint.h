/* When checkpoints are taken (DESIGN.md section 3). A timer or a signal
 * only sets a flag; at each collective on a communicator of every rank,
 * MPI_COMM_WORLD or one derived like it (a safe point)
 * the ranks agree, one safe point late and without blocking, whether one
 * is wanted; all ranks then decide the same way at the same safe point. */
#ifndef STASIS_SAFEPOINT_H
#define STASIS_SAFEPOINT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

struct session;

/* Arm the interval timer (rank 0) and the SIGUSR1 request handler. */
int safepoint_start(struct session *s, char *err, size_t errlen);
/* Before a collective: a safe point when comm spans every rank. */
void safepoint_collective(MPI_Comm comm, const char *call);
/* Complete the pending agreement and stop the timer (MPI_Finalize). */
void safepoint_stop(void);
/* Re-arm after a restart resumed (the interval starts anew). */
void safepoint_resumed(uint64_t index);
uint64_t safepoint_index(void);

#endif
