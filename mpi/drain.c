#define LOG_PREFIX ""
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collective_counts.h"
#include "drain.h"
#include "fds.h"
#include "windows.h"
#include "log.h"
#include "requests.h"
#include "trigger.h"
#include "session.h"
#include "sync_sends.h"
#include "traffic.h"

#define TAG_BOUNCE 0x5a5b
/* A drained message goes back to its sender after a header: the id of its
 * communicator, its tag, its length (8 bytes each). */
#define BOUNCE_HDR 24
/* A rank that receives nothing for this long while messages are still
 * owed to it gives the checkpoint up (a count gone wrong must not hang
 * the program). */
#define DRAIN_TIMEOUT 60.0

struct drained {
	uint64_t gid; /* the communicator */
	int source;   /* world rank of the sender */
	int tag;
	uint64_t len;
	char *pack;	 /* BOUNCE_HDR bytes, then the message */
	MPI_Request req; /* its way back to its sender */
};

/* Runtime memory: carried across a restart in the MPI state. */
static struct drained *msgs;
static size_t nmsgs, msgs_cap;

/* A message sent again for its sender, kept until its receiver takes it;
 * the bounced message (BOUNCE_HDR bytes, the data) follows. */
struct resend {
	struct resend *next;
	MPI_Request req;
};
static struct resend *resends;
static size_t nresends;

/* The program must never die because a checkpoint failed (STYLE.md habit
 * 3). What the drain needs besides the messages, five ints per rank
 * (senders_can_resend; resend_drained uses two), is allocated before
 * anything is drained; a rank that cannot have it makes every rank skip
 * the checkpoint with nothing drained, hence nothing to send back. Kept
 * from one attempt to the next; a restart allocates it in drain_load. */
static int *scratch;
static bool nothing_drained;

static int scratch_alloc(int size)
{
	if (!scratch)
		scratch = calloc(5 * (size_t)size, sizeof(int));
	return scratch ? 0 : -ENOMEM;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Room for one more drained message. */
static int reserve(void)
{
	if (nmsgs == msgs_cap) {
		size_t cap = msgs_cap ? msgs_cap * 2 : 64;
		void *p = realloc(msgs, sizeof(*msgs) * cap);

		if (!p)
			return -ENOMEM;
		msgs = p;
		msgs_cap = cap;
	}
	return 0;
}

static int keep(uint64_t gid, int source, int tag, uint64_t len, char *pack)
{
	if (reserve())
		return -ENOMEM;
	msgs[nmsgs++] = (struct drained){gid, source, tag, len, pack, MPI_REQUEST_NULL};
	return 0;
}

struct probe_ctx {
	int ret;
	bool got;
};

/* Receive one message waiting on ci's communicator, if there is one. */
static void probe_one(struct comm_info *ci, void *arg)
{
	struct probe_ctx *p = arg;
	MPI_Comm real = VH_REAL(VH_COMM, MPI_Comm, ci->self);
	MPI_Status st;
	int flag = 0, n = 0;
	char *pack;

	if (p->ret || PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, real, &flag, &st) != MPI_SUCCESS ||
	    !flag)
		return;
	PMPI_Get_count(&st, MPI_BYTE, &n);
	/* All the memory the message needs, on its way back too, before it
	 * is taken from MPI: a failure then skips the checkpoint, later it
	 * would lose the message. */
	pack = reserve() ? NULL : malloc(BOUNCE_HDR + (size_t)n);
	if (!pack || st.MPI_SOURCE < 0 || st.MPI_SOURCE >= ci->size) {
		free(pack);
		p->ret = -ENOMEM;
		return;
	}
	PMPI_Recv(pack + BOUNCE_HDR, n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, real,
		  MPI_STATUS_IGNORE);
	p->ret = keep(ci->gid, ci->world[st.MPI_SOURCE], st.MPI_TAG, n, pack);
	traffic_received(0);
	p->got = true;
}

