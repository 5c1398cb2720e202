/* The flush level (flush.h). */
#define LOG_PREFIX "flush: "
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime.h"
#include "fsutil.h"
#include "flush.h"
#include "image.h"
#include "log.h"
#include "retention.h"
#include "session.h"

#define MAX_CHAIN 256
#define MARKER "flush-level"
#define WORKER_NICE 10 /* the application's ranks come first */

/* One flush: the chain of images of `target` (newest first, as opened by
 * the main thread at the commit, so that a later prune of the node-local
 * level cannot take them away mid-copy), then a prune of the flush level. */
struct flush_job {
	uint64_t target; /* 0: prune only */
	int n;
	int fd[MAX_CHAIN];
	struct commit_record rec[MAX_CHAIN];
	uint64_t complete; /* newest checkpoint flushed on every rank */
	uint64_t own_from;
	int keep;
};

/* Runtime state (never saved, never restored). */
static struct store fl;
static bool enabled;
static struct flush_job job;
static pthread_t worker;
static bool running;
static atomic_int job_done;
static uint64_t job_result; /* target of the last finished job if it succeeded, else 0 */
static uint64_t complete;   /* newest checkpoint known flushed on every rank */
static uint64_t pruned_at;  /* `complete` of the last prune */
static int since_flush;     /* commits since the last flush started */

const char *flush_dir(void)
{
	return enabled ? fl.dir : "";
}

/* "<what the directory is>": for people and stasis-inspect. */
static void write_marker(void)
{
	static const char text[] =
	    "stasis flush level (STASIS_FLUSH_DIR): a checkpoint here is complete when every "
	    "rank has its ckpt-<id>.r<rank>.done\n";
	char path[sizeof(fl.dir) + 32];
	int fd;

	snprintf(path, sizeof(path), "%s/" MARKER, fl.dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return; /* there already (another rank, an earlier run) */
	if (write(fd, text, sizeof(text) - 1) != (ssize_t)sizeof(text) - 1 || fsync(fd))
		pr_warn("cannot write %s: %s", path, strerror(errno));
	close(fd);
}

int flush_open(struct session *s, struct why *why)
{
	struct why st = WHY_INIT;
	int ret;

	if (!s->cfg.flush_dir[0])
		return 0;
	ret = store_open(&fl, s->cfg.flush_dir, s->node, s->rank, s->job, true, &st);
	if (ret) {
		/* store_open names STASIS_DIR, the variable it usually serves. */
		const char *rest = strncmp(st.msg, "STASIS_DIR", 10) ? st.msg : st.msg + 10;

		return why_set(why, ret, "STASIS_FLUSH_DIR%s%s", rest == st.msg ? ": " : "", rest);
	}
	write_marker();
	enabled = true;
	return 0;
}

uint64_t flush_newest_id(void)
{
	uint64_t ids[1];

	return enabled && store_list(&fl, ids, 1) == 1 ? ids[0] : 0;
}

/* Copy src (read from its start) to path through path.tmp: synced, then
 * renamed and the directory synced, so that a file named path is whole. */
static int copy_fd(int src, const char *path, struct why *why)
{
	char tmp[4400];
	struct stat st;
	off_t off = 0;
	int out = -1, ret;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (fstat(src, &st)) {
		ret = -errno;
		goto err;
	}
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0 || fchmod(out, 0600)) {
		ret = -errno;
		goto err;
	}
	while (off < st.st_size) {
		ssize_t n = sendfile(out, src, &off, st.st_size - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			goto err;
		}
	}
	if (fsync(out)) {
		ret = -errno;
		goto err;
	}
	ret = close(out);
	out = -1;
	if (ret || rename(tmp, path)) {
		ret = -errno;
		goto err;
	}
	return fsutil_sync_parent(path);
err:
	if (out >= 0)
		close(out);
	unlink(tmp); /* our own temporary */
	return why_set(why, ret, "cannot copy to %s: %s", path, strerror(-ret));
}

