/* The life of stasis in one MPI rank, called by the MPI_Init, MPI_Init_thread
 * and MPI_Finalize wrappers (preload/mpi_init.c). */
#ifndef STASIS_START_H
#define STASIS_START_H

/* Before the real MPI_Init: on a restart, the runtime is handed copies of
 * argv and environ (the restore overwrites the main stack where they are). */
void engine_before_init(int **argc, char ****argv);
/* After the real MPI_Init: read the settings, make the session, then either
 * restart from the newest usable checkpoint (this does not return: the
 * process resumes there, or stops with one line naming the cause) or arm the
 * checkpoint trigger. */
void engine_after_init(int required, int provided);
/* Before the real MPI_Finalize. */
void engine_finalize(void);

#endif
