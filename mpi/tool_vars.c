/* The tool interface's objects (tool.h): enumerations, control-variable
 * handles, performance-variable sessions and handles. Each is the address
 * of an object of the MPI library, gone after a restart, so the program
 * gets a virtual handle (VH_TOOL) and stasis keeps how to make the object
 * again: the variable's name (indices are the library's business), the
 * object it is bound to, the last value the program wrote to a control
 * variable and whether it started a performance variable. */
#include <errno.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "handles.h"
#include "runtime.h"
#include "session.h"
#include "tool_vars.h"

enum tool_type { TOOL_ENUM, TOOL_CVAR, TOOL_SESSION, TOOL_PVAR };

#define TOOL_NAME 256

struct tool_obj {
	enum tool_type type;
	char name[TOOL_NAME]; /* the variable's (an enum: the one it came from) */
	int pvar;	      /* an enum: of a performance variable */
	int var_class;	      /* performance variables */
	int bind;	      /* MPI_T_BIND_* */
	void *object;	      /* the program's handle of the bound object */
	void *session;	      /* a performance variable's (virtual) */
	int started;	      /* started by the program, not stopped since */
	uint64_t seq;	      /* a control variable's last write (0: none) */
	int nbytes;	      /* and the value it wrote */
	unsigned char *value;
};

static uint64_t write_seq; /* orders the writes of every control variable */

static struct tool_obj *obj_at(uint32_t index)
{
	struct vh_entry *e = vh_entry_at(VH_TOOL, index);

	return e ? e->aux : NULL;
}

static struct tool_obj *obj_of(const void *v, enum tool_type type)
{
	struct tool_obj *o = vh_is_virtual(VH_TOOL, v) ? obj_at(vh_index(VH_TOOL, v)) : NULL;

	return o && o->type == type ? o : NULL;
}

/* Calls fn(virtual handle, object, arg) for every live object, through
 * vh_walk (fn may drop the one it is given); stops at a nonzero return. */
typedef int each_fn(void *v, struct tool_obj *o, void *arg);

struct each {
	each_fn *fn;
	void *arg;
};

static int each_one(enum vh_kind k, uint32_t index, struct vh_entry *e, void *arg)
{
	struct each *w = arg;

	/* An entry minted a moment ago may not have its object yet. */
	return e->aux ? w->fn(vh_value(k, index), e->aux, w->arg) : 0;
}

static int each_obj(each_fn *fn, void *arg)
{
	struct each w = {fn, arg};

	return vh_walk(VH_TOOL, each_one, &w);
}

/* A new object's virtual handle; real on failure, checkpoints off. */
static void *adopt(void *real, struct tool_obj *o, const char *call)
{
	void *v = o ? vh_mint(VH_TOOL, real, 0, NULL) : NULL;
	struct vh_entry *e;

	if (!v) {
		free(o);
		session_unsupported(call);
		return real;
	}
	e = vh_entry(VH_TOOL, v);
	e->aux = o;
	return v;
}

static void drop(void *v)
{
	struct tool_obj *o = obj_at(vh_index(VH_TOOL, v));

	if (o)
		free(o->value);
	free(o);
	vh_release(VH_TOOL, v);
}

/* The kind of virtual handle an object bound by bind is; -1: none
 * stasis makes again (MPI_Message, handled by MPI alone). */
static int bind_kind(int bind)
{
	switch (bind) {
	case MPI_T_BIND_MPI_COMM: return VH_COMM;
	case MPI_T_BIND_MPI_DATATYPE: return VH_TYPE;
	case MPI_T_BIND_MPI_ERRHANDLER: return VH_ERRHANDLER;
	case MPI_T_BIND_MPI_FILE: return VH_FILE;
	case MPI_T_BIND_MPI_GROUP: return VH_GROUP;
	case MPI_T_BIND_MPI_OP: return VH_OP;
	case MPI_T_BIND_MPI_REQUEST: return VH_REQUEST;
	case MPI_T_BIND_MPI_WIN: return VH_WIN;
	case MPI_T_BIND_MPI_INFO: return VH_INFO;
	default: return -1;
	}
}

/* Where the real handle of the bound object is (in *slot), for MPI. */
static void *bound_real(int bind, void *object, void **slot)
{
	int k = bind_kind(bind);

	if (bind == MPI_T_BIND_NO_OBJECT)
		return NULL;
	*slot = k < 0 ? object : vh_real((enum vh_kind)k, object);
	return slot;
}