/* A flushed image counts only once it reads back whole. */
static int verify_image(const char *path, struct why *why)
{
	struct image *img;
	int ret = image_open(path, &img, why);

	if (!ret)
		ret = image_verify(img, why);
	image_close(img);
	return ret;
}

/* Already at the flush level, from an earlier flush of a chain it shares. */
static bool flushed(const struct commit_record *rec)
{
	struct commit_record have;
	char path[4400];
	struct stat st;

	store_path(&fl, rec->ckpt_id, STORE_IMAGE, path, sizeof(path));
	return store_read_commit(&fl, rec->ckpt_id, &have, NULL) == 0 && !stat(path, &st) &&
	       (uint64_t)st.st_size == rec->image_bytes && have.image_bytes == rec->image_bytes;
}

static void *worker_main(void *arg)
{
	char path[4400];
	bool ok = true;
	int ret;

	(void)arg;
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WORKER_NICE);
	/* Oldest first: every record written covers a chain already there. */
	for (int i = job.n - 1; i >= 0 && ok; i--) {
		if (flushed(&job.rec[i]))
			continue;
		struct why why = WHY_INIT;

		store_path(&fl, job.rec[i].ckpt_id, STORE_IMAGE, path, sizeof(path));
		ret = copy_fd(job.fd[i], path, &why);
		if (!ret)
			ret = verify_image(path, &why);
		if (!ret)
			ret = store_commit(&fl, &job.rec[i], &why);
		if (ret) {
			pr_warn("checkpoint %llu not flushed: %s", (unsigned long long)job.target,
				why.msg);
			ok = false;
		}
	}
	for (int i = 0; i < job.n; i++)
		close(job.fd[i]);
	ret = retention_prune_store(&fl, job.complete, job.own_from, job.keep);
	if (ret)
		pr_warn("cannot list %s: %s", fl.dir, strerror(-ret));
	job_result = ok ? job.target : 0;
	atomic_store(&job_done, 1);
	return NULL;
}

/* Open this rank's images of id's chain (newest first) on the main thread. */
static int open_chain(struct session *s, uint64_t id)
{
	char path[4400];

	job.n = 0;
	for (uint64_t cur = id; cur; cur = job.rec[job.n - 1].parent_id) {
		struct commit_record *rec = &job.rec[job.n];
		int fd;

		if (job.n == MAX_CHAIN || store_read_commit(&s->store, cur, rec, NULL) ||
		    rec->parent_id >= cur)
			goto err;
		store_path(&s->store, cur, STORE_IMAGE, path, sizeof(path));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			goto err;
		job.fd[job.n++] = fd;
	}
	return 0;
err:
	pr_warn("checkpoint %llu not flushed: its chain is not whole in %s (image or commit "
		"record of %llu)",
		(unsigned long long)id, s->store.dir,
		(unsigned long long)(job.n ? job.rec[job.n - 1].parent_id : id));
	for (int i = 0; i < job.n; i++)
		close(job.fd[i]);
	job.n = 0;
	return -ENOENT;
}

/* The worker must take none of the application's signals (the timer,
 * SIGUSR1, tracking faults are the main thread's business), and is made
 * inside stasis: the preload layer sees a runtime thread. */
static int start_worker(void)
{
	sigset_t all, old;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	stasis_depth++;
	atomic_store(&job_done, 0);
	ret = -pthread_create(&worker, NULL, worker_main, NULL);
	stasis_depth--;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	running = ret == 0;
	return ret;
}

