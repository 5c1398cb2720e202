/* The stripe engine over MPI: runs the plans of stripe_plan.c for xor and rs,
 * for encoding (every checksum position "erased") and rebuilding alike;
 * scheme_exchange(), at the end, sends each scheme its way.
 *
 * Per stripe, one of its contributors (the last in codeword order) gathers:
 * the other contributors send it their piece of the stripe, it combines
 * them with its own in one kernel call (xor_gen over all sources, or
 * ec_encode_data with the plan's coefficients) and sends each resulting
 * row to the member whose position it is. Every piece so takes two hops
 * whatever the set size, where the reduce-scatter chain of LLNL's redset took
 * p - k, each of which may wait for a scheduling slot when ranks share
 * cores (8 ranks on 2 cores on the test VMs); a piece of rs travels as one row
 * to the gatherer where a chain carried k rows at every link; and the
 * sources are combined in one pass over memory instead of one per link.
 * With no loss the gatherer of stripe s is member s - 1, so that every
 * member gathers one stripe; in a rebuild the gatherers rotate with s as
 * well.
 *
 * Each of this member's tasks (its part in one stripe: sender, gatherer or
 * sink) is a pipeline over the pieces (stripe_piece()) of the chunk with
 * DEPTH slots. Receives are posted as soon as a slot is free, sends are
 * non-blocking, and the pieces of a task go in order, so that the messages
 * of a link (same peers, same tag) match in order. Sinks drain on their
 * own, gatherers into sinks, senders into gatherers: the dataflow cannot
 * deadlock.
 *
 * Source data is read with pread into buffers kept warm for the process
 * (io.c), one piece at a time, its crc64 noted there while in cache;
 * rows go out through io_uring from the slot that holds them. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <isa-l.h>

#define LOG_PREFIX "redset: "
#include "log.h"
#include "internal_mpi.h"

#define DEPTH 2		     /* pieces in flight per task */
#define POLITE_MAX_NS 200000 /* longest sleep between polls when oversubscribed */

enum role { SENDER, GATHERER, SINK };
enum { SLOT_FREE, SLOT_RECV, SLOT_READY, SLOT_SEND, SLOT_WRITE };

struct slot {
	int state;
	int pending;	     /* receives outstanding */
	unsigned char *buf;  /* sender, sink: a piece; gatherer: ncontrib sources, nerased rows */
	struct ring_write w; /* SLOT_WRITE: buf going to the redundancy file */
};

struct task {
	enum role role;
	int s;
	const struct stripe_plan *pl;
	int pos;	    /* this member's position in stripe s */
	int self;	    /* gatherer: this member's index among the contributors */
	int gatherer;	    /* sender, sink: the set index of the stripe's gatherer */
	int nreq;	    /* requests per slot */
	uint64_t next_post; /* next piece to read and send, or to receive */
	uint64_t next_done; /* next piece to combine or write, in order */
	struct slot slot[DEPTH];
	MPI_Request *req; /* [DEPTH][nreq] */
};

struct engine {
	struct redundancy_set *rs;
	struct scheme_io *io;
	const struct stripe_kernel *kern;
	int k, d;
	size_t piece;
	uint64_t npieces;
	bool polite;
};

static int piece_len(const struct engine *e, uint64_t j)
{
	uint64_t c = e->io->meta->chunk, off = j * e->piece;

	return (int)(c - off < e->piece ? c - off : e->piece);
}

static int gatherer_of(const struct redundancy_set *rs, int k, int s, const struct stripe_plan *pl)
{
	return stripe_member(rs->g.p, k, s, pl->contrib[pl->ncontrib - 1]);
}

/* len bytes at off of this member's position pos (a chunk of its files,
 * or a section of its redundancy file) read into buf. On an error: zeros,
 * so that the collective goes on, and the error is reported once
 * everybody is done. */
static void read_pos(struct engine *e, int pos, uint64_t off, unsigned char *buf, int len)
{
	struct scheme_io *io = e->io;
	int ret;

	if (pos < e->d)
		ret = io_read_data(io, (uint64_t)pos * io->meta->chunk + off, buf, len);
	else
		ret = io_read_section(io, pos - e->d, off, buf, len);
	if (ret) {
		io_keep_err(io, ret);
		memset(buf, 0, len);
	}
}

/* A sink's row of piece off goes to its place through io_uring, the slot
 * staying busy until it is written: rebuilt data into the member's files
 * (a piece across two files synchronously), a checksum row into the
 * redundancy file. A task's pieces come in order, so the crc64s chain. */
