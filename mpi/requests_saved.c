/* Requests carried across a restart (requests.h): what the MPI state
 * holds of them, and the persistent ones a replay made again. */
#include <errno.h>
#include <stdlib.h>

#include "requests.h"
#include "requests_int.h"

/* --- carried across a restart ------------------------------------------------------ */

int req_recorded(const struct mpi_record *rec, int *peer, int *tag, void **comm)
{
	/* Every persistent call is recorded as (call, buf, count, datatype,
	 * peer, tag, communicator): mpi_record_<Send_init ...> */
	struct rec_reader r = recread_open(rec->data, rec->len);

	recread_int(&r);
	recread_u64(&r);
	recread_int(&r);
	recread_handle(&r, VH_TYPE);
	*peer = recread_int(&r);
	*tag = recread_int(&r);
	*comm = recread_handle(&r, VH_COMM);
	recread_done(&r);
	return r.bad ? -EBADMSG : 0;
}

int mpi_req_replayed(struct mpi_record *rec, MPI_Request v)
{
	struct vh_entry *e = vh_entry(VH_REQUEST, v);
	struct req_info *ri;
	void *comm;
	int peer, tag;

	if (req_recorded(rec, &peer, &tag, &comm) || !e)
		return -EBADMSG;
	ri = req_info_new(vh_lookup_real(VH_COMM, comm) ?: comm, peer);
	if (!ri)
		return -ENOMEM;
	ri->tag = tag;
	e->aux = ri;
	return 0;
}

/* Non-persistent receives to post again, and requests completed early
 * (their status), are not in the records: they go in the MPI state. */
struct save_ctx {
	struct rec_builder *b;
	int n;
};

/* A completed request gives back only its status: the communicator or
 * datatype it used may have been freed by the program since (MPI allows
 * it while the request is pending), and is not needed then. */
static void *needed(const struct vh_entry *e, enum vh_kind k, void *v, void *null)
{
	const struct vh_entry *o = vh_entry(k, v);

	if ((e->flags & VH_DONE) && vh_is_virtual(k, v) && !(o && o->rec))
		return null;
	return v;
}

static int save_one(enum vh_kind k, uint32_t index, struct vh_entry *e, void *arg)
{
	struct save_ctx *c = arg;
	struct req_info *ri = e->aux;

	(void)k;
	if (!ri || !(e->flags & (VH_REPOST | VH_DONE | VH_GREQ)))
		return 0;
	recbuf_int(c->b, (int)index);
	recbuf_int(c->b, (int)e->flags);
	recbuf_u64(c->b, (uintptr_t)ri->buf);
	recbuf_int(c->b, ri->count);
	recbuf_int(c->b, ri->peer);
	recbuf_int(c->b, ri->tag);
	recbuf_handle(c->b, VH_TYPE, needed(e, VH_TYPE, ri->type, MPI_DATATYPE_NULL));
	recbuf_handle(c->b, VH_COMM, needed(e, VH_COMM, ri->comm, MPI_COMM_NULL));
	recbuf_int(c->b, ri->ftype);
	recbuf_int(c->b, ri->fcomm);
	recbuf_u64(c->b, ri->posted);
	recbuf_put(c->b, &ri->status, sizeof(ri->status));
	if (e->flags & VH_SYNC) {
		recbuf_u64(c->b, ri->sync_gid);
		recbuf_u64(c->b, ri->sync_pos);
	}
	if (e->flags & VH_GREQ) {
		for (int i = 0; i < 3; i++)
			recbuf_u64(c->b, (uintptr_t)ri->greq_fn[i]);
		recbuf_u64(c->b, (uint64_t)ri->greq_extra);
		recbuf_int(c->b, ri->greq_completed);
	}
	c->n++;
	return 0;
}

int mpi_req_save(struct rec_builder *b)
{
	struct rec_builder body = {0};
	struct save_ctx c = {&body, 0};

	vh_walk(VH_REQUEST, save_one, &c);
	recbuf_int(b, c.n);
	recbuf_put(b, body.data, body.len);
	free(body.data);
	free(body.parents);
	b->orphan |= body.orphan;
	return body.orphan ? -EBADSLT : body.failed || b->failed ? -ENOMEM : 0;
}

int mpi_req_load(struct rec_reader *r)
{
	int n = recread_int(r);

	for (int i = 0; i < n && !r->bad; i++) {
		uint32_t index = (uint32_t)recread_int(r), flags = (uint32_t)recread_int(r);
		struct req_info *ri = calloc(1, sizeof(*ri));
		void *type, *comm;
		uint64_t posted;

		if (!ri)
			return -ENOMEM;
		ri->buf = (void *)(uintptr_t)recread_u64(r);
		ri->count = recread_int(r);
		ri->peer = recread_int(r);
		ri->tag = recread_int(r);
		/* Handles are kept as the program's: look the virtual ones up. */
		type = recread_handle(r, VH_TYPE);
		comm = recread_handle(r, VH_COMM);
		ri->type = vh_lookup_real(VH_TYPE, type) ?: type;
		ri->comm = vh_lookup_real(VH_COMM, comm) ?: comm;
		ri->ftype = recread_int(r);
		ri->fcomm = recread_int(r);
		posted = ri->posted = recread_u64(r);
		recread_get(r, &ri->status, sizeof(ri->status));
		if (flags & VH_SYNC) {
			ri->sync_gid = recread_u64(r);
			ri->sync_pos = recread_u64(r);
		}
		if (flags & VH_GREQ) {
			for (int k = 0; k < 3; k++)
				ri->greq_fn[k] = (void *)(uintptr_t)recread_u64(r);
			ri->greq_extra = (MPI_Aint)recread_u64(r);
			ri->greq_completed = recread_int(r);
		}
		if ((flags & VH_GREQ) && !(flags & VH_DONE)) {
			/* Started again: MPI's is gone with the old process. */
			MPI_Request real = MPI_REQUEST_NULL;
			MPI_Fint real_f = VH_NO_FINT;

			if (r->bad || grequest_start_again(ri, flags & VH_FORTRAN, &real, &real_f) ||
			    vh_bind(VH_REQUEST, index, real, flags, NULL)) {
				free(ri);
				return -EBADMSG;
			}
			vh_entry_at(VH_REQUEST, index)->aux = ri;
			vh_entry_at(VH_REQUEST, index)->real_f = real_f;
		} else if (flags & VH_PERSISTENT) {
			/* Made again by the replay: it takes the state it had. */
			struct vh_entry *e = vh_entry_at(VH_REQUEST, index);

			if (r->bad || !e || !e->aux) {
				free(ri);
				return -EBADMSG;
			}
			((struct req_info *)e->aux)->status = ri->status;
			((struct req_info *)e->aux)->posted = ri->posted;
			((struct req_info *)e->aux)->sync_gid = ri->sync_gid;
			((struct req_info *)e->aux)->sync_pos = ri->sync_pos;
			free(ri);
			e->flags = flags | VH_LIVE;
		} else if (r->bad || vh_bind(VH_REQUEST, index, MPI_REQUEST_NULL, flags, NULL)) {
			free(ri);
			return -EBADMSG;
		} else {
			vh_entry_at(VH_REQUEST, index)->aux = ri;
		}
		req_count_loaded(flags, posted); /* ri may be gone */
	}
	return r->bad ? -EBADMSG : 0;
}
