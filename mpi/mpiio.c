/* MPI-IO files: virtual handles, their records and replay (mpiio.h); the
 * calls written by hand (open, close, set_view) are mpiio_calls.c's. */
#define LOG_PREFIX "mpi-io: "
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"
#include "calls.h"
#include "comms.h"
#include "coord.h"
#include "fds.h"
#include "handles.h"
#include "log.h"
#include "mpiio.h"
#include "export.h"
#include "record.h"
#include "session.h"
#include "undo.h"

/* The runtime state of an open file, hung on its virtual handle. */
struct mpiio_file {
	MPI_Comm comm;		  /* stasis's duplicate of its communicator (virtual) */
	char name[PATH_MAX + 32]; /* absolute, with the prefix the program gave */
	const char *path;	  /* name past that prefix: what stat() sees */
	int amode;
	size_t open_len; /* bytes of its record that describe the open */
	bool view;
	MPI_Offset disp;
	MPI_Datatype etype, filetype;		     /* the program's handles */
	struct mpi_record *etype_rec, *filetype_rec; /* pinned while the view uses them */
	char datarep[MPI_MAX_DATAREP_STRING];
	struct {
		uint64_t id;
		MPI_Offset size;
	} ckpt[2]; /* its size at the newest two checkpoints */
	int split;	      /* a split collective begun (done in its begin) */
	MPI_Status split_status; /* what its end returns */
};

static struct mpiio_file *file_of(MPI_File v)
{
	struct vh_entry *e = vh_entry(VH_FILE, v);

	return e ? e->aux : NULL;
}

MPI_Comm mpiio_comm(MPI_File v)
{
	struct mpiio_file *f = file_of(v);

	return f ? f->comm : MPI_COMM_NULL;
}

/* "ufs:", "lustre:", ...: a file system named before the path (ROMIO's
 * convention, which OMPIO accepts). */
static size_t prefix_len(const char *name)
{
	const char *colon = strchr(name, ':'), *slash = strchr(name, '/');

	return colon && colon > name + 1 && (!slash || colon < slash) ? (size_t)(colon + 1 - name)
								      : 0;
}

/* A relative name becomes absolute: the restart opens the same file
 * whatever its directory. */
static void absolute_name(struct mpiio_file *f, const char *given)
{
	size_t pre = prefix_len(given);
	char cwd[PATH_MAX];

	if (given[pre] == '/' || !getcwd(cwd, sizeof(cwd)))
		snprintf(f->name, sizeof(f->name), "%s", given);
	else
		snprintf(f->name, sizeof(f->name), "%.*s%s/%s", (int)pre, given, cwd, given + pre);
	f->path = f->name + prefix_len(f->name);
}

/* A handle as a reference (no dependency): {1, index} or {0, value}, as
 * recbuf_handle writes it, so that recread_handle reads it back. */
static void put_ref(struct rec_builder *b, enum vh_kind k, void *v)
{
	bool virt = vh_is_virtual(k, v);

	recbuf_int(b, virt);
	recbuf_u64(b, virt ? vh_index(k, v) : (uint64_t)(uintptr_t)v);
}

/* The program's handle of a reference put_ref wrote. */
static void *get_ref(struct rec_reader *r, enum vh_kind k)
{
	int virt = recread_int(r);
	uint64_t x = recread_u64(r);

	if (r->bad || (virt && x >= VH_MAX_INDEX))
		return vh_null(k);
	return virt ? vh_value(k, (uint32_t)x) : (void *)(uintptr_t)x;
}

static void put_info(struct rec_builder *b, MPI_Info info)
{
	char key[MPI_MAX_INFO_KEY + 1];
	int n = 0, vlen, flag;

	if (info == MPI_INFO_NULL || PMPI_Info_get_nkeys(info, &n) != MPI_SUCCESS)
		n = 0;
	recbuf_int(b, n);
	for (int i = 0; i < n; i++) {
		char *value = NULL;

		if (PMPI_Info_get_nthkey(info, i, key) == MPI_SUCCESS &&
		    PMPI_Info_get_valuelen(info, key, &vlen, &flag) == MPI_SUCCESS && flag &&
		    (value = calloc(1, (size_t)vlen + 1)) &&
		    PMPI_Info_get(info, key, vlen, value, &flag) == MPI_SUCCESS && flag) {
			recbuf_str(b, key);
			recbuf_str(b, value);
		} else {
			b->failed = true;
		}
		free(value);
	}
}