static void write_pos(struct engine *e, struct slot *sl, int pos, uint64_t off, int len)
{
	struct scheme_io *io = e->io;
	struct payload_section *sec;
	uint64_t lo = (uint64_t)pos * io->meta->chunk + off, at;
	size_t n;
	int fd;

	if (pos < e->d) {
		io_note_data(io, lo, sl->buf, len);
		if (!lfile_place(&io->lf, lo, len, &fd, &at, &n)) {
			io_keep_err(io, lfile_write(&io->lf, lo, sl->buf, len));
			n = 0;
		}
		sl->w = (struct ring_write){.fd = fd, .buf = sl->buf, .len = n, .off = at};
	} else {
		sec = &io->sec[pos - e->d];
		sec->crc = crc64_ecma_refl(sec->crc, sl->buf, len);
		sl->w = (struct ring_write){
		    .fd = io->red_fd, .buf = sl->buf, .len = len, .off = sec->offset + off};
	}
	sl->state = SLOT_FREE;
	if (!sl->w.len)
		return;
	sl->state = SLOT_WRITE;
	if (ring_write_start(&sl->w)) {
		io_keep_err(io, sl->w.res);
		sl->state = SLOT_FREE;
	}
}

/* Frees the slots whose writes finished; the number freed. */
static int reap_writes(struct engine *e, bool wait)
{
	struct ring_write *w;
	int n = 0;

	while ((w = ring_write_reap(wait && !n))) {
		struct slot *sl = (struct slot *)((char *)w - offsetof(struct slot, w));

		io_keep_err(e->io, w->res);
		sl->state = SLOT_FREE;
		n++;
	}
	return n;
}

/* This member's part in each stripe with something to rebuild: it
 * gathers, contributes (sends to the gatherer), or owns an erased
 * position (sink). */
static int make_tasks(const struct redundancy_set *rs, int k, const struct stripe_plan *plans,
		      struct task *tasks)
{
	int p = rs->g.p, n = 0;

	for (int s = 0; s < p; s++) {
		const struct stripe_plan *pl = &plans[s];
		int pos = stripe_pos(p, k, s, rs->g.me), ci = -1, ei = -1;
		struct task t = {.s = s, .pl = pl, .pos = pos, .self = -1};

		if (!pl->nerased)
			continue;
		for (int i = 0; i < pl->ncontrib; i++)
			ci = pl->contrib[i] == pos ? i : ci;
		for (int r = 0; r < pl->nerased; r++)
			ei = pl->erased[r] == pos ? r : ei;
		t.gatherer = gatherer_of(rs, k, s, pl);
		if (t.gatherer == rs->g.me)
			t.role = GATHERER;
		else if (ci >= 0)
			t.role = SENDER;
		else if (ei >= 0)
			t.role = SINK;
		else
			continue; /* a surviving position that is not needed */
		t.self = ci;
		t.nreq = t.role != GATHERER		  ? 1
			 : pl->ncontrib - 1 > pl->nerased ? pl->ncontrib - 1
							  : pl->nerased;
		tasks[n++] = t;
	}
	return n;
}

static size_t slot_bytes(const struct engine *e, const struct task *t)
{
	if (t->role == GATHERER)
		return (size_t)(t->pl->ncontrib + t->pl->nerased) * e->piece;
	return e->piece;
}

/* The gatherer's buffers of a slot, each len bytes apart: the sources in
 * contributor order, then the rows. */
static void gather_bufs(const struct task *t, const struct slot *sl, int len, unsigned char **src,
			unsigned char **rows)
{
	for (int i = 0; i < t->pl->ncontrib; i++)
		src[i] = sl->buf + (size_t)i * len;
	for (int r = 0; r < t->pl->nerased; r++)
		rows[r] = sl->buf + (size_t)(t->pl->ncontrib + r) * len;
}

static bool sends_done(const struct task *t, int w)
{
	for (int r = 0; r < t->nreq; r++)
		if (t->req[w * t->nreq + r] != MPI_REQUEST_NULL)
			return false;
	return true;
}

/* The gatherer has every other contributor's piece next_done: adds its own,
 * combines, and sends each row to its sink. */
static int combine_send(struct engine *e, struct task *t)
{
	const struct stripe_plan *pl = t->pl;
	uint64_t j = t->next_done++;
	int w = j % DEPTH, len = piece_len(e, j), ret = 0;
	struct slot *sl = &t->slot[w];
	unsigned char *src[MAX_SET], *rows[MAX_SET];

	gather_bufs(t, sl, len, src, rows);
	read_pos(e, t->pos, j * e->piece, src[t->self], len);
	e->kern->combine(pl, len, src, rows);
	sl->state = SLOT_SEND;
	for (int r = 0; r < pl->nerased && !ret; r++) {
		int dest = stripe_member(e->rs->g.p, e->k, t->s, pl->erased[r]);

		ret = mpi_ret(PMPI_Isend(rows[r], len, MPI_BYTE, dest, e->rs->g.p + t->s,
					 e->rs->comm, &t->req[w * t->nreq + r]));
	}
	return ret;
}

