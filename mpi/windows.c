/* Windows: virtual handles, records, replay and epochs (windows.h). */
#define LOG_PREFIX "windows: "
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime.h"
#include "arena.h"
#include "comms.h"
#include "coord.h"
#include "calls.h"
#include "export.h"
#include "handles.h"
#include "log.h"
#include "dirty.h"
#include "session.h"
#include "windows.h"
#include "windows_int.h"

struct win_region {
	void *base;
	MPI_Aint size;
};

/* The runtime state of a window, hung on its virtual handle. */
struct win {
	MPI_Comm comm; /* stasis's duplicate of its communicator (virtual) */
	int flavor;
	void *base;	   /* WF_ALLOCATE: arena memory, freed with the window */
	size_t create_len; /* bytes of its record that describe the creation */
	bool fence;	   /* a fence epoch is open (last fence without NOSUCCEED) */
	int locks;	   /* MPI_Win_lock epochs open */
	bool lock_all;	   /* MPI_Win_lock_all epoch open */
	bool dirty;	   /* operations under lock_all since the last flush_all */
	bool busy;	   /* counted in nbusy */
	bool access;	   /* MPI_Win_start'ed, not completed: counted in npscw */
	bool exposure;	   /* MPI_Win_post'ed, not waited for: counted in npscw */
	struct win_region *regions;
	int nregions;
};

/* Windows with a passive-target epoch a checkpoint cannot hold. */
static int nbusy;
/* Generalized active-target epochs open on this rank's windows (access and
 * exposure each count one), and a call opening one under way: read by the
 * coordinator thread when STOP comes (coord.h, coord_epoch_gate). */
static int npscw;
static uint64_t nsynced; /* epochs of post/start/complete/wait opened and closed */
static struct timespec hold_since;
static bool holding;

static void expose(void *base, MPI_Aint size);

static struct win *win_of(MPI_Win v)
{
	struct vh_entry *e = vh_is_virtual(VH_WIN, v) ? vh_entry(VH_WIN, v) : NULL;

	return e ? e->aux : NULL;
}

MPI_Comm windows_comm(MPI_Win v)
{
	struct win *w = win_of(v);

	return w ? w->comm : MPI_COMM_NULL;
}

static void update(struct win *w)
{
	bool busy = w->locks > 0 || (w->lock_all && w->dirty);

	if (busy != w->busy)
		__atomic_add_fetch(&nbusy, busy ? 1 : -1, __ATOMIC_RELAXED);
	w->busy = busy;
}

/* --- epochs (hooks of the generated wrappers) ---------------------------------- */

void windows_op(MPI_Win v)
{
	struct win *w;

	/* The common case costs a load: no lock_all epoch is clean. */
	if (__builtin_expect(!(w = win_of(v)) || !w->lock_all || w->dirty, 1))
		return;
	w->dirty = true;
	update(w);
}

void windows_fenced(MPI_Win v, int assert_, int unused)
{
	struct win *w = win_of(v);

	(void)unused;
	if (w)
		w->fence = !(assert_ & MPI_MODE_NOSUCCEED);
}

void windows_locked(MPI_Win v, int unused1, int unused2)
{
	struct win *w = win_of(v);

	(void)unused1, (void)unused2;
	if (w) {
		w->locks++;
		update(w);
	}
}

void windows_unlocked(MPI_Win v, int unused1, int unused2)
{
	struct win *w = win_of(v);

	(void)unused1, (void)unused2;
	if (w && w->locks > 0) {
		w->locks--;
		update(w);
	}
}

void windows_locked_all(MPI_Win v, int unused1, int unused2)
{
	struct win *w = win_of(v);

	(void)unused1, (void)unused2;
	if (w) {
		w->lock_all = true;
		w->dirty = false;
		update(w);
	}
}

void windows_unlocked_all(MPI_Win v, int unused1, int unused2)
{
	struct win *w = win_of(v);

	(void)unused1, (void)unused2;
	if (w) {
		w->lock_all = false;
		w->dirty = false;
		update(w);
	}
}

void windows_flushed_all(MPI_Win v, int unused1, int unused2)
{
	struct win *w = win_of(v);

	(void)unused1, (void)unused2;
	if (w) {
		w->dirty = false;
		update(w);
	}
}