/* --- enumerations --------------------------------------------------------- */

/* The program's handle for an enumeration MPI gave about a variable. */
static void adopt_enum(MPI_T_enum *e, int pvar, int index, const char *call)
{
	int len = TOOL_NAME, verb, cls = 0, bind, ro, cont, atomic, scope;
	MPI_Datatype dt;
	MPI_T_enum real = *e;
	struct tool_obj *o;
	void *v;

	if (real == MPI_T_ENUM_NULL)
		return;
	v = vh_lookup_real(VH_TOOL, real);
	if (v) {
		*e = v;
		return;
	}
	o = calloc(1, sizeof(*o));
	if (o) {
		o->type = TOOL_ENUM;
		o->pvar = pvar;
		if (pvar)
			PMPI_T_pvar_get_info(index, o->name, &len, &verb, &cls, &dt, &real, NULL,
					     NULL, &bind, &ro, &cont, &atomic);
		else
			PMPI_T_cvar_get_info(index, o->name, &len, &verb, &dt, &real, NULL, NULL,
					     &bind, &scope);
		o->var_class = cls;
	}
	*e = adopt(real, o, call);
}

EXPORT int MPI_T_cvar_get_info(int index, char *name, int *name_len, int *verbosity,
			       MPI_Datatype *datatype, MPI_T_enum *enumtype, char *desc,
			       int *desc_len, int *bind, int *scope)
{
	int ret;

	stasis_depth++;
	ret = PMPI_T_cvar_get_info(index, name, name_len, verbosity, datatype, enumtype, desc,
				   desc_len, bind, scope);
	if (ret == MPI_SUCCESS && enumtype)
		adopt_enum(enumtype, 0, index, "MPI_T_cvar_get_info");
	stasis_depth--;
	return ret;
}

EXPORT int MPI_T_pvar_get_info(int index, char *name, int *name_len, int *verbosity,
			       int *var_class, MPI_Datatype *datatype, MPI_T_enum *enumtype,
			       char *desc, int *desc_len, int *bind, int *readonly,
			       int *continuous, int *atomic)
{
	int ret;

	stasis_depth++;
	ret = PMPI_T_pvar_get_info(index, name, name_len, verbosity, var_class, datatype,
				   enumtype, desc, desc_len, bind, readonly, continuous, atomic);
	if (ret == MPI_SUCCESS && enumtype)
		adopt_enum(enumtype, 1, index, "MPI_T_pvar_get_info");
	stasis_depth--;
	return ret;
}

EXPORT int MPI_T_enum_get_info(MPI_T_enum e, int *num, char *name, int *name_len)
{
	int ret;

	stasis_depth++;
	ret = PMPI_T_enum_get_info(VH_REAL(VH_TOOL, MPI_T_enum, e), num, name, name_len);
	stasis_depth--;
	return ret;
}

EXPORT int MPI_T_enum_get_item(MPI_T_enum e, int index, int *value, char *name, int *name_len)
{
	int ret;

	stasis_depth++;
	ret = PMPI_T_enum_get_item(VH_REAL(VH_TOOL, MPI_T_enum, e), index, value, name,
				   name_len);
	stasis_depth--;
	return ret;
}

/* --- control variables ---------------------------------------------------- */

EXPORT int MPI_T_cvar_handle_alloc(int index, void *obj_handle, MPI_T_cvar_handle *handle,
				   int *count)
{
	int len = TOOL_NAME, verb, bind = MPI_T_BIND_NO_OBJECT, scope, size = 0, ret;
	MPI_Datatype dt = MPI_DATATYPE_NULL;
	MPI_T_enum en;
	struct tool_obj *o = calloc(1, sizeof(*o));
	void *slot, *object = NULL;

	stasis_depth++;
	if (PMPI_T_cvar_get_info(index, o ? o->name : NULL, &len, &verb, &dt, &en, NULL, NULL,
				 &bind, &scope) == MPI_SUCCESS && bind != MPI_T_BIND_NO_OBJECT &&
	    obj_handle)
		object = *(void **)obj_handle;
	ret = PMPI_T_cvar_handle_alloc(index, bound_real(bind, object, &slot), handle, count);
	if (ret == MPI_SUCCESS) {
		if (bind != MPI_T_BIND_NO_OBJECT && bind_kind(bind) < 0)
			session_unsupported("MPI_T_cvar_handle_alloc (a variable bound to a message)");
		if (o) {
			o->type = TOOL_CVAR;
			o->bind = bind;
			o->object = object;
			if (PMPI_Type_size(dt, &size) == MPI_SUCCESS)
				o->nbytes = size * *count;
		}
		*handle = adopt(*handle, o, "MPI_T_cvar_handle_alloc");
	} else {
		free(o);
	}
	stasis_depth--;
	return ret;
}