void flush_committed(struct session *s)
{
	uint64_t in[2], out[2];
	bool due;
	int ret;

	if (!enabled)
		return;
	if (running && atomic_load(&job_done)) {
		pthread_join(worker, NULL);
		running = false;
	}
	/* {all idle, the flush they all finished}: only when every rank is
	 * idle did they all finish the same one. */
	in[0] = !running;
	in[1] = running ? 0 : job_result;
	PMPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_MIN, s->comm);
	due = ++since_flush >= s->cfg.flush_every;
	if (!out[0]) {
		if (due && s->rank == 0)
			pr_debug("flush of checkpoint %llu deferred: a copy is still under way",
				 (unsigned long long)s->last_id);
		return;
	}
	if (out[1] > complete) {
		complete = out[1];
		if (s->rank == 0)
			pr_info("checkpoint %llu is flushed to %s on every rank",
				(unsigned long long)complete, s->cfg.flush_dir);
	}
	if (!due && complete == pruned_at)
		return;
	job.target = 0;
	job.n = 0;
	if (due) {
		since_flush = 0;
		if (!open_chain(s, s->last_id))
			job.target = s->last_id;
	}
	job.complete = pruned_at = complete;
	job.own_from = s->own_from;
	job.keep = s->cfg.keep;
	ret = start_worker();
	if (ret) {
		pr_warn("cannot start the flush thread: %s", strerror(-ret));
		for (int i = 0; i < job.n; i++)
			close(job.fd[i]);
	}
}

void flush_stop(void)
{
	if (running)
		pthread_join(worker, NULL);
	running = false;
}

/* Newest id below `below` with this rank's record at the flush level. */
static uint64_t newest_mine_below(uint64_t below)
{
	uint64_t *ids = malloc(4096 * sizeof(*ids)), found = 0;
	struct commit_record rec;
	int n = ids ? store_list(&fl, ids, 4096) : 0;

	for (int i = n - 1; i >= 0 && !found; i--)
		if (ids[i] < below && store_read_commit(&fl, ids[i], &rec, NULL) == 0)
			found = ids[i];
	free(ids);
	return found;
}

uint64_t flush_complete_below(struct session *s, uint64_t below)
{
	int have, all;

	if (!s->cfg.flush_dir[0])
		return 0;
	for (;;) {
		uint64_t mine = enabled ? newest_mine_below(below) : 0, x;
		struct commit_record rec;

		PMPI_Allreduce(&mine, &x, 1, MPI_UINT64_T, MPI_MAX, s->comm);
		if (!x)
			return 0;
		have = enabled && store_read_commit(&fl, x, &rec, NULL) == 0;
		PMPI_Allreduce(&have, &all, 1, MPI_INT, MPI_LAND, s->comm);
		if (all)
			return x;
		below = x;
	}
}

int flush_fetch(struct session *s, uint64_t id, struct why *why)
{
	struct commit_record *rec = calloc(MAX_CHAIN, sizeof(*rec));
	char from[4400], to[4400];
	int n = 0, ok = rec != NULL, all;

	for (uint64_t cur = id; ok && cur; cur = rec[n - 1].parent_id) {
		ok = n < MAX_CHAIN && store_read_commit(&fl, cur, &rec[n], why) == 0 &&
		     rec[n].parent_id < cur;
		n += ok;
	}
	/* Oldest first, as the flush wrote them. */
	for (int i = n - 1; ok && i >= 0; i--) {
		int fd;

		store_path(&fl, rec[i].ckpt_id, STORE_IMAGE, from, sizeof(from));
		store_path(&s->store, rec[i].ckpt_id, STORE_IMAGE, to, sizeof(to));
		fd = open(from, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			why_set(why, -errno, "%s: %s", from, strerror(errno));
		ok = fd >= 0 && copy_fd(fd, to, why) == 0;
		if (fd >= 0)
			close(fd);
	}
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, s->comm);
	/* Committed on the node-local level only once every rank has its
	 * chain back: a record there proves the checkpoint whole everywhere. */
	for (int i = n - 1; all && i >= 0; i--)
		store_commit(&s->store, &rec[i], NULL);
	free(rec);
	if (all && s->rank == 0)
		pr_warn("checkpoint %llu: fetched from the flush level %s", (unsigned long long)id,
			s->cfg.flush_dir);
	return all ? 0 : -EUCLEAN;
}