/* An epoch of post/start/complete/wait closed on a window (its flag). */
static void pscw_close(bool *epoch)
{
	if (*epoch)
		__atomic_sub_fetch(&npscw, 1, __ATOMIC_SEQ_CST);
	*epoch = false;
	__atomic_add_fetch(&nsynced, 1, __ATOMIC_RELAXED);
}

void windows_opening(void)
{
	for (;;) {
		coord_epoch_gate();
		/* Others open: this rank's answer to STOP said so (coord.h). */
		if (__atomic_fetch_add(&npscw, 1, __ATOMIC_SEQ_CST) > 0 || !coord_stopping())
			return;
		__atomic_sub_fetch(&npscw, 1, __ATOMIC_SEQ_CST);
		coord_stop_here();
	}
}

void windows_section_begin(void)
{
	windows_opening();
}

void windows_section_end(void)
{
	__atomic_sub_fetch(&npscw, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&nsynced, 1, __ATOMIC_RELAXED);
}

void windows_opened(MPI_Win v, int ok, int epoch)
{
	struct win *w = ok ? win_of(v) : NULL;
	bool *flag = w ? (epoch == WIN_ACCESS ? &w->access : &w->exposure) : NULL;

	/* Counted once per window and kind, as MPI allows one of each. */
	if (!flag || *flag)
		__atomic_sub_fetch(&npscw, 1, __ATOMIC_SEQ_CST);
	else
		*flag = true;
	__atomic_add_fetch(&nsynced, 1, __ATOMIC_RELAXED);
}

void windows_completed(MPI_Win v, int unused1, int unused2)
{
	struct win *w = win_of(v);

	(void)unused1, (void)unused2;
	if (w)
		pscw_close(&w->access);
}

void windows_waited(MPI_Win v, int unused1, int unused2)
{
	struct win *w = win_of(v);

	(void)unused1, (void)unused2;
	if (w)
		pscw_close(&w->exposure);
}

void windows_tested(MPI_Win v, int *flag, int unused)
{
	struct win *w = win_of(v);

	(void)unused;
	if (w && *flag)
		pscw_close(&w->exposure);
}

void windows_attached(MPI_Win v, void *base, MPI_Aint size)
{
	struct win *w = win_of(v);
	struct win_region *r;

	if (!w)
		return;
	r = realloc(w->regions, sizeof(*r) * (size_t)(w->nregions + 1));
	if (!r) {
		session_unsupported("MPI_Win_attach (out of memory)");
		return;
	}
	w->regions = r;
	r[w->nregions++] = (struct win_region){base, size};
	expose(base, size);
}

void windows_detached(MPI_Win v, const void *base, int unused)
{
	struct win *w = win_of(v);

	(void)unused;
	for (int i = 0; w && i < w->nregions; i++)
		if (w->regions[i].base == base) {
			w->regions[i] = w->regions[--w->nregions];
			return;
		}
}

static double since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

bool windows_busy(void)
{
	return __atomic_load_n(&nbusy, __ATOMIC_RELAXED) > 0 ||
	       __atomic_load_n(&npscw, __ATOMIC_SEQ_CST) > 0;
}

bool windows_pscw(void)
{
	return __atomic_load_n(&npscw, __ATOMIC_SEQ_CST) > 0;
}

uint64_t windows_progress(void)
{
	return __atomic_load_n(&nsynced, __ATOMIC_RELAXED);
}

bool windows_hold_stop(void)
{
	/* Never stopped inside one: this rank's answer to STOP said it was
	 * open, and the attempt is given up (coord.h). */
	if (windows_pscw())
		return true;
	if (!nbusy) {
		holding = false;
		return false;
	}
	if (!holding) {
		holding = true;
		clock_gettime(CLOCK_MONOTONIC, &hold_since);
		pr_info("the checkpoint waits for a passive-target epoch to end (MPI_Win_unlock, "
			"MPI_Win_flush_all), at most %d s",
			WINDOWS_HOLD_SECONDS);
		return true;
	}
	if (since(&hold_since) < WINDOWS_HOLD_SECONDS)
		return true;
	holding = false;
	return false;
}

