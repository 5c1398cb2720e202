/* inotify instances of the program (format.h FILE_INOTIFY): a restart
 * makes the instance again and adds its watches again, each under the
 * watch descriptor the program holds.
 *
 * Which watches an instance has, and their masks, are read where the
 * kernel shows them (/proc/self/fdinfo: a watch removed by the program or
 * by the kernel, IN_IGNORED, is gone there); the path of each is noted when
 * inotify_add_watch() returns, since the kernel keeps only a file handle,
 * which only a privileged process could open again. A watch whose path
 * stasis did not see, or whose path names another file now, is refused,
 * named. Events not read yet cannot be copied without taking them from the
 * program: a checkpoint finding some is skipped, named.
 *
 * Watch descriptors are handed out by the kernel in increasing order (an
 * idr, cyclic): a restart adds the watches in that order and steps over
 * the numbers the program's removed watches used by adding and removing a
 * watch, whose IN_IGNORED events are read away before the program
 * resumes. */
#define LOG_PREFIX "files: "
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fds.h"
#include "format.h"
#include "log.h"

/* Lookup flags that fdinfo does not show. */
#define LOOKUP_FLAGS (IN_DONT_FOLLOW | IN_ONLYDIR)

/* The watches inotify_add_watch() made, by instance inode and wd. */
struct noted {
	uint64_t inst;
	int wd;
	uint32_t flags;
	char *path;
};
static struct noted *noted;
static int nnoted, noted_cap;

static struct noted *find(uint64_t inst, int wd)
{
	for (int i = 0; i < nnoted; i++)
		if (noted[i].inst == inst && noted[i].wd == wd)
			return &noted[i];
	return NULL;
}

static int note(uint64_t inst, int wd, const char *abs, uint32_t mask)
{
	struct noted *n = find(inst, wd);
	char *p = strdup(abs);

	if (!p)
		return -ENOMEM;
	if (!n) {
		if (nnoted == noted_cap) {
			int cap = noted_cap ? noted_cap * 2 : 32;
			struct noted *v = realloc(noted, sizeof(*v) * (size_t)cap);

			if (!v) {
				free(p);
				return -ENOMEM;
			}
			noted = v;
			noted_cap = cap;
		}
		n = &noted[nnoted++];
		n->path = NULL;
	}
	free(n->path);
	*n = (struct noted){inst, wd, mask & LOOKUP_FLAGS, p};
	return 0;
}

void fds_inotify_added(int fd, int wd, const char *path, uint32_t mask)
{
	FDS_LOCKED();
	char abs[PATH_MAX];
	struct stat st;
	const struct fds_slot *sl = fds_slot(fd);

	if (!sl || sl->state != SLOT_PROGRAM || fstat(fd, &st))
		return;
	if (path[0] == '/')
		snprintf(abs, sizeof(abs), "%s", path);
	else if (!getcwd(abs, sizeof(abs)) || strlen(abs) + 1 + strlen(path) >= sizeof(abs))
		abs[0] = 0;
	else
		strcat(strcat(abs, "/"), path);
	if (!abs[0] || note(st.st_ino, wd, abs, mask))
		fds_refuse("an inotify watch on %s whose path stasis could not keep", path);
}

/* --- saving ---------------------------------------------------------------------- */

/* Bytes of fds_payload filled by this describe. */
static size_t payload_len;

/* n bytes at the end of the payload, padded to 8. */
static int append(const void *p, size_t n)
{
	size_t want = payload_len + ((n + 7) & ~(size_t)7);
	char *payload = fds_payload(want);

	if (!payload)
		return -ENOMEM;
	memcpy(payload + payload_len, p, n);
	memset(payload + payload_len + n, 0, want - payload_len - n);
	payload_len = want;
	return 0;
}

/* Lines "inotify wd:%x ino:%lx sdev:%x mask:%x ignored_mask:%x ...", in
 * fdinfo (the caller read it), sorted into wd order in the payload. */
int fds_inotify_describe(int fd, const struct stat *st, const char *path, const char *fdinfo,
			 struct file_record *r, const void **data, size_t *plen, struct why *why)
{
	struct inotify_watch w[64], t;
	int n = 0, inq = 0;

