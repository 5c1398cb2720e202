/* Undo records of files written in place (undo.h). Runtime state only:
 * a restart rebuilds it (the interval after the restored checkpoint
 * begins empty). */
#define LOG_PREFIX "undo: "
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fds.h"
#include "log.h"
#include "names.h"
#include "store.h"
#include "undo.h"

#define UNDO_MAGIC "UNDO"
#define NAME_MAGIC "NAME" /* a name made or removed (names.h): old_size the op */
#define CHUNK (1u << 20)
#define MAX_IDS 4096

/* One saved piece: len bytes the file had at offset, and the file's
 * length at the checkpoint; followed by the path (path_len bytes, no NUL)
 * and the bytes. */
struct undo_rec {
	char magic[4];
	uint32_t path_len;
	uint64_t dev, ino, old_size, offset, len;
};

struct range {
	uint64_t a, b;
};

struct ufile {
	uint64_t dev, ino;
	struct range *r; /* saved this interval: sorted, disjoint, not touching */
	int n, cap;
	int rd;	    /* open to read it, -1 until needed */
	char *path; /* as the records name it, NULL until needed */
	bool length_kept; /* its length at the checkpoint is in the record */
};

static struct ufile *files;
static int nfiles, capfiles;
static uint64_t cur_id;	   /* the interval's checkpoint */
static int rec_fd = -1;	   /* its record, open for appending */
static uint64_t rec_bytes; /* bytes in it */

static void new_interval(uint64_t id)
{
	if (id == cur_id)
		return;
	for (int i = 0; i < nfiles; i++) {
		free(files[i].r);
		free(files[i].path);
		if (files[i].rd >= 0)
			close(files[i].rd);
	}
	nfiles = 0;
	if (rec_fd >= 0)
		close(rec_fd);
	rec_fd = -1;
	rec_bytes = 0;
	cur_id = id;
}

static struct ufile *file_of(uint64_t dev, uint64_t ino)
{
	for (int i = 0; i < nfiles; i++)
		if (files[i].dev == dev && files[i].ino == ino)
			return &files[i];
	if (nfiles == capfiles) {
		int cap = capfiles ? 2 * capfiles : 16;
		struct ufile *f = realloc(files, cap * sizeof(*f));

		if (!f)
			return NULL;
		files = f;
		capfiles = cap;
	}
	files[nfiles] = (struct ufile){.dev = dev, .ino = ino, .rd = -1};
	return &files[nfiles++];
}

/* Mark [a, b) saved: merge it with the ranges it touches. */
static int add_range(struct ufile *f, uint64_t a, uint64_t b)
{
	int i = 0, j;

	while (i < f->n && f->r[i].b < a)
		i++;
	j = i;
	while (j < f->n && f->r[j].a <= b) {
		a = f->r[j].a < a ? f->r[j].a : a;
		b = f->r[j].b > b ? f->r[j].b : b;
		j++;
	}
	if (j == i) {
		if (f->n == f->cap) {
			int cap = f->cap ? 2 * f->cap : 8;
			struct range *r = realloc(f->r, cap * sizeof(*r));

			if (!r)
				return -ENOMEM;
			f->r = r;
			f->cap = cap;
		}
		memmove(&f->r[i + 1], &f->r[i], (f->n - i) * sizeof(*f->r));
		f->n++;
	} else if (j > i + 1) {
		memmove(&f->r[i + 1], &f->r[j], (f->n - j) * sizeof(*f->r));
		f->n -= j - i - 1;
	}
	f->r[i] = (struct range){a, b};
	return 0;
}

static int open_record(struct session *s, struct why *why)
{
	char path[sizeof(s->store.dir) + 64];
	struct stat st;

	if (rec_fd >= 0)
		return 0;
	store_path(&s->store, cur_id, STORE_UNDO, path, sizeof(path));
	rec_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (rec_fd < 0)
		return why_set(why, -errno, "cannot open %s: %s", path, strerror(errno));
	rec_bytes = fstat(rec_fd, &st) ? 0 : (uint64_t)st.st_size;
	return 0;
}

/* Append one record: n bytes the file had at offset (none: only its
 * length old_size, to cut it back to). */
