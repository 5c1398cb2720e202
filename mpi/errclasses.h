/* The program's own error classes, codes and strings (MPI_Add_error_class,
 * MPI_Add_error_code, MPI_Add_error_string: PETSc adds its own at
 * PetscInitialize). The numbers MPI gave live in the program's memory, so
 * a restart must make the same ones: every call is recorded in order and
 * replayed in order after the restart's MPI_Init. MPI numbers them from a
 * counter (Open MPI: the next free class, the next free code), so the
 * replay gives the same numbers; that is checked, and a number that
 * differs stops the restart. */
#ifndef STASIS_MPI_ERRCLASSES_H
#define STASIS_MPI_ERRCLASSES_H

#include "record.h"
#include "why.h"

/* Appends the calls made so far to b (the MPI section). */
void errclasses_save(struct rec_builder *b);
/* At a restart: the calls read from r made again, in order. 0, or -errno
 * with why set (a number MPI gave differs from the checkpoint's). */
int errclasses_replay(struct rec_reader *r, struct why *why);

#endif