	payload_len = 0;
	if (ioctl(fd, FIONREAD, &inq))
		return why_set(why, -errno, "%s (descriptor %d): %s", path, fd, strerror(errno));
	if (inq)
		return why_set(why, -EAGAIN,
			       "%s (descriptor %d) holds %d bytes of events the program did not "
			       "read yet; this checkpoint is skipped",
			       path, fd, inq);
	for (const char *l = strstr(fdinfo, "inotify wd:"); l; l = strstr(l + 1, "inotify wd:")) {
		unsigned int wd, mask;
		unsigned long long ino;

		if (sscanf(l, "inotify wd:%x ino:%llx sdev:%*x mask:%x", &wd, &ino, &mask) < 3)
			return why_set(why, -EIO, "%s (descriptor %d): cannot read fdinfo", path,
				       fd);
		if (n == (int)(sizeof(w) / sizeof(w[0]))) {
			fds_refuse("%s (descriptor %d) with more than %d watches", path, fd, n);
			return why_set(why, -E2BIG, "%s (descriptor %d): too many watches", path,
				       fd);
		}
		w[n++] = (struct inotify_watch){.wd = (int32_t)wd, .mask = mask, .ino = ino};
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && w[j - 1].wd > w[j].wd; j--)
			t = w[j], w[j] = w[j - 1], w[j - 1] = t;
	for (int i = 0; i < n; i++) {
		const struct noted *nt = find(st->st_ino, w[i].wd);
		struct stat ws;
		int got;

		if (!nt) {
			fds_refuse("%s (descriptor %d) has watch %d, added in a way stasis did not "
				   "see",
				   path, fd, w[i].wd);
			return why_set(why, -EXDEV, "%s (descriptor %d): watch %d unknown", path,
				       fd, w[i].wd);
		}
		got = nt->flags & IN_DONT_FOLLOW ? lstat(nt->path, &ws) : stat(nt->path, &ws);
		if (got || ws.st_ino != w[i].ino)
			return why_set(why, -ESTALE,
				       "%s, watched by %s (descriptor %d), is no longer the file "
				       "it watches; this checkpoint is skipped",
				       nt->path, path, fd);
		w[i].mask |= nt->flags;
		w[i].path_len = (uint32_t)strlen(nt->path);
		if (append(&w[i], sizeof(w[i])) || append(nt->path, w[i].path_len))
			return why_set(why, -ENOMEM, "out of memory recording %s", path);
	}
	r->kind = FILE_INOTIFY;
	r->ino = st->st_ino;
	*data = payload_len ? fds_payload(payload_len) : NULL;
	*plen = payload_len;
	return 1;
}

/* --- the restart ------------------------------------------------------------------ */

/* Watch w (its path at p) under its number on instance k. */
static int add_again(int k, const struct inotify_watch *w, const char *p, struct why *why)
{
	for (long tries = 0; tries < (1l << 22); tries++) {
		int got = inotify_add_watch(k, p, w->mask);

		if (got < 0)
			return why_set(why, -errno, "cannot watch %s again: %s", p,
				       strerror(errno));
		if (got == w->wd)
			return 0;
		if (got > w->wd)
			break;
		inotify_rm_watch(k, got);
	}
	return why_set(why, -EBUSY, "cannot watch %s again as watch %d", p, w->wd);
}

int fds_inotify_make(const char *data, size_t len, int *made, struct why *why)
{
	struct stat st;
	int k = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);

	if (k < 0 || fstat(k, &st))
		return why_set(why, -errno, "cannot make an inotify instance again: %s",
			       strerror(errno));
	for (size_t at = 0; at < len;) {
		struct inotify_watch w;
		char p[PATH_MAX];
		int ret;

		if (len - at < sizeof(w))
			goto damaged;
		memcpy(&w, data + at, sizeof(w));
		at += sizeof(w);
		if (w.path_len >= PATH_MAX || w.path_len > len - at)
			goto damaged;
		memcpy(p, data + at, w.path_len);
		p[w.path_len] = 0;
		at += (w.path_len + 7) & ~7u;
		ret = add_again(k, &w, p, why);
		if (!ret)
			ret = note(st.st_ino, w.wd, p, w.mask);
		if (ret) {
			close(k);
			return why_set(why, ret, "cannot watch %s again: %s", p, strerror(-ret));
		}
	}
	made[0] = k;
	return 0;
damaged:
	close(k);
	return why_set(why, -EBADMSG, "the record of open files in the image is damaged");
}

/* Once the files are back: the events the restart itself caused (the
 * watches it stepped over, files put back) are not the program's. */
void fds_inotify_drain(int fd)
{
	char buf[4096];
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK))
		return;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	fcntl(fd, F_SETFL, fl);
}
