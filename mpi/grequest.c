/* Generalized requests (MPI_Grequest_start, MPI_Grequest_complete). The
 * program completes one itself, when the operation it stands for is done,
 * so stasis never waits for one at a checkpoint nor tests it
 * (requests.c): it keeps the request's query, free and cancel functions
 * and extra state (in the program's memory and code, at the same
 * addresses after a restart) and whether the program completed it. A
 * restart starts it again with them, under the same handle, and completes
 * it again if the program had: its Wait or Test then runs the program's
 * own functions as MPI would have. */
#include <errno.h>
#include <mpi.h>
#include <string.h>

#include "export.h"
#include "handles.h"
#include "requests.h"
#include "runtime.h"

typedef void fortran_start_fn(void *, void *, void *, MPI_Aint *, MPI_Fint *, MPI_Fint *);
typedef void fortran_complete_fn(MPI_Fint *, MPI_Fint *);

/* Resolved at each use: a restart resumes in a process where a static
 * pointer was never set. */
static fortran_start_fn *fortran_start(void)
{
	return (fortran_start_fn *)stasis_next_symbol("mpi_grequest_start_");
}

static fortran_complete_fn *fortran_complete(void)
{
	return (fortran_complete_fn *)stasis_next_symbol("mpi_grequest_complete_");
}

/* Kept as any request the program holds (mpi_req_new), with what starts
 * it again. */
MPI_Request mpi_req_greq(MPI_Request real, void *const fn[3], MPI_Aint extra, uint32_t flags)
{
	MPI_Request v = mpi_req_new(real, VH_GREQ | flags, MPI_COMM_NULL, MPI_PROC_NULL);
	struct vh_entry *e = v != real ? vh_entry(VH_REQUEST, v) : NULL;
	struct req_info *ri = e ? e->aux : NULL;

	if (ri) {
		memcpy(ri->greq_fn, fn, sizeof(ri->greq_fn));
		ri->greq_extra = extra;
	}
	return v;
}

void mpi_req_greq_completed(MPI_Request v)
{
	struct vh_entry *e = vh_entry(VH_REQUEST, v);

	if (e && (e->flags & VH_GREQ) && e->aux)
		((struct req_info *)e->aux)->greq_completed = true;
}

EXPORT int MPI_Grequest_start(MPI_Grequest_query_function *query_fn,
			      MPI_Grequest_free_function *free_fn,
			      MPI_Grequest_cancel_function *cancel_fn, void *extra_state,
			      MPI_Request *request)
{
	void *fn[3] = {(void *)query_fn, (void *)free_fn, (void *)cancel_fn};
	MPI_Request real = MPI_REQUEST_NULL;
	int ret;

	/* Inside MPI: what it allocates and opens is its own (runtime.h). */
	stasis_depth++;
	ret = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, extra_state, &real);
	stasis_depth--;
	if (ret == MPI_SUCCESS)
		*request = mpi_req_greq(real, fn, (MPI_Aint)extra_state, 0);
	return ret;
}

EXPORT int MPI_Grequest_complete(MPI_Request request)
{
	int ret;

	stasis_depth++;
	ret = PMPI_Grequest_complete(VH_REAL(VH_REQUEST, MPI_Request, request));
	stasis_depth--;
	if (ret == MPI_SUCCESS)
		mpi_req_greq_completed(request);
	return ret;
}

/* Fortran (mpif.h, use mpi; mpi_f08 through gen_f08.py's trampolines):
 * MPI's own bindings, which call Fortran functions. */
EXPORT void mpi_grequest_start_(void *query_fn, void *free_fn, void *cancel_fn,
				MPI_Aint *extra_state, MPI_Fint *request, MPI_Fint *ierr)
{
	void *fn[3] = {query_fn, free_fn, cancel_fn};
	MPI_Fint real_f = 0;

	/* Open MPI keeps the address of the program's extra state (its
	 * functions are given it by reference): the address is kept. */
	stasis_depth++;
	fortran_start()(query_fn, free_fn, cancel_fn, extra_state, &real_f, ierr);
	stasis_depth--;
	if (*ierr == MPI_SUCCESS)
		*request = vh_keep_real_f(VH_REQUEST,
					  mpi_req_greq(PMPI_Request_f2c(real_f), fn,
						       (MPI_Aint)extra_state, VH_FORTRAN),
					  real_f);
}
FORTRAN_ALIASES(mpi_grequest_start, MPI_GREQUEST_START)

EXPORT void mpi_grequest_complete_(MPI_Fint *request, MPI_Fint *ierr)
{
	MPI_Fint real_f = vh_real_f(VH_REQUEST, *request);

	stasis_depth++;
	fortran_complete()(&real_f, ierr);
	stasis_depth--;
	if (*ierr == MPI_SUCCESS)
		mpi_req_greq_completed(vh_f2c(VH_REQUEST, *request));
}
FORTRAN_ALIASES(mpi_grequest_complete, MPI_GREQUEST_COMPLETE)

int grequest_start_again(const struct req_info *ri, bool fortran, MPI_Request *real,
			 MPI_Fint *real_f)
{
	int ret;

	if (fortran) {
		MPI_Fint ierr = MPI_SUCCESS, f = 0;

		fortran_start()(ri->greq_fn[0], ri->greq_fn[1], ri->greq_fn[2],
				(MPI_Aint *)ri->greq_extra, &f, &ierr);
		ret = ierr;
		*real = ret == MPI_SUCCESS ? PMPI_Request_f2c(f) : MPI_REQUEST_NULL;
		*real_f = f;
	} else {
		ret = PMPI_Grequest_start((MPI_Grequest_query_function *)ri->greq_fn[0],
					  (MPI_Grequest_free_function *)ri->greq_fn[1],
					  (MPI_Grequest_cancel_function *)ri->greq_fn[2],
					  (void *)ri->greq_extra, real);
		*real_f = VH_NO_FINT;
	}
	if (ret == MPI_SUCCESS && ri->greq_completed)
		ret = PMPI_Grequest_complete(*real);
	return ret == MPI_SUCCESS ? 0 : -EIO;
}
