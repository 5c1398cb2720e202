#define LOG_PREFIX "callbacks: "
/* The program's Fortran functions that MPI calls back (mpif.h, use mpi and
 * mpi_f08, whose MPI_Op_create and keyval and error handler constructors
 * forward to mpif.h's): user ops, attribute copy and delete functions,
 * communicator error handlers. The objects are made through the Fortran
 * bindings, as the program asked, recorded, and made again through them
 * at a restart; but the bindings are given stasis's Fortran trampolines,
 * which hand the program's function its virtual INTEGER handles. Without
 * them a user op compared its datatype argument with its own derived type
 * and found it different, and a copy function was given a communicator
 * and keyval the program had never seen. */
#include <errno.h>
#include <stdint.h>

#include "session.h"
#include "callbacks.h"
#include "callbacks_int.h"
#include "log.h"
#include "export.h"

typedef void (*fortran_fn)();

static fortran_fn fortran_real(const char *name)
{
	return (fortran_fn)stasis_next_symbol(name);
}

/* A real INTEGER handle MPI passes to a callback, as the program knows it. */
static MPI_Fint virtual_f(enum vh_kind k, MPI_Fint real_f)
{
	void *v = vh_lookup_real(k, vh_real_f2c(k, real_f));

	return v ? vh_c2f(k, v) : real_f;
}

static void fortran_bind(enum vh_kind k, MPI_Fint *out, struct mpi_record *rec,
			 const char *call)
{
	void *real = k == VH_KEYVAL ? (void *)(intptr_t)*out : vh_real_f2c(k, *out);
	MPI_Fint real_f = *out;
	void *v = cb_bind(k, real, rec, call);
	struct vh_entry *e = vh_entry(k, v);

	if (!e)
		return;
	e->real_f = real_f;
	*out = k == VH_KEYVAL ? vh_keyval_value(v) : vh_c2f(k, v);
}

/* --- ops and communicator error handlers: one trampoline per function -------- */

static void *fop_fns[MPI_OP_SLOTS], *feh_fns[MPI_ERRHANDLER_SLOTS];

void mpi_fop_call(int slot, void *in, void *inout, MPI_Fint *len, MPI_Fint *type)
{
	MPI_Fint t = virtual_f(VH_TYPE, *type);

	AS_PROGRAM(((mpi_fortran_op_fn *)fop_fns[slot])(in, inout, len, &t));
}

void mpi_feh_call(int slot, MPI_Fint *comm, MPI_Fint *code)
{
	MPI_Fint c = virtual_f(VH_COMM, *comm);

	if (callbacks_silent)
		return;
	AS_PROGRAM(((mpi_fortran_eh_fn *)feh_fns[slot])(&c, code));
}

/* The trampoline for fn, or NULL when every slot is taken. */
static void *op_trampoline(void *fn)
{
	int slot = cb_slot_of(fop_fns, MPI_OP_SLOTS, fn);

	return slot < 0 ? NULL : (void *)mpi_fop_trampolines[slot];
}

static void *eh_trampoline(enum eh_which which, void *fn)
{
	int slot;

	if (which != EH_COMM) /* windows and files: as the C bindings do */
		return fn;
	slot = cb_slot_of(feh_fns, MPI_ERRHANDLER_SLOTS, fn);
	return slot < 0 ? NULL : (void *)mpi_feh_trampolines[slot];
}

EXPORT void mpi_op_create_(void *fn, MPI_Fint *commute, MPI_Fint *op, MPI_Fint *ierr)
{
	void *tramp;

	stasis_depth++;
	if (!(tramp = op_trampoline(fn))) {
		session_unsupported("more than 256 distinct MPI_OP_CREATE functions");
		fortran_real("mpi_op_create_")(fn, commute, op, ierr);
	} else {
		fortran_real("mpi_op_create_")(tramp, commute, op, ierr);
		if (*ierr == MPI_SUCCESS)
			fortran_bind(VH_OP, op, cb_record(VH_OP, 0, true, fn, NULL, NULL, *commute),
				     "MPI_OP_CREATE");
	}
	stasis_depth--;
}
FORTRAN_ALIASES(mpi_op_create, MPI_OP_CREATE)