int windows_settle(MPI_Comm comm)
{
	int ok, rank = 0;
	bool unfenced = false;

	holding = false;
	/* In creation order, the same on every member. */
	for (struct mpi_record *rec = rec_first(); rec; rec = rec->next) {
		struct vh_entry *e;
		struct win *w;

		if (rec->kind != VH_WIN || !(e = vh_entry_at(VH_WIN, rec->index)) || !(w = e->aux))
			continue;
		if (w->fence && PMPI_Win_fence(0, e->real) != MPI_SUCCESS)
			unfenced = true; /* not settled: no checkpoint */
	}
	ok = nbusy == 0 && npscw == 0 && !unfenced;
	PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, comm);
	PMPI_Comm_rank(comm, &rank);
	if (ok)
		return 0;
	if (rank == 0)
		pr_warn("checkpoint skipped: a passive-target epoch (MPI_Win_lock, or "
			"MPI_Win_lock_all with operations not flushed) was open on a window "
			"where a rank had to stop");
	return -EBUSY;
}

/* Other ranks write a window's memory from their processes (the kernel's
 * single copy: process_vm_writev): under the mprotect backend a protected
 * page makes their write fail (EFAULT), so the memory is made writable and
 * dirty; uffd and soft-dirty see such writes themselves. */
static void expose(void *base, MPI_Aint size)
{
	struct session *s = session_get();

	if (s && s->dirty == &dirty_mprotect_backend && base && size > 0)
		s->dirty->prepare_write(base, (size_t)size);
}

static void expose_all(void)
{
	for (struct mpi_record *rec = rec_first(); rec; rec = rec->next) {
		struct rec_reader r;
		struct vh_entry *e;
		struct win *w;

		if (rec->kind != VH_WIN || !(e = vh_entry_at(VH_WIN, rec->index)) || !(w = e->aux))
			continue;
		r = recread_open(rec->data, rec->len);
		recread_handle(&r, VH_COMM);
		if (recread_int(&r) != WF_SHARED) {
			void *base = (void *)(uintptr_t)recread_u64(&r);
			MPI_Aint size = (MPI_Aint)recread_u64(&r);

			if (!r.bad)
				expose(base, size);
		}
		recread_done(&r);
		for (int i = 0; i < w->nregions; i++)
			expose(w->regions[i].base, w->regions[i].size);
	}
}

void windows_checkpointed(MPI_Comm comm)
{
	struct session *s = session_get();

	/* Each rank's memory writable again before any rank writes to it. */
	if (!s || s->dirty != &dirty_mprotect_backend)
		return;
	expose_all();
	PMPI_Barrier(comm);
}

/* --- making and freeing ---------------------------------------------------------- */

/* The program made real (collective over real_comm): a virtual handle for
 * it, with a communicator of stasis's to count its fences. */
MPI_Win windows_made(MPI_Comm real_comm, int flavor, void *base, MPI_Aint size, int disp_unit,
		     MPI_Win real, const char *call, const void *extra, size_t extra_len)
{
	struct rec_builder b = {0};
	struct mpi_record *rec;
	struct win *w;
	MPI_Comm dup;
	MPI_Win v;

	w = calloc(1, sizeof(*w));
	if (!w || PMPI_Comm_dup(real_comm, &dup) != MPI_SUCCESS) {
		free(w);
		session_unsupported(call);
		return real;
	}
	w->comm = mpi_comm_new(dup, MPI_UNDEFINED, call);
	if (!vh_is_virtual(VH_COMM, w->comm)) {
		free(w); /* checkpoints are off: the duplicate stays */
		return real;
	}
	w->flavor = flavor;
	w->base = flavor == WF_ALLOCATE ? base : NULL;
	recbuf_handle(&b, VH_COMM, w->comm);
	recbuf_int(&b, flavor);
	recbuf_u64(&b, (uint64_t)(uintptr_t)base);
	recbuf_u64(&b, (uint64_t)size);
	recbuf_int(&b, disp_unit);
	if (extra_len)
		recbuf_put(&b, extra, extra_len);
	w->create_len = b.len;
	if (flavor != WF_SHARED) /* a shared segment is not tracked memory */
		expose(base, size);
	rec = rec_make(VH_WIN, &b, 0);
	v = rec ? vh_mint(VH_WIN, real, 0, rec) : NULL;
	if (!v) {
		rec_discard(rec);
		free(w);
		session_unsupported(call);
		return real;
	}
	rec_attach(rec, v);
	vh_lock();
	vh_entry(VH_WIN, v)->aux = w;
	vh_unlock();
	return v;
}