static int put_record(const struct ufile *f, const char *magic, uint64_t old_size, uint64_t offset,
		      const char *bytes, size_t n, struct why *why)
{
	size_t plen = strlen(f->path);
	struct undo_rec h = {.path_len = (uint32_t)plen,
			     .dev = f->dev,
			     .ino = f->ino,
			     .old_size = old_size,
			     .offset = offset,
			     .len = n};
	struct iovec iov[3];
	ssize_t w;

	memcpy(h.magic, magic, 4);
	iov[0] = (struct iovec){&h, sizeof(h)};
	iov[1] = (struct iovec){f->path, plen};
	iov[2] = (struct iovec){(void *)bytes, n};
	w = writev(rec_fd, iov, 3);
	if (w != (ssize_t)(sizeof(h) + plen + n)) {
		int e = w < 0 ? errno : ENOSPC;

		/* A torn record at the end is ignored by the restart: the
		 * write it stood before never happened. */
		return why_set(why, -e, "cannot write its undo record: %s", strerror(e));
	}
	rec_bytes += (uint64_t)w;
	return 0;
}

/* Whether n more bytes of records for f fit in STASIS_UNDO_MAX. */
static int fits(struct session *s, const struct ufile *f, uint64_t n, struct why *why)
{
	if (rec_bytes + n + (n / CHUNK + 1) * (sizeof(struct undo_rec) + strlen(f->path)) >
	    s->cfg.undo_max)
		return why_set(why, -EFBIG, "its undo record would pass STASIS_UNDO_MAX=%llu bytes",
			       (unsigned long long)s->cfg.undo_max);
	return 0;
}

/* Append [a, b) of the file as it is now (read through rd). */
static int save(struct session *s, struct ufile *f, int rd, uint64_t old_size, uint64_t a,
		uint64_t b, struct why *why)
{
	static char *buf;
	int ret = fits(s, f, b - a, why);

	if (!ret)
		ret = open_record(s, why);
	if (ret)
		return ret;
	if (!buf && !(buf = malloc(CHUNK)))
		return why_set(why, -ENOMEM, "out of memory for its undo record");
	while (a < b) {
		size_t want = b - a < CHUNK ? b - a : CHUNK;
		ssize_t n = pread(rd, buf, want, (off_t)a);

		if (n < 0)
			return why_set(why, -errno, "cannot read it: %s", strerror(errno));
		ret = put_record(f, UNDO_MAGIC, old_size, a, buf, (size_t)n, why);
		if (ret)
			return ret;
		if ((size_t)n < want)
			break; /* the file is shorter: nothing there to overwrite */
		a += (uint64_t)n;
	}
	return 0;
}

/* The first range of f that ends after at (f->n if none). */
static int first_after(const struct ufile *f, uint64_t at)
{
	int lo = 0, hi = f->n;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (f->r[mid].b <= at)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Make f ready to save from: its path and a descriptor to read it. */
static int ready(struct ufile *f, const char *path, int fd, struct why *why)
{
	char proc[64], named[PATH_MAX];

	if (!f->path) {
		if (!path) {
			fds_path_of(fd, named, sizeof(named));
			path = named;
		}
		f->path = strdup(path);
		if (!f->path)
			return why_set(why, -ENOMEM, "out of memory for its undo record");
	}
	if (f->rd < 0) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		f->rd = open(fd >= 0 ? proc : f->path, O_RDONLY | O_CLOEXEC);
		if (f->rd < 0)
			return why_set(why, -errno, "cannot read it: %s", strerror(errno));
	}
	return 0;
}

