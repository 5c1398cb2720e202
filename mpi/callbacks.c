#define LOG_PREFIX "callbacks: "
/* mpi.h declares the MPI-1 functions MPI-3 removed only when asked. */
#define OMPI_OMIT_MPI1_COMPAT_DECLS 0
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "session.h"
#include "callbacks.h"
#include "callbacks_int.h"
#include "log.h"
#include "export.h"

bool callbacks_silent;

void callbacks_quiet(bool q)
{
	callbacks_silent = q;
}

/* --- slots: one trampoline per distinct program function --------------------- */

static void *op_fns[MPI_OP_SLOTS], *eh_fns[MPI_ERRHANDLER_SLOTS];

int cb_slot_of(void **fns, int n, void *fn)
{
	int i;

	vh_lock();
	for (i = 0; i < n && fns[i] && fns[i] != fn; i++)
		;
	if (i < n)
		fns[i] = fn;
	vh_unlock();
	return i < n ? i : -1;
}

void *cb_as_virtual(enum vh_kind k, void *real)
{
	void *v = vh_lookup_real(k, real);

	return v ? v : real;
}

void mpi_op_call(int slot, void *in, void *inout, int *len, MPI_Datatype *type)
{
	MPI_Datatype t = cb_as_virtual(VH_TYPE, *type);

	AS_PROGRAM(((MPI_User_function *)op_fns[slot])(in, inout, len, &t));
}

void mpi_errhandler_call(int slot, MPI_Comm *comm, int *code)
{
	MPI_Comm c = cb_as_virtual(VH_COMM, *comm);

	if (callbacks_silent)
		return;
	AS_PROGRAM(((MPI_Comm_errhandler_function *)eh_fns[slot])(&c, code));
}

/* --- records ------------------------------------------------------------------ */

struct mpi_record *cb_record(enum vh_kind k, int which, int fortran, void *a, void *b, void *c,
			     int commute)
{
	struct rec_builder rb = {0};

	if (k != VH_OP)
		recbuf_int(&rb, which);
	recbuf_int(&rb, fortran);
	recbuf_u64(&rb, (uintptr_t)a);
	if (k == VH_OP)
		recbuf_int(&rb, commute);
	if (k == VH_KEYVAL) {
		recbuf_u64(&rb, (uintptr_t)b);
		recbuf_u64(&rb, (uintptr_t)c);
	}
	return rec_make(k, &rb, fortran ? REC_FORTRAN : 0);
}

void *cb_bind(enum vh_kind k, void *real, struct mpi_record *rec, const char *call)
{
	void *v = rec ? vh_mint(k, real, 0, rec) : NULL;

	if (!v) {
		rec_discard(rec);
		session_unsupported(call);
		return NULL;
	}
	rec_attach(rec, v);
	return v;
}

/* --- ops ----------------------------------------------------------------------- */

static int create_op(MPI_User_function *fn, int commute, MPI_Op *real)
{
	int slot = cb_slot_of(op_fns, MPI_OP_SLOTS, (void *)fn);

	if (slot < 0)
		return -ENOSPC;
	return PMPI_Op_create(mpi_op_trampolines[slot], commute, real) == MPI_SUCCESS ? 0 : -EINVAL;
}

EXPORT int MPI_Op_create(MPI_User_function *fn, int commute, MPI_Op *op)
{
	MPI_Op real;
	int ret;
	void *v;

	stasis_depth++;
	ret = create_op(fn, commute, &real);
	if (ret == -ENOSPC) {
		/* More distinct functions than trampolines: the program gets its
		 * own function registered, and no more checkpoints. */
		session_unsupported("more than 256 distinct MPI_Op_create functions");
		ret = PMPI_Op_create(fn, commute, op);
	} else if (!ret) {
		v = cb_bind(VH_OP, real, cb_record(VH_OP, 0, false, (void *)fn, NULL, NULL, commute),
			 "MPI_Op_create");
		*op = v ? v : real;
	} else {
		ret = PMPI_Op_create(fn, commute, op);
	}
	stasis_depth--;
	return ret;
}


/* --- keyvals ------------------------------------------------------------------- */

/* What a keyval's trampolines need, in runtime memory (the record's aux). */
struct keyval_cb {
	void *copy, *del, *extra;
	int keyval; /* the program's (virtual) value */
};

