/* MPI_Comm_idup. A checkpoint must not find a communicator half made (its
 * record and collective counts are taken over the finished communicator,
 * collectively: comms.c), so stasis makes it whole in the call, through
 * its own wrapper of MPI_Comm_dup (counted as a collective on comm, where
 * a rank may stop for a checkpoint), and returns a request that is
 * already complete: the program's Wait or Test finds it done.
 *
 * What this gives up: overlap. A program that relies on idup progressing
 * while it does other communication before the Wait (a rank that idups,
 * then receives from a rank that sends before its own idup) would wait in
 * the call; every order of collectives MPI allows is kept. */
#include <mpi.h>

#include "export.h"
#include "handles.h"
#include "requests.h"
#include "runtime.h"

EXPORT int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request)
{
	MPI_Request real = MPI_REQUEST_NULL;
	int ret = MPI_Comm_dup(comm, newcomm);

	/* A barrier of this rank alone: done at its first Test, its status
	 * empty, as an idup's is. */
	if (ret == MPI_SUCCESS) {
		stasis_depth++; /* inside MPI (runtime.h) */
		ret = PMPI_Ibarrier(MPI_COMM_SELF, &real);
		stasis_depth--;
	}
	if (ret == MPI_SUCCESS)
		*request = mpi_req_new(real, mpi_req_kind(VH_SEND, MPI_PROC_NULL), MPI_COMM_NULL,
				       MPI_PROC_NULL);
	return ret;
}

/* Fortran (mpif.h, use mpi; mpi_f08 through gen_f08.py's trampolines). */
EXPORT void mpi_comm_idup_(MPI_Fint *comm, MPI_Fint *newcomm, MPI_Fint *request, MPI_Fint *ierr)
{
	MPI_Comm c = MPI_COMM_NULL;
	MPI_Request r = MPI_REQUEST_NULL;

	*ierr = MPI_Comm_idup(vh_f2c(VH_COMM, *comm), &c, &r);
	if (*ierr == MPI_SUCCESS) {
		*newcomm = vh_c2f(VH_COMM, c);
		*request = vh_c2f(VH_REQUEST, r);
	}
}
FORTRAN_ALIASES(mpi_comm_idup, MPI_COMM_IDUP)
