/* Windows made through the Fortran bindings (mpif.h and `use mpi`; `use
 * mpi_f08` reaches these through gen_f08.py's trampolines, its arguments
 * being the same INTEGERs): each is windows.c's C wrapper with the handles
 * translated, so a Fortran window is recorded and made again at a restart
 * as a C one is. The program then holds the window's virtual INTEGER
 * handle, which the generated Fortran wrappers translate like any other.
 *
 * MPI_WIN_ALLOCATE's BASEPTR is an INTEGER(KIND=MPI_ADDRESS_KIND) (mpif.h,
 * use mpi) or a TYPE(C_PTR) (use mpi's MPI_WIN_ALLOCATE_CPTR, mpi_f08):
 * either way the address of a pointer-sized word the base is written to. */
#include <mpi.h>

#include "calls.h"
#include "export.h"
#include "handles.h"
#include "runtime.h"
#include "session.h"

/* The window the C wrapper made (w), as the program's INTEGER handle. */
static void win_out(int ret, const MPI_Win *w, MPI_Fint *win, MPI_Fint *ierr)
{
	*ierr = ret;
	if (ret == MPI_SUCCESS)
		*win = vh_c2f(VH_WIN, *w);
}

EXPORT void mpi_win_create_(void *base, MPI_Aint *size, MPI_Fint *disp_unit, MPI_Fint *info,
			    MPI_Fint *comm, MPI_Fint *win, MPI_Fint *ierr)
{
	MPI_Win w = MPI_WIN_NULL;

	win_out(MPI_Win_create(base, *size, *disp_unit, vh_f2c(VH_INFO, *info),
			       vh_f2c(VH_COMM, *comm), &w),
		&w, win, ierr);
}
FORTRAN_ALIASES(mpi_win_create, MPI_WIN_CREATE)

EXPORT void mpi_win_allocate_(MPI_Aint *size, MPI_Fint *disp_unit, MPI_Fint *info, MPI_Fint *comm,
			      void *baseptr, MPI_Fint *win, MPI_Fint *ierr)
{
	MPI_Win w = MPI_WIN_NULL;

	win_out(MPI_Win_allocate(*size, *disp_unit, vh_f2c(VH_INFO, *info), vh_f2c(VH_COMM, *comm),
				 baseptr, &w),
		&w, win, ierr);
}
FORTRAN_ALIASES(mpi_win_allocate, MPI_WIN_ALLOCATE)

EXPORT void mpi_win_allocate_cptr_(MPI_Aint *size, MPI_Fint *disp_unit, MPI_Fint *info,
				   MPI_Fint *comm, void *baseptr, MPI_Fint *win, MPI_Fint *ierr)
{
	mpi_win_allocate_(size, disp_unit, info, comm, baseptr, win, ierr);
}
FORTRAN_ALIASES(mpi_win_allocate_cptr, MPI_WIN_ALLOCATE_CPTR)

EXPORT void mpi_win_create_dynamic_(MPI_Fint *info, MPI_Fint *comm, MPI_Fint *win, MPI_Fint *ierr)
{
	MPI_Win w = MPI_WIN_NULL;

	win_out(MPI_Win_create_dynamic(vh_f2c(VH_INFO, *info), vh_f2c(VH_COMM, *comm), &w), &w, win,
		ierr);
}
FORTRAN_ALIASES(mpi_win_create_dynamic, MPI_WIN_CREATE_DYNAMIC)

EXPORT void mpi_win_free_(MPI_Fint *win, MPI_Fint *ierr)
{
	MPI_Win w = vh_f2c(VH_WIN, *win);

	*ierr = MPI_Win_free(&w);
	if (*ierr == MPI_SUCCESS)
		*win = PMPI_Win_c2f(MPI_WIN_NULL);
}
FORTRAN_ALIASES(mpi_win_free, MPI_WIN_FREE)

EXPORT void mpi_win_allocate_shared_(MPI_Aint *size, MPI_Fint *disp_unit, MPI_Fint *info,
				     MPI_Fint *comm, void *baseptr, MPI_Fint *win, MPI_Fint *ierr)
{
	MPI_Win w = MPI_WIN_NULL;

	win_out(MPI_Win_allocate_shared(*size, *disp_unit, vh_f2c(VH_INFO, *info),
					vh_f2c(VH_COMM, *comm), baseptr, &w),
		&w, win, ierr);
}
FORTRAN_ALIASES(mpi_win_allocate_shared, MPI_WIN_ALLOCATE_SHARED)

EXPORT void mpi_win_shared_query_(MPI_Fint *win, MPI_Fint *rank, MPI_Aint *size,
				  MPI_Fint *disp_unit, void *baseptr, MPI_Fint *ierr)
{
	int du = 0;

	*ierr = MPI_Win_shared_query(vh_f2c(VH_WIN, *win), *rank, size, &du, baseptr);
	*disp_unit = du;
}
FORTRAN_ALIASES(mpi_win_shared_query, MPI_WIN_SHARED_QUERY)

/* The C_PTR forms of use mpi, which mpi.h does not declare (so the
 * generated wrappers do not cover them): the same as the others. */
EXPORT void mpi_win_allocate_shared_cptr_(MPI_Aint *size, MPI_Fint *disp_unit, MPI_Fint *info,
					  MPI_Fint *comm, void *baseptr, MPI_Fint *win,
					  MPI_Fint *ierr)
{
	mpi_win_allocate_shared_(size, disp_unit, info, comm, baseptr, win, ierr);
}
FORTRAN_ALIASES(mpi_win_allocate_shared_cptr, MPI_WIN_ALLOCATE_SHARED_CPTR)

EXPORT void mpi_win_shared_query_cptr_(MPI_Fint *win, MPI_Fint *rank, MPI_Aint *size,
				       MPI_Fint *disp_unit, void *baseptr, MPI_Fint *ierr)
{
	mpi_win_shared_query_(win, rank, size, disp_unit, baseptr, ierr);
}
FORTRAN_ALIASES(mpi_win_shared_query_cptr, MPI_WIN_SHARED_QUERY_CPTR)