EXPORT int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
			  MPI_Win *win)
{
	int ret;

	stasis_depth++;
	coord_entry();
	coord_collective(comm);
	ret = PMPI_Win_create(base, size, disp_unit, VH_REAL(VH_INFO, MPI_Info, info),
			      VH_REAL(VH_COMM, MPI_Comm, comm), win);
	coord_collective_done(comm);
	if (ret == MPI_SUCCESS)
		*win = windows_made(VH_REAL(VH_COMM, MPI_Comm, comm), WF_CREATE, base, size, disp_unit,
			    *win, "MPI_Win_create", NULL, 0);
	stasis_depth--;
	return ret;
}

/* MPI_Win_create over the arena's memory, its error returned rather than
 * raised: some MPIs make a window with MPI_Win_allocate where they cannot
 * with MPI_Win_create (Open MPI 4.1 on one rank: only osc/sm, which makes
 * none over given memory). */
int windows_create_quietly(void *base, MPI_Aint size, int disp_unit, MPI_Info info,
			   MPI_Comm real, MPI_Win *win)
{
	MPI_Errhandler eh;
	int ret;

	if (PMPI_Comm_get_errhandler(real, &eh) != MPI_SUCCESS)
		return PMPI_Win_create(base, size, disp_unit, info, real, win);
	PMPI_Comm_set_errhandler(real, MPI_ERRORS_RETURN);
	ret = PMPI_Win_create(base, size, disp_unit, info, real, win);
	PMPI_Comm_set_errhandler(real, eh);
	PMPI_Errhandler_free(&eh);
	return ret;
}

/* MPI would not make the window over the arena: MPI's own, as the program
 * asked, and checkpoints off, naming why (a restart could not make it). */
static int allocate_unprotected(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
				void *baseptr, MPI_Win *win, int why)
{
	char msg[MPI_MAX_ERROR_STRING] = "", feature[MPI_MAX_ERROR_STRING + 128];
	void *base;
	int len = 0, ret;

	PMPI_Error_string(why, msg, &len);
	snprintf(feature, sizeof(feature),
		 "MPI_Win_allocate (this MPI makes no window over memory stasis places; "
		 "MPI_Win_create said: %s)",
		 msg);
	ret = PMPI_Win_allocate(size, disp_unit, VH_REAL(VH_INFO, MPI_Info, info),
				VH_REAL(VH_COMM, MPI_Comm, comm), baseptr, win);
	if (ret != MPI_SUCCESS)
		return ret;
	session_unsupported(feature);
	memcpy(&base, baseptr, sizeof(base));
	/* Recorded as over the program's memory: never freed by stasis. */
	*win = windows_made(VH_REAL(VH_COMM, MPI_Comm, comm), WF_CREATE, base, size, disp_unit, *win,
		    "MPI_Win_allocate", NULL, 0);
	return MPI_SUCCESS;
}

EXPORT int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
			    void *baseptr, MPI_Win *win)
{
	void *base;
	int ret;

	if (!stasis_active)
		return PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win);
	stasis_depth++;
	coord_entry();
	/* From the arena, so that it is in the image at the same address; a
	 * cache line, as MPI's own pools give. */
	base = size < 0 ? NULL : arena_memalign(64, size ? (size_t)size : 1);
	coord_collective(comm);
	ret = windows_create_quietly(base, base ? size : 0, disp_unit, VH_REAL(VH_INFO, MPI_Info, info),
			     VH_REAL(VH_COMM, MPI_Comm, comm), win);
	if (ret != MPI_SUCCESS && base) {
		arena_free(base);
		base = NULL;
		ret = allocate_unprotected(size, disp_unit, info, comm, baseptr, win, ret);
		coord_collective_done(comm);
		stasis_depth--;
		return ret;
	}
	coord_collective_done(comm);
	if (ret == MPI_SUCCESS && !base) {
		PMPI_Win_free(win);
		ret = MPI_ERR_NO_MEM;
	}
	if (ret == MPI_SUCCESS) {
		memcpy(baseptr, &base, sizeof(base));
		*win = windows_made(VH_REAL(VH_COMM, MPI_Comm, comm), WF_ALLOCATE, base, size, disp_unit,
			    *win, "MPI_Win_allocate", NULL, 0);
	} else if (base) {
		arena_free(base);
	}
	stasis_depth--;
	return ret;
}