EXPORT int MPI_T_cvar_handle_free(MPI_T_cvar_handle *handle)
{
	MPI_T_cvar_handle v = *handle, real = VH_REAL(VH_TOOL, MPI_T_cvar_handle, v);
	int ret;

	stasis_depth++;
	ret = PMPI_T_cvar_handle_free(&real);
	if (ret == MPI_SUCCESS) {
		if (obj_of(v, TOOL_CVAR))
			drop(v);
		*handle = MPI_T_CVAR_HANDLE_NULL;
	}
	stasis_depth--;
	return ret;
}

EXPORT int MPI_T_cvar_read(MPI_T_cvar_handle handle, void *buf)
{
	int ret;

	stasis_depth++;
	ret = PMPI_T_cvar_read(VH_REAL(VH_TOOL, MPI_T_cvar_handle, handle), buf);
	stasis_depth--;
	return ret;
}

EXPORT int MPI_T_cvar_write(MPI_T_cvar_handle handle, const void *buf)
{
	struct tool_obj *o = obj_of(handle, TOOL_CVAR);
	MPI_T_cvar_handle real = VH_REAL(VH_TOOL, MPI_T_cvar_handle, handle);
	int ret;

	stasis_depth++;
	ret = PMPI_T_cvar_write(real, buf);
	if (ret == MPI_SUCCESS && o) {
		if (o->nbytes > 0 && !o->value)
			o->value = malloc((size_t)o->nbytes);
		if (o->value) {
			memcpy(o->value, buf, (size_t)o->nbytes);
			o->seq = __atomic_add_fetch(&write_seq, 1, __ATOMIC_SEQ_CST);
		} else {
			session_unsupported("MPI_T_cvar_write (its value could not be kept)");
		}
	}
	stasis_depth--;
	return ret;
}

/* --- performance variables ------------------------------------------------ */

EXPORT int MPI_T_pvar_session_create(MPI_T_pvar_session *session)
{
	struct tool_obj *o = calloc(1, sizeof(*o));
	int ret;

	stasis_depth++;
	ret = PMPI_T_pvar_session_create(session);
	if (ret == MPI_SUCCESS) {
		if (o)
			o->type = TOOL_SESSION;
		*session = adopt(*session, o, "MPI_T_pvar_session_create");
	} else {
		free(o);
	}
	stasis_depth--;
	return ret;
}

static int drop_in_session(void *v, struct tool_obj *o, void *session)
{
	if (o->type == TOOL_PVAR && o->session == session)
		drop(v);
	return 0;
}

EXPORT int MPI_T_pvar_session_free(MPI_T_pvar_session *session)
{
	MPI_T_pvar_session v = *session, real = VH_REAL(VH_TOOL, MPI_T_pvar_session, v);
	int ret;

	stasis_depth++;
	ret = PMPI_T_pvar_session_free(&real);
	if (ret == MPI_SUCCESS) {
		/* Its handles went with it. */
		each_obj(drop_in_session, v);
		if (obj_of(v, TOOL_SESSION))
			drop(v);
		*session = MPI_T_PVAR_SESSION_NULL;
	}
	stasis_depth--;
	return ret;
}

