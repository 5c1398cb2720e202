/* Synchronous sends across a checkpoint's drain (sync_sends.h). */
#define LOG_PREFIX ""
#include <stdbool.h>
#include <stdlib.h>

#include "collective_counts.h"
#include "log.h"
#include "requests.h"
#include "session.h"
#include "sync_sends.h"

struct stream {
	uint64_t gid;
	int dest, tag;
	uint64_t count; /* sends numbered since the first pending synchronous one */
	int pending;	/* synchronous sends numbered whose completion the program has not taken */
};

/* Few: the streams with a synchronous send pending. */
static struct stream *streams;
static int nstreams_cap;
int sync_streams;

static struct stream *find(uint64_t gid, int dest, int tag)
{
	for (int i = 0; i < sync_streams; i++)
		if (streams[i].gid == gid && streams[i].dest == dest && streams[i].tag == tag)
			return &streams[i];
	return NULL;
}

static struct stream *add(uint64_t gid, int dest, int tag)
{
	if (sync_streams == nstreams_cap) {
		int cap = nstreams_cap ? 2 * nstreams_cap : 16;
		void *p = realloc(streams, sizeof(*streams) * cap);

		if (!p)
			return NULL;
		streams = p;
		nstreams_cap = cap;
	}
	streams[sync_streams] = (struct stream){gid, dest, tag, 0, 0};
	return &streams[sync_streams++];
}

void sync_sends_started(MPI_Request sync, MPI_Comm comm, int dest, int tag)
{
	struct vh_entry *e = sync != MPI_REQUEST_NULL ? vh_entry(VH_REQUEST, sync) : NULL;
	struct comm_info *ci;
	struct stream *s;

	if (dest == MPI_PROC_NULL || !(ci = collective_counts_of(comm)))
		return;
	s = find(ci->gid, dest, tag);
	if (!s && e && !(s = add(ci->gid, dest, tag))) {
		/* Unnumbered, a drained message of it would complete it early. */
		session_unsupported("out of memory numbering synchronous sends");
		return;
	}
	if (!s)
		return;
	s->count++;
	if (e && e->aux && !(e->flags & VH_COUNTED)) {
		struct req_info *ri = e->aux;

		ri->sync_gid = ci->gid;
		ri->sync_pos = s->count;
		ri->peer = dest;
		ri->tag = tag;
		__atomic_or_fetch(&e->flags, VH_COUNTED, __ATOMIC_RELAXED);
		s->pending++;
	}
}

void sync_sends_forget(struct vh_entry *e)
{
	struct req_info *ri = e->aux;
	struct stream *s;

	if (!(e->flags & VH_COUNTED) || !ri)
		return;
	__atomic_and_fetch(&e->flags, ~(uint32_t)VH_COUNTED, __ATOMIC_RELAXED);
	s = find(ri->sync_gid, ri->peer, ri->tag);
	if (s && --s->pending <= 0)
		*s = streams[--sync_streams];
}

int sync_sends_watched(uint64_t gid, int dest, int tag)
{
	return find(gid, dest, tag) != NULL;
}

struct drained_ctx {
	uint64_t gid, pos;
	int dest, tag;
	struct vh_entry *found;
};

static int match(enum vh_kind k, uint32_t index, struct vh_entry *e, void *arg)
{
	struct drained_ctx *c = arg;
	struct req_info *ri = e->aux;

	(void)k;
	(void)index;
	if ((e->flags & (VH_SYNC | VH_COUNTED)) != (VH_SYNC | VH_COUNTED) || !ri ||
	    ri->sync_gid != c->gid || ri->peer != c->dest || ri->tag != c->tag ||
	    ri->sync_pos != c->pos)
		return 0;
	c->found = e;
	return 1;
}

struct vh_entry *sync_sends_drained(uint64_t gid, int dest, int tag, int j, int k)
{
	static bool said;
	struct stream *s = find(gid, dest, tag);
	struct drained_ctx c = {gid, 0, dest, tag, NULL};

	if (!s || s->count + (uint64_t)j <= (uint64_t)k)
		return NULL; /* drained before the stream was numbered: not synchronous */
	c.pos = s->count - (uint64_t)k + (uint64_t)j;
	vh_walk(VH_REQUEST, match, &c);
	if (!c.found || !(c.found->flags & VH_DONE))
		return NULL;
	if (c.found->flags & VH_PERSISTENT) {
		if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
			pr_warn("a message of a persistent synchronous send (MPI_Ssend_init) was in "
				"flight at a checkpoint: its request completed before its receiver "
				"took the message");
		return NULL;
	}
	return c.found;
}

int sync_sends_save(struct rec_builder *b)
{
	recbuf_int(b, sync_streams);
	for (int i = 0; i < sync_streams; i++) {
		recbuf_u64(b, streams[i].gid);
		recbuf_int(b, streams[i].dest);
		recbuf_int(b, streams[i].tag);
		recbuf_u64(b, streams[i].count);
		recbuf_int(b, streams[i].pending);
	}
	return b->failed ? -ENOMEM : 0;
}

int sync_sends_load(struct rec_reader *r)
{
	int n = recread_int(r);

	sync_streams = 0;
	for (int i = 0; i < n && !r->bad; i++) {
		uint64_t gid = recread_u64(r);
		int dest = recread_int(r), tag = recread_int(r);
		struct stream *s = add(gid, dest, tag);

		if (!s)
			return -ENOMEM;
		s->count = recread_u64(r);
		s->pending = recread_int(r);
	}
	return r->bad || n < 0 ? -EBADMSG : 0;
}