/* Receive every message still on its way to this rank. Collective. */
static int drain_messages(struct session *s)
{
	uint64_t expected = 0;
	double since = now();
	struct probe_ctx p = {0};
	int ok = scratch_alloc(s->size) == 0;

	if (!ok)
		pr_err("out of memory before draining messages in flight");
	PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, s->comm);
	if (!ok) {
		nothing_drained = true;
		return -ENOMEM;
	}
	PMPI_Reduce_scatter_block((void *)traffic_sent_to(), &expected, 1, MPI_UINT64_T, MPI_SUM,
				  s->comm);
	while (traffic_received_total() < expected && !p.ret) {
		/* Receives the program posted take their messages first. */
		mpi_req_progress(VH_RECV);
		p.got = false;
		collective_counts_walk(probe_one, &p);
		if (p.got) {
			since = now();
		} else if (now() - since > DRAIN_TIMEOUT) {
			pr_err("checkpoint: %llu messages owed to this rank never came",
			       (unsigned long long)(expected - traffic_received_total()));
			p.ret = -ETIMEDOUT;
		} else {
			sched_yield();
		}
	}
	return p.ret;
}

/* Each drained message goes back to its sender, who needs the
 * communicator it came on: a sender that freed it meanwhile could not
 * send it again, so the checkpoint is given up. Collective. */
static int senders_can_resend(struct session *s)
{
	int n = s->size, *cnt = scratch, *got = cnt + n, *sd = got + n, *rd = sd + n,
	    *fill = rd + n;
	uint64_t *out = malloc(sizeof(uint64_t) * (nmsgs + 1)), *in = NULL;
	int ok = out != NULL, total = 0, ret;

	memset(scratch, 0, 5 * (size_t)n * sizeof(int));
	/* The ids of the communicators of this rank's drained messages,
	 * grouped by sender. */
	for (size_t i = 0; ok && i < nmsgs; i++)
		cnt[msgs[i].source]++;
	for (int r = 1; ok && r < n; r++)
		sd[r] = sd[r - 1] + cnt[r - 1];
	for (size_t i = 0; ok && i < nmsgs; i++)
		out[sd[msgs[i].source] + fill[msgs[i].source]++] = msgs[i].gid;
	/* !ok: take part all the same, with nothing (cnt is zero) */
	PMPI_Alltoall(cnt, 1, MPI_INT, got, 1, MPI_INT, s->comm);
	for (int r = 0; r < n; r++) {
		rd[r] = total;
		total += got[r];
	}
	in = malloc(sizeof(uint64_t) * (total + 1));
	ok = ok && in;
	/* A rank without in could not take part in the exchange: all skip
	 * it, and the checkpoint, together. */
	PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, s->comm);
	if (!ok) {
		ret = -ENOMEM;
		goto done;
	}
	PMPI_Alltoallv(out, cnt, sd, MPI_UINT64_T, in, got, rd, MPI_UINT64_T, s->comm);
	for (int i = 0; ok && i < total; i++)
		if (!collective_counts_find(in[i]))
			ok = 0;
	PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, s->comm);
	ret = ok ? 0 : -ESTALE;
done:
	free(out);
	free(in);
	return ret;
}

/* Every send of the program completes once its receiver drained it. */
static void finish_sends(void)
{
	while (mpi_req_progress(VH_SEND) > 0 || nresends) {
		drain_progress();
		sched_yield();
	}
}

/* A drained message back at its sender, to send again. */
struct bounced {
	struct resend *rs; /* its buffer: BOUNCE_HDR bytes, then the message */
	uint64_t gid;
	int tag, dest, n;
	uint64_t len;
	struct comm_info *ci;
};

