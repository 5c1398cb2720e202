#define LOG_PREFIX "mpi state: "
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "callbacks.h"
#include "calls.h"
#include "collective_counts.h"
#include "comms.h"
#include "drain.h"
#include "sync_sends.h"
#include "errclasses.h"
#include "tool.h"
#include "tool_vars.h"
#include "format.h"
#include "log.h"
#include "memory.h"
#include "mpiio.h"
#include "windows.h"
#include "part.h"
#include "record.h"
#include "requests.h"
#include "session.h"
#include "snapshot.h"
#include "section.h"
#include "traffic.h"
#include "wtime.h"

#define STATE_MAGIC "STASISMP"
/* 6: the tool interface's objects (tool_vars.h) */
#define STATE_VERSION 6u

/* The blob: this header, then each record, the snapshot entries, the
 * requests to post again or completed early, the drained messages. */
struct state_header {
	char magic[8];
	uint32_t version;
	uint32_t nrecords;
	uint64_t next_seq;
	uint64_t bytes; /* used, header included */
	uint64_t buffer_addr;
	int32_t buffer_size;
	int32_t nsnapshot;
	uint64_t next_gid; /* collective_counts.h */
	double wtime;	   /* the program's MPI_Wtime at the checkpoint (wtime.h) */
};

int mpi_section_init(void)
{
	int ret = comms_init();

	if (!ret)
		ret = collective_counts_init();
	if (!ret)
		ret = traffic_init();
	if (!ret)
		callbacks_init();
	/* Before the program can rename a predefined datatype. */
	snapshot_note_names();
	return ret;
}

static void put_record(struct rec_builder *b, const struct mpi_record *r)
{
	recbuf_int(b, r->kind);
	recbuf_int(b, (int)r->index);
	recbuf_u64(b, r->seq);
	recbuf_int(b, (int)r->flags);
	recbuf_int(b, (int)r->nparents);
	for (uint32_t i = 0; i < r->nparents; i++) {
		recbuf_int(b, r->parents[i]->kind);
		recbuf_int(b, (int)r->parents[i]->index);
	}
	recbuf_u64(b, r->len);
	recbuf_put(b, r->data, r->len);
}

/* Page-aligned memory kept between checkpoints (it is written to the
 * image straight from here). */
static struct section_buf out;

int mpi_section_save(void **data, size_t *len, struct why *why)
{
	struct rec_builder b = {0}, snap = {0};
	struct state_header h = {0};
	void *buf;
	int ret, nsnap = 0;

	/* Snapshot first: it refreshes the contents of info records. */
	ret = snapshot_write(&snap, &nsnap);
	if (ret) {
		why_set(why, ret, "cannot record the state of MPI objects: %s",
			ret == -ENOENT ? "an error handler stasis did not see made is in use"
				       : strerror(-ret));
		goto out;
	}
	/* Open MPI files: their records get their sizes, views, pointers. */
	ret = mpiio_refresh();
	if (ret) {
		why_set(why, ret, "cannot record the state of open MPI files: %s",
			ret == -ENOENT ? "one was deleted" : strerror(-ret));
		goto out;
	}
	/* Windows: their records get their epochs, names, regions. */
	ret = windows_refresh();
	if (ret) {
		why_set(why, ret, "cannot record the state of MPI windows: %s", strerror(-ret));
		goto out;
	}
	recbuf_put(&b, &h, sizeof(h));
	for (const struct mpi_record *r = rec_first(); r; r = r->next)
		put_record(&b, r);
	recbuf_put(&b, snap.data, snap.len);
	errclasses_save(&b);
	tool_save(&b);
	if (mpi_req_save(&b) || drain_save(&b) || sync_sends_save(&b) || b.failed || snap.failed) {
		ret = b.orphan || snap.orphan
			  ? why_set(why, -EBADSLT,
				    "a pending MPI request or object names an object the program "
				    "freed (a communicator or datatype), which stasis could not "
				    "make again")
			  : why_set(why, -ENOMEM, "out of memory recording MPI objects");
		goto out;
	}
	memcpy(h.magic, STATE_MAGIC, 8);
	h.version = STATE_VERSION;
	h.nrecords = (uint32_t)rec_count();
	h.next_seq = rec_next_seq();
	h.bytes = b.len;
	h.nsnapshot = nsnap;
	h.next_gid = collective_counts_next_gid();
	h.wtime = wtime_program();
	mpi_buffer_get(&buf, &h.buffer_size);
	h.buffer_addr = (uintptr_t)buf;
	memcpy(b.data, &h, sizeof(h));
	if (section_buf_fill(&out, b.data, b.len, len)) {
		ret = why_set(why, -ENOMEM, "out of memory recording MPI objects");
		goto out;
	}
	*data = out.data;
out:
	free(b.data);
	free(b.parents);
	free(snap.data);
	free(snap.parents);
	return ret;
}

