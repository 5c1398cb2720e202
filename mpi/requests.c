#define LOG_PREFIX "requests: "
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "collective_counts.h"
#include "drain.h"
#include "log.h"
#include "requests.h"
#include "requests_int.h"
#include "session.h"
#include "sync_sends.h"
#include "traffic.h"

static int64_t pending, matched, collectives;
static uint64_t post_seq; /* the program's thread only */
static int done_requests; /* entries with VH_DONE: the common case is none */

int64_t mpi_pending(void)
{
	return __atomic_load_n(&pending, __ATOMIC_RELAXED) +
	       __atomic_load_n(&matched, __ATOMIC_RELAXED);
}

int64_t mpi_matched(void)
{
	return __atomic_load_n(&matched, __ATOMIC_SEQ_CST);
}

int64_t mpi_coll_pending(void)
{
	return __atomic_load_n(&collectives, __ATOMIC_SEQ_CST);
}

static void pending_add(int64_t n)
{
	__atomic_add_fetch(&pending, n, __ATOMIC_RELAXED);
}

/* --- the state kept per request ------------------------------------------------ */

struct req_info *req_info_new(MPI_Comm comm, int peer)
{
	struct req_info *ri = calloc(1, sizeof(*ri));

	if (ri) {
		ri->comm = comm;
		ri->peer = peer;
	}
	return ri;
}

static void *mint(MPI_Request real, uint32_t flags, struct mpi_record *rec, struct req_info *ri)
{
	void *v;

	if (!ri) {
		session_unsupported("out of memory tracking MPI requests");
		return NULL;
	}
	v = vh_mint(VH_REQUEST, real, flags, rec);
	if (!v) {
		free(ri);
		session_unsupported("more MPI requests than stasis can number");
		return NULL;
	}
	vh_entry(VH_REQUEST, v)->aux = ri;
	return v;
}

static void release(void *v)
{
	struct vh_entry *e = vh_entry(VH_REQUEST, v);

	if (!e)
		return;
	sync_sends_forget(e);
	if (e->aux)
		free(((struct req_info *)e->aux)->held);
	free(e->aux);
	e->aux = NULL;
	vh_release(VH_REQUEST, v);
}

MPI_Request mpi_req_new(MPI_Request real, uint32_t kind, MPI_Comm comm, int peer)
{
	struct req_info *ri;
	void *v;

	if (real == MPI_REQUEST_NULL)
		return real;
	ri = req_info_new(comm, peer);
	if (ri && (kind & VH_COLL))
		ri->coll = collective_counts_of(comm); /* entered at coord_icollective() */
	v = mint(real, kind | VH_ACTIVE, NULL, ri);
	if (!v)
		return real;
	pending_add(1);
	if (kind & VH_COLL)
		__atomic_add_fetch(&collectives, 1, __ATOMIC_SEQ_CST);
	return v;
}

MPI_Fint mpi_req_new_f(MPI_Fint real_f, uint32_t kind, MPI_Comm comm, int peer)
{
	return vh_keep_real_f(VH_REQUEST, mpi_req_new(PMPI_Request_f2c(real_f), kind, comm, peer),
			      real_f);
}

static MPI_Request recv_new(MPI_Request real, void *buf, int count, MPI_Datatype type, int source,
			    int tag, MPI_Comm comm, uint32_t fortran)
{
	struct req_info *ri;
	void *v;

	if (real == MPI_REQUEST_NULL)
		return real;
	ri = req_info_new(comm, source);
	if (ri) {
		ri->buf = buf;
		ri->count = count;
		ri->type = type;
		ri->tag = tag;
		ri->posted = ++post_seq;
	}
	v = mint(real, mpi_req_kind(VH_RECV, source) | VH_ACTIVE | fortran, NULL, ri);
	if (!v)
		return real;
	pending_add(1);
	return v;
}