void undo_will_change(const char *path, uint64_t dev, uint64_t ino, int fd, uint64_t id,
		      uint64_t old_size, uint64_t from, uint64_t to)
{
	FDS_LOCKED(); /* the program's threads and MPI-IO's calls alike */
	static bool refused;
	struct session *s = session_get();
	struct why why = WHY_INIT;
	struct ufile *f;
	char named[PATH_MAX];
	int ret = 0;
	uint64_t at;

	if (refused || !s || from >= old_size || to <= from)
		return;
	if (to > old_size)
		to = old_size;
	if (!dev && !ino) {
		struct stat st;

		if (stat(path, &st))
			return;
		dev = st.st_dev;
		ino = st.st_ino;
	}
	new_interval(id);
	f = file_of(dev, ino);
	if (!f) {
		ret = why_set(&why, -ENOMEM, "out of memory for its undo record");
		goto out;
	}
	/* The gaps of [from, to) between the ranges saved already (a write
	 * over saved bytes only, the common case, costs a binary search). */
	at = from;
	for (int i = first_after(f, from); at < to && !ret; i++) {
		uint64_t end = i < f->n && f->r[i].a < to ? f->r[i].a : to;

		if (end > at) {
			ret = ready(f, path, fd, &why);
			if (!ret)
				ret = save(s, f, f->rd, old_size, at, end, &why);
			if (!ret)
				ret = add_range(f, at, end);
			/* The ranges moved: find the one after end again. */
			i = first_after(f, end) - 1;
			at = end;
			continue;
		}
		if (i >= f->n)
			break;
		at = f->r[i].b;
	}
out:
	if (ret) {
		if (f && f->path)
			path = f->path;
		else if (!path) {
			fds_path_of(fd, named, sizeof(named));
			path = named;
		}
		refused = true;
		fds_mark_overwritten(path, (int64_t)from, old_size, id,
				     why.msg[0] ? why.msg : strerror(-ret));
	}
}

void undo_keep_length(int fd, uint64_t dev, uint64_t ino, uint64_t id, uint64_t size)
{
	FDS_LOCKED();
	static bool refused;
	struct session *s = session_get();
	struct why why = WHY_INIT;
	char named[PATH_MAX];
	struct ufile *f;
	int ret;

	if (refused || !s)
		return;
	new_interval(id);
	f = file_of(dev, ino);
	if (f && (f->length_kept || size == UNDO_LENGTH_LOST)) {
		f->length_kept = true;
		return;
	}
	/* Named only when its first record is written (readlink costs). */
	fds_path_of(fd, named, sizeof(named));
	if (!f || (!f->path && !(f->path = strdup(named))))
		ret = why_set(&why, -ENOMEM, "out of memory for its undo record");
	else if (!(ret = fits(s, f, 0, &why)) && !(ret = open_record(s, &why)))
		ret = put_record(f, UNDO_MAGIC, size, size, NULL, 0, &why);
	if (!ret) {
		f->length_kept = true;
		return;
	}
	refused = true;
	fds_refuse("%s, opened for writing after checkpoint %llu: its length then (%llu bytes) "
		   "cannot be kept for a restart to cut it back to (%s)",
		   named, (unsigned long long)id, (unsigned long long)size, why.msg);
}

void undo_note_name(uint32_t op, const char *path, uint64_t id)
{
	FDS_LOCKED();
	static bool refused;
	struct session *s = session_get();
	struct why why = WHY_INIT;
	struct ufile f = {.path = (char *)path};
	int ret;

	if (refused || !s)
		return;
	new_interval(id);
	if (!(ret = fits(s, &f, 0, &why)) && !(ret = open_record(s, &why)))
		ret = put_record(&f, NAME_MAGIC, op, 0, NULL, 0, &why);
	if (!ret)
		return;
	refused = true;
	fds_refuse("%s, %s after checkpoint %llu, cannot be kept for a restart (%s)", path,
		   op == NAME_MKDIR || op == NAME_CREATE ? "made" : "removed", (unsigned long long)id,
		   why.msg);
}

/* --- the restart ------------------------------------------------------------------ */

/* The records to apply, read by undo_restart_check: per checkpoint,
 * newest first, the whole file. */
struct record_file {
	uint64_t id;
	char *data;
	size_t len;
};
static struct record_file *rfs;
static int nrfs;

static void forget(void)
{
	for (int i = 0; i < nrfs; i++)
		free(rfs[i].data);
	free(rfs);
	rfs = NULL;
	nrfs = 0;
}

static int read_all(const char *path, char **data, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	size_t got = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		close(fd);
		return -errno;
	}
	*data = malloc((size_t)st.st_size + 1);
	if (!*data) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, *data + got, (size_t)st.st_size - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	return 0;
}

