/* The stripe engine over MPI: runs the plans of stripe.c for xor and rs,
 * for encoding (every checksum position "erased") and rebuilding alike.
 *
 * Per stripe the contributing members form a chain in ring order; each adds
 * its term to the partial sum received from its predecessor and passes it
 * on, and the last one scatters the rows to the members that lack them.
 * With no loss every member is in the middle of p - k chains at once and
 * data flows left to right around the ring, as in redset's reduce-scatter.
 *
 * Each of this member's tasks (its part in one stripe) is a pipeline over
 * the pieces (stripe_piece()) of the chunk with RING_DEPTH buffers: piece
 * j + 1 is received while piece j is folded and sent on, and no member
 * waits for the whole set to finish a piece before starting the next one
 * (a per-piece barrier made every piece cost a full chain of scheduling
 * hops when ranks share cores). Receives are posted as soon as a buffer is
 * free, sends are non-blocking, and a task's pieces are sent on in order,
 * so that messages of one link (same peers, same tag) match in order and
 * the dataflow cannot deadlock: every chain ends in a sink, which frees its
 * buffers on its own.
 *
 * The partial sum is folded in place (term added into the received rows by
 * xor_gen or ec_encode_data_update), a chain head's term goes out straight
 * from the buffer its data was read into (xor) or is made by
 * ec_encode_data into a buffer (rs). Source data is read with pread into
 * buffers kept warm for the process (red_io.c), one piece at a time, and
 * its crc64 is noted there while the piece is in cache; rows bound for the
 * redundancy file go out through io_uring from the slot that holds them. */
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
#include "redset_int.h"

#define RING_DEPTH 2 /* pieces in flight per task */
#define POLITE_MAX_NS 200000 /* longest sleep between polls when oversubscribed */

enum { SLOT_FREE, SLOT_RECV, SLOT_READY, SLOT_SEND, SLOT_WRITE };

struct slot {
	int state;
	uint64_t piece;
	unsigned char *buf; /* nrows * piece bytes */
	struct red_write w; /* SLOT_WRITE: buf going to the redundancy file */
};

struct task {
	int s;
	const struct stripe_plan *pl;
	int pos;   /* this member's position in stripe s */
	int vec_i; /* index among the contributors, -1 for a sink */
	int pred;  /* set index of the predecessor, -1 none */
	int succ;  /* set index of the successor, -1: scatter the rows */
	int src;   /* sink: set index of the last contributor */
	int nrows; /* rows received / sent: nerased, 1 for a sink */
	uint64_t next_post; /* next piece to receive (head: to produce) */
	uint64_t next_done; /* next piece to pass on / write, in order */
	struct slot slot[RING_DEPTH];
	MPI_Request *req; /* [RING_DEPTH][1 + k]: receive, then sends */
};

static void keep_err(struct codec_io *io, int ret)
{
	if (ret && !io->err)
		io->err = ret;
}

static int mpi_ret(int rc)
{
	return rc == MPI_SUCCESS ? 0 : -EIO;
}

/* Passes the rows of a piece on: to the successor, or scattered to the
 * members whose positions are erased. */
static int emit(struct redset *rs, int k, struct task *t, MPI_Request *sreq,
		const unsigned char *rows, int len)
{
	const struct stripe_plan *pl = t->pl;
	int ret = 0;

	if (t->succ >= 0)
		return mpi_ret(PMPI_Isend(rows, pl->nerased * len, MPI_BYTE, t->succ, t->s,
					  rs->comm, &sreq[0]));
	for (int r = 0; r < pl->nerased && !ret; r++) {
		int dest = stripe_member(rs->p, k, t->s, pl->erased[r]);

		ret = mpi_ret(PMPI_Isend(rows + (size_t)r * len, len, MPI_BYTE, dest, rs->p + t->s,
					 rs->comm, &sreq[r]));
	}
	return ret;
}

/* This member's part in each stripe: contributor (with chain neighbours),
 * sink (an erased position of its own) or nothing. Contributors without a
 * predecessor come first so that their chains start at once. */
static int make_tasks(const struct redset *rs, int k, const struct stripe_plan *plans,
		      struct task *tasks)
{
	int p = rs->p, n = 0;

