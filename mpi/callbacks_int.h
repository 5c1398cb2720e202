/* What callbacks.c (C bindings) and callbacks_f.c (Fortran bindings)
 * share: the slots of trampolines, the records of ops, keyvals and error
 * handlers, and running the program's code as the program's. */
#ifndef STASIS_MPI_CALLBACKS_INT_H
#define STASIS_MPI_CALLBACKS_INT_H

#include "callbacks.h"
#include "handles.h"
#include "runtime.h"

/* The program's code runs as the program's: outside every wrapper, so that
 * what it allocates lands in the arena. */
#define AS_PROGRAM(call)                                                                           \
	do {                                                                                       \
		int saved_depth_ = stasis_depth;                                                   \
		stasis_depth = 0;                                                                  \
		call;                                                                              \
		stasis_depth = saved_depth_;                                                       \
	} while (0)

/* Set during a replay: trampolines do not call the program. */
extern bool callbacks_silent;

enum eh_which { EH_COMM, EH_WIN, EH_FILE };

/* The record's fortran field: 0 for C, 1 for the Fortran bindings,
 * FORTRAN_MPI1 for MPI_KEYVAL_CREATE's (INTEGER extra state and values). */
#define FORTRAN_MPI1 2

/* The slot of fn in fns[n] (taken if new), -1 when all are taken. */
int cb_slot_of(void **fns, int n, void *fn);
/* A real handle MPI passes to a callback, as the program knows it. */
void *cb_as_virtual(enum vh_kind k, void *real);
/* Op: {fortran, fn, commute}; keyval: {which, fortran, copy, delete,
 * extra}; error handler: {which, fortran, fn}. */
struct mpi_record *cb_record(enum vh_kind k, int which, int fortran, void *a, void *b, void *c,
			     int commute);
/* A virtual handle for real, owning rec; NULL (checkpoints off, naming
 * call) when there is none. */
void *cb_bind(enum vh_kind k, void *real, struct mpi_record *rec, const char *call);

/* Replay of a record made through the Fortran bindings (callbacks_f.c). */
int callbacks_f_replay(struct mpi_record *rec, int which, int fortran, void *fn, void *b, void *c,
		       int commute, void **real);

#endif