/* Posts what piece next_post needs: a sender reads and sends it, a
 * gatherer receives the other contributors' pieces, a sink its row. */
static int post(struct engine *e, struct task *t)
{
	const struct stripe_plan *pl = t->pl;
	uint64_t j = t->next_post++;
	int w = j % DEPTH, len = piece_len(e, j), ret = 0;
	struct slot *sl = &t->slot[w];
	MPI_Request *req = &t->req[w * t->nreq];
	unsigned char *src[MAX_SET], *rows[MAX_SET];

	if (t->role == SENDER) {
		read_pos(e, t->pos, j * e->piece, sl->buf, len);
		sl->state = SLOT_SEND;
		t->next_done++;
		return mpi_ret(
		    PMPI_Isend(sl->buf, len, MPI_BYTE, t->gatherer, t->s, e->rs->comm, req));
	}
	sl->state = SLOT_RECV;
	if (t->role == SINK) {
		sl->pending = 1;
		return mpi_ret(PMPI_Irecv(sl->buf, len, MPI_BYTE, t->gatherer, e->rs->g.p + t->s,
					  e->rs->comm, req));
	}
	gather_bufs(t, sl, len, src, rows);
	sl->pending = 0;
	for (int i = 0; i < pl->ncontrib && !ret; i++) {
		if (i == t->self)
			continue;
		ret = mpi_ret(PMPI_Irecv(src[i], len, MPI_BYTE,
					 stripe_member(e->rs->g.p, e->k, t->s, pl->contrib[i]),
					 t->s, e->rs->comm, &req[sl->pending++]));
	}
	if (!sl->pending)
		sl->state = SLOT_READY; /* the only contributor */
	return ret;
}

/* Advances a task as far as it goes without waiting; *busy: it still has
 * work or requests outstanding. */
static int advance(struct engine *e, struct task *t, bool *busy)
{
	int ret = 0;

	for (int w = 0; w < DEPTH; w++)
		if (t->slot[w].state == SLOT_SEND && sends_done(t, w))
			t->slot[w].state = SLOT_FREE;
	/* Until nothing moves: a gatherer that is the stripe's only
	 * contributor has its pieces ready as soon as it posts them. */
	for (bool moved = true; moved && !ret;) {
		moved = false;
		while (!ret && t->role != SENDER && t->next_done < e->npieces &&
		       t->slot[t->next_done % DEPTH].state == SLOT_READY) {
			moved = true;
			if (t->role == GATHERER) {
				ret = combine_send(e, t);
			} else {
				uint64_t j = t->next_done++;

				write_pos(e, &t->slot[j % DEPTH], t->pos, j * e->piece,
					  piece_len(e, j));
			}
		}
		while (!ret && t->next_post < e->npieces &&
		       t->slot[t->next_post % DEPTH].state == SLOT_FREE) {
			moved = true;
			ret = post(e, t);
		}
	}
	if (t->next_done < e->npieces)
		*busy = true;
	for (int w = 0; w < DEPTH; w++)
		if (t->slot[w].state != SLOT_FREE)
			*busy = true;
	return ret;
}

/* Whether this node runs more ranks than it has cores, as far as Open MPI
 * tells: it was asked to yield when idle (mpirun --mca mpi_yield_when_idle
 * 1, what oversubscribed runs use), or its local rank count exceeds the
 * online CPUs. Elsewhere: no, and waits spin as MPI does. */
static bool oversubscribed(void)
{
	const char *y = getenv("OMPI_MCA_mpi_yield_when_idle");
	const char *n = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (y && (!strcmp(y, "1") || !strcasecmp(y, "true")))
		return true;
	return n && cpus > 0 && atol(n) > cpus;
}

/* Waits until requests complete (*nout of them, in idx) or a write
 * finishes (*nout 0); *nout MPI_UNDEFINED: nothing is outstanding. Polite
 * when the node has more ranks than cores: the MPI progress loop spins
 * (or sched_yield()s, which the scheduler hardly honours), taking the core
 * from the very ranks this one waits for; then poll with a short sleep
 * that grows while nothing arrives. */
