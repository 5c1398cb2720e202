/* The tool interface's enumerations, control-variable handles and
 * performance-variable sessions and handles (tool_vars.c): virtual handles
 * for the program, made again at a restart from the variables' names, the
 * objects they are bound to, the last value written to each control
 * variable and whether each performance variable was started. What a
 * performance variable reads after a restart is what the restarted MPI
 * library counted: its counters and timers start again from the restart. */
#ifndef STASIS_MPI_TOOL_VARS_H
#define STASIS_MPI_TOOL_VARS_H

#include "record.h"
#include "why.h"

/* Appends the objects to b (the MPI section). */
void tool_vars_save(struct rec_builder *b);
/* At a restart, before the interface is initialized again as the
 * checkpoint says: the objects this process made before MPI_Init (which
 * it ran again) are freed. */
void tool_vars_discard(void);
/* When the interface's last MPI_T_finalize ended them: forgotten. */
void tool_vars_forget(void);
/* At a restart: the objects read from the MPI section (0, or -errno with
 * why set), then made again once the objects they may be bound to are
 * (communicators, files, windows). */
int tool_vars_read(struct rec_reader *r, struct why *why);
int tool_vars_apply(struct why *why);

#endif