MPI_Request mpi_req_recv(MPI_Request real, void *buf, int count, MPI_Datatype type, int source,
			 int tag, MPI_Comm comm)
{
	return recv_new(real, buf, count, type, source, tag, comm, 0);
}

MPI_Fint mpi_req_recv_f(MPI_Fint real_f, void *buf, int count, MPI_Fint ftype, int source, int tag,
			MPI_Fint fcomm)
{
	MPI_Request v = recv_new(PMPI_Request_f2c(real_f), buf, count, vh_f2c(VH_TYPE, ftype),
				 source, tag, vh_f2c(VH_COMM, fcomm), VH_FORTRAN);
	struct vh_entry *e = vh_entry(VH_REQUEST, v);

	if (e) {
		struct req_info *ri = e->aux;

		ri->ftype = ftype;
		ri->fcomm = fcomm;
	}
	return vh_keep_real_f(VH_REQUEST, v, real_f);
}

MPI_Request mpi_req_persistent(MPI_Request real, uint32_t kind, MPI_Comm comm, int peer,
			       struct rec_builder *b, const char *call)
{
	struct mpi_record *rec = rec_make(VH_REQUEST, b, 0);
	struct req_info *ri;
	int rec_peer, tag;
	void *rec_comm, *v;

	if (real == MPI_REQUEST_NULL) {
		rec_discard(rec);
		return real;
	}
	if (!rec) {
		session_unsupported(call);
		return real;
	}
	/* Its tag numbers a synchronous send in its stream (sync_sends.h). */
	if (req_recorded(rec, &rec_peer, &tag, &rec_comm))
		tag = MPI_ANY_TAG;
	ri = req_info_new(comm, peer);
	if (ri)
		ri->tag = tag;
	v = mint(real, kind | VH_PERSISTENT, rec, ri);
	if (!v) {
		rec_discard(rec);
		return real;
	}
	rec_attach(rec, v);
	return v;
}

MPI_Fint mpi_req_persistent_f(MPI_Fint real_f, uint32_t kind, MPI_Comm comm, int peer,
			      struct rec_builder *b, const char *call)
{
	return vh_keep_real_f(
	    VH_REQUEST, mpi_req_persistent(PMPI_Request_f2c(real_f), kind, comm, peer, b, call),
	    real_f);
}

/* --- completion ------------------------------------------------------------------- */

/* e's operation finished: count what it received, and the collective. */
static void finished(struct vh_entry *e)
{
	struct req_info *ri = e->aux;

	if (!(e->flags & VH_ACTIVE))
		return;
	__atomic_and_fetch(&e->flags, ~(uint32_t)VH_ACTIVE, __ATOMIC_RELAXED);
	pending_add(-1);
	if ((e->flags & VH_RECV) && !(e->flags & VH_NOPEER))
		traffic_received(0);
	if (e->flags & VH_COLL) {
		if (ri && ri->coll)
			__atomic_add_fetch(&ri->coll->completed, 1, __ATOMIC_SEQ_CST);
		__atomic_sub_fetch(&collectives, 1, __ATOMIC_SEQ_CST);
	}
}

static void give_status(struct vh_entry *e, MPI_Status *st)
{
	struct req_info *ri = e->aux;

	if (st != MPI_STATUS_IGNORE && ri)
		*st = ri->status;
	__atomic_and_fetch(&e->flags, ~(uint32_t)VH_DONE, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&done_requests, 1, __ATOMIC_RELAXED);
}

/* Returns whether the program's handle is now MPI_REQUEST_NULL. */
static bool settle(void *v, bool real_is_null, bool done, MPI_Status *st)
{
	struct vh_entry *e = vh_entry(VH_REQUEST, v);

	if (!e)
		return real_is_null;
	if (e->flags & VH_DONE) {
		/* Completed during a checkpoint: the program's once the call
		 * completes it. A Testall (MPI_Waitall's loop, blocking.h)
		 * that finds others still pending leaves it, status and all:
		 * handed over then, its status was lost by the time the
		 * last one finished (a restarted Waitall gave an empty one). */
		if (!done)
			return false;
		give_status(e, st);
		if (e->flags & VH_PERSISTENT) {
			sync_sends_forget(e);
			return false;
		}
		release(v);
		return true;
	}
	if (e->flags & VH_PERSISTENT) {
		if (done) {
			finished(e);
			sync_sends_forget(e);
		}
		return false;
	}
	if (!real_is_null)
		return false;
	finished(e);
	release(v);
	return true;
}

