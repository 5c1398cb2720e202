/* Inside windows (windows.c, windows_shared.c): how a window was made, and
 * the shared-memory windows' own functions. */
#ifndef STASIS_MPI_WINDOWS_INT_H
#define STASIS_MPI_WINDOWS_INT_H

#include <mpi.h>

#include "record.h"
#include "why.h"

enum win_flavor { WF_CREATE, WF_ALLOCATE, WF_DYNAMIC, WF_SHARED };

/* The program made real (collective over real_comm): its virtual handle,
 * recorded with extra (extra_len bytes, part of the creation: the replay
 * reads it) after the common fields. */
MPI_Win windows_made(MPI_Comm real_comm, int flavor, void *base, MPI_Aint size, int disp_unit,
		     MPI_Win real, const char *call, const void *extra, size_t extra_len);

/* MPI_Win_create, its error returned rather than raised (some MPIs make a
 * window with MPI_Win_allocate where they cannot with MPI_Win_create). */
int windows_create_quietly(void *base, MPI_Aint size, int disp_unit, MPI_Info info,
			   MPI_Comm real, MPI_Win *win);

/* A restart makes shared window v again (collective over real_comm): its
 * segment mapped where it was, then the window over this rank's part; r
 * is at the record's extra. 0 or -errno with why. */
int windows_shared_replay(struct rec_reader *r, MPI_Win v, MPI_Comm real_comm, void *base,
			  MPI_Aint size, int disp_unit, MPI_Win *real, struct why *why);
/* Past the record's extra of a shared window. */
void windows_shared_skip(struct rec_reader *r);
/* Shared window v was freed: its segment is unmapped. */
void windows_shared_freed(MPI_Win v);

#endif