EXPORT int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win)
{
	int ret;

	stasis_depth++;
	coord_entry();
	coord_collective(comm);
	ret = PMPI_Win_create_dynamic(VH_REAL(VH_INFO, MPI_Info, info),
				      VH_REAL(VH_COMM, MPI_Comm, comm), win);
	coord_collective_done(comm);
	if (ret == MPI_SUCCESS)
		*win = windows_made(VH_REAL(VH_COMM, MPI_Comm, comm), WF_DYNAMIC, NULL, 0, 1, *win,
			    "MPI_Win_create_dynamic", NULL, 0);
	stasis_depth--;
	return ret;
}

EXPORT int MPI_Win_free(MPI_Win *win)
{
	MPI_Win v = *win, r = VH_REAL(VH_WIN, MPI_Win, v);
	struct vh_entry *e = vh_is_virtual(VH_WIN, v) ? vh_entry(VH_WIN, v) : NULL;
	struct win *w = e ? e->aux : NULL;
	MPI_Comm comm = w ? w->comm : MPI_COMM_NULL, rc;
	int ret;

	stasis_depth++;
	coord_entry();
	if (w)
		coord_collective(comm);
	ret = PMPI_Win_free(&r);
	if (w)
		coord_collective_done(comm);
	if (ret == MPI_SUCCESS) {
		*win = r;
		if (e) {
			vh_lock();
			e->aux = NULL;
			vh_unlock();
			rec_object_freed(VH_WIN, v);
		}
		if (w) {
			w->locks = 0;
			w->lock_all = false;
			update(w);
			pscw_close(&w->access);
			pscw_close(&w->exposure);
			rc = VH_REAL(VH_COMM, MPI_Comm, w->comm);
			if (PMPI_Comm_free(&rc) == MPI_SUCCESS)
				mpi_freed(VH_COMM, w->comm);
			if (w->base)
				arena_free(w->base);
			if (w->flavor == WF_SHARED)
				windows_shared_freed(v);
			free(w->regions);
			free(w);
		}
	}
	stasis_depth--;
	return ret;
}

/* --- checkpoint and restart --------------------------------------------------------- */

static int refresh_one(struct mpi_record *rec, MPI_Win real, struct win *w)
{
	char name[MPI_MAX_OBJECT_NAME] = "";
	struct rec_builder b = {0};
	MPI_Errhandler eh, veh = MPI_ERRHANDLER_NULL;
	int len = 0;

	recbuf_put(&b, rec->data, w->create_len);
	recbuf_int(&b, w->fence);
	recbuf_int(&b, w->lock_all);
	PMPI_Win_get_name(real, name, &len);
	recbuf_str(&b, name);
	if (PMPI_Win_get_errhandler(real, &eh) == MPI_SUCCESS) {
		if (eh == MPI_ERRORS_RETURN || eh == MPI_ERRORS_ARE_FATAL)
			veh = eh;
		else
			veh = vh_lookup_real(VH_ERRHANDLER, eh) ?: MPI_ERRHANDLER_NULL;
		PMPI_Errhandler_free(&eh);
	}
	recbuf_int(&b, vh_is_virtual(VH_ERRHANDLER, veh));
	recbuf_u64(&b, vh_is_virtual(VH_ERRHANDLER, veh) ? vh_index(VH_ERRHANDLER, veh)
							  : (uint64_t)(uintptr_t)veh);
	recbuf_int(&b, w->nregions);
	for (int i = 0; i < w->nregions; i++) {
		recbuf_u64(&b, (uint64_t)(uintptr_t)w->regions[i].base);
		recbuf_u64(&b, (uint64_t)w->regions[i].size);
	}
	return rec_replace_data(rec, &b) ? -ENOMEM : 0;
}

int windows_refresh(void)
{
	for (struct mpi_record *rec = rec_first(); rec; rec = rec->next) {
		struct vh_entry *e;
		int ret;

		if (rec->kind != VH_WIN || !(e = vh_entry_at(VH_WIN, rec->index)) || !e->aux)
			continue;
		ret = refresh_one(rec, e->real, e->aux);
		if (ret)
			return ret;
	}
	return 0;
}

struct win_state {
	MPI_Comm comm;
	int flavor, disp_unit;
	void *base;
	MPI_Aint size;
	size_t create_len;
};

static void read_create(struct rec_reader *r, struct win_state *st)
{
	st->comm = recread_handle(r, VH_COMM);
	st->flavor = recread_int(r);
	st->base = (void *)(uintptr_t)recread_u64(r);
	st->size = (MPI_Aint)recread_u64(r);
	st->disp_unit = recread_int(r);
}

