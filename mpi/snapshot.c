/* What MPI objects hold that the program changes after making them: the
 * names of communicators and datatypes, the error handler of each
 * communicator (and the default one of files), attributes the program
 * cached on them with its keyvals, and the contents of info objects.
 * Read from MPI when a checkpoint is taken, put back after a replay has
 * made the objects, with the program's callbacks kept quiet. MPI_COMM_WORLD
 * and MPI_COMM_SELF are included: programs set error handlers and
 * attributes on them. */
#define LOG_PREFIX "snapshot: "
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "callbacks.h"
#include "keyvals.h"
#include "log.h"
#include "session.h"
#include "snapshot.h"

enum snap_what { SNAP_COMM = 1, SNAP_TYPE = 2, SNAP_FILE_DEFAULT = 3, SNAP_WIN = 4 };

/* An error handler by its program's handle: a virtual one, or one of the
 * predefined handlers (whose addresses do not move). */
static bool predefined_errhandler(MPI_Errhandler eh)
{
	static void *throw_exceptions;
	static bool looked;

	if (!looked) {
		throw_exceptions = dlsym(RTLD_DEFAULT, "ompi_mpi_errors_throw_exceptions");
		looked = true;
	}
	return eh == MPI_ERRORS_ARE_FATAL || eh == MPI_ERRORS_RETURN ||
	       (throw_exceptions && eh == throw_exceptions);
}

static int put_errhandler(struct rec_builder *b, MPI_Errhandler real)
{
	void *v = vh_lookup_real(VH_ERRHANDLER, real);

	if (!v && !predefined_errhandler(real))
		return -ENOENT;
	recbuf_handle(b, VH_ERRHANDLER, v ? v : real);
	return 0;
}

struct keyvals {
	int n;
	int virt[64], real[64];
};

static void collect_keyvals(struct keyvals *kv, enum keyval_which which)
{
	kv->n = 0;
	for (struct mpi_record *r = rec_first(); r; r = r->next) {
		struct vh_entry *e;

		if (r->kind != VH_KEYVAL || callbacks_keyval_which(r) != which)
			continue;
		e = vh_entry_at(VH_KEYVAL, r->index);
		if (!e)
			continue;
		if (kv->n == 64) {
			session_unsupported("more than 64 attribute keyvals of one kind");
			return;
		}
		kv->virt[kv->n] = VH_FBASE + (int)r->index;
		kv->real[kv->n] = (int)(intptr_t)e->real;
		kv->n++;
	}
}

/* An attribute set through the Fortran bindings reads from C as a pointer
 * to MPI's copy of its value (MPI-4.0 section 19.3.7), which no set can
 * put back: such a value is read and set again through the Fortran
 * bindings. A value set from C reads from Fortran as itself, so the two
 * reads tell them apart. A program with no Fortran library has only C ones. */
typedef void (*get_attr_fn)(MPI_Fint *, MPI_Fint *, MPI_Aint *, MPI_Fint *, MPI_Fint *);
typedef void (*set_attr_fn)(MPI_Fint *, MPI_Fint *, MPI_Aint *, MPI_Fint *);

static const char *const get_f[] = {"pmpi_comm_get_attr_", "pmpi_type_get_attr_",
				    "pmpi_win_get_attr_"};
static const char *const set_f[] = {"pmpi_comm_set_attr_", "pmpi_type_set_attr_",
				    "pmpi_win_set_attr_"};

/* The Fortran library's function name, looked up once (NULL without it). */
static void *fortran_fn(const char *const *names, enum keyval_which which)
{
	static void *fns[2][3];
	static bool looked[2][3];
	int i = names == set_f;

	if (!looked[i][which]) {
		fns[i][which] = dlsym(RTLD_DEFAULT, names[which]);
		looked[i][which] = true;
	}
	return fns[i][which];
}

static MPI_Fint real_f(void *real, enum keyval_which which)
{
	return which == KEYVAL_COMM   ? PMPI_Comm_c2f(real)
	       : which == KEYVAL_TYPE ? PMPI_Type_c2f(real)
				      : PMPI_Win_c2f(real);
}

