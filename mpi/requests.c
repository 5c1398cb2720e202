#define LOG_PREFIX "requests: "
#include <stdlib.h>

#include "log.h"
#include "requests.h"
#include "session.h"
#include "traffic.h"

static int64_t pending;

int64_t mpi_pending(void)
{
	return __atomic_load_n(&pending, __ATOMIC_RELAXED);
}

static void pending_add(int64_t n)
{
	__atomic_add_fetch(&pending, n, __ATOMIC_RELAXED);
}

MPI_Request mpi_req_new(MPI_Request real, uint32_t kind)
{
	void *v;

	if (real == MPI_REQUEST_NULL)
		return real;
	v = vh_mint(VH_REQUEST, real, kind | VH_ACTIVE, NULL);
	if (!v) {
		session_unsupported("more MPI requests than stasis can number");
		return real;
	}
	pending_add(1);
	return v;
}

MPI_Fint mpi_req_new_f(MPI_Fint real_f, uint32_t kind)
{
	MPI_Request v = mpi_req_new(PMPI_Request_f2c(real_f), kind);
	struct vh_entry *e = vh_entry(VH_REQUEST, v);

	if (!e)
		return real_f;
	e->real_f = real_f;
	return vh_c2f(VH_REQUEST, v);
}

MPI_Request mpi_req_persistent(MPI_Request real, uint32_t kind, struct rec_builder *b,
			       const char *call)
{
	struct mpi_record *rec;
	void *v;

	if (real == MPI_REQUEST_NULL) {
		rec_discard(rec_make(VH_REQUEST, b, 0));
		return real;
	}
	rec = rec_make(VH_REQUEST, b, 0);
	if (!rec) {
		session_unsupported(call);
		return real;
	}
	v = vh_mint(VH_REQUEST, real, kind | VH_PERSISTENT, rec);
	if (!v) {
		rec_discard(rec);
		session_unsupported("more MPI requests than stasis can number");
		return real;
	}
	rec_attach(rec, v);
	return v;
}

MPI_Fint mpi_req_persistent_f(MPI_Fint real_f, uint32_t kind, struct rec_builder *b,
			      const char *call)
{
	MPI_Request v = mpi_req_persistent(PMPI_Request_f2c(real_f), kind, b, call);
	struct vh_entry *e = vh_entry(VH_REQUEST, v);

	if (!e)
		return real_f;
	e->real_f = real_f;
	return vh_c2f(VH_REQUEST, v);
}

/* e's operation finished: count what it received. */
static void finished(struct vh_entry *e)
{
	if (!(e->flags & VH_ACTIVE))
		return;
	__atomic_and_fetch(&e->flags, ~(uint32_t)VH_ACTIVE, __ATOMIC_RELAXED);
	pending_add(-1);
	if ((e->flags & VH_RECV) && !(e->flags & VH_NOPEER))
		traffic_received(0);
}

/* Returns whether the program's handle is now MPI_REQUEST_NULL. */
static bool settle(void *v, bool real_is_null, bool done)
{
	struct vh_entry *e = vh_entry(VH_REQUEST, v);

	if (!e)
		return real_is_null;
	if (e->flags & VH_PERSISTENT) {
		if (done)
			finished(e);
		return false;
	}
	if (!real_is_null)
		return false;
	finished(e);
	vh_release(VH_REQUEST, v);
	return true;
}

void mpi_req_settle(MPI_Request *app, MPI_Request real, bool done)
{
	if (!vh_is_virtual(VH_REQUEST, *app)) {
		*app = real; /* not one of ours (a window's): MPI's value */
		return;
	}
	if (settle(*app, real == MPI_REQUEST_NULL, done))
		*app = MPI_REQUEST_NULL;
}

void mpi_req_settle_f(MPI_Fint *app, MPI_Fint real_f, bool done)
{
	static MPI_Fint null_f = -1;

	if (null_f == -1)
		null_f = PMPI_Request_c2f(MPI_REQUEST_NULL);
	if (!vh_is_virtual_f(*app)) {
		*app = real_f;
		return;
	}
	if (settle(vh_f2c(VH_REQUEST, *app), real_f == null_f, done))
		*app = null_f;
}

void mpi_req_started(MPI_Request v)
{
	struct vh_entry *e = vh_entry(VH_REQUEST, v);

	if (!e || (e->flags & VH_ACTIVE))
		return;
	__atomic_or_fetch(&e->flags, VH_ACTIVE, __ATOMIC_RELAXED);
	pending_add(1);
	if ((e->flags & VH_SEND) && !(e->flags & VH_NOPEER))
		traffic_sent(0);
}

void mpi_req_started_f(MPI_Fint v)
{
	if (vh_is_virtual_f(v))
		mpi_req_started(vh_f2c(VH_REQUEST, v));
}

/* An active request the program frees runs on inside MPI: its receive
 * is counted now, as the message will be taken. */
static void freed(void *v)
{
	struct vh_entry *e = vh_entry(VH_REQUEST, v);

	if (!e)
		return;
	finished(e);
	if (e->flags & VH_PERSISTENT)
		rec_object_freed(VH_REQUEST, v);
	else
		vh_release(VH_REQUEST, v);
}

void mpi_req_freed(MPI_Request *app)
{
	freed(*app);
	*app = MPI_REQUEST_NULL;
}

void mpi_req_freed_f(MPI_Fint *app)
{
	if (vh_is_virtual_f(*app))
		freed(vh_f2c(VH_REQUEST, *app));
	*app = PMPI_Request_c2f(MPI_REQUEST_NULL);
}

void mpi_message_matched(MPI_Message m)
{
	if (m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC)
		pending_add(1);
}

void mpi_message_received(MPI_Message m)
{
	if (m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC)
		pending_add(-1);
}
