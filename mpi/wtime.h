/* MPI_Wtime across a restart: Open MPI takes a new origin in every process,
 * so a restarted program's clock would start again near 0 and its timings
 * (t1 - t0 around the checkpoint) go negative. The value at the checkpoint
 * is saved with the MPI section (section.c) and the restarted process reads
 * on from it: monotonic across any number of restarts. */
#ifndef STASIS_MPI_WTIME_H
#define STASIS_MPI_WTIME_H

/* The program's MPI_Wtime (MPI's own plus the offset). */
double wtime_program(void);
/* MPI's own, for stasis's durations. */
double wtime_mpi(void);
/* A restart: the checkpoint was taken when the program's clock read at. */
void wtime_restored(double at);

#endif