void mpi_req_settle(MPI_Request *app, MPI_Request real, bool done, MPI_Status *st)
{
	if (!vh_is_virtual(VH_REQUEST, *app)) {
		*app = real; /* not one of ours (a window's): MPI's value */
		return;
	}
	if (settle(*app, real == MPI_REQUEST_NULL, done, st))
		*app = MPI_REQUEST_NULL;
}

static MPI_Fint null_f(void)
{
	static MPI_Fint v = -1;

	if (v == -1)
		v = PMPI_Request_c2f(MPI_REQUEST_NULL);
	return v;
}

/* A C status given to the program as a Fortran one. */
static void status_to_f(const MPI_Status *c, MPI_Fint *f)
{
	if (f && f != MPI_F_STATUS_IGNORE && f != MPI_F_STATUSES_IGNORE)
		PMPI_Status_c2f(c, f);
}

void mpi_req_settle_f(MPI_Fint *app, MPI_Fint real_f, bool done, MPI_Fint *st)
{
	MPI_Status cst;
	struct vh_entry *e;

	if (!vh_is_virtual_f(*app)) {
		*app = real_f;
		return;
	}
	e = vh_entry_at(VH_REQUEST, (uint32_t)(*app - VH_FBASE));
	if (e && (e->flags & VH_DONE)) {
		bool gone;

		if (!done)
			return;
		gone = settle(vh_f2c(VH_REQUEST, *app), true, done, &cst);
		status_to_f(&cst, st);
		if (gone)
			*app = null_f();
		return;
	}
	if (settle(vh_f2c(VH_REQUEST, *app), real_f == null_f(), done, MPI_STATUS_IGNORE))
		*app = null_f();
}

bool mpi_req_take_done(MPI_Request *reqs, int n, int *index, MPI_Status *st)
{
	if (!__atomic_load_n(&done_requests, __ATOMIC_RELAXED))
		return false;
	for (int i = 0; i < n; i++) {
		struct vh_entry *e = vh_entry(VH_REQUEST, reqs[i]);

		if (e && (e->flags & VH_DONE)) {
			mpi_req_settle(&reqs[i], MPI_REQUEST_NULL, true, st);
			*index = i;
			return true;
		}
	}
	return false;
}

bool mpi_req_take_done_f(MPI_Fint *reqs, int n, MPI_Fint *index, MPI_Fint *st)
{
	if (!__atomic_load_n(&done_requests, __ATOMIC_RELAXED))
		return false;
	for (int i = 0; i < n; i++) {
		struct vh_entry *e = vh_is_virtual_f(reqs[i])
					 ? vh_entry_at(VH_REQUEST, (uint32_t)(reqs[i] - VH_FBASE))
					 : NULL;

		if (e && (e->flags & VH_DONE)) {
			mpi_req_settle_f(&reqs[i], null_f(), true, st);
			*index = i + 1; /* Fortran counts from 1 */
			return true;
		}
	}
	return false;
}

void mpi_req_started(MPI_Request v)
{
	struct vh_entry *e = vh_entry(VH_REQUEST, v);
	struct req_info *ri;

	if (!e || (e->flags & VH_ACTIVE))
		return;
	ri = e->aux;
	if (ri)
		ri->posted = ++post_seq;
	__atomic_or_fetch(&e->flags, VH_ACTIVE, __ATOMIC_RELAXED);
	pending_add(1);
	if ((e->flags & VH_SEND) && ri) {
		traffic_sent(ri->comm, ri->peer);
		if (e->flags & VH_SYNC)
			sync_sends_started(v, ri->comm, ri->peer, ri->tag);
		else
			sync_sends_note(ri->comm, ri->peer, ri->tag);
	}
}