/* The hints back as a new info object (MPI_INFO_NULL when there are none
 * or when only skipping them: make false). */
static MPI_Info get_info(struct rec_reader *r, bool make)
{
	MPI_Info info = MPI_INFO_NULL;
	int n = recread_int(r);

	if (make && n > 0 && PMPI_Info_create(&info) != MPI_SUCCESS)
		info = MPI_INFO_NULL;
	for (int i = 0; i < n && !r->bad; i++) {
		const char *key = recread_str(r), *value = recread_str(r);

		if (info != MPI_INFO_NULL && key && value)
			PMPI_Info_set(info, key, value);
	}
	return info;
}

/* --- open, view, close ------------------------------------------------------ */

/* The program opened real (collective over real_comm): a virtual handle
 * for it, with a communicator of stasis's to count its collectives. */
/* A file opened for writing that the newest checkpoint did not hold open
 * (HDF5 output closed and opened again every few steps): its length at
 * that checkpoint is what fds.h lists for it, or its length now, listed
 * (the first open after the checkpoint, by any of this rank's means). */
static void reopened(struct mpiio_file *f)
{
	struct stat st;
	uint64_t size, id;

	if ((f->amode & (MPI_MODE_WRONLY | MPI_MODE_RDWR)) && !stat(f->path, &st) &&
	    S_ISREG(st.st_mode) &&
	    fds_written_size(st.st_dev, st.st_ino, (uint64_t)st.st_size, &size, &id, -1, f->path)) {
		f->ckpt[0].id = id;
		f->ckpt[0].size = (MPI_Offset)size;
	}
}

MPI_File mpiio_opened(MPI_Comm real_comm, const char *given, int amode, MPI_Info info,
		      MPI_File real, bool fortran)
{
	struct rec_builder b = {0};
	struct mpi_record *rec;
	struct mpiio_file *f;
	MPI_Comm dup;
	MPI_File v;

	if (amode & MPI_MODE_DELETE_ON_CLOSE) {
		session_unsupported("MPI_File_open with MPI_MODE_DELETE_ON_CLOSE");
		return real;
	}
	if (amode & MPI_MODE_SEQUENTIAL) {
		session_unsupported("MPI_File_open with MPI_MODE_SEQUENTIAL");
		return real;
	}
	f = calloc(1, sizeof(*f));
	if (!f || PMPI_Comm_dup(real_comm, &dup) != MPI_SUCCESS) {
		free(f);
		session_unsupported("MPI_File_open (out of memory)");
		return real;
	}
	f->comm = mpi_comm_new(dup, MPI_UNDEFINED, "MPI_File_open");
	if (!vh_is_virtual(VH_COMM, f->comm)) {
		free(f); /* checkpoints are off: the duplicate stays */
		return real;
	}
	absolute_name(f, given);
	f->amode = amode;
	reopened(f);
	recbuf_handle(&b, VH_COMM, f->comm);
	recbuf_str(&b, f->name);
	recbuf_int(&b, amode);
	put_info(&b, info);
	f->open_len = b.len;
	rec = rec_make(VH_FILE, &b, fortran ? REC_FORTRAN : 0);
	v = rec ? vh_mint(VH_FILE, real, 0, rec) : NULL;
	if (!v) {
		rec_discard(rec);
		free(f);
		session_unsupported("MPI_File_open (a file stasis could not record)");
		return real;
	}
	rec_attach(rec, v);
	vh_lock();
	vh_entry(VH_FILE, v)->aux = f;
	vh_unlock();
	return v;
}

static struct mpi_record *record_of_type(MPI_Datatype t)
{
	struct vh_entry *e = vh_entry(VH_TYPE, t);

	return e ? e->rec : NULL;
}

