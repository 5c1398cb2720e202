/* The stripe engine over MPI: runs the plans of stripe.c for xor and rs,
 * for encoding (every checksum position "erased") and rebuilding alike.
 *
 * Per stripe the contributing members form a chain in ring order; each adds
 * its term to the partial sum received from its predecessor and passes it
 * on, and the last one scatters the rows to the members that lack them.
 * Every member works on up to p stripes at once, one piece (stripe_piece())
 * of the chunk at a time: all receives of the piece are posted first and
 * sends are non-blocking, so the dataflow cannot deadlock, and a member
 * computes its own terms while its predecessors' partial sums are in
 * flight, folding each in (xor_gen) as it arrives. With no loss every
 * member is in the middle of p - k chains at once and data flows left to
 * right around the ring, as in redset's reduce-scatter. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l.h>

#define LOG_PREFIX "redset: "
#include "log.h"
#include "redset_int.h"

struct task {
	int s;
	const struct stripe_plan *pl;
	int pos;   /* this member's position in stripe s */
	int vec_i; /* index among the contributors, -1 for a sink */
	int pred;  /* set index of the predecessor, -1 none */
	int succ;  /* set index of the successor, -1: scatter the rows */
	int src;   /* sink: set index of the last contributor */
	unsigned char *acc;
	unsigned char *rbuf;
};

static void keep_err(struct codec_io *io, int ret)
{
	if (ret && !io->err)
		io->err = ret;
}

static void read_pos(struct codec_io *io, int d, int pos, uint64_t off, void *buf, size_t len)
{
	const uint64_t c = io->meta->chunk;
	int ret;

	if (pos < d)
		ret = lf_read(&io->lf, (uint64_t)pos * c + off, buf, len);
	else
		ret = full_pread(io->red_fd, buf, len, io->sec[pos - d].offset + off);
	if (ret) {
		/* Keep the collective going with zeros; the error is reported
		 * once everybody is done. */
		keep_err(io, ret);
		memset(buf, 0, len);
	}
}

static void write_pos(struct codec_io *io, int d, int pos, uint64_t off, const void *buf,
		      size_t len)
{
	const uint64_t c = io->meta->chunk;
	struct red_section *sec;

	if (pos < d) {
		keep_err(io, lf_write(&io->lf, (uint64_t)pos * c + off, buf, len));
		return;
	}
	/* Pieces of a section arrive in offset order: its crc chains. */
	sec = &io->sec[pos - d];
	keep_err(io, full_pwrite(io->red_fd, buf, len, sec->offset + off));
	sec->crc = crc64_ecma_refl(sec->crc, buf, len);
}

static int mpi_ret(int rc)
{
	return rc == MPI_SUCCESS ? 0 : -EIO;
}

static int emit(struct redset *rs, int k, struct task *t, int len, MPI_Request *sreq, int *ns)
{
	const struct stripe_plan *pl = t->pl;
	int ret = 0;

	if (t->succ >= 0)
		return mpi_ret(PMPI_Isend(t->acc, pl->nerased * len, MPI_BYTE, t->succ, t->s,
					  rs->comm, &sreq[(*ns)++]));
	for (int r = 0; r < pl->nerased && !ret; r++) {
		int dest = stripe_member(rs->p, k, t->s, pl->erased[r]);

		ret = mpi_ret(PMPI_Isend(t->acc + (size_t)r * len, len, MPI_BYTE, dest,
					 rs->p + t->s, rs->comm, &sreq[(*ns)++]));
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
			tasks[n++] = t;
		}
	}
	return n;
}

/* Runs one encode or rebuild of the stripe scheme with k checksum positions
 * per stripe. Collective over the set; every member must pass the same
 * data_lost/red_lost (agreed before). Local I/O errors land in io->err and
 * the member keeps exchanging (zeros) so that nobody hangs. */