static const char *const eh_fortran[] = {"mpi_comm_create_errhandler_",
					  "mpi_win_create_errhandler_",
					  "mpi_file_create_errhandler_"};

static void errhandler_f(enum eh_which which, void *fn, MPI_Fint *eh, MPI_Fint *ierr)
{
	void *tramp;

	stasis_depth++;
	if (!(tramp = eh_trampoline(which, fn))) {
		session_unsupported("more than 64 distinct MPI_COMM_CREATE_ERRHANDLER functions");
		fortran_real(eh_fortran[which])(fn, eh, ierr);
	} else {
		fortran_real(eh_fortran[which])(tramp, eh, ierr);
		if (*ierr == MPI_SUCCESS)
			fortran_bind(VH_ERRHANDLER, eh,
				     cb_record(VH_ERRHANDLER, which, true, fn, NULL, NULL, 0),
				     eh_fortran[which]);
	}
	stasis_depth--;
}

EXPORT void mpi_comm_create_errhandler_(void *fn, MPI_Fint *eh, MPI_Fint *ierr)
{
	errhandler_f(EH_COMM, fn, eh, ierr);
}
FORTRAN_ALIASES(mpi_comm_create_errhandler, MPI_COMM_CREATE_ERRHANDLER)

/* MPI_ERRHANDLER_CREATE: what MPI_COMM_CREATE_ERRHANDLER does, recorded
 * and made again as that. */
EXPORT void mpi_errhandler_create_(void *fn, MPI_Fint *eh, MPI_Fint *ierr)
{
	errhandler_f(EH_COMM, fn, eh, ierr);
}
FORTRAN_ALIASES(mpi_errhandler_create, MPI_ERRHANDLER_CREATE)

EXPORT void mpi_win_create_errhandler_(void *fn, MPI_Fint *eh, MPI_Fint *ierr)
{
	errhandler_f(EH_WIN, fn, eh, ierr);
}
FORTRAN_ALIASES(mpi_win_create_errhandler, MPI_WIN_CREATE_ERRHANDLER)

EXPORT void mpi_file_create_errhandler_(void *fn, MPI_Fint *eh, MPI_Fint *ierr)
{
	errhandler_f(EH_FILE, fn, eh, ierr);
}
FORTRAN_ALIASES(mpi_file_create_errhandler, MPI_FILE_CREATE_ERRHANDLER)

/* --- keyvals: the extra state MPI keeps is the index of the program's ------- */

/* The program's copy and delete functions and extra state of one Fortran
 * keyval, and the keyval as the program knows it. MPI is given the index
 * (MPI_KEYVAL_CREATE's extra state is an INTEGER: no room for a pointer).
 * Entries are never reused: MPI may call a freed keyval's functions for
 * as long as attributes of it live. */
struct fkeyval {
	void *copy, *del;
	MPI_Aint extra;
	int keyval;
	enum keyval_which which;
};
#define FKEYVALS 1024
static struct fkeyval fkeyvals[FKEYVALS];
static int nfkeyvals;

static int fkeyval_new(enum keyval_which which, void *copy, void *del, MPI_Aint extra)
{
	int i = -1;

	vh_lock();
	if (nfkeyvals < FKEYVALS) {
		i = nfkeyvals++;
		fkeyvals[i] = (struct fkeyval){copy, del, extra, 0, which};
	}
	vh_unlock();
	return i;
}

static struct fkeyval *fkeyval_at(MPI_Aint i)
{
	return i >= 0 && i < nfkeyvals ? &fkeyvals[i] : NULL;
}

static const enum vh_kind keyval_object[] = {VH_COMM, VH_TYPE, VH_WIN};

typedef void copy2_fn(MPI_Fint *, MPI_Fint *, MPI_Aint *, MPI_Aint *, MPI_Aint *, MPI_Fint *,
		      MPI_Fint *);
typedef void delete2_fn(MPI_Fint *, MPI_Fint *, MPI_Aint *, MPI_Aint *, MPI_Fint *);
typedef void copy1_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
		      MPI_Fint *);