static void put_attrs(struct rec_builder *b, void *real, const struct keyvals *kv,
		      enum keyval_which which)
{
	get_attr_fn get = kv->n ? (get_attr_fn)fortran_fn(get_f, which) : NULL;
	MPI_Fint h = get ? real_f(real, which) : 0, fkey, fflag, ierr;
	int n = 0, flag;
	MPI_Aint fval;
	void *val;
	size_t at = b->len;

	recbuf_int(b, 0); /* count, patched below */
	for (int i = 0; i < kv->n; i++) {
		flag = 0;
		keyval_get_attr(which, real, kv->real[i], &val, &flag);
		if (!flag)
			continue;
		fkey = kv->real[i];
		fflag = 0;
		ierr = MPI_ERR_OTHER;
		if (get)
			get(&h, &fkey, &fval, &fflag, &ierr);
		/* 1: set from Fortran, val its value. */
		if (get && ierr == MPI_SUCCESS && fflag && fval != (MPI_Aint)val) {
			recbuf_int(b, 1);
			val = (void *)fval;
		} else {
			recbuf_int(b, 0);
		}
		recbuf_int(b, kv->virt[i]);
		recbuf_u64(b, (uintptr_t)val);
		n++;
	}
	if (!b->failed)
		memcpy(b->data + at, &n, sizeof(n));
}

static int put_comm(struct rec_builder *b, MPI_Comm v, MPI_Comm real, const struct keyvals *kv)
{
	char name[MPI_MAX_OBJECT_NAME] = "";
	int len = 0, ret;
	MPI_Errhandler eh;

	recbuf_int(b, SNAP_COMM);
	recbuf_handle(b, VH_COMM, v);
	PMPI_Comm_get_name(real, name, &len);
	recbuf_str(b, name);
	if (PMPI_Comm_get_errhandler(real, &eh) != MPI_SUCCESS)
		return -EINVAL;
	ret = put_errhandler(b, eh);
	PMPI_Errhandler_free(&eh);
	if (ret)
		return ret;
	put_attrs(b, real, kv, KEYVAL_COMM);
	return 0;
}

static void put_type(struct rec_builder *b, MPI_Datatype v, MPI_Datatype real,
		     const struct keyvals *kv)
{
	char name[MPI_MAX_OBJECT_NAME] = "";
	int len = 0;

	recbuf_int(b, SNAP_TYPE);
	recbuf_handle(b, VH_TYPE, v);
	PMPI_Type_get_name(real, name, &len);
	recbuf_str(b, name);
	put_attrs(b, real, kv, KEYVAL_TYPE);
}

/* The predefined datatypes (MPI-4.0 sections 3.2.2, 3.2.3, 5.9.4, 19.1.9,
 * 19.2.5): a program may name them and cache attributes on them, state
 * a restarted MPI does not have. Their handles are the same in every run. */
static const MPI_Datatype predefined[] = {
	MPI_CHAR, MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_BYTE, MPI_WCHAR, MPI_SHORT,
	MPI_UNSIGNED_SHORT, MPI_INT, MPI_UNSIGNED, MPI_LONG, MPI_UNSIGNED_LONG, MPI_LONG_LONG_INT,
	MPI_UNSIGNED_LONG_LONG, MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE, MPI_INT8_T, MPI_INT16_T,
	MPI_INT32_T, MPI_INT64_T, MPI_UINT8_T, MPI_UINT16_T, MPI_UINT32_T, MPI_UINT64_T, MPI_C_BOOL,
	MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX, MPI_C_LONG_DOUBLE_COMPLEX, MPI_AINT, MPI_OFFSET,
	MPI_COUNT, MPI_PACKED, MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT,
	MPI_LONG_DOUBLE_INT, MPI_CXX_BOOL, MPI_CXX_FLOAT_COMPLEX, MPI_CXX_DOUBLE_COMPLEX,
	MPI_CXX_LONG_DOUBLE_COMPLEX, MPI_CHARACTER, MPI_LOGICAL, MPI_INTEGER, MPI_REAL,
	MPI_DOUBLE_PRECISION, MPI_COMPLEX, MPI_DOUBLE_COMPLEX, MPI_2REAL, MPI_2DOUBLE_PRECISION,
	MPI_2INTEGER, MPI_LOGICAL1, MPI_LOGICAL2, MPI_LOGICAL4, MPI_LOGICAL8, MPI_INTEGER1,
	MPI_INTEGER2, MPI_INTEGER4, MPI_INTEGER8, MPI_REAL4, MPI_REAL8, MPI_REAL16, MPI_COMPLEX8,
	MPI_COMPLEX16, MPI_COMPLEX32,
};
#define NPREDEFINED (sizeof(predefined) / sizeof(predefined[0]))