/* The program set v's view: its datatypes stay recorded while it lasts. */
void mpiio_view_set(MPI_File v, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,
		    const char *datarep)
{
	struct mpiio_file *f = file_of(v);
	struct mpi_record *er, *fr;

	if (!f)
		return;
	er = record_of_type(etype);
	fr = record_of_type(filetype);
	if ((vh_is_virtual(VH_TYPE, etype) && !er) || (vh_is_virtual(VH_TYPE, filetype) && !fr))
		session_unsupported("MPI_File_set_view with a datatype stasis did not record");
	if (er)
		rec_pin(er);
	if (fr)
		rec_pin(fr);
	if (f->etype_rec)
		rec_unpin(f->etype_rec);
	if (f->filetype_rec)
		rec_unpin(f->filetype_rec);
	f->etype_rec = er;
	f->filetype_rec = fr;
	f->view = true;
	f->disp = disp;
	f->etype = etype;
	f->filetype = filetype;
	snprintf(f->datarep, sizeof(f->datarep), "%s", datarep ? datarep : "native");
}

/* The program closed v (MPI closed the real file). */
void mpiio_closed(MPI_File v)
{
	struct vh_entry *e = vh_entry(VH_FILE, v);
	struct mpiio_file *f = e ? e->aux : NULL;
	MPI_Comm real;

	if (!e)
		return;
	vh_lock();
	e->aux = NULL;
	vh_unlock();
	rec_object_freed(VH_FILE, v);
	if (!f)
		return;
	if (f->etype_rec)
		rec_unpin(f->etype_rec);
	if (f->filetype_rec)
		rec_unpin(f->filetype_rec);
	real = VH_REAL(VH_COMM, MPI_Comm, f->comm);
	if (PMPI_Comm_free(&real) == MPI_SUCCESS)
		mpi_freed(VH_COMM, f->comm);
	free(f);
}

/* --- writes a restart could not undo ------------------------------------------ */

static bool checkpointed_size(struct mpiio_file *f, MPI_Offset *size, uint64_t *id)
{
	struct session *s = session_get();

	if (!f || !s || !s->last_id || !(f->amode & (MPI_MODE_WRONLY | MPI_MODE_RDWR)))
		return false;
	for (int g = 0; g < 2; g++)
		if (f->ckpt[g].id == s->last_id) {
			*size = f->ckpt[g].size;
			*id = f->ckpt[g].id;
			return true;
		}
	return false;
}

/* Before count items of type are written at offset (etypes of the view;
 * count < 0: everything from there on): save the bytes from the first to
 * past the last the write can touch, below the length at the checkpoint
 * (with a view with holes, bytes between are saved too). */
static void check_bytes(struct mpiio_file *f, MPI_File real, MPI_Offset offset, int count,
			MPI_Datatype type)
{
	MPI_Offset size, byte, end = -1;
	uint64_t id;
	int tsize, esize;

	if (!checkpointed_size(f, &size, &id) ||
	    PMPI_File_get_byte_offset(real, offset, &byte) != MPI_SUCCESS || byte >= size)
		return;
	if (count >= 0 && PMPI_Type_size(type, &tsize) == MPI_SUCCESS &&
	    PMPI_Type_size(f->view ? VH_REAL(VH_TYPE, MPI_Datatype, f->etype) : MPI_BYTE,
			   &esize) == MPI_SUCCESS &&
	    esize > 0) {
		MPI_Offset n = ((MPI_Offset)count * tsize + esize - 1) / esize;

		if (PMPI_File_get_byte_offset(real, offset + n, &end) != MPI_SUCCESS)
			end = -1;
	}
	undo_will_change(f->path, 0, 0, -1, id, (uint64_t)size, (uint64_t)byte,
			 end < byte ? (uint64_t)size : (uint64_t)end);
}

void mpiio_will_write_at(MPI_File v, MPI_Offset offset, int count, MPI_Datatype type)
{
	check_bytes(file_of(v), VH_REAL(VH_FILE, MPI_File, v), offset, count, type);
}

void mpiio_will_write(MPI_File v, bool shared, int count, MPI_Datatype type)
{
	struct mpiio_file *f = file_of(v);
	MPI_File real = VH_REAL(VH_FILE, MPI_File, v);
	MPI_Offset pos, size;
	uint64_t id;

	if (!checkpointed_size(f, &size, &id))
		return;
	/* Through the shared pointer the ranks' order decides where this
	 * rank's part lands (write_ordered): all from the pointer on. */
	if ((shared ? PMPI_File_get_position_shared(real, &pos)
		    : PMPI_File_get_position(real, &pos)) == MPI_SUCCESS)
		check_bytes(f, real, pos, shared ? -1 : count, type);
}