static int wait_some(struct engine *e, int n, MPI_Request *req, int *nout, int *idx)
{
	long ns = 2000;

	if (!e->polite && !ring_write_inflight())
		return mpi_ret(PMPI_Waitsome(n, req, nout, idx, MPI_STATUSES_IGNORE));
	for (;;) {
		struct timespec ts = {0, ns};
		int ret = mpi_ret(PMPI_Testsome(n, req, nout, idx, MPI_STATUSES_IGNORE));

		if (ret || (*nout && *nout != MPI_UNDEFINED))
			return ret;
		if (ring_write_inflight() && reap_writes(e, *nout == MPI_UNDEFINED)) {
			*nout = 0;
			return 0;
		}
		if (*nout == MPI_UNDEFINED)
			return 0;
		if (!e->polite)
			continue;
		nanosleep(&ts, NULL);
		ns = ns * 2 > POLITE_MAX_NS ? POLITE_MAX_NS : ns * 2;
	}
}

int stripe_run(struct redundancy_set *rs, struct scheme_io *io, int k,
	       const struct stripe_kernel *kern, const bool *data_lost, const bool *red_lost)
{
	const int p = rs->g.p;
	struct engine e = {
	    .rs = rs, .io = io, .kern = kern, .k = k, .d = p - k, .piece = stripe_piece(p, k)};
	struct stripe_plan *plans = calloc(p, sizeof(*plans));
	struct task *tasks = calloc(p, sizeof(*tasks));
	MPI_Request *req = NULL;
	int *idx = NULL, *owner = NULL, ntasks = 0, nreq = 0, ret;
	size_t bytes = 0, at = 0;
	unsigned char *base;

	e.polite = oversubscribed();
	e.npieces = (io->meta->chunk + e.piece - 1) / e.piece;
	if (!plans || !tasks) {
		ret = -ENOMEM;
		goto out;
	}
	ret = stripe_plans_make(p, k, kern, data_lost, red_lost, plans);
	if (ret)
		goto out;
	ntasks = make_tasks(rs, k, plans, tasks);
	for (int i = 0; i < ntasks; i++) {
		nreq += DEPTH * tasks[i].nreq;
		bytes += DEPTH * slot_bytes(&e, &tasks[i]);
	}
	req = malloc(sizeof(*req) * (nreq ? nreq : 1));
	idx = malloc(sizeof(int) * (nreq ? nreq : 1));
	owner = malloc(sizeof(int) * (nreq ? nreq : 1)); /* request -> task */
	base = kept_buf(KEPT_PIECES, bytes ? bytes : 1);
	if (!req || !idx || !owner || !base) {
		ret = -ENOMEM;
		goto out;
	}
	for (int i = 0, r = 0; i < ntasks; i++) {
		struct task *t = &tasks[i];

		t->req = req + r;
		for (int q = 0; q < DEPTH * t->nreq; q++, r++) {
			req[r] = MPI_REQUEST_NULL;
			owner[r] = i;
		}
		for (int w = 0; w < DEPTH; w++) {
			t->slot[w].buf = base + at;
			at += slot_bytes(&e, t);
		}
	}

	while (!ret) {
		bool busy = false;
		int nout;

		for (int i = 0; i < ntasks && !ret; i++)
			ret = advance(&e, &tasks[i], &busy);
		if (ret || !busy)
			break;
		ret = wait_some(&e, nreq, req, &nout, idx);
		if (!ret && nout == MPI_UNDEFINED) {
			/* busy but nothing outstanding: a broken plan */
			pr_err("stripe exchange stalled");
			ret = -EIO;
		}
		for (int n = 0; !ret && n < nout; n++) {
			struct task *t = &tasks[owner[idx[n]]];
			struct slot *sl = &t->slot[(idx[n] - (int)(t->req - req)) / t->nreq];

			if (sl->state == SLOT_RECV && !--sl->pending)
				sl->state = SLOT_READY;
		}
	}
out:
	/* Writes in flight point into the slots: wait for them, error or not. */
	while (ring_write_inflight())
		reap_writes(&e, true);
	if (plans)
		stripe_plans_free(p, plans);
	free(plans);
	free(tasks);
	free(req);
	free(idx);
	free(owner);
	if (ret)
		pr_err("stripe exchange failed: %s", strerror(-ret));
	return ret;
}

int scheme_exchange(struct redundancy_set *rs, struct scheme_io *io, const bool *data_lost,
		    const bool *red_lost)
{
	const struct scheme_ops *ops = rs->g.ops;

	switch (ops->exchange) {
	case EXCHANGE_COPIES:
		return copies_run(rs, io, data_lost, red_lost);
	case EXCHANGE_STRIPES:
		return stripe_run(rs, io, rs->g.param, ops->kernel, data_lost, red_lost);
	case EXCHANGE_NONE:
		break;
	}
	return 0;
}