EXPORT int MPI_T_pvar_handle_alloc(MPI_T_pvar_session session, int index, void *obj_handle,
				   MPI_T_pvar_handle *handle, int *count)
{
	int len = TOOL_NAME, verb, cls = 0, bind = MPI_T_BIND_NO_OBJECT, ro, cont = 0, atomic, ret;
	MPI_Datatype dt;
	MPI_T_enum en;
	struct tool_obj *o = calloc(1, sizeof(*o));
	void *slot, *object = NULL;

	stasis_depth++;
	if (PMPI_T_pvar_get_info(index, o ? o->name : NULL, &len, &verb, &cls, &dt, &en, NULL,
				 NULL, &bind, &ro, &cont, &atomic) == MPI_SUCCESS &&
	    bind != MPI_T_BIND_NO_OBJECT && obj_handle)
		object = *(void **)obj_handle;
	ret = PMPI_T_pvar_handle_alloc(VH_REAL(VH_TOOL, MPI_T_pvar_session, session), index,
				       bound_real(bind, object, &slot), handle, count);
	if (ret == MPI_SUCCESS) {
		if (bind != MPI_T_BIND_NO_OBJECT && bind_kind(bind) < 0)
			session_unsupported("MPI_T_pvar_handle_alloc (a variable bound to a message)");
		if (o) {
			o->type = TOOL_PVAR;
			o->var_class = cls;
			o->bind = bind;
			o->object = object;
			o->session = session;
			o->started = cont ? -1 : 0; /* -1: started by MPI, always */
		}
		*handle = adopt(*handle, o, "MPI_T_pvar_handle_alloc");
	} else {
		free(o);
	}
	stasis_depth--;
	return ret;
}

EXPORT int MPI_T_pvar_handle_free(MPI_T_pvar_session session, MPI_T_pvar_handle *handle)
{
	MPI_T_pvar_handle v = *handle, real = VH_REAL(VH_TOOL, MPI_T_pvar_handle, v);
	int ret;

	stasis_depth++;
	ret = PMPI_T_pvar_handle_free(VH_REAL(VH_TOOL, MPI_T_pvar_session, session), &real);
	if (ret == MPI_SUCCESS) {
		if (obj_of(v, TOOL_PVAR))
			drop(v);
		*handle = MPI_T_PVAR_HANDLE_NULL;
	}
	stasis_depth--;
	return ret;
}

struct started {
	MPI_T_pvar_session session;
	MPI_T_pvar_handle handle; /* or MPI_T_PVAR_ALL_HANDLES */
	int on;
};

static int note_started(void *v, struct tool_obj *o, void *arg)
{
	struct started *s = arg;

	if (o->type == TOOL_PVAR && o->started >= 0 &&
	    (s->handle == MPI_T_PVAR_ALL_HANDLES ? o->session == s->session : v == s->handle))
		o->started = s->on;
	return 0;
}

/* Start (on 1) or stop (0) handle, or every handle of session
 * (MPI_T_PVAR_ALL_HANDLES), as the program did: noted for a restart. */
static int start_stop(MPI_T_pvar_session session, MPI_T_pvar_handle handle, int on)
{
	MPI_T_pvar_session s = VH_REAL(VH_TOOL, MPI_T_pvar_session, session);
	MPI_T_pvar_handle h = VH_REAL(VH_TOOL, MPI_T_pvar_handle, handle);
	struct started note = {session, handle, on};
	int ret;

	stasis_depth++;
	ret = on ? PMPI_T_pvar_start(s, h) : PMPI_T_pvar_stop(s, h);
	if (ret == MPI_SUCCESS)
		each_obj(note_started, &note);
	stasis_depth--;
	return ret;
}

EXPORT int MPI_T_pvar_start(MPI_T_pvar_session session, MPI_T_pvar_handle handle)
{
	return start_stop(session, handle, 1);
}

EXPORT int MPI_T_pvar_stop(MPI_T_pvar_session session, MPI_T_pvar_handle handle)
{
	return start_stop(session, handle, 0);
}