	for (int pass = 0; pass < 2; pass++) {
		for (int s = 0; s < p; s++) {
			const struct stripe_plan *pl = &plans[s];
			int pos = stripe_pos(p, k, s, rs->me);
			struct task t = {.s = s, .pl = pl, .pos = pos, .vec_i = -1, .pred = -1,
					 .succ = -1, .src = -1};

			if (!pl->nerased)
				continue;
			for (int i = 0; i < pl->ncontrib; i++) {
				if (pl->contrib[i] != pos)
					continue;
				t.vec_i = i;
				if (i > 0)
					t.pred = stripe_member(p, k, s, pl->contrib[i - 1]);
				if (i + 1 < pl->ncontrib)
					t.succ = stripe_member(p, k, s, pl->contrib[i + 1]);
			}
			if (t.vec_i < 0) {
				for (int r = 0; r < pl->nerased; r++)
					if (pl->erased[r] == pos)
						t.src = stripe_member(p, k, s,
								      pl->contrib[pl->ncontrib - 1]);
				if (t.src < 0)
					continue;
			}
			/* pass 0: chain heads; pass 1: the rest. */
			if ((pass == 0) != (t.vec_i == 0))
				continue;
			t.nrows = t.vec_i >= 0 ? pl->nerased : 1;
			tasks[n++] = t;
		}
	}
	return n;
}

struct ring {
	struct redset *rs;
	struct codec_io *io;
	const struct stripe_kernel *kern;
	int k, d;
	size_t piece;
	uint64_t npieces;
	unsigned char *scratch; /* a piece: the source data of a fold or an rs term */
	bool polite;
};

static int piece_len(const struct ring *rg, uint64_t j)
{
	uint64_t c = rg->io->meta->chunk, off = j * rg->piece;

	return (int)(c - off < rg->piece ? c - off : rg->piece);
}

static void slot_rows(unsigned char *buf, int nrows, int len, unsigned char **rows)
{
	for (int r = 0; r < nrows; r++)
		rows[r] = buf + (size_t)r * len;
}

/* len bytes at off of this member's position pos (a chunk of its files,
 * or a section of its redundancy file) read into buf. On an error: zeros,
 * so that the collective goes on, and the error is reported once
 * everybody is done. */
static void read_pos(struct ring *rg, int pos, uint64_t off, unsigned char *buf, int len)
{
	struct codec_io *io = rg->io;
	int ret;

	if (pos < rg->d)
		ret = red_data_read(io, (uint64_t)pos * io->meta->chunk + off, buf, len);
	else
		ret = red_sec_read(io, pos - rg->d, off, buf, len);
	if (ret) {
		keep_err(io, ret);
		memset(buf, 0, len);
	}
}

/* A sink's row of piece off goes to its place: rebuilt data into the
 * member's files, synchronously (the restore reads them next, from the
 * page cache); a checksum row into the redundancy file through io_uring,
 * the slot staying busy until it is written. A task's pieces come in
 * order, so the crc64 of a section chains. */
static void write_pos(struct ring *rg, struct slot *sl, int pos, uint64_t off, int len)
{
	struct codec_io *io = rg->io;
	struct red_section *sec;

	if (pos < rg->d) {
		keep_err(io,
			 red_data_write(io, (uint64_t)pos * io->meta->chunk + off, sl->buf, len));
		sl->state = SLOT_FREE;
		return;
	}
	sec = &io->sec[pos - rg->d];
	sec->crc = crc64_ecma_refl(sec->crc, sl->buf, len);
	sl->w = (struct red_write){.fd = io->red_fd,
				   .dfd = io->red_dfd,
				   .direct = &io->red_direct,
				   .buf = sl->buf,
				   .len = len,
				   .off = sec->offset + off};
	sl->state = SLOT_WRITE;
	if (red_write_start(&sl->w)) {
		keep_err(io, sl->w.res);
		sl->state = SLOT_FREE;
	}
}

/* Frees the slots whose writes finished; the number freed. */
static int reap_writes(struct ring *rg, bool wait)
{
	struct red_write *w;
	int n = 0;

	while ((w = red_write_reap(wait && !n))) {
		struct slot *sl = (struct slot *)((char *)w - offsetof(struct slot, w));

		keep_err(rg->io, w->res);
		sl->state = SLOT_FREE;
		n++;
	}
	return n;
}