void mpi_req_started_f(MPI_Fint v)
{
	if (vh_is_virtual_f(v))
		mpi_req_started(vh_f2c(VH_REQUEST, v));
}

/* A synchronous send drained and sent again that the program frees before
 * it completes: its message and request go to the drain, which keeps the
 * message until MPI is done with it. */
static void held_to_drain(struct vh_entry *e)
{
	struct req_info *ri = e->aux;

	if (!ri || !ri->held)
		return;
	if (e->flags & VH_ACTIVE)
		drain_keep(e->real, ri->held);
	else
		free(ri->held);
	ri->held = NULL;
}

void mpi_req_hold(struct vh_entry *e, MPI_Request real, void *buf)
{
	struct req_info *ri = e->aux;

	ri->held = buf;
	e->real = real;
	e->real_f = VH_NO_FINT;
	__atomic_and_fetch(&e->flags, ~(uint32_t)VH_DONE, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&done_requests, 1, __ATOMIC_RELAXED);
	__atomic_or_fetch(&e->flags, VH_ACTIVE, __ATOMIC_RELAXED);
	pending_add(1);
}

/* An active request the program frees runs on inside MPI: its receive
 * is counted now, as the message will be taken. */
static void freed(void *v)
{
	struct vh_entry *e = vh_entry(VH_REQUEST, v);

	if (!e)
		return;
	held_to_drain(e);
	finished(e);
	if (e->flags & VH_PERSISTENT) {
		sync_sends_forget(e);
		free(e->aux);
		e->aux = NULL;
		rec_object_freed(VH_REQUEST, v);
	} else {
		release(v);
	}
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
	*app = null_f();
}

void mpi_message_matched(MPI_Message m)
{
	if (m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC)
		__atomic_add_fetch(&matched, 1, __ATOMIC_SEQ_CST);
}

void mpi_message_received(MPI_Message m)
{
	if (m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC)
		__atomic_sub_fetch(&matched, 1, __ATOMIC_RELAXED);
}

/* --- for the coordinator ------------------------------------------------------------ */

struct progress_ctx {
	uint32_t kind;
	int left;
};

/* Complete e if MPI finished it: its status waits for the program. */
static int progress_one(enum vh_kind k, uint32_t index, struct vh_entry *e, void *arg)
{
	struct progress_ctx *c = arg;
	struct req_info *ri = e->aux;
	int flag = 0;

	(void)k;
	(void)index;
	/* A generalized request is the program's to complete: testing it
	 * would run its query and free functions at a time of stasis's. */
	if (!(e->flags & VH_ACTIVE) || (e->flags & (VH_DONE | VH_REPOST | VH_GREQ)) ||
	    (c->kind && !(e->flags & c->kind)) || !ri)
		return 0;
	if (PMPI_Test((MPI_Request *)&e->real, &flag, &ri->status) != MPI_SUCCESS || !flag) {
		c->left++;
		return 0;
	}
	/* A non-persistent request's real handle is gone now (NULL): the
	 * program's Wait then returns at once, with the kept status. Its
	 * Fortran number is gone with it. */
	if (!(e->flags & VH_PERSISTENT))
		e->real_f = VH_NO_FINT;
	finished(e);
	__atomic_or_fetch(&e->flags, VH_DONE, __ATOMIC_RELAXED);
	__atomic_add_fetch(&done_requests, 1, __ATOMIC_RELAXED);
	return 0;
}

int mpi_req_progress(uint32_t kind)
{
	struct progress_ctx c = {kind, 0};

	vh_walk(VH_REQUEST, progress_one, &c);
	return c.left;
}