size_t snapshot_predefined_count(void)
{
	return NPREDEFINED;
}

MPI_Datatype snapshot_predefined_type(size_t i)
{
	return predefined[i];
}

/* A predefined type the program renamed (from its name right after
 * MPI_Init: snapshot_note_names) or cached an attribute on. */
static char predefined_names[NPREDEFINED][MPI_MAX_OBJECT_NAME];

void snapshot_note_names(void)
{
	for (size_t i = 0; i < NPREDEFINED; i++) {
		int len = 0;

		if (predefined[i] != MPI_DATATYPE_NULL)
			PMPI_Type_get_name(predefined[i], predefined_names[i], &len);
	}
}

static bool predefined_changed(size_t i, const struct keyvals *kv)
{
	char name[MPI_MAX_OBJECT_NAME] = "";
	int len = 0;

	PMPI_Type_get_name(predefined[i], name, &len);
	if (strcmp(name, predefined_names[i]))
		return true;
	for (int k = 0; k < kv->n; k++)
		if (keyval_has_attr(KEYVAL_TYPE, predefined[i], kv->real[k]))
			return true;
	return false;
}

static void put_win(struct rec_builder *b, MPI_Win v, MPI_Win real, const struct keyvals *kv)
{
	recbuf_int(b, SNAP_WIN);
	recbuf_handle(b, VH_WIN, v);
	put_attrs(b, real, kv, KEYVAL_WIN);
}

/* Info objects are recorded by what they hold now. */
static int info_contents(struct mpi_record *rec, MPI_Info real)
{
	struct rec_builder b = {0};
	char key[MPI_MAX_INFO_KEY + 1], *val;
	int n = 0, vlen, flag;

	PMPI_Info_get_nkeys(real, &n);
	recbuf_int(&b, n);
	for (int i = 0; i < n; i++) {
		if (PMPI_Info_get_nthkey(real, i, key) != MPI_SUCCESS ||
		    PMPI_Info_get_valuelen(real, key, &vlen, &flag) != MPI_SUCCESS || !flag ||
		    !(val = malloc((size_t)vlen + 1))) {
			b.failed = true;
			break;
		}
		PMPI_Info_get(real, key, vlen, val, &flag);
		val[vlen] = 0;
		recbuf_str(&b, key);
		recbuf_str(&b, val);
		free(val);
	}
	return rec_replace_data(rec, &b);
}

int snapshot_write(struct rec_builder *b, int *count)
{
	struct keyvals comm_kv, type_kv, win_kv;
	MPI_Errhandler eh;
	int n = 0, ret;

	keyvals_release_unused();
	collect_keyvals(&comm_kv, KEYVAL_COMM);
	collect_keyvals(&type_kv, KEYVAL_TYPE);
	collect_keyvals(&win_kv, KEYVAL_WIN);
	for (struct mpi_record *r = rec_first(); r; r = r->next) {
		struct vh_entry *e = vh_entry_at(r->kind, r->index);

		if (!e || (r->flags & REC_FREED))
			continue;
		if (r->kind == VH_COMM) {
			ret = put_comm(b, vh_value(VH_COMM, r->index), e->real, &comm_kv);
			if (ret)
				return ret;
			n++;
		} else if (r->kind == VH_TYPE) {
			put_type(b, vh_value(VH_TYPE, r->index), e->real, &type_kv);
			n++;
		} else if (r->kind == VH_WIN) {
			put_win(b, vh_value(VH_WIN, r->index), e->real, &win_kv);
			n++;
		} else if (r->kind == VH_INFO && (ret = info_contents(r, e->real))) {
			return ret;
		}
	}
	for (size_t i = 0; i < NPREDEFINED; i++)
		if (predefined[i] != MPI_DATATYPE_NULL && predefined_changed(i, &type_kv)) {
			put_type(b, predefined[i], predefined[i], &type_kv);
			n++;
		}
	if ((ret = put_comm(b, MPI_COMM_WORLD, MPI_COMM_WORLD, &comm_kv)) ||
	    (ret = put_comm(b, MPI_COMM_SELF, MPI_COMM_SELF, &comm_kv)))
		return ret;
	recbuf_int(b, SNAP_FILE_DEFAULT);
	if (PMPI_File_get_errhandler(MPI_FILE_NULL, &eh) != MPI_SUCCESS)
		return -EINVAL;
	ret = put_errhandler(b, eh);
	PMPI_Errhandler_free(&eh);
	*count = n + 3;
	return ret ? ret : b->failed ? -ENOMEM : 0;
}