/* A chain head makes its term of piece next_post and sends it. */
static int head_produce(struct ring *rg, struct task *t)
{
	uint64_t j = t->next_post;
	struct slot *sl = &t->slot[j % RING_DEPTH];
	MPI_Request *sreq = t->req + (j % RING_DEPTH) * (1 + rg->k) + 1;
	int len = piece_len(rg, j);
	unsigned char *rows[RED_MAX_SET];

	if (rg->kern->direct) {
		/* xor: the term is the data itself, sent from where it was read. */
		read_pos(rg, t->pos, j * rg->piece, sl->buf, len);
	} else {
		read_pos(rg, t->pos, j * rg->piece, rg->scratch, len);
		slot_rows(sl->buf, t->nrows, len, rows);
		rg->kern->term(t->pl, t->vec_i, len, rg->scratch, rows);
	}
	sl->piece = j;
	sl->state = SLOT_SEND;
	t->next_post++;
	t->next_done++;
	return emit(rg->rs, rg->k, t, sreq, sl->buf, len);
}

/* The partial sum of piece next_done arrived: add this member's term and
 * pass it on, or (sink) write the rebuilt row. */
static int pass_on(struct ring *rg, struct task *t)
{
	uint64_t j = t->next_done;
	struct slot *sl = &t->slot[j % RING_DEPTH];
	MPI_Request *sreq = t->req + (j % RING_DEPTH) * (1 + rg->k) + 1;
	int len = piece_len(rg, j);
	unsigned char *rows[RED_MAX_SET];

	t->next_done++;
	if (t->vec_i < 0) {
		write_pos(rg, sl, t->pos, j * rg->piece, len);
		return 0;
	}
	read_pos(rg, t->pos, j * rg->piece, rg->scratch, len);
	slot_rows(sl->buf, t->nrows, len, rows);
	rg->kern->fold(t->pl, t->vec_i, len, rg->scratch, rows);
	sl->state = SLOT_SEND;
	return emit(rg->rs, rg->k, t, sreq, sl->buf, len);
}

static bool sends_done(const struct ring *rg, const struct task *t, int w)
{
	const MPI_Request *sreq = t->req + w * (1 + rg->k) + 1;

	for (int r = 0; r < rg->k; r++)
		if (sreq[r] != MPI_REQUEST_NULL)
			return false;
	return true;
}

/* Advances a task as far as it goes without waiting; *busy: it still has
 * work or requests outstanding. */