/* --- replay ------------------------------------------------------------------ */

/* Read one record; its parents must be records read before it. */
static struct mpi_record *read_record(struct rec_reader *r, struct mpi_record **by_order,
				      size_t nread)
{
	struct mpi_record *rec = calloc(1, sizeof(*rec));
	uint64_t len;

	if (!rec)
		return NULL;
	rec->kind = (enum vh_kind)recread_int(r);
	rec->index = (uint32_t)recread_int(r);
	rec->seq = recread_u64(r);
	rec->flags = (uint32_t)recread_int(r);
	rec->nparents = (uint32_t)recread_int(r);
	if (r->bad || rec->kind >= VH_NKINDS || rec->index >= VH_MAX_INDEX ||
	    rec->nparents > nread)
		goto bad;
	if (rec->nparents && !(rec->parents = calloc(rec->nparents, sizeof(*rec->parents))))
		goto bad;
	for (uint32_t i = 0; i < rec->nparents; i++) {
		int k = recread_int(r);
		uint32_t index = (uint32_t)recread_int(r);

		for (size_t j = 0; j < nread && !rec->parents[i]; j++)
			if (by_order[j]->kind == (enum vh_kind)k && by_order[j]->index == index)
				rec->parents[i] = by_order[j];
		if (!rec->parents[i])
			goto bad;
	}
	len = recread_u64(r);
	if (r->bad || len > (uint64_t)(r->end - r->p) || !(rec->data = malloc(len ? len : 1)))
		goto bad;
	recread_get(r, rec->data, len);
	rec->len = len;
	return rec;
bad:
	r->bad = true;
	rec_discard(rec);
	return NULL;
}

/* Make the object of rec again: its real handle and the flags of its
 * virtual one. */
static int replay_one(struct mpi_record *rec, void **real, uint32_t *flags, struct why *why)
{
	int ret;

	*flags = 0;
	switch (rec->kind) {
	case VH_COMM:
		return comms_replay_comm(rec, (MPI_Comm *)real, flags, why);
	case VH_GROUP:
		return comms_replay_group(rec, (MPI_Group *)real);
	case VH_INFO:
		return snapshot_replay_info(rec, (MPI_Info *)real);
	case VH_OP:
	case VH_KEYVAL:
	case VH_ERRHANDLER:
		return callbacks_replay(rec, real);
	case VH_TYPE:
		ret = mpi_replay_call(rec, real, flags);
		if (!ret && (rec->flags & REC_COMMITTED))
			ret = PMPI_Type_commit((MPI_Datatype *)real) == MPI_SUCCESS ? 0 : -EINVAL;
		return ret;
	case VH_REQUEST:
		return mpi_replay_call(rec, real, flags);
	case VH_FILE:
		return mpiio_replay(rec, (MPI_File *)real, why);
	case VH_WIN:
		return windows_replay(rec, (MPI_Win *)real, why);
	default:
		return -EBADMSG;
	}
}

