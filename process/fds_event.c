/* The program's descriptors that a restart makes again rather than opens
 * by path (fds.h, format.h FILE_PIPE ... FILE_EPOLL): pipes whose both ends
 * are the program's, eventfds, timerfds, signalfds and epoll instances.
 *
 * What each holds is read where the kernel shows it, as CRIU does
 * (/proc/self/fdinfo: an eventfd's counter, a timerfd's clock and unread
 * expirations, a signalfd's mask, an epoll instance's registrations with
 * the descriptor number, events and data of each), so that state made
 * through any call (syscall(2) included) is seen. A pipe's bytes are
 * copied with tee(2), which leaves them in the pipe: the program goes on
 * after the checkpoint with its pipe as it was, and nothing is lost if the
 * checkpoint fails halfway.
 *
 * Which pipes are the program's alone: a pipe is one inode, shared by its
 * two ends; when the program holds both (its read end and its write end,
 * one description each) nobody else can have written into it in a way the
 * restart would miss. A pipe with one end only (the other given to a child,
 * or closed: stasis cannot tell) stops checkpoints, naming it. */
#define LOG_PREFIX "files: "
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "fds.h"
#include "format.h"
#include "log.h"

/* The describes' one payload storage (fds_payload). */
static char *payload;
static size_t payload_cap;

char *fds_payload(size_t n)
{
	char *p;

	if (n <= payload_cap)
		return payload;
	p = realloc(payload, n);
	if (!p)
		return NULL;
	payload = p;
	payload_cap = n;
	return payload;
}

/* /proc/self/fdinfo/fd, NUL-terminated, in module storage (*out). */
static char *fdinfo;
static size_t fdinfo_cap;

