/* MPI_Wtime for C (both names: a tool or library may call the profiling
 * one) and Fortran callers (mpif.h and `use mpi` reach mpi_wtime_, not the
 * C function): the program's clock goes on across a restart (mpi/wtime.h). */
#include <mpi.h>

#include "export.h"
#include "wtime.h"

EXPORT double MPI_Wtime(void)
{
	return wtime_program();
}

EXPORT double PMPI_Wtime(void)
{
	return wtime_program();
}

EXPORT double mpi_wtime_(void)
{
	return wtime_program();
}
FORTRAN_ALIASES(mpi_wtime, MPI_WTIME)