/* Receive the k drained messages receiver r sends back to this rank. */
static void take_bounced(struct session *s, int r, struct bounced *b, int k)
{
	for (int i = 0; i < k; i++) {
		MPI_Status st;
		char *buf;
		uint64_t tag;

		PMPI_Probe(r, TAG_BOUNCE, s->comm, &st);
		PMPI_Get_count(&st, MPI_BYTE, &b[i].n);
		b[i].rs = malloc(sizeof(*b[i].rs) + b[i].n);
		if (!b[i].rs) {
			/* The one allocation that cannot come before the
			 * drain: the size is known only now. Without it a
			 * message MPI delivered once would be lost and the
			 * program go wrong, so the job stops. */
			pr_err("out of memory sending drained messages again");
			PMPI_Abort(MPI_COMM_WORLD, 1);
		}
		buf = (char *)(b[i].rs + 1);
		PMPI_Recv(buf, b[i].n, MPI_BYTE, r, TAG_BOUNCE, s->comm, MPI_STATUS_IGNORE);
		memcpy(&b[i].gid, buf, 8);
		memcpy(&tag, buf + 8, 8);
		memcpy(&b[i].len, buf + 16, 8);
		b[i].tag = (int)tag;
		b[i].ci = collective_counts_find(b[i].gid);
		b[i].dest = -1;
		for (int j = 0; b[i].ci && j < b[i].ci->size; j++)
			if (b[i].ci->world[j] == r)
				b[i].dest = j;
		if (!b[i].ci || b[i].dest < 0) {
			/* senders_can_resend() made sure of it, unless the
			 * drain failed before it could look: the sender
			 * freed the communicator, and the message, taken
			 * from MPI, can neither go back nor be dropped. */
			pr_err("a drained message has no communicator to go back on");
			PMPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
}

/* The program's synchronous send that b[i] was, if any: b[i] is the j-th
 * of the k messages of its stream among b[0..n) (sync_sends.h). */
static struct vh_entry *sync_send_of(const struct bounced *b, int i, int n)
{
	int j = 0, k = 0;

	if (!sync_streams || !sync_sends_watched(b[i].gid, b[i].dest, b[i].tag))
		return NULL;
	for (int x = 0; x < n; x++)
		if (b[x].gid == b[i].gid && b[x].tag == b[i].tag) {
			k++;
			j += x <= i;
		}
	return sync_sends_drained(b[i].gid, b[i].dest, b[i].tag, j, k);
}

/* Send every drained message back to its sender, and send again every
 * message that comes back, on its communicator, to the rank it was for.
 * Collective. */
static void resend_drained(struct session *s)
{
	int *cnt = scratch, *got = scratch + s->size, most = 0;
	struct bounced *b;

	if (nothing_drained) {
		/* No rank drained anything: no rank takes part. */
		nothing_drained = false;
		return;
	}
	memset(cnt, 0, 2 * (size_t)s->size * sizeof(int));
	for (size_t i = 0; i < nmsgs; i++)
		cnt[msgs[i].source]++;
	PMPI_Alltoall(cnt, 1, MPI_INT, got, 1, MPI_INT, s->comm);
	for (size_t i = 0; i < nmsgs; i++) {
		struct drained *d = &msgs[i];

		memcpy(d->pack, &d->gid, 8);
		memcpy(d->pack + 8, &(uint64_t){(uint64_t)d->tag}, 8);
		memcpy(d->pack + 16, &d->len, 8);
		PMPI_Isend(d->pack, (int)(BOUNCE_HDR + d->len), MPI_BYTE, d->source, TAG_BOUNCE,
			   s->comm, &d->req);
	}
	for (int r = 0; r < s->size; r++)
		most = got[r] > most ? got[r] : most;
	b = malloc(sizeof(*b) * (most ? most : 1));
	if (!b) {
		pr_err("out of memory sending drained messages again");
		PMPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (int r = 0; r < s->size; r++) {
		take_bounced(s, r, b, got[r]);
		for (int i = 0; i < got[r]; i++) {
			MPI_Comm comm = VH_REAL(VH_COMM, MPI_Comm, b[i].ci->self);
			char *data = (char *)(b[i].rs + 1) + BOUNCE_HDR;
			struct vh_entry *sync = sync_send_of(b, i, got[r]);

			if (sync) {
				/* The program's request completes when this does. */
				MPI_Request req;

				PMPI_Issend(data, (int)b[i].len, MPI_BYTE, b[i].dest, b[i].tag, comm,
					    &req);
				mpi_req_hold(sync, req, b[i].rs);
			} else {
				/* The receiver takes it when the program asks: keep
				 * the buffer until then. */
				PMPI_Isend(data, (int)b[i].len, MPI_BYTE, b[i].dest, b[i].tag, comm,
					   &b[i].rs->req);
				drain_keep(b[i].rs->req, b[i].rs);
			}
			traffic_sent(b[i].ci->self, b[i].dest);
		}
	}
	free(b);
	for (size_t i = 0; i < nmsgs; i++) {
		PMPI_Wait(&msgs[i].req, MPI_STATUS_IGNORE);
		free(msgs[i].pack);
	}
	nmsgs = 0;
}

void drain_keep(MPI_Request real, void *buf)
{
	struct resend *rs = buf;

	rs->req = real;
	rs->next = resends;
	resends = rs;
	nresends++;
}

void drain_progress(void)
{
	for (struct resend **p = &resends; *p;) {
		struct resend *rs = *p;
		int flag = 0;

		PMPI_Test(&rs->req, &flag, MPI_STATUS_IGNORE);
		if (flag) {
			*p = rs->next;
			free(rs);
			nresends--;
		} else {
			p = &rs->next;
		}
	}
}

bool drain_pending(void)
{
	return nresends != 0;
}

void drain_finish(void)
{
	while (nresends) {
		drain_progress();
		sched_yield();
	}
}

/* A line scripts read (tests/cr/drained.sh): keep its shape. */
static void say_drained(struct session *s, uint64_t id)
{
	uint64_t mine = nmsgs, all = 0;

	PMPI_Reduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM, 0, s->comm);
	if (s->rank == 0 && s->cfg.verbose >= 1 && all)
		fprintf(stderr, "stasis: checkpoint %llu: %llu messages in flight drained\n",
			(unsigned long long)id, (unsigned long long)all);
}

/* A pipe to another process open on any rank (popen): no checkpoint
 * now (fds_child_pipes), said the first time by the ranks that have one.
 * Collective. */
static int child_pipes_closed(struct session *s)
{
	static bool said;
	const char *command;
	int mine = fds_child_pipes(&command) > 0, any = mine;

	PMPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_LOR, s->comm);
	if (!any)
		return 0;
	if (mine && !said)
		pr_warn("checkpoint skipped: a pipe to another process is open (popen() of "
			"\"%s\"); checkpoints wait while one is open (tried again every "
			"second), and resume once the program closes it",
			command);
	said |= mine;
	nothing_drained = true; /* on every rank: none drains */
	return -EAGAIN;
}

bool drain_and_checkpoint(struct session *s, coord_take_fn take)
{
	double t0 = now();
	int ret, ok;

	ret = child_pipes_closed(s); /* agreed: every rank goes on, or none */
	if (!ret) {
		mpi_req_progress(0);
		ret = drain_messages(s);
		ok = !ret;
		PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, s->comm);
		ret = ok ? senders_can_resend(s) : -EIO;
	}
	if (!ret) {
		finish_sends();
		ok = mpi_req_cancel_receives() == 0;
		PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, s->comm);
		ret = ok ? 0 : -EIO;
	}
	if (!ret)
		ret = windows_settle(s->comm); /* says why itself */
	if (!ret) {
		say_drained(s, s->next_id);
		traffic_reset();
		/* The MPI part's RESUMED hook (drain_resume) has posted the
		 * receives and sent the drained messages again by the time the
		 * checkpoint returns, whether it committed, failed or resumed a
		 * restarted process. */
		ret = take(s);
		windows_checkpointed(s->comm);
		if (ret == CHECKPOINT_RESUMED)
			return true;
	} else {
		if (s->rank == 0 && ret != -EBUSY && ret != -EAGAIN)
			pr_warn("checkpoint skipped: %s",
				ret == -ESTALE ? "a message in flight was sent on a communicator "
						 "its sender has freed"
					       : "messages in flight could not be drained");
		drain_resume(s);
	}
	if (ret == -EAGAIN)
		trigger_checkpoint_deferred();
	else
		trigger_checkpoint_done(ret ? -1 : now() - t0);
	return false;
}