static int apply_attrs(struct rec_reader *r, void *real, enum keyval_which which)
{
	int n = recread_int(r), ret = MPI_SUCCESS;
	MPI_Fint h = 0, fkey, ierr;
	set_attr_fn set = NULL;

	if (n < 0)
		r->bad = true;
	for (int i = 0; i < n && !r->bad && ret == MPI_SUCCESS; i++) {
		int fortran = recread_int(r), keyval = vh_real_keyval(recread_int(r));
		void *val = (void *)(uintptr_t)recread_u64(r);

		if (r->bad)
			break;
		if (fortran) {
			MPI_Aint fval = (MPI_Aint)val;

			if (!set && !(set = (set_attr_fn)fortran_fn(set_f, which)))
				return -ENOSYS;
			h = real_f(real, which);
			fkey = keyval;
			set(&h, &fkey, &fval, &ierr);
			ret = ierr;
		} else if (which == KEYVAL_COMM) {
			ret = PMPI_Comm_set_attr(real, keyval, val);
		} else if (which == KEYVAL_TYPE) {
			ret = PMPI_Type_set_attr(real, keyval, val);
		} else {
			ret = PMPI_Win_set_attr(real, keyval, val);
		}
	}
	return r->bad ? -EBADMSG : ret == MPI_SUCCESS ? 0 : -EINVAL;
}

int snapshot_apply(struct rec_reader *r, int count)
{
	int ret = 0;

	for (int i = 0; i < count && !ret; i++) {
		int what = recread_int(r);
		const char *name;
		MPI_Comm c;
		MPI_Datatype t;
		MPI_Win w;
		MPI_Errhandler eh;

		switch (what) {
		case SNAP_COMM:
			c = recread_handle(r, VH_COMM);
			name = recread_str(r);
			eh = recread_handle(r, VH_ERRHANDLER);
			if (r->bad)
				return -EBADMSG;
			if (name && name[0])
				PMPI_Comm_set_name(c, name);
			if (PMPI_Comm_set_errhandler(c, eh) != MPI_SUCCESS)
				return -EINVAL;
			ret = apply_attrs(r, c, KEYVAL_COMM);
			break;
		case SNAP_TYPE:
			t = recread_handle(r, VH_TYPE);
			name = recread_str(r);
			if (r->bad)
				return -EBADMSG;
			if (name && name[0])
				PMPI_Type_set_name(t, name);
			ret = apply_attrs(r, t, KEYVAL_TYPE);
			break;
		case SNAP_WIN:
			w = recread_handle(r, VH_WIN);
			if (r->bad)
				return -EBADMSG;
			ret = apply_attrs(r, w, KEYVAL_WIN);
			break;
		case SNAP_FILE_DEFAULT:
			eh = recread_handle(r, VH_ERRHANDLER);
			if (r->bad)
				return -EBADMSG;
			ret = PMPI_File_set_errhandler(MPI_FILE_NULL, eh) == MPI_SUCCESS ? 0
											: -EINVAL;
			break;
		default:
			return -EBADMSG;
		}
		recread_done(r);
	}
	return ret;
}

int snapshot_replay_info(const struct mpi_record *rec, MPI_Info *out)
{
	struct rec_reader r = recread_open(rec->data, rec->len);
	int n = recread_int(&r), ret;

	if (r.bad || n < 0 || PMPI_Info_create(out) != MPI_SUCCESS)
		return -EBADMSG;
	ret = 0;
	for (int i = 0; i < n && !ret; i++) {
		const char *key = recread_str(&r), *val = recread_str(&r);

		if (r.bad || !key || !val)
			ret = -EBADMSG;
		else if (PMPI_Info_set(*out, key, val) != MPI_SUCCESS)
			ret = -EINVAL;
	}
	recread_done(&r);
	return ret;
}