/* The program had freed these: free them again now that what needed them
 * exists. Error handlers stay usable by the objects that hold them (MPI
 * counts references); a freed keyval in the image was held for an
 * attribute (keyvals.h) and is held again. */
static void free_again(struct mpi_record *rec)
{
	struct vh_entry *e = vh_entry_at(rec->kind, rec->index);
	void *real;

	if (!e || !(rec->flags & REC_FREED))
		return;
	real = e->real;
	switch (rec->kind) {
	case VH_COMM:
		collective_counts_detach(e);
		PMPI_Comm_free((MPI_Comm *)&real);
		break;
	case VH_GROUP:
		PMPI_Group_free((MPI_Group *)&real);
		break;
	case VH_TYPE:
		PMPI_Type_free((MPI_Datatype *)&real);
		break;
	case VH_OP:
		PMPI_Op_free((MPI_Op *)&real);
		break;
	case VH_INFO:
		PMPI_Info_free((MPI_Info *)&real);
		break;
	case VH_REQUEST:
		PMPI_Request_free((MPI_Request *)&real);
		break;
	case VH_ERRHANDLER:
		PMPI_Errhandler_free((MPI_Errhandler *)&real);
		return;
	default:
		return;
	}
	vh_zombie(rec->kind, vh_value(rec->kind, rec->index));
}