void drain_resume(struct session *s)
{
	mpi_req_repost();
	resend_drained(s);
}

/* --- carried across a restart --------------------------------------------------------- */

int drain_save(struct rec_builder *b)
{
	recbuf_u64(b, nmsgs);
	for (size_t i = 0; i < nmsgs; i++) {
		recbuf_u64(b, msgs[i].gid);
		recbuf_int(b, msgs[i].source);
		recbuf_int(b, msgs[i].tag);
		recbuf_u64(b, msgs[i].len);
		recbuf_put(b, msgs[i].pack + BOUNCE_HDR, msgs[i].len);
	}
	return b->failed ? -ENOMEM : 0;
}

int drain_load(struct rec_reader *r)
{
	uint64_t n = recread_u64(r);
	struct session *s = session_get();

	/* resend_drained's share too: once resumed, a failure could only
	 * stop the job. */
	if (!s || scratch_alloc(s->size))
		return -ENOMEM;
	for (uint64_t i = 0; i < n && !r->bad; i++) {
		uint64_t gid = recread_u64(r);
		int source = recread_int(r), tag = recread_int(r);
		uint64_t len = recread_u64(r);
		char *pack;

		if (r->bad || len > (uint64_t)(r->end - r->p))
			return -EBADMSG;
		pack = malloc(BOUNCE_HDR + len);
		if (!pack)
			return -ENOMEM;
		recread_get(r, pack + BOUNCE_HDR, len);
		if (keep(gid, source, tag, len, pack)) {
			free(pack);
			return -ENOMEM;
		}
	}
	return r->bad ? -EBADMSG : 0;
}