typedef void delete1_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);

/* MPI_{COMM,TYPE,WIN}_CREATE_KEYVAL's functions. During a replay nothing
 * is copied (snapshot.c puts attribute values back) and nothing said. */
static void f_copy(MPI_Fint *old, MPI_Fint *keyval, MPI_Aint *extra, MPI_Aint *in,
		   MPI_Aint *out, MPI_Fint *flag, MPI_Fint *ierr)
{
	struct fkeyval *k = fkeyval_at(*extra);
	MPI_Fint h, kv;

	(void)keyval;
	*ierr = MPI_SUCCESS;
	if (!k || callbacks_silent || !k->copy) {
		*flag = 0;
		return;
	}
	h = virtual_f(keyval_object[k->which], *old), kv = k->keyval;
	AS_PROGRAM(((copy2_fn *)k->copy)(&h, &kv, &k->extra, in, out, flag, ierr));
}

static void f_delete(MPI_Fint *obj, MPI_Fint *keyval, MPI_Aint *val, MPI_Aint *extra,
		     MPI_Fint *ierr)
{
	struct fkeyval *k = fkeyval_at(*extra);
	MPI_Fint h, kv;

	(void)keyval;
	*ierr = MPI_SUCCESS;
	if (!k || callbacks_silent || !k->del)
		return;
	h = virtual_f(keyval_object[k->which], *obj), kv = k->keyval;
	AS_PROGRAM(((delete2_fn *)k->del)(&h, &kv, val, &k->extra, ierr));
}

/* MPI_KEYVAL_CREATE's: INTEGER extra state and attribute values. */
static void f1_copy(MPI_Fint *old, MPI_Fint *keyval, MPI_Fint *extra, MPI_Fint *in,
		    MPI_Fint *out, MPI_Fint *flag, MPI_Fint *ierr)
{
	struct fkeyval *k = fkeyval_at(*extra);
	MPI_Fint h, kv, ex;

	(void)keyval;
	*ierr = MPI_SUCCESS;
	if (!k || callbacks_silent || !k->copy) {
		*flag = 0;
		return;
	}
	h = virtual_f(VH_COMM, *old), kv = k->keyval, ex = (MPI_Fint)k->extra;
	AS_PROGRAM(((copy1_fn *)k->copy)(&h, &kv, &ex, in, out, flag, ierr));
	k->extra = ex;
}

static void f1_delete(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *val, MPI_Fint *extra,
		      MPI_Fint *ierr)
{
	struct fkeyval *k = fkeyval_at(*extra);
	MPI_Fint h, kv, ex;

	(void)keyval;
	*ierr = MPI_SUCCESS;
	if (!k || callbacks_silent || !k->del)
		return;
	h = virtual_f(VH_COMM, *comm), kv = k->keyval, ex = (MPI_Fint)k->extra;
	AS_PROGRAM(((delete1_fn *)k->del)(&h, &kv, val, &ex, ierr));
	k->extra = ex;
}

static const char *const keyval_fortran[] = {"mpi_comm_create_keyval_",
					      "mpi_type_create_keyval_",
					      "mpi_win_create_keyval_"};

/* Make the keyval through the bindings with the trampolines; the program's
 * keyval value is set in the entry by the caller. -ENOSPC when the table
 * is full (the caller passes the program's functions on). */
static int make_keyval(enum keyval_which which, bool mpi1, void *copy, void *del,
		       MPI_Aint extra, MPI_Fint *out, int *index, MPI_Fint *ierr)
{
	int i = fkeyval_new(which, copy, del, extra);

	*index = i;
	if (i < 0)
		return -ENOSPC;
	if (mpi1) {
		MPI_Fint ex = i;

		fortran_real("mpi_keyval_create_")(f1_copy, f1_delete, out, &ex, ierr);
	} else {
		MPI_Aint ex = i;

		fortran_real(keyval_fortran[which])(f_copy, f_delete, out, &ex, ierr);
	}
	return 0;
}