/* Walk one record file: fn(record, path, bytes) for each whole record. */
typedef int (*rec_fn)(const struct undo_rec *h, const char *path, const char *bytes,
		      struct why *why);

static int walk(const struct record_file *rf, rec_fn fn, struct why *why)
{
	size_t at = 0;

	while (at + sizeof(struct undo_rec) <= rf->len) {
		struct undo_rec h;
		char path[PATH_MAX];
		int ret;

		memcpy(&h, rf->data + at, sizeof(h));
		if ((memcmp(h.magic, UNDO_MAGIC, 4) && memcmp(h.magic, NAME_MAGIC, 4)) ||
		    h.path_len == 0 || h.path_len >= PATH_MAX)
			return why_set(why, -EBADMSG,
				       "the undo record of checkpoint %llu is damaged",
				       (unsigned long long)rf->id);
		if (h.len > rf->len || at + sizeof(h) + h.path_len + h.len > rf->len)
			break; /* torn at the end: its write never happened */
		memcpy(path, rf->data + at + sizeof(h), h.path_len);
		path[h.path_len] = 0;
		ret = fn(&h, path, rf->data + at + sizeof(h) + h.path_len, why);
		if (ret)
			return ret;
		at += sizeof(h) + h.path_len + h.len;
	}
	return 0;
}

static struct {
	uint64_t dev, ino;
} * restored;
static int nrestored, caprestored;

bool undo_restores(uint64_t dev, uint64_t ino)
{
	for (int i = 0; i < nrestored; i++)
		if (restored[i].dev == dev && restored[i].ino == ino)
			return true;
	return false;
}

static int check_one(const struct undo_rec *h, const char *path, const char *bytes, struct why *why)
{
	struct stat st;
	int fd;

	(void)bytes;
	if (!memcmp(h->magic, NAME_MAGIC, 4)) {
		if (h->old_size < NAME_MKDIR || h->old_size > NAME_CREATE || path[0] != '/')
			return why_set(why, -EBADMSG, "an undo record names %s wrongly", path);
		return 0;
	}
	if (undo_restores(h->dev, h->ino))
		return 0;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	/* Only a length to cut back to: a file gone or replaced since (a
	 * temporary file renamed, a log removed) has nothing to cut. */
	if (!h->len && (fd < 0 ? errno == ENOENT
			       : fstat(fd, &st) || st.st_ino != h->ino || st.st_dev != h->dev)) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	if (fd < 0)
		return why_set(why, -errno,
			       "%s, written in place after the checkpoint, cannot be put back: %s",
			       path, strerror(errno));
	if (fstat(fd, &st) || st.st_ino != h->ino || st.st_dev != h->dev) {
		close(fd);
		return why_set(
		    why, -ESTALE,
		    "%s, written in place after the checkpoint, is not the file the program "
		    "wrote: it was replaced",
		    path);
	}
	close(fd);
	if (nrestored == caprestored) {
		int cap = caprestored ? 2 * caprestored : 16;
		void *p = realloc(restored, cap * sizeof(*restored));

		if (!p)
			return why_set(why, -ENOMEM, "out of memory reading undo records");
		restored = p;
		caprestored = cap;
	}
	restored[nrestored].dev = h->dev;
	restored[nrestored++].ino = h->ino;
	return 0;
}

int undo_restart_check(struct session *s, uint64_t id, struct why *why)
{
	uint64_t *ids = malloc(MAX_IDS * sizeof(*ids));
	int n, ret = 0;

	forget();
	nrestored = 0;
	if (!ids)
		return why_set(why, -ENOMEM, "out of memory reading undo records");
	n = store_list(&s->store, ids, MAX_IDS);
	rfs = calloc(n > 0 ? n : 1, sizeof(*rfs));
	if (!rfs) {
		free(ids);
		return why_set(why, -ENOMEM, "out of memory reading undo records");
	}
	/* Newest first. */
	for (int i = n - 1; i >= 0 && !ret; i--) {
		char path[sizeof(s->store.dir) + 64];
		struct record_file *rf = &rfs[nrfs];

		if (ids[i] < id)
			break;
		store_path(&s->store, ids[i], STORE_UNDO, path, sizeof(path));
		ret = read_all(path, &rf->data, &rf->len);
		if (ret == -ENOENT) {
			ret = 0;
			continue;
		}
		if (ret) {
			ret = why_set(why, ret, "cannot read %s: %s", path, strerror(-ret));
			break;
		}
		rf->id = ids[i];
		nrfs++;
		ret = walk(rf, check_one, why);
	}
	free(ids);
	if (ret)
		forget();
	else if (s->images_rebuilt)
		pr_warn("files this rank opened for writing after checkpoint %llu and closed again "
			"(a log appended to every step) cannot be cut back to their lengths then, "
			"nor the directories it made or the files it removed passed over: their "
			"undo record was lost with this rank's node",
			(unsigned long long)id);
	return ret;
}

