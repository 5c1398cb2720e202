/* The program's functions that MPI calls back: user reduction ops,
 * attribute copy/delete functions of keyvals, and error handlers. MPI is
 * given stasis's trampolines, which hand the program its virtual handles
 * (never the real ones), run its code as the program's (allocations go to
 * the application arena) and stay silent during a replay, when the
 * program's memory is not back yet. Records keep the program's function
 * pointers: code does not move with randomisation off.
 *
 * Objects made through the Fortran bindings (mpif.h, use mpi, mpi_f08) are
 * made through them too, with Fortran trampolines (callbacks_f.c) that
 * hand the program's Fortran functions their virtual INTEGER handles. */
#ifndef STASIS_MPI_CALLBACKS_H
#define STASIS_MPI_CALLBACKS_H

#include <mpi.h>
#include <stdbool.h>

#include "record.h"

/* What a keyval attaches attributes to. */
enum keyval_which { KEYVAL_COMM, KEYVAL_TYPE, KEYVAL_WIN };

/* Replay: make the op, keyval or error handler of rec again. 0 or -errno. */
int callbacks_replay(struct mpi_record *rec, void **real);
/* The object kind a keyval record attaches to. */
enum keyval_which callbacks_keyval_which(const struct mpi_record *rec);
/* While set, trampolines do not call the program (replay). */
void callbacks_quiet(bool quiet);

/* The trampolines for user ops and communicator error handlers are
 * generated (gen_wrappers.py): one per slot, each calling these. */
#define MPI_OP_SLOTS 256
#define MPI_ERRHANDLER_SLOTS 64
extern MPI_User_function *const mpi_op_trampolines[MPI_OP_SLOTS];
extern MPI_Comm_errhandler_function *const mpi_errhandler_trampolines[MPI_ERRHANDLER_SLOTS];
void mpi_op_call(int slot, void *in, void *inout, int *len, MPI_Datatype *type);
void mpi_errhandler_call(int slot, MPI_Comm *comm, int *code);
/* The same for Fortran functions: every argument by reference, handles as
 * INTEGERs (what Open MPI calls a Fortran op or error handler with). */
typedef void mpi_fortran_op_fn(void *in, void *inout, MPI_Fint *len, MPI_Fint *type);
typedef void mpi_fortran_eh_fn(MPI_Fint *comm, MPI_Fint *code, ...);
extern mpi_fortran_op_fn *const mpi_fop_trampolines[MPI_OP_SLOTS];
extern mpi_fortran_eh_fn *const mpi_feh_trampolines[MPI_ERRHANDLER_SLOTS];
void mpi_fop_call(int slot, void *in, void *inout, MPI_Fint *len, MPI_Fint *type);
void mpi_feh_call(int slot, MPI_Fint *comm, MPI_Fint *code);

/* Values of predefined attributes (MPI_TAG_UB, ...) as pointers that stay
 * valid across a restart; read once after MPI_Init. */
void callbacks_init(void);

#endif