int stripe_ring_run(struct redset *rs, struct codec_io *io, int k, const struct stripe_kernel *kern,
		    const bool *data_lost, const bool *red_lost)
{
	const int p = rs->p, d = p - k;
	const uint64_t c = io->meta->chunk;
	const size_t piece = stripe_piece(p, k);
	struct stripe_plan *plans = calloc(p, sizeof(*plans));
	struct task *tasks = calloc(p, sizeof(*tasks));
	MPI_Request *rreq = calloc(p, sizeof(*rreq));
	MPI_Request *sreq = calloc((size_t)p * k + 1, sizeof(*sreq));
	unsigned char *src = NULL, *rows[RED_MAX_SET];
	int ntasks = 0, ret;

	if (!plans || !tasks || !rreq || !sreq) {
		ret = -ENOMEM;
		goto out;
	}
	ret = stripe_plans_make(p, k, kern, data_lost, red_lost, plans);
	if (ret)
		goto out;
	ntasks = make_tasks(rs, k, plans, tasks);
	src = aligned_alloc(64, piece);
	if (!src) {
		ret = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < ntasks; i++) {
		struct task *t = &tasks[i];
		size_t rows_bytes = (size_t)t->pl->nerased * piece;

		t->acc = t->vec_i >= 0 ? aligned_alloc(64, rows_bytes) : NULL;
		t->rbuf = t->pred >= 0 ? aligned_alloc(64, rows_bytes)
					: t->vec_i < 0 ? aligned_alloc(64, piece) : NULL;
		if ((t->vec_i >= 0 && !t->acc) || ((t->pred >= 0 || t->vec_i < 0) && !t->rbuf)) {
			ret = -ENOMEM;
			goto out;
		}
	}

	for (uint64_t off = 0; off < c && !ret; off += piece) {
		int len = (int)(c - off < piece ? c - off : piece);
		int ns = 0, idx;

		for (int i = 0; i < ntasks && !ret; i++) {
			struct task *t = &tasks[i];

			rreq[i] = MPI_REQUEST_NULL;
			if (t->pred >= 0)
				ret = mpi_ret(PMPI_Irecv(t->rbuf, t->pl->nerased * len, MPI_BYTE,
							 t->pred, t->s, rs->comm, &rreq[i]));
			else if (t->vec_i < 0)
				ret = mpi_ret(PMPI_Irecv(t->rbuf, len, MPI_BYTE, t->src, p + t->s,
							 rs->comm, &rreq[i]));
		}
		for (int i = 0; i < ntasks && !ret; i++) {
			struct task *t = &tasks[i];

			if (t->vec_i < 0)
				continue;
			if (kern->direct) {
				read_pos(io, d, t->pos, off, t->acc, len);
			} else {
				for (int r = 0; r < t->pl->nerased; r++)
					rows[r] = t->acc + (size_t)r * len;
				read_pos(io, d, t->pos, off, src, len);
				kern->contribute(t->pl, t->vec_i, len, src, rows);
			}
			if (t->pred < 0)
				ret = emit(rs, k, t, len, sreq, &ns);
		}
		while (!ret) {
			struct task *t;

			ret = mpi_ret(PMPI_Waitany(ntasks, rreq, &idx, MPI_STATUS_IGNORE));
			if (ret || idx == MPI_UNDEFINED)
				break;
			t = &tasks[idx];
			if (t->vec_i < 0) {
				write_pos(io, d, t->pos, off, t->rbuf, len);
				continue;
			}
			for (int r = 0; r < t->pl->nerased; r++) {
				void *v[3] = {t->acc + (size_t)r * len, t->rbuf + (size_t)r * len,
					      t->acc + (size_t)r * len};

				xor_gen(3, len, v);
			}
			ret = emit(rs, k, t, len, sreq, &ns);
		}
		if (!ret)
			ret = mpi_ret(PMPI_Waitall(ns, sreq, MPI_STATUSES_IGNORE));
	}
out:
	for (int i = 0; i < ntasks; i++) {
		free(tasks[i].acc);
		free(tasks[i].rbuf);
	}
	if (plans)
		stripe_plans_free(p, plans);
	free(src);
	free(plans);
	free(tasks);
	free(rreq);
	free(sreq);
	if (ret)
		pr_err("stripe exchange failed: %s", strerror(-ret));
	return ret;
}
