/* Keyvals the program freed. MPI keeps a freed keyval while an attribute
 * uses it and destroys it with the last one; asking MPI about a destroyed
 * keyval is an error that MPI_ERRORS_ARE_FATAL turns into the job's end,
 * and a checkpoint reads every keyval's attributes (snapshot.c). So a
 * keyval freed while an attribute uses it is held by stasis (left
 * allocated in MPI, its record kept), and one that no attribute uses is
 * freed at once, record and handle included: a program that makes and
 * frees keyvals all run long costs nothing that grows. The held ones are
 * freed at the first checkpoint that finds no attribute on them. */
#ifndef STASIS_MPI_KEYVALS_H
#define STASIS_MPI_KEYVALS_H

#include <stdbool.h>

#include "callbacks.h"

/* The program frees keyval v (its handle, virtual or not): true when
 * stasis holds it (the wrapper then returns success without calling MPI);
 * false when MPI is to free *real (then mpi_keyval_freed), which is
 * MPI_KEYVAL_INVALID for a keyval the program had freed already, so that
 * MPI reports the error the program would have got. */
bool keyval_hold(int v, int *real);
/* Frees the held keyvals no attribute uses any more. Before a checkpoint
 * reads attributes. */
void keyvals_release_unused(void);
/* MPI_*_get_attr of the object's kind: MPI's return code. */
int keyval_get_attr(enum keyval_which which, void *real, int keyval, void **val, int *flag);
/* Whether the object holds an attribute of keyval (which MPI still has). */
bool keyval_has_attr(enum keyval_which which, void *real, int keyval);

#endif