void mpiio_will_cut(MPI_File v, MPI_Offset new_size)
{
	struct mpiio_file *f = file_of(v);
	MPI_Offset size;
	uint64_t id;

	if (checkpointed_size(f, &size, &id) && new_size < size)
		undo_will_change(f->path, 0, 0, -1, id, (uint64_t)size,
				 (uint64_t)(new_size < 0 ? 0 : new_size), (uint64_t)size);
}

/* --- checkpoint ---------------------------------------------------------------- */

/* The shared file pointer, if the file has one: asked with errors
 * returned, whatever the program's error handler says. */
static bool shared_position(MPI_File real, MPI_Offset *pos)
{
	MPI_Errhandler old;
	bool ok;

	if (PMPI_File_get_errhandler(real, &old) != MPI_SUCCESS)
		return false;
	PMPI_File_set_errhandler(real, MPI_ERRORS_RETURN);
	ok = PMPI_File_get_position_shared(real, pos) == MPI_SUCCESS;
	PMPI_File_set_errhandler(real, old);
	PMPI_Errhandler_free(&old);
	return ok;
}

/* The file's error handler as the program names it; MPI_ERRHANDLER_NULL
 * when stasis does not know it (it is then left as MPI sets it). */
static MPI_Errhandler program_errhandler(MPI_File real)
{
	MPI_Errhandler eh, v = MPI_ERRHANDLER_NULL;

	if (PMPI_File_get_errhandler(real, &eh) != MPI_SUCCESS)
		return v;
	if (eh == MPI_ERRORS_RETURN || eh == MPI_ERRORS_ARE_FATAL)
		v = eh;
	else
		v = vh_lookup_real(VH_ERRHANDLER, eh) ?: MPI_ERRHANDLER_NULL;
	PMPI_Errhandler_free(&eh);
	return v;
}

static int refresh_one(struct mpi_record *rec, MPI_File real, struct mpiio_file *f, uint64_t id)
{
	struct rec_builder b = {0};
	MPI_Offset size = 0, pos = 0, spos = 0;
	int atom = 0, shared, g;
	struct stat st;

	if (PMPI_File_get_size(real, &size) != MPI_SUCCESS || stat(f->path, &st))
		return -ENOENT;
	recbuf_put(&b, rec->data, f->open_len);
	recbuf_u64(&b, id);
	recbuf_u64(&b, (uint64_t)size);
	recbuf_u64(&b, st.st_ino);
	recbuf_u64(&b, (uint64_t)st.st_mtim.tv_sec);
	recbuf_u64(&b, (uint64_t)st.st_mtim.tv_nsec);
	recbuf_int(&b, f->view);
	recbuf_u64(&b, (uint64_t)f->disp);
	put_ref(&b, VH_TYPE, f->etype);
	put_ref(&b, VH_TYPE, f->filetype);
	recbuf_str(&b, f->datarep);
	PMPI_File_get_position(real, &pos);
	shared = shared_position(real, &spos);
	recbuf_u64(&b, (uint64_t)pos);
	recbuf_int(&b, shared);
	recbuf_u64(&b, (uint64_t)spos);
	PMPI_File_get_atomicity(real, &atom);
	recbuf_int(&b, atom);
	put_ref(&b, VH_ERRHANDLER, program_errhandler(real));
	recbuf_int(&b, f->split);
	recbuf_put(&b, &f->split_status, sizeof(f->split_status));
	if (rec_replace_data(rec, &b))
		return -ENOMEM;
	g = f->ckpt[0].id <= f->ckpt[1].id ? 0 : 1;
	f->ckpt[g].id = id;
	f->ckpt[g].size = size;
	return 0;
}

int mpiio_refresh(void)
{
	struct session *s = session_get();
	uint64_t id = s ? s->next_id - 1 : 0; /* the checkpoint being taken */
	int ret;

	for (struct mpi_record *rec = rec_first(); rec; rec = rec->next) {
		struct vh_entry *e;

		if (rec->kind != VH_FILE || !(e = vh_entry_at(VH_FILE, rec->index)) || !e->aux)
			continue;
		ret = refresh_one(rec, e->real, e->aux, id);
		if (ret) {
			if (ret == -ENOENT)
				pr_err(
				    "%s, an MPI file the program has open, was deleted: a restart "
				    "could not open it again",
				    ((struct mpiio_file *)e->aux)->path);
			return ret;
		}
	}
	return 0;
}