static int comm_copy(MPI_Comm old, int keyval, void *extra, void *in, void *out, int *flag)
{
	struct keyval_cb *cb = extra;
	int ret = MPI_SUCCESS;

	(void)keyval;
	if (callbacks_silent || !cb->copy) {
		*flag = 0;
		return MPI_SUCCESS;
	}
	AS_PROGRAM(ret = ((MPI_Comm_copy_attr_function *)cb->copy)(
			   cb_as_virtual(VH_COMM, old), cb->keyval, cb->extra, in, out, flag));
	return ret;
}

static int comm_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
	struct keyval_cb *cb = extra;
	int ret = MPI_SUCCESS;

	(void)keyval;
	if (callbacks_silent || !cb->del)
		return MPI_SUCCESS;
	AS_PROGRAM(ret = ((MPI_Comm_delete_attr_function *)cb->del)(cb_as_virtual(VH_COMM, comm),
								    cb->keyval, val, cb->extra));
	return ret;
}

static int type_copy(MPI_Datatype old, int keyval, void *extra, void *in, void *out, int *flag)
{
	struct keyval_cb *cb = extra;
	int ret = MPI_SUCCESS;

	(void)keyval;
	if (callbacks_silent || !cb->copy) {
		*flag = 0;
		return MPI_SUCCESS;
	}
	AS_PROGRAM(ret = ((MPI_Type_copy_attr_function *)cb->copy)(
			   cb_as_virtual(VH_TYPE, old), cb->keyval, cb->extra, in, out, flag));
	return ret;
}

static int type_delete(MPI_Datatype type, int keyval, void *val, void *extra)
{
	struct keyval_cb *cb = extra;
	int ret = MPI_SUCCESS;

	(void)keyval;
	if (callbacks_silent || !cb->del)
		return MPI_SUCCESS;
	AS_PROGRAM(ret = ((MPI_Type_delete_attr_function *)cb->del)(cb_as_virtual(VH_TYPE, type),
								    cb->keyval, val, cb->extra));
	return ret;
}

static int win_copy(MPI_Win old, int keyval, void *extra, void *in, void *out, int *flag)
{
	struct keyval_cb *cb = extra;
	int ret = MPI_SUCCESS;

	(void)keyval;
	if (callbacks_silent || !cb->copy) {
		*flag = 0;
		return MPI_SUCCESS;
	}
	AS_PROGRAM(ret = ((MPI_Win_copy_attr_function *)cb->copy)(
		       cb_as_virtual(VH_WIN, old), cb->keyval, cb->extra, in, out, flag));
	return ret;
}

static int win_delete(MPI_Win win, int keyval, void *val, void *extra)
{
	struct keyval_cb *cb = extra;
	int ret = MPI_SUCCESS;

	(void)keyval;
	if (callbacks_silent || !cb->del)
		return MPI_SUCCESS;
	AS_PROGRAM(ret = ((MPI_Win_delete_attr_function *)cb->del)(cb_as_virtual(VH_WIN, win),
								   cb->keyval, val, cb->extra));
	return ret;
}

/* Register a C keyval with stasis's trampolines; cb is kept by the caller
 * for as long as the keyval lives. */
static int create_keyval(enum keyval_which which, struct keyval_cb *cb, int *real)
{
	int ret;

	switch (which) {
	case KEYVAL_COMM:
		ret = PMPI_Comm_create_keyval(comm_copy, comm_delete, real, cb);
		break;
	case KEYVAL_TYPE:
		ret = PMPI_Type_create_keyval(type_copy, type_delete, real, cb);
		break;
	default:
		ret = PMPI_Win_create_keyval(win_copy, win_delete, real, cb);
	}
	return ret == MPI_SUCCESS ? 0 : -EINVAL;
}

static int keyval_c(enum keyval_which which, void *copy, void *del, int *keyval, void *extra,
		    const char *call)
{
	struct keyval_cb *cb = malloc(sizeof(*cb));
	struct mpi_record *rec;
	int real, ret;
	void *v;

	if (!cb)
		return MPI_ERR_NO_MEM;
	*cb = (struct keyval_cb){copy, del, extra, 0};
	ret = create_keyval(which, cb, &real);
	if (ret) {
		free(cb);
		return MPI_ERR_OTHER;
	}
	rec = cb_record(VH_KEYVAL, which, false, copy, del, extra, 0);
	if (rec)
		rec->aux = cb;
	v = cb_bind(VH_KEYVAL, (void *)(intptr_t)real, rec, call);
	if (!v) {
		cb->keyval = *keyval = real; /* cb stays: MPI holds it */
		return MPI_SUCCESS;
	}
	cb->keyval = vh_keyval_value(v);
	*keyval = cb->keyval;
	return MPI_SUCCESS;
}

