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
#include <stdlib.h>
#include <string.h>

#include "callbacks_int.h"
#include "export.h"
#include "handles.h"
#include "requests.h"
#include "runtime.h"

typedef void fortran_start_fn(void *, void *, void *, MPI_Aint *, MPI_Fint *, MPI_Fint *);
typedef void fortran_complete_fn(MPI_Fint *, MPI_Fint *);
typedef void fortran_query_fn(MPI_Aint *, MPI_Fint *, MPI_Fint *);
typedef void fortran_free_fn(MPI_Aint *, MPI_Fint *);
typedef void fortran_cancel_fn(MPI_Aint *, MPI_Fint *, MPI_Fint *);

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

/* MPI calls the program's functions from inside its Wait or Test, that
 * is inside a wrapper: it is given trampolines that run them as the
 * program's (AS_PROGRAM: what they allocate lands in the arena, and is
 * saved). Their extra state is this, the runtime's, freed with the
 * request. */
struct greq_call {
	void *fn[3];	/* the program's query, free and cancel functions */
	MPI_Aint extra; /* its extra state (Fortran: the address of it) */
};

static int query_c(void *x, MPI_Status *status)
{
	struct greq_call *c = x;
	int ret;

	AS_PROGRAM(ret = ((MPI_Grequest_query_function *)c->fn[0])((void *)c->extra, status));
	return ret;
}

static int free_c(void *x)
{
	struct greq_call *c = x;
	int ret;

	AS_PROGRAM(ret = ((MPI_Grequest_free_function *)c->fn[1])((void *)c->extra));
	free(c);
	return ret;
}

static int cancel_c(void *x, int complete)
{
	struct greq_call *c = x;
	int ret;

	AS_PROGRAM(ret = ((MPI_Grequest_cancel_function *)c->fn[2])((void *)c->extra, complete));
	return ret;
}

/* Open MPI calls a Fortran request's functions with the address it was
 * given as extra state: c's. */
static void query_f(MPI_Aint *x, MPI_Fint *status, MPI_Fint *ierr)
{
	struct greq_call *c = (struct greq_call *)x;

	AS_PROGRAM(((fortran_query_fn *)c->fn[0])((MPI_Aint *)c->extra, status, ierr));
}

static void free_f(MPI_Aint *x, MPI_Fint *ierr)
{
	struct greq_call *c = (struct greq_call *)x;

	AS_PROGRAM(((fortran_free_fn *)c->fn[1])((MPI_Aint *)c->extra, ierr));
	free(c);
}

static void cancel_f(MPI_Aint *x, MPI_Fint *complete, MPI_Fint *ierr)
{
	struct greq_call *c = (struct greq_call *)x;

	AS_PROGRAM(((fortran_cancel_fn *)c->fn[2])((MPI_Aint *)c->extra, complete, ierr));
}

/* Starts a generalized request for the program's functions fn and extra
 * state through MPI's C or Fortran binding, with the trampolines: MPI's
 * error code, *real (and *real_f for Fortran) set on success. */
static int start(void *const fn[3], MPI_Aint extra, bool fortran, MPI_Request *real,
		 MPI_Fint *real_f)
{
	struct greq_call *c = malloc(sizeof(*c));
	MPI_Fint ierr = MPI_SUCCESS, f = 0;
	int ret;

	if (!c)
		return MPI_ERR_NO_MEM;
	memcpy(c->fn, fn, sizeof(c->fn));
	c->extra = extra;
	if (fortran) {
		fortran_start()((void *)query_f, (void *)free_f, (void *)cancel_f, (MPI_Aint *)c,
				&f, &ierr);
		ret = ierr;
		*real = ret == MPI_SUCCESS ? PMPI_Request_f2c(f) : MPI_REQUEST_NULL;
		*real_f = f;
	} else {
		ret = PMPI_Grequest_start(query_c, free_c, cancel_c, c, real);
		*real_f = VH_NO_FINT;
	}
	if (ret != MPI_SUCCESS)
		free(c);
	return ret;
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
	MPI_Fint real_f;
	int ret;

	/* Inside MPI: what it allocates and opens is its own (runtime.h). */
	stasis_depth++;
	ret = start(fn, (MPI_Aint)extra_state, false, &real, &real_f);
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
	MPI_Request real;
	MPI_Fint real_f = 0;

	/* Open MPI keeps the address of the program's extra state (its
	 * functions are given it by reference): the address is kept. */
	stasis_depth++;
	*ierr = start(fn, (MPI_Aint)extra_state, true, &real, &real_f);
	stasis_depth--;
	if (*ierr == MPI_SUCCESS)
		*request = vh_keep_real_f(VH_REQUEST,
					  mpi_req_greq(real, fn, (MPI_Aint)extra_state, VH_FORTRAN),
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
	int ret = start((void *const *)ri->greq_fn, ri->greq_extra, fortran, real, real_f);

	if (ret == MPI_SUCCESS && ri->greq_completed)
		ret = PMPI_Grequest_complete(*real);
	return ret == MPI_SUCCESS ? 0 : -EIO;
}