static int cancel_one(enum vh_kind k, uint32_t index, struct vh_entry *e, void *arg)
{
	struct req_info *ri = e->aux;
	MPI_Status st;
	int cancelled = 0;

	(void)k;
	(void)index;
	(void)arg;
	if (!(e->flags & VH_RECV) || !(e->flags & VH_ACTIVE) ||
	    (e->flags & (VH_DONE | VH_REPOST)) || !ri)
		return 0;
	if (PMPI_Cancel((MPI_Request *)&e->real) != MPI_SUCCESS ||
	    PMPI_Wait((MPI_Request *)&e->real, &st) != MPI_SUCCESS)
		return -EIO;
	PMPI_Test_cancelled(&st, &cancelled);
	if (cancelled) {
		if (!(e->flags & VH_PERSISTENT))
			e->real = MPI_REQUEST_NULL;
		e->real_f = VH_NO_FINT;
		__atomic_or_fetch(&e->flags, VH_REPOST, __ATOMIC_RELAXED);
		return 0;
	}
	/* It completed instead: the program finds it so. */
	if (!(e->flags & VH_PERSISTENT))
		e->real_f = VH_NO_FINT;
	ri->status = st;
	finished(e);
	__atomic_or_fetch(&e->flags, VH_DONE, __ATOMIC_RELAXED);
	__atomic_add_fetch(&done_requests, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Whether v names an object the program freed (its record gone, or kept
 * only for dependants). */
static bool freed_object(enum vh_kind k, void *v)
{
	const struct vh_entry *o;

	if (!v || !vh_is_virtual(k, v))
		return false;
	o = vh_entry(k, v);
	return !o || !o->rec || (o->rec->flags & REC_FREED);
}

/* A pending receive on a communicator or datatype the program freed: MPI
 * keeps the object while the receive is pending, but once cancelled it
 * lets it go, and posting the receive again would use a dead object. (A
 * persistent one is started again as it is: its request holds them.) */
static int names_freed(enum vh_kind k, uint32_t index, struct vh_entry *e, void *arg)
{
	struct req_info *ri = e->aux;
	void *comm, *type;

	(void)k;
	(void)index;
	(void)arg;
	if (!(e->flags & VH_RECV) || !(e->flags & VH_ACTIVE) ||
	    (e->flags & (VH_DONE | VH_REPOST | VH_PERSISTENT)) || !ri)
		return 0;
	comm = ri->comm;
	type = ri->type;
	if (e->flags & VH_FORTRAN) {
		comm = vh_is_virtual_f(ri->fcomm) ? vh_f2c(VH_COMM, ri->fcomm) : NULL;
		type = vh_is_virtual_f(ri->ftype) ? vh_f2c(VH_TYPE, ri->ftype) : NULL;
	}
	return freed_object(VH_COMM, comm) || freed_object(VH_TYPE, type) ? -ESTALE : 0;
}

int mpi_req_cancel_receives(void)
{
	static bool said;

	/* Nothing cancelled here then: every rank skips this checkpoint and
	 * posts again what it cancelled; the next one comes once the receive
	 * completed. */
	if (vh_walk(VH_REQUEST, names_freed, NULL)) {
		if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
			pr_warn("a receive is pending on a communicator or datatype the program "
				"freed: checkpoints are skipped until it completes");
		return -ESTALE;
	}
	return vh_walk(VH_REQUEST, cancel_one, NULL);
}

/* The checkpoint protected every page again (STASIS_DIRTY=mprotect): MPI
 * may write the buffer of a receive posted again from another process
 * (single-copy transfers), where a protected page is an EFAULT, not a
 * fault stasis sees. Unprotected as the wrapper of a first post does. */
static void prepare_buffer(struct vh_entry *e)
{
	struct req_info *ri = e->aux;

	if (e->flags & VH_PERSISTENT) {
		/* (call, buf, count, datatype, ...): mpi_req_replayed() */
		struct rec_reader r;
		void *buf, *type;
		int count;

		if (!e->rec)
			return;
		r = recread_open(e->rec->data, e->rec->len);
		recread_int(&r);
		buf = (void *)(uintptr_t)recread_u64(&r);
		count = recread_int(&r);
		type = recread_handle(&r, VH_TYPE);
		if (!r.bad)
			traffic_recv_buffer(buf, count, VH_REAL(VH_TYPE, MPI_Datatype, type));
	} else if (e->flags & VH_FORTRAN) {
		traffic_recv_buffer(ri->buf, ri->count,
				    PMPI_Type_f2c(vh_real_f(VH_TYPE, ri->ftype)));
	} else {
		traffic_recv_buffer(ri->buf, ri->count, VH_REAL(VH_TYPE, MPI_Datatype, ri->type));
	}
}

/* Post one cancelled receive again, through the bindings it came from. */
static int post_again(struct vh_entry *e)
{
	struct req_info *ri = e->aux;
	int ret;

	prepare_buffer(e);
	if (e->flags & VH_PERSISTENT) {
		ret = PMPI_Start((MPI_Request *)&e->real);
	} else if (e->flags & VH_FORTRAN) {
		static void (*irecv_f)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
				       MPI_Fint *, MPI_Fint *, MPI_Fint *);
		MPI_Fint count = ri->count, type = vh_real_f(VH_TYPE, ri->ftype);
		MPI_Fint source = ri->peer, tag = ri->tag, comm = vh_real_f(VH_COMM, ri->fcomm);
		MPI_Fint req, ierr;

		if (!irecv_f)
			irecv_f = stasis_next_symbol("mpi_irecv_");
		irecv_f(ri->buf, &count, &type, &source, &tag, &comm, &req, &ierr);
		ret = ierr;
		if (ret == MPI_SUCCESS) {
			e->real = PMPI_Request_f2c(req);
			e->real_f = req;
		}
	} else {
		ret = PMPI_Irecv(ri->buf, ri->count, VH_REAL(VH_TYPE, MPI_Datatype, ri->type),
				 ri->peer, ri->tag, VH_REAL(VH_COMM, MPI_Comm, ri->comm),
				 (MPI_Request *)&e->real);
	}
	if (ret != MPI_SUCCESS)
		return -EIO;
	__atomic_and_fetch(&e->flags, ~(uint32_t)VH_REPOST, __ATOMIC_RELAXED);
	return 0;
}

struct repost_ctx {
	struct vh_entry **e;
	size_t n, cap;
	int ret;
};

static int collect_repost(enum vh_kind k, uint32_t index, struct vh_entry *e, void *arg)
{
	struct repost_ctx *c = arg;

	(void)k;
	(void)index;
	if (!(e->flags & VH_REPOST) || !e->aux)
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		void *p = realloc(c->e, sizeof(*c->e) * cap);

		if (!p) {
			c->ret = -ENOMEM;
			return c->ret;
		}
		c->e = p;
		c->cap = cap;
	}
	c->e[c->n++] = e;
	return 0;
}

static int by_posting(const void *a, const void *b)
{
	const struct req_info *x = (*(struct vh_entry *const *)a)->aux;
	const struct req_info *y = (*(struct vh_entry *const *)b)->aux;

	return x->posted < y->posted ? -1 : x->posted > y->posted;
}

/* In the order the program posted them: receives with wildcards match
 * messages in posting order. */
int mpi_req_repost(void)
{
	struct repost_ctx c = {0};

	vh_walk(VH_REQUEST, collect_repost, &c);
	qsort(c.e, c.n, sizeof(*c.e), by_posting);
	for (size_t i = 0; i < c.n && !c.ret; i++)
		c.ret = post_again(c.e[i]);
	free(c.e);
	return c.ret;
}

void req_count_loaded(uint32_t flags, uint64_t posted)
{
	if (posted > post_seq)
		post_seq = posted;
	if (flags & VH_ACTIVE)
		pending_add(1);
	if (flags & VH_DONE)
		__atomic_add_fetch(&done_requests, 1, __ATOMIC_RELAXED);
}