static int replay_records(struct rec_reader *r, uint32_t n, struct why *why)
{
	struct mpi_record **by_order = calloc(n ? n : 1, sizeof(*by_order));
	size_t nread = 0;
	int ret = 0;

	if (!by_order)
		return -ENOMEM;
	/* Read and check every record before the first collective: a bad one
	 * must stop all ranks together, not leave some inside a replay. */
	for (uint32_t i = 0; i < n; i++) {
		struct mpi_record *rec = read_record(r, by_order, nread);

		if (!rec) {
			ret = -EBADMSG;
			break;
		}
		by_order[nread++] = rec;
	}
	PMPI_Allreduce(MPI_IN_PLACE, &ret, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (ret) {
		why_set(why, ret, "the MPI state in the image is damaged");
		goto out;
	}
	/* A record this rank cannot make again does not stop its loop: the
	 * other members of the communicators after it would wait for it. */
	for (size_t i = 0; i < nread; i++) {
		struct mpi_record *rec = by_order[i];
		void *real = NULL;
		uint32_t flags;
		int err = replay_one(rec, &real, &flags, why);

		if (!err && vh_bind(rec->kind, rec->index, real, flags, rec))
			err = -EEXIST;
		if (!err && rec->kind == VH_COMM)
			err = comms_counts_replayed(rec, vh_value(VH_COMM, rec->index), real);
		if (!err && rec->kind == VH_REQUEST)
			err = mpi_req_replayed(rec, vh_value(VH_REQUEST, rec->index));
		if (err) {
			/* The replay of a file may have said why already. */
			if (!ret)
				why_set(why, err,
					"cannot make the MPI object of record %llu again: %s",
					(unsigned long long)rec->seq, strerror(-err));
			ret = ret ? ret : err;
			continue;
		}
		rec_restore(rec);
		by_order[i] = NULL;
	}
out:
	for (size_t i = 0; i < nread; i++)
		rec_discard(by_order[i]);
	free(by_order);
	return ret;
}

int mpi_section_replay(const void *data, size_t len, struct why *why)
{
	struct rec_reader r = recread_open(data, len);
	struct state_header h;
	int ret = 0, bad;

	recread_get(&r, &h, sizeof(h));
	if (r.bad || memcmp(h.magic, STATE_MAGIC, 8) || h.bytes > len || h.bytes < sizeof(h) ||
	    h.nsnapshot < 0)
		ret = why_set(why, -EBADMSG, "the MPI state in the image is damaged");
	else if (h.version != STATE_VERSION)
		ret = why_set(why, -EPROTO,
			      "the MPI state in the image was written by another version of "
			      "stasis (its version %u; this stasis reads %u)",
			      h.version, STATE_VERSION);
	r.end = (const uint8_t *)data + (ret ? sizeof(h) : h.bytes);
	bad = ret;
	PMPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (bad)
		return bad;
	callbacks_quiet(true);
	ret = replay_records(&r, h.nrecords, why);
	if (!ret) {
		ret = snapshot_apply(&r, h.nsnapshot);
		if (ret)
			why_set(why, ret, "cannot put back the state of MPI objects: %s",
				strerror(-ret));
	}
	/* Read between the snapshot and the requests, as written. */
	if (!ret)
		ret = errclasses_replay(&r, why);
	if (!ret)
		ret = tool_replay(&r, why);
	/* Before the program's freed datatypes are freed again: views need them. */
	if (!ret)
		ret = mpiio_apply(why);
	if (!ret)
		ret = windows_apply(why);
	/* The tool interface's handles may be bound to any of those. */
	if (!ret)
		ret = tool_vars_apply(why);
	if (!ret) {
		ret = mpi_req_load(&r);
		if (!ret)
			ret = drain_load(&r);
		if (!ret)
			ret = sync_sends_load(&r);
		if (ret)
			why_set(why, ret,
				"cannot read the requests and messages of the "
				"checkpoint: %s",
				strerror(-ret));
	}
	collective_counts_set_next_gid(h.next_gid);
	wtime_restored(h.wtime);
	if (!ret)
		for (struct mpi_record *rec = rec_first(); rec; rec = rec->next)
			free_again(rec);
	callbacks_quiet(false);
	rec_set_next_seq(h.next_seq);
	mpi_buffer_set((void *)(uintptr_t)h.buffer_addr, h.buffer_size);
	/* A verification failure (why set, ret 0) stops the restart too. */
	bad = ret ? ret : why_said(why) ? -EXDEV : 0;
	PMPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	return bad;
}

size_t mpi_section_objects(void)
{
	return rec_count();
}

void mpi_section_resumed(void)
{
	if (mpi_buffer_reattach())
		pr_warn("cannot attach the buffered-send buffer again");
}

/* --- the MPI part (session/part.h) --------------------------------------------------- */

static int mpi_part_save(uint64_t id, struct section_list *out, struct why *why)
{
	void *data;
	size_t len;
	int ret = mpi_section_save(&data, &len, why);

	(void)id;
	if (ret)
		return ret;
	return section_add(out, SECTION_MPI, data, len, why);
}

/* Collective: the replay makes communicators. A line scripts read
 * (bench/replay_perf.sh): keep its shape. */
static int mpi_part_recreate(const struct restart_input *in, struct why *why)
{
	const struct section *sec = restart_section(in, SECTION_MPI);
	struct session *s = session_get();
	double t0 = wtime_mpi();
	int ret;

	if (!sec->data)
		return why_set(why, -EBADMSG, "the image holds no MPI state");
	ret = mpi_section_replay(sec->data, sec->len, why);
	if (ret)
		return ret;
	if (s && s->rank == 0 && s->cfg.verbose >= 1)
		fprintf(stderr, "stasis: replayed %zu MPI objects in %.1f ms\n", mpi_section_objects(),
			(wtime_mpi() - t0) * 1e3);
	return 0;
}

/* Receives posted again and drained messages sent again after every
 * checkpoint; a restarted process first attaches the program's buffer. */
static void mpi_part_resumed(bool restarted)
{
	struct session *s = session_get();

	if (restarted)
		mpi_section_resumed();
	if (s)
		drain_resume(s);
}

const struct part_ops mpi_part = {
    .name = "mpi",
    .save = mpi_part_save,
    .save_early = true,
    .recreate = mpi_part_recreate,
    .resumed = mpi_part_resumed,
};