/* --- split collectives (mpiio_split.c) ------------------------------------------- */

bool mpiio_split_ours(MPI_File v)
{
	return vh_is_virtual(VH_FILE, v) && file_of(v);
}

void mpiio_split_begun(MPI_File v, const MPI_Status *st)
{
	struct mpiio_file *f = file_of(v);

	f->split = 1;
	f->split_status = *st;
}

int mpiio_split_end(MPI_File v, MPI_Status *st)
{
	struct mpiio_file *f = file_of(v);

	if (!f->split)
		return MPI_ERR_OTHER; /* no begin: as MPI says of it */
	f->split = 0;
	if (st != MPI_STATUS_IGNORE)
		*st = f->split_status;
	return MPI_SUCCESS;
}

/* --- restart --------------------------------------------------------------------- */

/* A file's record, read back (the order refresh_one wrote it). */
struct file_state {
	MPI_Comm comm; /* the program's handle */
	const char *name;
	int amode;
	size_t open_len;
	uint64_t id, size, ino, mtime_sec, mtime_nsec;
	int view;
	MPI_Offset disp;
	MPI_Datatype etype, filetype;
	const char *datarep;
	MPI_Offset pos, spos;
	int shared, atom;
	MPI_Errhandler eh;
	int split;
	MPI_Status split_status;
};

static int read_state(struct rec_reader *r, const struct mpi_record *rec, struct file_state *st,
		      MPI_Info *info)
{
	st->comm = get_ref(r, VH_COMM);
	st->name = recread_str(r);
	st->amode = recread_int(r);
	MPI_Info hints = get_info(r, info != NULL);

	if (info)
		*info = hints;
	st->open_len = (size_t)(r->p - rec->data);
	st->id = recread_u64(r);
	st->size = recread_u64(r);
	st->ino = recread_u64(r);
	st->mtime_sec = recread_u64(r);
	st->mtime_nsec = recread_u64(r);
	st->view = recread_int(r);
	st->disp = (MPI_Offset)recread_u64(r);
	st->etype = get_ref(r, VH_TYPE);
	st->filetype = get_ref(r, VH_TYPE);
	st->datarep = recread_str(r);
	st->pos = (MPI_Offset)recread_u64(r);
	st->shared = recread_int(r);
	st->spos = (MPI_Offset)recread_u64(r);
	st->atom = recread_int(r);
	st->eh = get_ref(r, VH_ERRHANDLER);
	st->split = recread_int(r);
	recread_get(r, &st->split_status, sizeof(st->split_status));
	return r->bad || !st->name || !st->datarep ? -EBADMSG : 0;
}

/* The file as the checkpoint left it (process/fds_image.c checks the
 * program's other files the same way). */
static int check_file(const struct file_state *st, struct why *why)
{
	const char *path = st->name + prefix_len(st->name);
	struct stat sb;

	if (stat(path, &sb)) {
		return why_set(why, -ESTALE, "%s (an MPI file): %s", path,
			       errno == ENOENT ? "missing" : strerror(errno));
	}
	if (sb.st_ino != st->ino) {
		return why_set(why, -ESTALE,
			       "%s (an MPI file) is not the file the program had open: it was "
			       "replaced after the checkpoint",
			       path);
	}
	if (st->amode & MPI_MODE_RDONLY) {
		if ((uint64_t)sb.st_size != st->size ||
		    (uint64_t)sb.st_mtim.tv_sec != st->mtime_sec ||
		    (uint64_t)sb.st_mtim.tv_nsec != st->mtime_nsec) {
			return why_set(
			    why, -ESTALE,
			    "%s (an MPI file, read-only) changed after the checkpoint: %lld "
			    "bytes, was %llu",
			    path, (long long)sb.st_size, (unsigned long long)st->size);
		}
	} else if (session_get() && session_get()->images_rebuilt) {
		pr_warn("%s (an MPI file): if this rank overwrote bytes of it in place since the "
			"checkpoint, they cannot be put back: its undo record was lost with its "
			"node",
			path);
	}
	if (!(st->amode & MPI_MODE_RDONLY) && (uint64_t)sb.st_size < st->size) {
		return why_set(
		    why, -ESTALE,
		    "%s (an MPI file) is shorter than at the checkpoint (%lld bytes, was "
		    "%llu): what the program wrote before it is lost",
		    path, (long long)sb.st_size, (unsigned long long)st->size);
	}
	return 0;
}

