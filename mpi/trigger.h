/* When checkpoints are wanted (DESIGN.md section 3): a timer on rank 0
 * (STASIS_INTERVAL, or auto from the measured cost) or a SIGUSR1 from the
 * launcher only sets a flag; the coordinator (mpi/coord.h) reads it at the
 * next MPI call and brings every rank to a checkpoint, wherever each is. */
#ifndef STASIS_TRIGGER_H
#define STASIS_TRIGGER_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coord.h"

struct session;

/* Arm the interval timer (rank 0), the SIGUSR1 request handler and the
 * coordinator. */
int trigger_start(struct session *s, coord_take_fn take, struct why *why);
/* A checkpoint is wanted (rank 0's timer or a request). */
bool trigger_wanted(void);
/* A checkpoint ended: cost in seconds (< 0: it did not happen); the
 * interval starts anew. */
void trigger_checkpoint_done(double cost);
/* A checkpoint was put off by what will soon pass (a pipe to another
 * process open): the next try comes after 1 s, not a whole interval. */
void trigger_checkpoint_deferred(void);
/* Finish what is under way and stop the timer (MPI_Finalize). */
void trigger_stop(void);
/* Re-arm after a restart resumed (the interval starts anew). */
void trigger_resumed(void);

#endif