#define PVAR_CALL(call, ...)                                                                \
	int ret;                                                                            \
	stasis_depth++;                                                                     \
	ret = call(VH_REAL(VH_TOOL, MPI_T_pvar_session, session),                           \
		   VH_REAL(VH_TOOL, MPI_T_pvar_handle, handle), ##__VA_ARGS__);             \
	stasis_depth--;                                                                     \
	return ret

EXPORT int MPI_T_pvar_read(MPI_T_pvar_session session, MPI_T_pvar_handle handle, void *buf)
{
	PVAR_CALL(PMPI_T_pvar_read, buf);
}

EXPORT int MPI_T_pvar_write(MPI_T_pvar_session session, MPI_T_pvar_handle handle,
			    const void *buf)
{
	PVAR_CALL(PMPI_T_pvar_write, buf);
}

EXPORT int MPI_T_pvar_reset(MPI_T_pvar_session session, MPI_T_pvar_handle handle)
{
	PVAR_CALL(PMPI_T_pvar_reset);
}

EXPORT int MPI_T_pvar_readreset(MPI_T_pvar_session session, MPI_T_pvar_handle handle,
				void *buf)
{
	PVAR_CALL(PMPI_T_pvar_readreset, buf);
}

/* --- checkpoint and restart ----------------------------------------------- */

static int drop_any(void *v, struct tool_obj *o, void *arg)
{
	(void)o, (void)arg;
	drop(v);
	return 0;
}

void tool_vars_forget(void)
{
	each_obj(drop_any, NULL);
}

/* The real object freed (sessions take their handles with them), then
 * the virtual handle. */
static int free_real(void *v, struct tool_obj *o, void *arg)
{
	void *real = vh_real(VH_TOOL, v);

	(void)arg;
	if (o->type == TOOL_CVAR)
		PMPI_T_cvar_handle_free((MPI_T_cvar_handle *)&real);
	else if (o->type == TOOL_SESSION)
		PMPI_T_pvar_session_free((MPI_T_pvar_session *)&real);
	drop(v);
	return 0;
}

void tool_vars_discard(void)
{
	each_obj(free_real, NULL);
}

static int count_one(void *v, struct tool_obj *o, void *n)
{
	(void)v, (void)o;
	++*(int *)n;
	return 0;
}

static int save_one(void *v, struct tool_obj *o, void *arg)
{
	struct rec_builder *b = arg;

	recbuf_int(b, (int)vh_index(VH_TOOL, v));
	recbuf_int(b, o->type);
	recbuf_str(b, o->name);
	recbuf_int(b, o->pvar);
	recbuf_int(b, o->var_class);
	recbuf_int(b, o->bind);
	recbuf_u64(b, (uintptr_t)o->object);
	recbuf_u64(b, (uintptr_t)o->session);
	recbuf_int(b, o->started);
	recbuf_u64(b, o->seq);
	recbuf_int(b, o->value ? o->nbytes : 0);
	if (o->value)
		recbuf_put(b, o->value, (size_t)o->nbytes);
	return 0;
}

void tool_vars_save(struct rec_builder *b)
{
	int n = 0;

	each_obj(count_one, &n);
	recbuf_int(b, n);
	each_obj(save_one, b);
}

/* One object read back from the image, its index, and whether the
 * table has it now (bound) or it is still this module's to free. */
struct saved {
	uint32_t index;
	bool bound;
	struct tool_obj *o;
};

/* Read at the MPI section's turn, made once every object they may be
 * bound to is (tool_vars_apply). */
static struct saved *pending;
static int npending;

static int read_saved(struct rec_reader *r, struct saved *s)
{
	struct tool_obj *o = calloc(1, sizeof(*o));
	const char *name;
	int nbytes;

	s->o = o;
	if (!o)
		return -ENOMEM;
	s->index = (uint32_t)recread_int(r);
	o->type = recread_int(r);
	name = recread_str(r);
	snprintf(o->name, sizeof(o->name), "%s", name ? name : "");
	o->pvar = recread_int(r);
	o->var_class = recread_int(r);
	o->bind = recread_int(r);
	o->object = (void *)(uintptr_t)recread_u64(r);
	o->session = (void *)(uintptr_t)recread_u64(r);
	o->started = recread_int(r);
	o->seq = recread_u64(r);
	nbytes = recread_int(r);
	if (r->bad || !name || o->type < TOOL_ENUM || o->type > TOOL_PVAR ||
	    s->index >= VH_MAX_INDEX || nbytes < 0 || nbytes > (1 << 20))
		return -EBADMSG;
	if (nbytes) {
		o->value = malloc((size_t)nbytes);
		if (!o->value)
			return -ENOMEM;
		o->nbytes = nbytes;
		recread_get(r, o->value, (size_t)nbytes);
	}
	return r->bad ? -EBADMSG : 0;
}

static void pending_done(void)
{
	for (int i = 0; i < npending; i++)
		if (!pending[i].bound && pending[i].o) {
			free(pending[i].o->value);
			free(pending[i].o);
		}
	free(pending);
	pending = NULL;
	npending = 0;
}

int tool_vars_read(struct rec_reader *r, struct why *why)
{
	int n = recread_int(r), ret = 0;

	pending_done();
	pending = r->bad || n < 0 || n > (int)VH_MAX_INDEX ? NULL
							  : calloc((size_t)n + 1, sizeof(*pending));
	if (!pending)
		return why_set(why, -EBADMSG, "the MPI state in the image is damaged");
	npending = n;
	for (int i = 0; i < n && !ret; i++)
		ret = read_saved(r, &pending[i]);
	if (ret) {
		pending_done();
		return why_set(why, ret, "the MPI tool interface's state in the image is damaged");
	}
	return 0;
}

/* The MPI object behind o, made again: its real handle in *real. */
static int make(struct tool_obj *o, void **real)
{
	int index, count, len = 0, verb, cls, bind, ro, cont, atomic, scope;
	MPI_Datatype dt;
	void *slot;

	switch (o->type) {
	case TOOL_ENUM:
		if (o->pvar)
			return PMPI_T_pvar_get_index(o->name, o->var_class, &index) ||
			       PMPI_T_pvar_get_info(index, NULL, &len, &verb, &cls, &dt,
						    (MPI_T_enum *)real, NULL, &len, &bind, &ro,
						    &cont, &atomic);
		return PMPI_T_cvar_get_index(o->name, &index) ||
		       PMPI_T_cvar_get_info(index, NULL, &len, &verb, &dt, (MPI_T_enum *)real,
					    NULL, &len, &bind, &scope);
	case TOOL_CVAR:
		return PMPI_T_cvar_get_index(o->name, &index) ||
		       PMPI_T_cvar_handle_alloc(index, bound_real(o->bind, o->object, &slot),
						(MPI_T_cvar_handle *)real, &count);
	case TOOL_SESSION:
		return PMPI_T_pvar_session_create((MPI_T_pvar_session *)real);
	default:
		return PMPI_T_pvar_get_index(o->name, o->var_class, &index) ||
		       PMPI_T_pvar_handle_alloc(VH_REAL(VH_TOOL, MPI_T_pvar_session, o->session),
						index, bound_real(o->bind, o->object, &slot),
						(MPI_T_pvar_handle *)real, &count) ||
		       (o->started == 1 &&
			PMPI_T_pvar_start(VH_REAL(VH_TOOL, MPI_T_pvar_session, o->session), *real));
	}
}

static int by_seq(const void *a, const void *b)
{
	const struct saved *x = a, *y = b;

	return (x->o->seq > y->o->seq) - (x->o->seq < y->o->seq);
}

static const char *const what[] = {"an enumeration of", "a handle of control variable",
				   "a session for", "a handle of performance variable"};

int tool_vars_apply(struct why *why)
{
	struct saved *s = pending;
	int ret = 0;
	void *real;

	/* Sessions before the handles in them, whatever their indices. */
	for (int type = TOOL_ENUM; type <= TOOL_PVAR && !ret; type++) {
		for (int i = 0; i < npending && !ret; i++) {
			if (s[i].o->type != (enum tool_type)type)
				continue;
			real = NULL;
			if (make(s[i].o, &real) != MPI_SUCCESS)
				ret = why_set(why, -EIO, "MPI_T: %s %s failed when made again",
					      what[type], s[i].o->name);
			else if (vh_bind(VH_TOOL, s[i].index, real, 0, NULL))
				ret = why_set(why, -EEXIST, "MPI_T: two objects at one handle");
			else
				s[i].bound = true;
			if (s[i].bound)
				vh_entry_at(VH_TOOL, s[i].index)->aux = s[i].o;
		}
	}
	/* The program's writes to control variables, in the order it made them. */
	if (npending)
		qsort(s, (size_t)npending, sizeof(*s), by_seq);
	for (int i = 0; i < npending && !ret; i++) {
		struct tool_obj *o = s[i].o;

		if (o->type == TOOL_CVAR && o->seq && o->value &&
		    PMPI_T_cvar_write(vh_real(VH_TOOL, vh_value(VH_TOOL, s[i].index)), o->value))
			ret = why_set(why, -EIO, "MPI_T_cvar_write of %s failed when made again",
				      o->name);
		if (o->seq > write_seq)
			write_seq = o->seq;
	}
	pending_done();
	return ret;
}