static int advance(struct ring *rg, struct task *t, bool *busy)
{
	int ret = 0;

	for (int w = 0; w < RING_DEPTH; w++)
		if (t->slot[w].state == SLOT_SEND && sends_done(rg, t, w))
			t->slot[w].state = SLOT_FREE;
	if (t->pred < 0 && t->vec_i >= 0) {
		while (!ret && t->next_post < rg->npieces &&
		       t->slot[t->next_post % RING_DEPTH].state == SLOT_FREE)
			ret = head_produce(rg, t);
	} else {
		while (!ret && t->next_done < rg->npieces &&
		       t->slot[t->next_done % RING_DEPTH].state == SLOT_READY)
			ret = pass_on(rg, t);
		while (!ret && t->next_post < rg->npieces &&
		       t->slot[t->next_post % RING_DEPTH].state == SLOT_FREE) {
			uint64_t j = t->next_post++;
			int w = j % RING_DEPTH, len = piece_len(rg, j);
			struct slot *sl = &t->slot[w];

			sl->piece = j;
			sl->state = SLOT_RECV;
			ret = mpi_ret(PMPI_Irecv(sl->buf, t->nrows * len, MPI_BYTE,
						 t->vec_i >= 0 ? t->pred : t->src,
						 t->vec_i >= 0 ? t->s : rg->rs->p + t->s,
						 rg->rs->comm, &t->req[w * (1 + rg->k)]));
		}
	}
	if (t->next_done < rg->npieces)
		*busy = true;
	for (int w = 0; w < RING_DEPTH; w++)
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

/* Waits until a request completes (*nout of them, in idx) or a write
 * finishes (*nout 0); *nout MPI_UNDEFINED: nothing is outstanding. Polite
 * when the node has more ranks than cores: the MPI progress loop spins
 * (or sched_yield()s, which the scheduler hardly honours), taking the core
 * from the very ranks this one waits for; then poll with a short sleep
 * that grows while nothing arrives. */
static int wait_some(struct ring *rg, int n, MPI_Request *req, int *nout, int *idx)
{
	long ns = 2000;

	if (!rg->polite && !red_write_inflight())
		return mpi_ret(PMPI_Waitsome(n, req, nout, idx, MPI_STATUSES_IGNORE));
	for (;;) {
		struct timespec ts = {0, ns};
		int ret = mpi_ret(PMPI_Testsome(n, req, nout, idx, MPI_STATUSES_IGNORE));

		if (ret || (*nout && *nout != MPI_UNDEFINED))
			return ret;
		if (red_write_inflight() && reap_writes(rg, *nout == MPI_UNDEFINED)) {
			*nout = 0;
			return 0;
		}
		if (*nout == MPI_UNDEFINED)
			return 0;
		if (!rg->polite)
			continue;
		nanosleep(&ts, NULL);
		ns = ns * 2 > POLITE_MAX_NS ? POLITE_MAX_NS : ns * 2;
	}
}

/* Runs one encode or rebuild of the stripe scheme with k checksum positions
 * per stripe. Collective over the set; every member must pass the same
 * data_lost/red_lost (agreed before). Local I/O errors land in io->err and
 * the member keeps exchanging (zeros) so that nobody hangs. */
int stripe_ring_run(struct redset *rs, struct codec_io *io, int k, const struct stripe_kernel *kern,
		    const bool *data_lost, const bool *red_lost)
{
	const int p = rs->p, nreq_task = RING_DEPTH * (1 + k);
	const uint64_t c = io->meta->chunk;
	struct ring rg = {.rs = rs, .io = io, .kern = kern, .k = k, .d = p - k,
			  .piece = stripe_piece(p, k)};
	struct stripe_plan *plans = calloc(p, sizeof(*plans));
	struct task *tasks = calloc(p, sizeof(*tasks));
	MPI_Request *req = malloc(sizeof(*req) * (size_t)p * nreq_task);
	int *idx = malloc(sizeof(int) * (size_t)p * nreq_task);
	int ntasks = 0, ret;
	size_t bytes, at;
	unsigned char *base;

	rg.polite = oversubscribed();
	rg.npieces = (c + rg.piece - 1) / rg.piece;
	if (!plans || !tasks || !req || !idx) {
		ret = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < p * nreq_task; i++)
		req[i] = MPI_REQUEST_NULL;
	ret = stripe_plans_make(p, k, kern, data_lost, red_lost, plans);
	if (ret)
		goto out;
	ntasks = make_tasks(rs, k, plans, tasks);
	/* All pieces in one kept buffer: the scratch piece, then the slots. */
	bytes = rg.piece;
	for (int i = 0; i < ntasks; i++)
		bytes += (size_t)RING_DEPTH * tasks[i].nrows * rg.piece;
	base = red_buf(RED_BUF_RING, bytes);
	if (!base) {
		ret = -ENOMEM;
		goto out;
	}
	rg.scratch = base;
	at = rg.piece;
	for (int i = 0; i < ntasks; i++) {
		struct task *t = &tasks[i];

		t->req = req + (size_t)i * nreq_task;
		for (int w = 0; w < RING_DEPTH; w++) {
			t->slot[w].buf = base + at;
			at += (size_t)t->nrows * rg.piece;
		}
	}

	while (!ret) {
		bool busy = false;
		int nout;

		for (int i = 0; i < ntasks && !ret; i++)
			ret = advance(&rg, &tasks[i], &busy);
		if (ret || !busy)
			break;
		ret = wait_some(&rg, ntasks * nreq_task, req, &nout, idx);
		if (!ret && nout == MPI_UNDEFINED) {
			/* busy but nothing outstanding: a broken plan */
			pr_err("stripe exchange stalled");
			ret = -EIO;
		}
		for (int n = 0; !ret && n < nout; n++) {
			struct task *t = &tasks[idx[n] / nreq_task];
			int w = idx[n] % nreq_task;

			if (w % (1 + k) == 0)
				t->slot[w / (1 + k)].state = SLOT_READY;
		}
	}
out:
	/* Writes in flight point into the slots: wait for them, error or not. */
	while (red_write_inflight())
		reap_writes(&rg, true);
	if (plans)
		stripe_plans_free(p, plans);
	free(plans);
	free(tasks);
	free(req);
	free(idx);
	if (ret)
		pr_err("stripe exchange failed: %s", strerror(-ret));
	return ret;
}