/* Applying: the file each record names, open for writing, and the length
 * the current record file says it had. */
static struct {
	uint64_t dev, ino, size;
	int fd;
	char path[PATH_MAX];
} * open_files;
static int nopen;

static int apply_one(const struct undo_rec *h, const char *path, const char *bytes, struct why *why)
{
	int i;

	if (!memcmp(h->magic, NAME_MAGIC, 4))
		return names_pending_add((uint32_t)h->old_size, path)
			   ? why_set(why, -ENOMEM, "out of memory applying undo records")
			   : 0;
	if (!undo_restores(h->dev, h->ino))
		return 0; /* only its length, and gone or replaced (check_one) */
	for (i = 0; i < nopen; i++)
		if (open_files[i].dev == h->dev && open_files[i].ino == h->ino)
			break;
	if (i == nopen) {
		int fd = open(path, O_WRONLY | O_CLOEXEC);

		if (fd < 0)
			return why_set(why, -errno, "cannot put %s back: %s", path,
				       strerror(errno));
		open_files[i].dev = h->dev;
		open_files[i].ino = h->ino;
		open_files[i].fd = fd;
		snprintf(open_files[i].path, sizeof(open_files[i].path), "%s", path);
		nopen++;
	}
	open_files[i].size = h->old_size;
	for (uint64_t done = 0; done < h->len;) {
		ssize_t w = pwrite(open_files[i].fd, bytes + done, h->len - done,
				   (off_t)(h->offset + done));

		if (w <= 0)
			return why_set(why, w < 0 ? -errno : -EIO, "cannot put %s back: %s", path,
				       strerror(w < 0 ? errno : EIO));
		done += (uint64_t)w;
	}
	return 0;
}

static int close_all(int ret, struct why *why)
{
	for (int i = 0; i < nopen; i++) {
		if (!ret && ftruncate(open_files[i].fd, (off_t)open_files[i].size))
			ret = why_set(why, -errno, "cannot cut %s back to %llu bytes: %s",
				      open_files[i].path, (unsigned long long)open_files[i].size,
				      strerror(errno));
		if (!ret && fdatasync(open_files[i].fd))
			ret = why_set(why, -errno, "cannot write %s: %s", open_files[i].path,
				      strerror(errno));
		close(open_files[i].fd);
	}
	nopen = 0;
	return ret;
}

int undo_restart_apply(struct session *s, uint64_t id, struct why *why)
{
	int ret = 0;

	(void)id;
	if (nrfs)
		open_files = calloc((size_t)nrestored + 1, sizeof(*open_files));
	if (nrfs && !open_files)
		return why_set(why, -ENOMEM, "out of memory applying undo records");
	/* Newest first: each interval's record puts its files back to their
	 * content at its checkpoint, and their length then. */
	for (int i = 0; i < nrfs && !ret; i++) {
		ret = walk(&rfs[i], apply_one, why);
		ret = close_all(ret, why);
	}
	/* The files are at id's content now: the records are spent (a crash
	 * before they are gone applies them again, to the same effect). */
	for (int i = 0; i < nrfs && !ret; i++) {
		char path[sizeof(s->store.dir) + 64];

		store_path(&s->store, rfs[i].id, STORE_UNDO, path, sizeof(path));
		if (unlink(path) && errno != ENOENT)
			ret = why_set(why, -errno, "cannot remove %s: %s", path, strerror(errno));
	}
	free(open_files);
	open_files = NULL;
	forget();
	return ret;
}
