/* istore in the background. Fenix_Data_member_istore does what store does
 * up to the data: it checks the subset on every rank, copies the stored
 * elements into the staging copy (the program may change its buffer as
 * soon as istore returns) and makes the group's redundancy set; then a
 * thread of the group writes the snapshot's .dat (write, fsync, rename)
 * while the program goes on. The redundancy exchange is MPI on the group's
 * communicator and stays on the program's thread (MPI_THREAD_SINGLE
 * programs are the usual case): it runs when the istore is completed, by
 * Fenix_Data_wait, or by the group's next store, istore or commit (all
 * collective) when the program only tested it. Fenix_Data_test is local:
 * it says whether the write has ended. Every other call on the group waits
 * for the thread first (it reads the members' staging copies). */
#include <string.h>

#include "fenix_int.h"

/* One lock and condition for every group's writer: a writer that has said
 * it is done touches its group no more (the program may delete it). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;

static void *writer(void *arg)
{
	struct fx_group *g = arg;
	int section = g->async.section;

	int ret = fx_write_dat(g, g->async.ts, &g->async.why);
	pthread_mutex_lock(&lock);
	g->async.ret = ret;
	atomic_store_explicit(&g->async.written, true, memory_order_release);
	pthread_cond_broadcast(&done);
	pthread_mutex_unlock(&lock);
	/* g may be gone from here on: the program's thread went on. */
	fx_section_end(section);
	return NULL;
}

/* section: fx_section_begin's token, ended by the writer once done. */
int fx_async_start(struct fx_group *g, int ts, int section)
{
	pthread_attr_t attr;
	pthread_t t;

	g->async.ts = ts;
	g->async.ret = 0;
	g->async.section = section;
	g->async.why = (struct why)WHY_INIT;
	atomic_store(&g->async.written, false);
	g->async.pending = true;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, writer, g))
		writer(g); /* no thread: written here, completed as one would be */
	pthread_attr_destroy(&attr);
	return 0;
}

void fx_async_join(struct fx_group *g)
{
	if (!g->async.pending || atomic_load_explicit(&g->async.written, memory_order_acquire))
		return;
	pthread_mutex_lock(&lock);
	while (!atomic_load_explicit(&g->async.written, memory_order_acquire))
		pthread_cond_wait(&done, &lock);
	pthread_mutex_unlock(&lock);
}

int fx_async_finish(struct fx_group *g, int error_code)
{
	if (!g->async.pending)
		return FENIX_SUCCESS;
	fx_async_join(g);
	g->async.pending = false;
	/* After stasis-restart the memory may be from before the killed run
	 * completed this istore and pruned its files: the staging copy, back
	 * with the memory, writes them again. */
	if (!g->async.ret && !fx_dat_present(g, g->async.ts))
		g->async.ret = fx_write_dat(g, g->async.ts, &g->async.why);
	if (fx_agree(g->comm, g->async.ret ? -1 : 0))
		return fx_say_before_return(g->comm, g->async.ret != 0, error_code,
					    "istore of group %d: %s", g->gid,
					    g->async.why.msg[0] ? g->async.why.msg : "cannot write");
	int ret = fx_protect(g, g->async.ts, "istore", error_code);
	if (ret)
		return ret;
	g->staged = true;
	return FENIX_SUCCESS;
}

/* The request names the group and the snapshot (the public library keeps
 * MPI requests there; they are opaque to the program). */
static void request_make(Fenix_Request *req, int gid, int ts)
{
	req->mpi_send_req = (MPI_Request)(uintptr_t)(gid + 1);
	req->mpi_recv_req = (MPI_Request)(uintptr_t)(ts + 1);
}

/* The group with a pending istore the request names, or NULL (a null
 * request, or one completed already). */
static struct fx_group *request_group(Fenix_Request req)
{
	if (req.mpi_send_req == MPI_REQUEST_NULL)
		return NULL;
	int gid = (int)(uintptr_t)req.mpi_send_req - 1, ts = (int)(uintptr_t)req.mpi_recv_req - 1;
	struct fx_group *g = fx_group_find(gid);
	return g && g->async.pending && g->async.ts == ts ? g : NULL;
}

int Fenix_Data_member_istore(int gid, int mid, Fenix_Data_subset s, Fenix_Request *req)
{
	struct fx_group *g;
	int section = fx_section_begin();
	int code = fx_stage_checked(gid, mid, &s, &g);
	struct why why = WHY_INIT;
	if (!code && fx_agree(g->comm, fx_set(g, &why) ? -1 : 0)) {
		if (why.msg[0])
			fx_say(0, "istore of group %d: %s", gid, why.msg);
		code = FENIX_ERROR_INTERN;
	}
	if (code) {
		fx_section_end(section);
		return code;
	}
	g->frozen = true;
	fx_async_start(g, g->next_ts, section);
	if (req)
		request_make(req, gid, g->next_ts);
	return FENIX_SUCCESS;
}

/* The subset extents may differ per rank: stasis pads them alike anyway. */
int Fenix_Data_member_istorev(int gid, int mid, Fenix_Data_subset s, Fenix_Request *req)
{
	return Fenix_Data_member_istore(gid, mid, s, req);
}

int Fenix_Data_wait(Fenix_Request req)
{
	if (!fx.init)
		return FENIX_ERROR_UNINITIALIZED;
	struct fx_group *g = request_group(req);
	if (!g)
		return FENIX_SUCCESS;
	int section = fx_section_begin();
	int code = fx_async_finish(g, FENIX_ERROR_DATA_WAIT);
	fx_section_end(section);
	return code;
}

int Fenix_Data_test(Fenix_Request req, int *flag)
{
	if (!fx.init)
		return FENIX_ERROR_UNINITIALIZED;
	struct fx_group *g = request_group(req);
	if (flag)
		*flag = !g || atomic_load_explicit(&g->async.written, memory_order_acquire);
	return FENIX_SUCCESS;
}
