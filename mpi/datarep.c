/* MPI_Register_datarep: a user data representation lives in the MPI
 * library (its conversion functions, by name) and would be gone after a
 * restart, so one that MPI accepts switches checkpoints off, naming it.
 * Open MPI 4.1's OMPIO accepts none (MPI_ERR_CONVERSION, and
 * MPI_File_set_view then says MPI_ERR_UNSUPPORTED_DATAREP): a program
 * that tries and goes on without one keeps its checkpoints. */
#include <mpi.h>

#include "export.h"
#include "runtime.h"
#include "session.h"

#define WHAT "a user data representation (MPI_Register_datarep)"

EXPORT int MPI_Register_datarep(const char *datarep,
				MPI_Datarep_conversion_function *read_conversion_fn,
				MPI_Datarep_conversion_function *write_conversion_fn,
				MPI_Datarep_extent_function *dtype_file_extent_fn, void *extra_state)
{
	int ret;

	/* Inside MPI: what it allocates and opens is its own (runtime.h). */
	stasis_depth++;
	ret = PMPI_Register_datarep(datarep, read_conversion_fn, write_conversion_fn,
				    dtype_file_extent_fn, extra_state);
	stasis_depth--;
	if (ret == MPI_SUCCESS)
		session_unsupported(WHAT);
	return ret;
}

/* Fortran (mpif.h, use mpi; mpi_f08 through gen_f08.py's trampolines):
 * MPI's own binding, which registers Fortran conversion functions. */
EXPORT void mpi_register_datarep_(void *datarep, void *read_fn, void *write_fn, void *extent_fn,
				  void *extra_state, MPI_Fint *ierr, size_t datarep_len)
{
	static void (*real)(void *, void *, void *, void *, void *, MPI_Fint *, size_t);

	/* Resolved here: a restart resumes in a process where it was never set. */
	if (!real)
		real = stasis_next_symbol("mpi_register_datarep_");
	stasis_depth++;
	real(datarep, read_fn, write_fn, extent_fn, extra_state, ierr, datarep_len);
	stasis_depth--;
	if (*ierr == MPI_SUCCESS)
		session_unsupported(WHAT);
}
FORTRAN_ALIASES(mpi_register_datarep, MPI_REGISTER_DATAREP)