EXPORT int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *copy,
				  MPI_Comm_delete_attr_function *del, int *keyval, void *extra)
{
	int ret;

	stasis_depth++;
	ret = keyval_c(KEYVAL_COMM, (void *)copy, (void *)del, keyval, extra,
		       "MPI_Comm_create_keyval");
	stasis_depth--;
	return ret;
}

EXPORT int MPI_Type_create_keyval(MPI_Type_copy_attr_function *copy,
				  MPI_Type_delete_attr_function *del, int *keyval, void *extra)
{
	int ret;

	stasis_depth++;
	ret = keyval_c(KEYVAL_TYPE, (void *)copy, (void *)del, keyval, extra,
		       "MPI_Type_create_keyval");
	stasis_depth--;
	return ret;
}

EXPORT int MPI_Win_create_keyval(MPI_Win_copy_attr_function *copy,
				 MPI_Win_delete_attr_function *del, int *keyval, void *extra)
{
	int ret;

	stasis_depth++;
	ret = keyval_c(KEYVAL_WIN, (void *)copy, (void *)del, keyval, extra,
		       "MPI_Win_create_keyval");
	stasis_depth--;
	return ret;
}

/* MPI-1's name (calls.def): in C its functions are MPI_Comm_create_keyval's
 * under older type names, and it is recorded and made again as one. */
EXPORT int MPI_Keyval_create(MPI_Copy_function *copy, MPI_Delete_function *del, int *keyval,
			     void *extra)
{
	int ret;

	stasis_depth++;
	ret = keyval_c(KEYVAL_COMM, (void *)copy, (void *)del, keyval, extra, "MPI_Keyval_create");
	stasis_depth--;
	return ret;
}

/* --- error handlers --------------------------------------------------------------- */

static int create_errhandler(enum eh_which which, void *fn, MPI_Errhandler *real)
{
	int slot, ret;

	switch (which) {
	case EH_COMM:
		slot = cb_slot_of(eh_fns, MPI_ERRHANDLER_SLOTS, fn);
		if (slot < 0)
			return -ENOSPC;
		ret = PMPI_Comm_create_errhandler(mpi_errhandler_trampolines[slot], real);
		break;
	case EH_WIN: /* windows and files are not virtual: nothing to translate */
		ret = PMPI_Win_create_errhandler(fn, real);
		break;
	default:
		ret = PMPI_File_create_errhandler(fn, real);
	}
	return ret == MPI_SUCCESS ? 0 : -EINVAL;
}

static int errhandler_c(enum eh_which which, void *fn, MPI_Errhandler *eh, const char *call)
{
	MPI_Errhandler real;
	int ret = create_errhandler(which, fn, &real);
	void *v;

	if (ret == -ENOSPC) {
		session_unsupported("more than 64 distinct MPI_Comm_create_errhandler functions");
		return PMPI_Comm_create_errhandler(fn, eh);
	}
	if (ret)
		return MPI_ERR_OTHER;
	v = cb_bind(VH_ERRHANDLER, real, cb_record(VH_ERRHANDLER, which, false, fn, NULL, NULL, 0), call);
	*eh = v ? v : real;
	return MPI_SUCCESS;
}

EXPORT int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function *fn, MPI_Errhandler *eh)
{
	int ret;

	stasis_depth++;
	ret = errhandler_c(EH_COMM, (void *)fn, eh, "MPI_Comm_create_errhandler");
	stasis_depth--;
	return ret;
}

/* MPI-1's name (calls.def): a communicator's error handler. */
EXPORT int MPI_Errhandler_create(MPI_Handler_function *fn, MPI_Errhandler *eh)
{
	int ret;

	stasis_depth++;
	ret = errhandler_c(EH_COMM, (void *)fn, eh, "MPI_Errhandler_create");
	stasis_depth--;
	return ret;
}

EXPORT int MPI_Win_create_errhandler(MPI_Win_errhandler_function *fn, MPI_Errhandler *eh)
{
	int ret;

	stasis_depth++;
	ret = errhandler_c(EH_WIN, (void *)fn, eh, "MPI_Win_create_errhandler");
	stasis_depth--;
	return ret;
}

