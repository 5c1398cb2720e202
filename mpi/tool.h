/* The MPI tool information interface (MPI_T_*), as far as stasis restores
 * it (calls.def says which calls): MPI_T_init_thread and MPI_T_finalize
 * are counted, and a restart initializes the interface again as many
 * times, so that the program's queries of variables and categories (by
 * index, safe) keep working; the handles and sessions of control and
 * performance variables are made again (tool_vars.h). */
#ifndef STASIS_MPI_TOOL_H
#define STASIS_MPI_TOOL_H

#include "record.h"
#include "why.h"

/* Appends the interface's state to b (the MPI section). */
void tool_save(struct rec_builder *b);
/* At a restart: initialized again as the checkpoint says, its objects read
 * (made by tool_vars_apply). 0, or -errno with why set. */
int tool_replay(struct rec_reader *r, struct why *why);

#endif
