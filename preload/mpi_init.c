/* MPI_Init, MPI_Init_thread and MPI_Finalize, for C and Fortran callers (a
 * Fortran call does not go through the C function, DESIGN.md fact 4). */
#include <mpi.h>

#include "runtime.h"
#include "interpose.h"
#include "slurm.h"
#include "start.h"
#include "unseen.h"


EXPORT int MPI_Init(int *argc, char ***argv)
{
	int ret;

	stasis_depth++;
	slurm_before_init();
	engine_before_init(&argc, &argv);
	ret = PMPI_Init(argc, argv);
	if (ret == MPI_SUCCESS)
		engine_after_init(MPI_THREAD_SINGLE, MPI_THREAD_SINGLE);
	stasis_depth--;
	return ret;
}

EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	int ret;

	stasis_depth++;
	slurm_before_init();
	engine_before_init(&argc, &argv);
	ret = PMPI_Init_thread(argc, argv, required, provided);
	if (ret == MPI_SUCCESS)
		engine_after_init(required, *provided);
	stasis_depth--;
	return ret;
}

EXPORT int MPI_Finalize(void)
{
	int ret;

	stasis_depth++;
	unseen_check();
	engine_finalize();
	ret = PMPI_Finalize();
	stasis_depth--;
	return ret;
}

EXPORT void mpi_init_(MPI_Fint *ierr)
{
	stasis_depth++;
	slurm_before_init();
	engine_before_init(NULL, NULL);
	REAL(mpi_init_);
	real(ierr);
	if (*ierr == MPI_SUCCESS)
		engine_after_init(MPI_THREAD_SINGLE, MPI_THREAD_SINGLE);
	stasis_depth--;
}
FORTRAN_ALIASES(mpi_init, MPI_INIT)

EXPORT void mpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
	stasis_depth++;
	slurm_before_init();
	engine_before_init(NULL, NULL);
	REAL(mpi_init_thread_);
	real(required, provided, ierr);
	if (*ierr == MPI_SUCCESS)
		engine_after_init(*required, *provided);
	stasis_depth--;
}
FORTRAN_ALIASES(mpi_init_thread, MPI_INIT_THREAD)

EXPORT void mpi_finalize_(MPI_Fint *ierr)
{
	stasis_depth++;
	unseen_check();
	engine_finalize();
	REAL(mpi_finalize_);
	real(ierr);
	stasis_depth--;
}
FORTRAN_ALIASES(mpi_finalize, MPI_FINALIZE)

/* `use mpi_f08` calls these (Open MPI's forward to the mpif.h functions,
 * as mpi/gen_f08.py says), with IERROR optional: a null pointer when the
 * program leaves it out. */
EXPORT void mpi_init_f08_(MPI_Fint *ierr)
{
	MPI_Fint e = MPI_SUCCESS;

	mpi_init_(ierr ? ierr : &e);
}

EXPORT void mpi_init_thread_f08_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
	MPI_Fint e = MPI_SUCCESS;

	mpi_init_thread_(required, provided, ierr ? ierr : &e);
}

EXPORT void mpi_finalize_f08_(MPI_Fint *ierr)
{
	MPI_Fint e = MPI_SUCCESS;

	mpi_finalize_(ierr ? ierr : &e);
}