static int read_fdinfo(int fd)
{
	char name[64];
	size_t len = 0;
	ssize_t n;
	int f;

	snprintf(name, sizeof(name), "/proc/self/fdinfo/%d", fd);
	f = open(name, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -errno;
	for (;;) {
		if (len + 4096 + 1 > fdinfo_cap) {
			size_t cap = fdinfo_cap ? fdinfo_cap * 2 : 16384;
			char *p = realloc(fdinfo, cap);

			if (!p) {
				close(f);
				return -ENOMEM;
			}
			fdinfo = p;
			fdinfo_cap = cap;
		}
		n = read(f, fdinfo + len, fdinfo_cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(f);
	if (n < 0)
		return -errno;
	fdinfo[len] = 0;
	return 0;
}

/* The value after "key" at a line's start in fdinfo, or NULL. */
static const char *field(const char *key)
{
	size_t k = strlen(key);

	for (const char *l = fdinfo; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (!strncmp(l, key, k))
			return l + k;
	return NULL;
}

/* --- saving ---------------------------------------------------------------------- */

/* The program's descriptor with the pipe inode ino, the other access mode
 * than acc, the lowest; -1 if none. *ndesc: how many descriptions of that
 * end the program holds. */
static int other_end(uint64_t ino, int acc, int *ndesc)
{
	uint32_t seen = 0;
	int found = -1;

	*ndesc = 0;
	for (int fd = 3; fd < fds_range(); fd++) {
		const struct fds_slot *sl = fds_slot(fd);
		struct stat st;
		int fl;

		if (sl->state != SLOT_PROGRAM || fstat(fd, &st) || !S_ISFIFO(st.st_mode) ||
		    st.st_ino != ino || (fl = fcntl(fd, F_GETFL)) < 0 || (fl & O_ACCMODE) == acc)
			continue;
		if (found < 0)
			found = fd;
		if (!*ndesc || sl->desc != seen)
			(*ndesc)++;
		seen = sl->desc;
	}
	return found;
}

/* Whether fd is the first of its description in the range. */
bool fds_event_first_of_desc(int fd)
{
	uint32_t d = fds_slot(fd)->desc;

	for (int g = 3; g < fd; g++)
		if (fds_slot(g)->state == SLOT_PROGRAM && fds_slot(g)->desc == d)
			return false;
	return true;
}

/* The bytes in the pipe whose read end is fd, copied (tee) into payload. */
static int copy_pipe(int fd, const char *path, size_t *plen, struct why *why)
{
	int avail = 0, cap = fcntl(fd, F_GETPIPE_SZ), t[2];
	ssize_t n, got = 0;

	*plen = 0;
	if (cap < 0 || ioctl(fd, FIONREAD, &avail) < 0)
		return why_set(why, -errno, "%s (descriptor %d): %s", path, fd, strerror(errno));
	if (!avail)
		return 0;
	if (!fds_payload((size_t)avail))
		return why_set(why, -ENOMEM, "out of memory copying %s", path);
	if (pipe2(t, O_CLOEXEC | O_NONBLOCK))
		return why_set(why, -errno, "cannot copy %s: %s", path, strerror(errno));
	/* As many slots as the program's pipe: tee takes its buffers whole. */
	if (fcntl(t[1], F_SETPIPE_SZ, cap) < cap) {
		n = -1;
		goto out;
	}
	n = tee(fd, t[1], (size_t)avail, SPLICE_F_NONBLOCK);
	while (n == avail && got < avail) {
		ssize_t r = read(t[0], payload + got, (size_t)(avail - got));

		if (r <= 0)
			break;
		got += r;
	}
out:
	close(t[0]);
	close(t[1]);
	if (n != avail || got != avail)
		return why_set(why, n < 0 ? -errno : -EIO,
			       "cannot copy the %d bytes in %s (descriptor %d): %s", avail, path,
			       fd, n < 0 ? strerror(errno) : "copied short");
	*plen = (size_t)avail;
	return 0;
}

static int describe_pipe(int fd, const struct stat *st, const char *path, struct file_record *r,
			 size_t *plen, struct why *why)
{
	int acc = (int)(r->flags & O_ACCMODE), ndesc, other, mine;

	r->kind = FILE_PIPE;
	r->ino = st->st_ino;
	r->size = (uint64_t)fcntl(fd, F_GETPIPE_SZ);
	other = other_end(st->st_ino, acc, &ndesc);
	/* The same end's descriptions: the program's own end counted as the
	 * "other" of the opposite mode. */
	other_end(st->st_ino, acc == O_RDONLY ? O_WRONLY : O_RDONLY, &mine);
	if (other < 0) {
		fds_refuse("%s (descriptor %d), a pipe whose other end is not the program's "
			   "(another process's, or closed): a restart could not make it again",
			   path, fd);
		return why_set(why, -EXDEV, "%s (descriptor %d): a pipe to another process",
			       path, fd);
	}
	if (ndesc > 1 || mine > 1) {
		fds_refuse("%s (descriptor %d), a pipe end opened more than once", path, fd);
		return why_set(why, -EXDEV, "%s (descriptor %d): a pipe end opened twice", path,
			       fd);
	}
	if (acc == O_RDONLY && fds_event_first_of_desc(fd))
		return copy_pipe(fd, path, plen, why);
	return 0;
}

static int describe_eventfd(int fd, const char *path, struct file_record *r, struct why *why)
{
	const char *c = field("eventfd-count:"), *s = field("eventfd-semaphore:");

	if (!c)
		return why_set(why, -EIO, "%s (descriptor %d): no counter in fdinfo", path, fd);
	r->kind = FILE_EVENTFD;
	r->offset = strtoull(c, NULL, 16);
	r->rdev = s && strtoul(s, NULL, 10) == 1;
	return 0;
}

static int describe_timerfd(int fd, const char *path, struct file_record *r, size_t *plen,
			    struct why *why)
{
	const char *clk = field("clockid:"), *ticks = field("ticks:");
	struct timerfd_record t = {0};
	struct itimerspec its;

	if (!clk || !ticks || timerfd_gettime(fd, &its))
		return why_set(why, -EIO, "%s (descriptor %d): cannot read the timer", path, fd);
	t.clockid = (int32_t)strtol(clk, NULL, 10);
	t.ticks = strtoull(ticks, NULL, 10);
	t.value_sec = its.it_value.tv_sec;
	t.value_nsec = its.it_value.tv_nsec;
	t.interval_sec = its.it_interval.tv_sec;
	t.interval_nsec = its.it_interval.tv_nsec;
	if (!fds_payload(sizeof(t)))
		return why_set(why, -ENOMEM, "out of memory recording %s", path);
	memcpy(payload, &t, sizeof(t));
	*plen = sizeof(t);
	r->kind = FILE_TIMERFD;
	return 0;
}

static int describe_signalfd(int fd, const char *path, struct file_record *r, struct why *why)
{
	const char *m = field("sigmask:");

	if (!m)
		return why_set(why, -EIO, "%s (descriptor %d): no mask in fdinfo", path, fd);
	r->kind = FILE_SIGNALFD;
	r->offset = strtoull(m, NULL, 16);
	return 0;
}

/* Lines "tfd: %8d events: %8x data: %16llx  pos:%lli ino:%lx sdev:%x". */
static int describe_epoll(int fd, const char *path, struct file_record *r, size_t *plen,
			  struct why *why)
{
	size_t n = 0;

	for (const char *l = strstr(fdinfo, "tfd:"); l; l = strstr(l + 1, "\ntfd:")) {
		struct epoll_watch w;
		unsigned long long data, ino;
		unsigned int events;
		int tfd, used;
		struct stat st;
		const struct fds_slot *sl;

		if (*l == '\n')
			l++;
		if (sscanf(l, "tfd: %d events: %x data: %llx pos:%*s ino:%llx%n", &tfd, &events,
			   &data, &ino, &used) < 4)
			return why_set(why, -EIO, "%s (descriptor %d): cannot read fdinfo", path,
				       fd);
		sl = fds_slot(tfd);
		if (!sl || sl->state != SLOT_PROGRAM || fstat(tfd, &st) || st.st_ino != ino) {
			fds_refuse("%s (descriptor %d) watches descriptor %d, which is not the "
				   "program's (or no longer the file it registered)",
				   path, fd, tfd);
			return why_set(why, -EXDEV, "%s watches descriptor %d, not the program's",
				       path, tfd);
		}
		if (!fds_payload((n + 1) * sizeof(w)))
			return why_set(why, -ENOMEM, "out of memory recording %s", path);
		w = (struct epoll_watch){.fd = tfd, .events = events, .data = data};
		memcpy(payload + n * sizeof(w), &w, sizeof(w));
		n++;
	}
	r->kind = FILE_EPOLL;
	*plen = n * sizeof(struct epoll_watch);
	return 0;
}

int fds_event_describe(int fd, const struct stat *st, const char *path, struct file_record *r,
		       const void **data, size_t *plen, struct why *why)
{
	int ret;

	*data = NULL;
	*plen = 0;
	if (S_ISFIFO(st->st_mode) && !strncmp(path, "pipe:", 5))
		ret = describe_pipe(fd, st, path, r, plen, why);
	else if (S_ISSOCK(st->st_mode))
		return fds_socket_describe(fd, st, path, r, data, plen, why);
	else if (strncmp(path, "anon_inode:", 11))
		return 0;
	else if ((ret = read_fdinfo(fd)))
		ret = why_set(why, ret, "%s (descriptor %d): %s", path, fd, strerror(-ret));
	else if (!strcmp(path, "anon_inode:[eventfd]"))
		ret = describe_eventfd(fd, path, r, why);
	else if (!strcmp(path, "anon_inode:[timerfd]"))
		ret = describe_timerfd(fd, path, r, plen, why);
	else if (!strcmp(path, "anon_inode:[signalfd]"))
		ret = describe_signalfd(fd, path, r, why);
	else if (!strcmp(path, "anon_inode:[eventpoll]"))
		ret = describe_epoll(fd, path, r, plen, why);
	else if (!strcmp(path, "anon_inode:inotify"))
		return fds_inotify_describe(fd, st, path, fdinfo, r, data, plen, why);
	else
		return 0;
	if (ret)
		return ret;
	*data = *plen ? payload : NULL;
	return 1;
}

const char *fds_event_name(uint32_t kind)
{
	switch (kind) {
	case FILE_PIPE:
		return "a pipe";
	case FILE_EVENTFD:
		return "an eventfd";
	case FILE_TIMERFD:
		return "a timerfd";
	case FILE_SIGNALFD:
		return "a signalfd";
	case FILE_EPOLL:
		return "an epoll instance";
	case FILE_SOCKETPAIR:
		return "a socketpair";
	case FILE_INOTIFY:
		return "an inotify instance";
	case FILE_DELETED:
		return "a file without a name";
	}
	return NULL;
}

/* --- the restart ------------------------------------------------------------------ */

/* The status flags a description can be given again (F_SETFL). */
static int set_status(int k, uint32_t flags)
{
	int fl = fcntl(k, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = (fl & ~O_NONBLOCK) | (int)(flags & O_NONBLOCK);
	return fcntl(k, F_SETFL, fl) ? -errno : 0;
}

/* A timer with ticks unread expirations and the rest as saved: armed on
 * an absolute time just past, so that the kernel counts ticks expirations
 * at once, then one interval on (the phase within the interval is not
 * kept). */
static int arm_timer(int k, const struct timerfd_record *t)
{
	struct itimerspec its = {
	    .it_value = {.tv_sec = t->value_sec, .tv_nsec = t->value_nsec},
	    .it_interval = {.tv_sec = t->interval_sec, .tv_nsec = t->interval_nsec},
	};
	struct timespec now;
	long double back;

	if (!t->ticks)
		return timerfd_settime(k, 0, &its, NULL) ? -errno : 0;
	if (clock_gettime(t->clockid, &now))
		return -errno;
	back = (long double)(t->ticks - 1) *
		   ((long double)t->interval_sec * 1e9L + (long double)t->interval_nsec) +
	       1;
	back = (long double)now.tv_sec * 1e9L + now.tv_nsec - back;
	if (back < 1)
		back = 1;
	its.it_value.tv_sec = (time_t)(back / 1e9L);
	its.it_value.tv_nsec = (long)(back - (long double)its.it_value.tv_sec * 1e9L);
	return timerfd_settime(k, TFD_TIMER_ABSTIME, &its, NULL) ? -errno : 0;
}

static int make_pipe(const struct file_record *recs, char *const *data, const size_t *len,
		     int *made, int n, int i, struct why *why)
{
	int p[2], j, reader;
	const struct file_record *r = &recs[i];

	for (j = 0; j < n; j++)
		if (j != i && recs[j].kind == FILE_PIPE && recs[j].ino == r->ino &&
		    (recs[j].flags & O_ACCMODE) != (r->flags & O_ACCMODE))
			break;
	if (j == n)
		return why_set(why, -EBADMSG, "the record of open files in the image is damaged");
	if (pipe2(p, O_CLOEXEC | (int)(r->flags & O_DIRECT)))
		return why_set(why, -errno, "cannot make a pipe: %s", strerror(errno));
	reader = (r->flags & O_ACCMODE) == O_RDONLY ? i : j;
	if (r->size && fcntl(p[1], F_SETPIPE_SZ, (int)r->size) < 0 && errno != EPERM) {
		why_set(why, -errno, "cannot give a pipe %llu bytes: %s",
			(unsigned long long)r->size, strerror(errno));
		goto fail;
	}
	if (len[reader] && write(p[1], data[reader], len[reader]) != (ssize_t)len[reader]) {
		why_set(why, -EIO, "cannot put %zu bytes back into a pipe", len[reader]);
		goto fail;
	}
	if (set_status(p[0], recs[reader].flags) || set_status(p[1], recs[reader == i ? j : i].flags)) {
		why_set(why, -errno, "cannot set a pipe's flags: %s", strerror(errno));
		goto fail;
	}
	made[reader] = p[0];
	made[reader == i ? j : i] = p[1];
	return 0;
fail:
	close(p[0]);
	close(p[1]);
	return why->err ? why->err : -EIO;
}

int fds_event_make(const struct file_record *recs, char *const *data, const size_t *len,
		   int *made, int n, int i, struct why *why)
{
	const struct file_record *r = &recs[i];
	const char *what = fds_event_name(r->kind);
	struct timerfd_record t;
	int k = -1, ret = 0;

	switch (r->kind) {
	case FILE_PIPE:
		return made[i] >= 0 ? 0 : make_pipe(recs, data, len, made, n, i, why);
	case FILE_SOCKETPAIR:
		return fds_socket_make(recs, data, len, made, n, i, why);
	case FILE_DELETED:
		return fds_deleted_make(recs, data, len, made, n, i, why);
	case FILE_INOTIFY:
		if ((ret = fds_inotify_make(data[i], len[i], &k, why)))
			return ret;
		break;
	case FILE_EVENTFD:
		k = eventfd(0, EFD_CLOEXEC | (r->rdev ? EFD_SEMAPHORE : 0));
		if (k >= 0 && r->offset && write(k, &r->offset, 8) != 8)
			ret = -errno;
		break;
	case FILE_TIMERFD:
		if (len[i] != sizeof(t))
			return why_set(why, -EBADMSG,
				       "the record of open files in the image is damaged");
		memcpy(&t, data[i], sizeof(t));
		k = timerfd_create(t.clockid, TFD_CLOEXEC);
		if (k >= 0)
			ret = arm_timer(k, &t);
		break;
	case FILE_SIGNALFD: {
		sigset_t set;

		sigemptyset(&set);
		for (int s = 1; s <= 64; s++)
			if ((r->offset >> (s - 1)) & 1)
				sigaddset(&set, s);
		k = signalfd(-1, &set, SFD_CLOEXEC);
		break;
	}
	case FILE_EPOLL:
		if (len[i] % sizeof(struct epoll_watch))
			return why_set(why, -EBADMSG,
				       "the record of open files in the image is damaged");
		k = epoll_create1(EPOLL_CLOEXEC);
		break;
	default:
		return why_set(why, -EBADMSG, "the record of open files in the image is damaged");
	}
	if (k < 0)
		return why_set(why, -errno, "cannot make %s (descriptor %d) again: %s", what, r->fd,
			       strerror(errno));
	if (!ret)
		ret = set_status(k, r->flags);
	if (ret) {
		close(k);
		return why_set(why, ret, "cannot make %s (descriptor %d) again: %s", what, r->fd,
			       strerror(-ret));
	}
	made[i] = k;
	return 0;
}

int fds_event_register(const struct file_record *r, const char *data, size_t len,
		       struct why *why)
{
	struct epoll_watch w;

	if (r->kind == FILE_INOTIFY)
		fds_inotify_drain(r->fd);
	if (r->kind != FILE_EPOLL)
		return 0;
	for (size_t at = 0; at + sizeof(w) <= len; at += sizeof(w)) {
		struct epoll_event ev;

		memcpy(&w, data + at, sizeof(w));
		ev.events = w.events;
		ev.data.u64 = w.data;
		if (epoll_ctl(r->fd, EPOLL_CTL_ADD, w.fd, &ev))
			return why_set(why, -errno,
				       "cannot register descriptor %d with the epoll instance %d "
				       "again: %s",
				       w.fd, r->fd, strerror(errno));
	}
	return 0;
}