int mpiio_replay(struct mpi_record *rec, MPI_File *real, struct why *why)
{
	struct rec_reader r = recread_open(rec->data, rec->len);
	struct file_state st;
	MPI_Info info = MPI_INFO_NULL;
	MPI_Comm comm;
	struct why changed = WHY_INIT;
	int ok, ret = -EINVAL;

	ok = read_state(&r, rec, &st, &info) == 0;
	comm = VH_REAL(VH_COMM, MPI_Comm, st.comm);
	if (ok && check_file(&st, &changed)) {
		/* As before structs: the last file that fails names it. */
		why_clear(why);
		why_set(why, changed.err, "%s", changed.msg);
		ok = 0;
	}
	/* Every member opens it, or none does. */
	PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
	if (ok && PMPI_File_open(comm, st.name, st.amode & ~(MPI_MODE_CREATE | MPI_MODE_EXCL), info,
				 real) == MPI_SUCCESS)
		ret = 0;
	else if (!ok)
		ret = -ESTALE;
	if (info != MPI_INFO_NULL)
		PMPI_Info_free(&info);
	recread_done(&r);
	return ret;
}

/* Everything but the open, for one file: collective over its members. */
static int apply_one(struct mpi_record *rec, struct vh_entry *e)
{
	struct rec_reader r = recread_open(rec->data, rec->len);
	struct mpiio_file *f = calloc(1, sizeof(*f));
	struct file_state st;
	MPI_File real = e->real;
	int ret = -ENOMEM;

	if (!f)
		goto out;
	ret = read_state(&r, rec, &st, NULL);
	if (ret)
		goto out;
	f->comm = st.comm;
	snprintf(f->name, sizeof(f->name), "%s", st.name);
	f->path = f->name + prefix_len(f->name);
	f->amode = st.amode;
	f->open_len = st.open_len;
	f->ckpt[0].id = st.id;
	f->ckpt[0].size = (MPI_Offset)st.size;
	f->split = st.split;
	f->split_status = st.split_status;
	if ((st.amode & (MPI_MODE_WRONLY | MPI_MODE_RDWR)) &&
	    PMPI_File_set_size(real, (MPI_Offset)st.size) != MPI_SUCCESS)
		ret = -EIO;
	if (st.view) {
		if (PMPI_File_set_view(real, st.disp, VH_REAL(VH_TYPE, MPI_Datatype, st.etype),
				       VH_REAL(VH_TYPE, MPI_Datatype, st.filetype), st.datarep,
				       MPI_INFO_NULL) != MPI_SUCCESS)
			ret = -EIO;
		vh_lock();
		e->aux = f;
		vh_unlock();
		mpiio_view_set(vh_value(VH_FILE, rec->index), st.disp, st.etype, st.filetype,
			       st.datarep);
	}
	if (st.atom && PMPI_File_set_atomicity(real, 1) != MPI_SUCCESS)
		ret = -EIO;
	if (PMPI_File_seek(real, st.pos, MPI_SEEK_SET) != MPI_SUCCESS)
		ret = -EIO;
	if (st.shared && PMPI_File_seek_shared(real, st.spos, MPI_SEEK_SET) != MPI_SUCCESS)
		ret = -EIO;
	if (st.eh != MPI_ERRHANDLER_NULL)
		PMPI_File_set_errhandler(real, VH_REAL(VH_ERRHANDLER, MPI_Errhandler, st.eh));
	vh_lock();
	e->aux = f;
	vh_unlock();
	f = NULL;
out:
	free(f);
	recread_done(&r);
	return ret;
}

int mpiio_apply(struct why *why)
{
	int ret = 0, err;

	for (struct mpi_record *rec = rec_first(); rec; rec = rec->next) {
		struct vh_entry *e;

		if (rec->kind != VH_FILE || !(e = vh_entry_at(VH_FILE, rec->index)))
			continue;
		/* Collective: every member goes through every file. */
		err = apply_one(rec, e);
		if (err && !ret) {
			ret = err;
			why_set(why, err,
				"cannot put the view and positions of an MPI "
				"file back: %s",
				strerror(-err));
		}
	}
	return ret;
}