static void keyval_f(enum keyval_which which, bool mpi1, void *copy, void *del,
		     MPI_Fint *keyval, MPI_Aint extra, void *pass_extra, MPI_Fint *ierr)
{
	const char *name = mpi1 ? "mpi_keyval_create_" : keyval_fortran[which];
	int i;

	stasis_depth++;
	if (make_keyval(which, mpi1, copy, del, extra, keyval, &i, ierr)) {
		session_unsupported("more than 1024 Fortran keyvals");
		fortran_real(name)(copy, del, keyval, pass_extra, ierr);
	} else if (*ierr == MPI_SUCCESS) {
		fortran_bind(VH_KEYVAL, keyval,
			     cb_record(VH_KEYVAL, which, mpi1 ? FORTRAN_MPI1 : 1, copy, del,
				       (void *)(intptr_t)extra, 0),
			     name);
		fkeyvals[i].keyval = *keyval;
	}
	stasis_depth--;
}

EXPORT void mpi_comm_create_keyval_(void *copy, void *del, MPI_Fint *keyval, MPI_Aint *extra,
				    MPI_Fint *ierr)
{
	keyval_f(KEYVAL_COMM, false, copy, del, keyval, *extra, extra, ierr);
}
FORTRAN_ALIASES(mpi_comm_create_keyval, MPI_COMM_CREATE_KEYVAL)

EXPORT void mpi_type_create_keyval_(void *copy, void *del, MPI_Fint *keyval, MPI_Aint *extra,
				    MPI_Fint *ierr)
{
	keyval_f(KEYVAL_TYPE, false, copy, del, keyval, *extra, extra, ierr);
}
FORTRAN_ALIASES(mpi_type_create_keyval, MPI_TYPE_CREATE_KEYVAL)

EXPORT void mpi_win_create_keyval_(void *copy, void *del, MPI_Fint *keyval, MPI_Aint *extra,
				   MPI_Fint *ierr)
{
	keyval_f(KEYVAL_WIN, false, copy, del, keyval, *extra, extra, ierr);
}
FORTRAN_ALIASES(mpi_win_create_keyval, MPI_WIN_CREATE_KEYVAL)

/* MPI_KEYVAL_CREATE: MPI-1's Fortran callbacks take INTEGER attribute
 * values and extra state where MPI_COMM_CREATE_KEYVAL's take address-sized
 * ones: recorded as such (FORTRAN_MPI1) and made again through
 * MPI_KEYVAL_CREATE. The values of attributes are snapshot.c's. */
EXPORT void mpi_keyval_create_(void *copy, void *del, MPI_Fint *keyval, MPI_Fint *extra,
			       MPI_Fint *ierr)
{
	keyval_f(KEYVAL_COMM, true, copy, del, keyval, *extra, extra, ierr);
}
FORTRAN_ALIASES(mpi_keyval_create, MPI_KEYVAL_CREATE)

/* --- replay ------------------------------------------------------------------ */

int callbacks_f_replay(struct mpi_record *rec, int which, int fortran, void *fn, void *b, void *c,
		       int commute, void **real)
{
	MPI_Fint out = 0, ierr = MPI_SUCCESS, fc = commute;
	void *tramp;
	int i;

	switch (rec->kind) {
	case VH_OP:
		if (!(tramp = op_trampoline(fn)))
			return -ENOSPC;
		fortran_real("mpi_op_create_")(tramp, &fc, &out, &ierr);
		*real = PMPI_Op_f2c(out);
		break;
	case VH_KEYVAL:
		if (make_keyval(which, fortran == FORTRAN_MPI1, fn, b, (MPI_Aint)(intptr_t)c,
				&out, &i, &ierr))
			return -ENOSPC;
		fkeyvals[i].keyval = VH_FBASE + (int)rec->index;
		*real = (void *)(intptr_t)out;
		break;
	case VH_ERRHANDLER:
		if (!(tramp = eh_trampoline(which, fn)))
			return -ENOSPC;
		fortran_real(eh_fortran[which])(tramp, &out, &ierr);
		*real = PMPI_Errhandler_f2c(out);
		break;
	default:
		return -EINVAL;
	}
	return ierr == MPI_SUCCESS ? 0 : -EINVAL;
}