int windows_replay(struct mpi_record *rec, MPI_Win *real, struct why *why)
{
	struct rec_reader r = recread_open(rec->data, rec->len);
	struct win_state st;
	int ret;

	read_create(&r, &st);
	if (r.bad || st.flavor < WF_CREATE || st.flavor > WF_SHARED) {
		recread_done(&r);
		return why_set(why, -EBADMSG, "the record of an MPI window is damaged");
	}
	/* The memory is the program's or the arena's, back at its address;
	 * a shared window's segment is mapped again first. */
	if (st.flavor == WF_SHARED) {
		ret = windows_shared_replay(&r, vh_value(VH_WIN, rec->index), st.comm, st.base,
					    st.size, st.disp_unit, real, why);
		recread_done(&r);
		return ret;
	}
	if (st.flavor == WF_DYNAMIC)
		ret = PMPI_Win_create_dynamic(MPI_INFO_NULL, st.comm, real);
	else
		ret = PMPI_Win_create(st.base, st.size, st.disp_unit, MPI_INFO_NULL, st.comm,
				      real);
	recread_done(&r);
	return ret == MPI_SUCCESS ? 0 : why_set(why, -EIO, "cannot make an MPI window again");
}

/* Everything but the creation, for one window: collective over its
 * members (a fence, a lock_all). */
static int apply_one(struct mpi_record *rec, struct vh_entry *e)
{
	struct rec_reader r = recread_open(rec->data, rec->len);
	struct win *w = calloc(1, sizeof(*w));
	struct win_state st;
	const char *name;
	int virt, n, ret = -ENOMEM;
	uint64_t eh;

	if (!w)
		goto out;
	read_create(&r, &st);
	if (st.flavor == WF_SHARED)
		windows_shared_skip(&r);
	w->create_len = rec->len - (size_t)(r.end - r.p);
	w->fence = recread_int(&r);
	w->lock_all = recread_int(&r);
	name = recread_str(&r);
	virt = recread_int(&r);
	eh = recread_u64(&r);
	n = recread_int(&r);
	ret = -EBADMSG;
	if (r.bad || n < 0 || n > 1 << 20 || (virt && eh >= VH_MAX_INDEX))
		goto out;
	w->regions = calloc((size_t)n + 1, sizeof(*w->regions));
	if (!w->regions) {
		ret = -ENOMEM;
		goto out;
	}
	ret = 0;
	for (int i = 0; i < n; i++) {
		void *base = (void *)(uintptr_t)recread_u64(&r);
		MPI_Aint size = (MPI_Aint)recread_u64(&r);

		if (r.bad || PMPI_Win_attach(e->real, base, size) != MPI_SUCCESS) {
			ret = -EIO;
			break;
		}
		w->regions[w->nregions++] = (struct win_region){base, size};
	}
	w->comm = st.comm == MPI_COMM_NULL ? MPI_COMM_NULL : vh_lookup_real(VH_COMM, st.comm);
	w->flavor = st.flavor;
	w->base = st.flavor == WF_ALLOCATE ? st.base : NULL;
	if (name && *name)
		PMPI_Win_set_name(e->real, name);
	if (virt || eh != (uint64_t)(uintptr_t)MPI_ERRHANDLER_NULL)
		PMPI_Win_set_errhandler(
		    e->real, VH_REAL(VH_ERRHANDLER, MPI_Errhandler,
				     virt ? vh_value(VH_ERRHANDLER, (uint32_t)eh) : (void *)(uintptr_t)eh));
	if (w->fence && PMPI_Win_fence(0, e->real) != MPI_SUCCESS)
		ret = -EIO;
	if (w->lock_all && PMPI_Win_lock_all(0, e->real) != MPI_SUCCESS)
		ret = -EIO;
	vh_lock();
	e->aux = w;
	vh_unlock();
	w = NULL;
out:
	if (w)
		free(w->regions);
	free(w);
	recread_done(&r);
	return ret;
}

int windows_apply(struct why *why)
{
	int ret = 0, err;

	for (struct mpi_record *rec = rec_first(); rec; rec = rec->next) {
		struct vh_entry *e;

		if (rec->kind != VH_WIN || !(e = vh_entry_at(VH_WIN, rec->index)))
			continue;
		err = apply_one(rec, e);
		if (err && !ret)
			ret = why_set(why, err, "cannot put an MPI window's state back: %s",
				      strerror(-err));
	}
	return ret;
}