EXPORT int MPI_File_create_errhandler(MPI_File_errhandler_function *fn, MPI_Errhandler *eh)
{
	int ret;

	stasis_depth++;
	ret = errhandler_c(EH_FILE, (void *)fn, eh, "MPI_File_create_errhandler");
	stasis_depth--;
	return ret;
}

/* --- replay ------------------------------------------------------------------------ */

int callbacks_replay(struct mpi_record *rec, void **real)
{
	struct rec_reader r = recread_open(rec->data, rec->len);
	int which = rec->kind == VH_OP ? 0 : recread_int(&r), fortran = recread_int(&r),
	    commute = 0;
	void *fn = (void *)(uintptr_t)recread_u64(&r), *b = NULL, *c = NULL;
	int ret = 0, iout;

	if (rec->kind == VH_OP)
		commute = recread_int(&r);
	if (rec->kind == VH_KEYVAL) {
		b = (void *)(uintptr_t)recread_u64(&r);
		c = (void *)(uintptr_t)recread_u64(&r);
	}
	if (r.bad || which < 0 || which > 2 || fortran < 0 || fortran > FORTRAN_MPI1)
		return -EBADMSG;
	if (fortran)
		return callbacks_f_replay(rec, which, fortran, fn, b, c, commute, real);
	switch (rec->kind) {
	case VH_OP:
		ret = create_op(fn, commute, (MPI_Op *)real);
		break;
	case VH_KEYVAL: {
		struct keyval_cb *cb = malloc(sizeof(*cb));

		if (!cb)
			return -ENOMEM;
		*cb = (struct keyval_cb){fn, b, c, VH_FBASE + (int)rec->index};
		ret = create_keyval(which, cb, &iout);
		if (ret) {
			free(cb);
			break;
		}
		free(rec->aux);
		rec->aux = cb;
		*real = (void *)(intptr_t)iout;
		break;
	}
	case VH_ERRHANDLER:
		ret = create_errhandler(which, fn, (MPI_Errhandler *)real);
		break;
	default:
		return -EINVAL;
	}
	return ret;
}

enum keyval_which callbacks_keyval_which(const struct mpi_record *rec)
{
	struct rec_reader r = recread_open(rec->data, rec->len);
	int which = recread_int(&r);

	return r.bad ? KEYVAL_WIN : (enum keyval_which)which;
}

/* --- predefined attributes ------------------------------------------------------------ */

/* MPI_Comm_get_attr hands out a pointer to the value of a predefined
 * attribute, inside the runtime's heap: a program that keeps the pointer
 * would read freed memory after a restart. It gets one into stasis's own
 * data instead, at the same address in every run, filled the same. */
static const int predefined_keyvals[] = {MPI_TAG_UB,	  MPI_HOST,	   MPI_IO,
					 MPI_WTIME_IS_GLOBAL, MPI_APPNUM, MPI_LASTUSEDCODE,
					 MPI_UNIVERSE_SIZE};
#define NPREDEFINED (sizeof(predefined_keyvals) / sizeof(predefined_keyvals[0]))
static int predefined_values[NPREDEFINED];

static int predefined_slot(int keyval)
{
	for (size_t i = 0; i < NPREDEFINED; i++)
		if (predefined_keyvals[i] == keyval)
			return (int)i;
	return -1;
}

void callbacks_init(void)
{
	for (size_t i = 0; i < NPREDEFINED; i++) {
		int *p, flag = 0;

		if (PMPI_Comm_get_attr(MPI_COMM_WORLD, predefined_keyvals[i], &p, &flag) ==
			    MPI_SUCCESS &&
		    flag)
			predefined_values[i] = *p;
	}
}

EXPORT int MPI_Comm_get_attr(MPI_Comm comm, int keyval, void *value, int *flag)
{
	int ret, slot;

	stasis_depth++;
	ret = PMPI_Comm_get_attr(VH_REAL(VH_COMM, MPI_Comm, comm), vh_real_keyval(keyval), value,
				 flag);
	if (ret == MPI_SUCCESS && *flag && keyval < VH_FBASE &&
	    (slot = predefined_slot(keyval)) >= 0) {
		predefined_values[slot] = **(int **)value;
		*(int **)value = &predefined_values[slot];
	}
	stasis_depth--;
	return ret;
}
/* MPI-1's name for it (calls.def): the same pointer care. */
EXPORT int MPI_Attr_get(MPI_Comm comm, int keyval, void *value, int *flag)
{
	return MPI_Comm_get_attr(comm, keyval, value, flag);
}

