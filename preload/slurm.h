/* Ranks started by srun (slurm.c). */
#ifndef STASIS_PRELOAD_SLURM_H
#define STASIS_PRELOAD_SLURM_H

/* First thing in MPI_Init: ranks over cores yield; an Open MPI program
 * srun started without PMIx is told so in one line and ends. */
void slurm_before_init(void);

#endif
