/* What libstasis needs to know of the MPI family it is built for, Open MPI
 * here (meson -Dmpi=, top meson.build: STASIS_MPI_FAMILY_H names this
 * header). The other family's library is named so that a program of
 * theirs, into which this build is preloaded, is refused at load with one
 * line (preload/load.c) instead of aborting inside MPI: Open MPI's handles
 * passed to MPICH (MPICH.md A.1). */
#ifndef STASIS_FAMILY_OPENMPI_H
#define STASIS_FAMILY_OPENMPI_H

#define STASIS_MPI_FAMILY "Open MPI"
#define STASIS_MPI_LIBRARY "libmpi.so.40"

/* A library file name starting so is the other family's. */
#define STASIS_MPI_FOREIGN_LIBRARY "libmpich.so"
#define STASIS_MPI_FOREIGN_FAMILY "MPICH"

#endif
