/* The program's descriptors while it runs: the reserved range, where the
 * program's opens go, what they are, and the writes a restart could not
 * undo (fds.h). */
#define LOG_PREFIX "files: "
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fds.h"
#include "log.h"
#include "session.h"
#include "threads.h"
#include "undo.h"

/* Runtime state (never restored: a restart rebuilds it from the image). */
static struct fds_slot slots[FDS_RANGE_MAX];
static int range;	     /* 0: not tracking */
static int placeholder = -1; /* what every reserved number duplicates */
static uint32_t next_desc = 1;
static bool restart_pending;
static bool overwrite_said;

/* Lengths of the written files at the newest two checkpoints: those open
 * for writing at the checkpoint, and those the program opened for writing
 * since (opened_for_writing). */
#define WRITTEN_MAX 1024
struct ckpt_sizes {
	uint64_t id;
	int n;
	struct {
		uint64_t dev, ino, size;
	} f[WRITTEN_MAX];
};
static struct ckpt_sizes sizes[2];
static bool checkpointed_size(uint64_t dev, uint64_t ino, uint64_t *size, uint64_t *id);

static pthread_mutex_t table_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

int fds_lock(void)
{
	stasis_busy_enter();
	pthread_mutex_lock(&table_lock);
	return 0;
}

void fds_unlock(int *unused)
{
	(void)unused;
	pthread_mutex_unlock(&table_lock);
	stasis_busy_leave();
}

int fds_range(void)
{
	return range;
}

bool fds_before_restore(void)
{
	return restart_pending;
}

void fds_set_restored(void)
{
	restart_pending = false;
	/* The program's children are not restarting (fds_init reads it). */
	unsetenv("STASIS_RESTART");
}

uint32_t fds_new_desc(void)
{
	return next_desc++;
}

const struct fds_slot *fds_slot(int fd)
{
	return fd >= 0 && fd < range ? &slots[fd] : NULL;
}

void fds_refuse(const char *fmt, ...)
{
	FDS_LOCKED();
	static char what[768];
	static bool said;
	va_list ap;

	if (said)
		return;
	said = true;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	session_unsupported(what);
}

static int child_pipes;
static char child_command[256];

void fds_child_pipe(int delta, const char *command)
{
	FDS_LOCKED();
	child_pipes += delta;
	if (child_pipes < 0)
		child_pipes = 0;
	if (command)
		snprintf(child_command, sizeof(child_command), "%s", command);
}

int fds_child_pipes(const char **command)
{
	if (command)
		*command = child_command;
	return __atomic_load_n(&child_pipes, __ATOMIC_RELAXED);
}

int fds_init(void)
{
	struct rlimit rl;
	const char *restart = getenv("STASIS_RESTART");
	int fd, master;

	range = 0;
	restart_pending = restart && !strcmp(restart, "1");
	int want = FDS_RANGE_MAX;
	/* Leave the runtime three quarters of what the process may open. */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur / 4 < (rlim_t)want)
		want = (int)(rl.rlim_cur / 4);
	if (want < 16)
		return -EMFILE;
	/* Read-only /dev/null: a program that uses a number it closed reads
	 * end-of-file and cannot write, as near to EBADF as a held number gets. */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	master = fcntl(fd, F_DUPFD_CLOEXEC, want);
	close(fd);
	if (master < 0)
		return -errno;
	placeholder = master;
	for (fd = 0; fd < want; fd++) {
		slots[fd] = (struct fds_slot){.state = SLOT_OTHER, .std_of = -1};
		/* Held already (0, 1, 2, or inherited): not the program's to have. */
		if (fd < 3 || fcntl(fd, F_GETFD) >= 0)
			continue;
		if (dup3(master, fd, O_CLOEXEC) != fd)
			continue;
		slots[fd].state = SLOT_RESERVED;
	}
	range = want;
	return 0;
}

/* The lowest reserved number >= min, or -1. */
static int lowest_reserved(int min)
{
	for (int fd = min < 3 ? 3 : min; fd < range; fd++)
		if (slots[fd].state == SLOT_RESERVED)
			return fd;
	return -1;
}

/* Put the placeholder on fd, a number of the range the program let go. */
static void reserve(int fd)
{
	if (dup3(placeholder, fd, O_CLOEXEC) == fd)
		slots[fd] = (struct fds_slot){.state = SLOT_RESERVED, .std_of = -1};
	else
		slots[fd] = (struct fds_slot){.state = SLOT_OTHER, .std_of = -1};
}

/* Move fd (the kernel's choice) onto the lowest reserved number >= min,
 * as a descriptor of description desc; st is its fstat(). */
static int place(int fd, int min, uint32_t desc, int std_of, const struct stat *st)
{
	int to = lowest_reserved(min), cloexec;

	if (to < 0) {
		fds_refuse("more than %d files open at once (stasis keeps descriptors 3 to %d "
			   "for the program)",
			   range - 3, range - 1);
		return fd;
	}
	cloexec = fcntl(fd, F_GETFD);
	if (cloexec < 0 || dup3(fd, to, (cloexec & FD_CLOEXEC) ? O_CLOEXEC : 0) != to) {
		fds_refuse("cannot move descriptor %d to %d: %s", fd, to, strerror(errno));
		return fd;
	}
	close(fd);
	slots[to] = (struct fds_slot){.state = SLOT_PROGRAM,
				      .std_of = (int8_t)std_of,
				      .desc = desc,
				      .dev = st->st_dev,
				      .ino = st->st_ino};
	return to;
}

/* Character devices a restart can open again by name and that keep no
 * state: /dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom. */
static bool reopenable_device(dev_t rdev)
{
	unsigned int mi = minor(rdev);

	return major(rdev) == 1 && (mi == 3 || mi == 5 || mi == 7 || mi == 8 || mi == 9);
}

/* Why fd (just opened) cannot be restored; NULL if it can. The
 * path is looked up only to say why (readlink of /proc costs). */
static const char *unrestorable(int fd, const struct stat *st, char *buf, size_t len)
{
	char link[64], path[PATH_MAX];
	const char *what;
	ssize_t n;

	/* A regular file without a name (tmpfile(), O_TMPFILE) too: its
	 * bytes are recorded (fds_deleted.c). */
	if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode))
		what = NULL;
	else if (S_ISCHR(st->st_mode))
		what = reopenable_device(st->st_rdev)
			   ? NULL
			   : "a character device stasis cannot open again";
	else if (S_ISFIFO(st->st_mode))
		what = "a FIFO";
	else if (S_ISBLK(st->st_mode))
		what = "a block device";
	else
		what = "neither a file nor a device";
	if (!what)
		return NULL;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	path[n > 0 ? n : 0] = 0;
	snprintf(buf, len, "%s, %s", path, what);
	return buf;
}

/* Whether fd, just returned by call, can be moved into the program's
 * range: a failed call has nothing to move; with no range kept, the
 * program's descriptors cannot be restored, which is refused. */
static bool placeable(int fd, const char *call)
{
	if (fd < 0)
		return false;
	if (!range) {
		fds_refuse("%s: no descriptors are kept for the program", call);
		return false;
	}
	return true;
}

bool fds_written_size(uint64_t dev, uint64_t ino, uint64_t size_now, uint64_t *size, uint64_t *id,
		      int fd, const char *path)
{
	FDS_LOCKED();
	struct session *s = session_get();

	if (checkpointed_size(dev, ino, size, id))
		return true;
	if (!s || !s->last_id || !size_now)
		return false;
	for (int g = 0; g < 2; g++) {
		struct ckpt_sizes *c = &sizes[g];

		if (c->id != s->last_id)
			continue;
		if (c->n == WRITTEN_MAX) {
			char named[PATH_MAX];

			if (!path)
				fds_path_of(fd, named, sizeof(named));
			fds_refuse("more than %d files written since checkpoint %llu (%s): a restart "
				   "could not undo their writes in place",
				   WRITTEN_MAX, (unsigned long long)c->id, path ? path : named);
			return false;
		}
		c->f[c->n].dev = dev;
		c->f[c->n].ino = ino;
		c->f[c->n++].size = size_now;
		*size = size_now;
		*id = c->id;
		return true;
	}
	return false;
}

/* A file opened for writing that the newest checkpoint did not hold open:
 * its length now is the one it had then, kept for a restart to cut it
 * back to (undo_keep_length), and listed (fds_written_size) to see writes
 * in place. A file without a name has its bytes in the checkpoint. */
static void opened_for_writing(int fd, const struct stat *st, int flags)
{
	struct session *s = session_get();
	uint64_t size, id;
	int fl;

	if (!S_ISREG(st->st_mode) || !st->st_nlink || !s || !s->last_id ||
	    (fl = fcntl(fd, F_GETFL)) < 0 || (fl & O_ACCMODE) == O_RDONLY ||
	    checkpointed_size(st->st_dev, st->st_ino, &size, &id))
		return;
	/* Emptied by this open, its length then is lost: a restart leaves it as
	 * the program last wrote it (README). */
	undo_keep_length(fd, st->st_dev, st->st_ino, s->last_id,
			 flags & O_TRUNC ? UNDO_LENGTH_LOST : (uint64_t)st->st_size);
	fds_written_size(st->st_dev, st->st_ino, (uint64_t)st->st_size, &size, &id, fd, NULL);
}

int fds_opened(int fd, int flags, const char *call)
{
	FDS_LOCKED();
	char why[PATH_MAX + 64];
	struct stat st;

	if (!placeable(fd, call) || fstat(fd, &st))
		return fd;
	if (unrestorable(fd, &st, why, sizeof(why))) {
		fds_refuse("%s of %s", call, why);
		return fd;
	}
	if (fd < 3) {
		fds_refuse("%s opened a file as descriptor %d (standard %s), which a restart gives "
			   "back to the launcher",
			   call, fd,
			   fd == 0   ? "input"
			   : fd == 1 ? "output"
				     : "error");
		return fd;
	}
	opened_for_writing(fd, &st, flags);
	return place(fd, 3, next_desc++, -1, &st);
}

int fds_made(int fd, const char *call)
{
	FDS_LOCKED();
	struct stat st;

	if (!placeable(fd, call) || fstat(fd, &st) || fd < 3)
		return fd;
	return place(fd, 3, next_desc++, -1, &st);
}

int fds_duplicated(int oldfd, int newfd, int min, const char *call)
{
	FDS_LOCKED();
	const struct fds_slot *old = fds_slot(oldfd);
	struct stat st;

	if (newfd < 0 || !range || fstat(newfd, &st))
		return newfd;
	if (min >= range) {
		fds_refuse("%s asked for a descriptor from %d on, above the %d stasis keeps for "
			   "the program",
			   call, min, range - 1);
		return newfd;
	}
	if (oldfd >= 0 && oldfd < 3)
		return place(newfd, min, next_desc++, oldfd, &st);
	if (old && old->state == SLOT_PROGRAM)
		return place(newfd, min, old->desc, old->std_of, &st);
	fds_refuse("%s of descriptor %d, which stasis did not see the program open", call, oldfd);
	return newfd;
}

void fds_dup_to_check(int oldfd, int newfd, const char *call)
{
	FDS_LOCKED();
	const struct fds_slot *old = fds_slot(oldfd);

	if (!range || oldfd == newfd)
		return;
	if (newfd >= 0 && newfd < 3)
		fds_refuse("%s onto descriptor %d (standard %s), which a restart gives back to "
			   "the launcher",
			   call, newfd,
			   newfd == 0	? "input"
			   : newfd == 1 ? "output"
					: "error");
	else if (newfd >= range)
		fds_refuse("%s onto descriptor %d, above the %d stasis keeps for the program", call,
			   newfd, range - 1);
	else if (oldfd >= 3 && !(old && old->state == SLOT_PROGRAM))
		fds_refuse("%s of descriptor %d, which stasis did not see the program open", call,
			   oldfd);
}

void fds_duplicated_to(int oldfd, int newfd)
{
	FDS_LOCKED();
	const struct fds_slot *old = fds_slot(oldfd);
	struct fds_slot *to = newfd >= 3 && newfd < range ? &slots[newfd] : NULL;

	if (!to || oldfd == newfd)
		return;
	if (oldfd >= 0 && oldfd < 3)
		*to = (struct fds_slot){
		    .state = SLOT_PROGRAM, .std_of = (int8_t)oldfd, .desc = next_desc++};
	else if (old && old->state == SLOT_PROGRAM)
		*to = *old;
	else
		*to = (struct fds_slot){.state = SLOT_OTHER, .std_of = -1};
}

bool fds_close(int fd, int *ret)
{
	FDS_LOCKED();
	int t;

	if (fd < 3 || fd >= range)
		return false;
	if (slots[fd].state == SLOT_RESERVED) {
		/* Closed, as far as the program knows. */
		errno = EBADF;
		*ret = -1;
		return true;
	}
	if (slots[fd].state != SLOT_PROGRAM)
		return false;
	/* The last close of a file reports write errors (NFS): close a
	 * duplicate after the placeholder took the number back. */
	t = fcntl(fd, F_DUPFD_CLOEXEC, range);
	reserve(fd);
	*ret = t >= 0 ? close(t) : 0;
	return true;
}

int fds_release(int fd)
{
	FDS_LOCKED();
	int t;

	if (fd < 3 || fd >= range || slots[fd].state != SLOT_PROGRAM)
		return fd;
	t = fcntl(fd, F_DUPFD_CLOEXEC, range);
	if (t < 0)
		return fd;
	reserve(fd);
	return t;
}

void fds_reclaim(int fd)
{
	FDS_LOCKED();
	int r;

	if (fd < 3 || fd >= range || slots[fd].state != SLOT_PROGRAM)
		return;
	if (fcntl(fd, F_GETFD) >= 0)
		return; /* still open: not closed after all */
	/* The lowest free number from fd on is fd itself if nobody took it. */
	r = fcntl(placeholder, F_DUPFD_CLOEXEC, fd);
	if (r == fd) {
		slots[fd] = (struct fds_slot){.state = SLOT_RESERVED, .std_of = -1};
		return;
	}
	if (r >= 0)
		close(r);
	slots[fd] = (struct fds_slot){.state = SLOT_OTHER, .std_of = -1};
}

void fds_reopened(int fd, int flags, const char *call)
{
	FDS_LOCKED();
	char why[PATH_MAX + 64];
	struct stat st;

	if (fd < 3 || fd >= range || slots[fd].state != SLOT_PROGRAM || fstat(fd, &st))
		return;
	if (unrestorable(fd, &st, why, sizeof(why)))
		fds_refuse("%s of %s", call, why);
	opened_for_writing(fd, &st, flags);
	slots[fd].desc = next_desc++;
	slots[fd].std_of = -1;
	slots[fd].dev = st.st_dev;
	slots[fd].ino = st.st_ino;
}

int fds_install(int k, int fd, uint32_t desc, int std_of, bool cloexec)
{
	struct stat st;

	if (fd < 3 || fd >= range)
		return -EBADF;
	if (dup3(k, fd, cloexec ? O_CLOEXEC : 0) != fd)
		return -errno;
	slots[fd] =
	    (struct fds_slot){.state = SLOT_PROGRAM, .std_of = (int8_t)std_of, .desc = desc};
	if (!fstat(fd, &st)) {
		slots[fd].dev = st.st_dev;
		slots[fd].ino = st.st_ino;
	}
	return 0;
}

void fds_release_all(void)
{
	for (int fd = 3; fd < range; fd++)
		if (slots[fd].state == SLOT_PROGRAM)
			reserve(fd);
}

/* --- writes a restart could not undo --------------------------------------------- */

void fds_checkpoint_sizes(uint64_t id, const uint64_t *dev, const uint64_t *ino,
			  const uint64_t *size, int n)
{
	struct ckpt_sizes *c = sizes[0].id <= sizes[1].id ? &sizes[0] : &sizes[1];

	c->id = id;
	c->n = 0;
	for (int i = 0; i < n && i < WRITTEN_MAX; i++, c->n++) {
		c->f[i].dev = dev[i];
		c->f[i].ino = ino[i];
		c->f[i].size = size[i];
	}
}

bool fds_watching(void)
{
	return sizes[0].n || sizes[1].n;
}

/* The length of the file (dev, ino) at the newest committed checkpoint, if
 * that checkpoint holds it. */
static bool checkpointed_size(uint64_t dev, uint64_t ino, uint64_t *size, uint64_t *id)
{
	struct session *s = session_get();

	if (!s || !s->last_id)
		return false;
	for (int g = 0; g < 2; g++) {
		if (sizes[g].id != s->last_id)
			continue;
		for (int i = 0; i < sizes[g].n; i++)
			if (sizes[g].f[i].dev == dev && sizes[g].f[i].ino == ino) {
				*size = sizes[g].f[i].size;
				*id = sizes[g].id;
				return true;
			}
	}
	return false;
}

void fds_mark_overwritten(const char *path, int64_t at, uint64_t size, uint64_t id,
			  const char *cause)
{
	struct session *s = session_get();
	char mark[4200];
	int fd;

	if (overwrite_said)
		return;
	overwrite_said = true;
	fds_refuse("%s written in place (at byte %lld, below its length %llu at checkpoint %llu: "
		   "%s, a restart could not undo that)",
		   path, (long long)at, (unsigned long long)size, (unsigned long long)id, cause);
	if (!s)
		return;
	snprintf(mark, sizeof(mark), "%s/overwritten.r%d", s->store.dir, s->rank);
	fd = open(mark, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		pr_perror("cannot write %s", mark);
		return;
	}
	if (dprintf(fd, "%llu\t%s\n", (unsigned long long)id, path) < 0 || fsync(fd))
		pr_perror("cannot write %s", mark);
	close(fd);
}

void fds_path_of(int fd, char *path, size_t len)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, len - 1);
	path[n > 0 ? n : 0] = 0;
}

void fds_will_write(int fd, int64_t offset, uint64_t len)
{
	FDS_LOCKED();
	const struct fds_slot *sl = fds_slot(fd);
	uint64_t size, id;

	int fl;

	if (fd < 3 || !sl || sl->state != SLOT_PROGRAM || overwrite_said ||
	    !checkpointed_size(sl->dev, sl->ino, &size, &id))
		return;
	/* With O_APPEND every write goes to the end, whatever the offset
	 * (pwrite too, on Linux). */
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_APPEND))
		return;
	if (offset < 0)
		offset = lseek(fd, 0, SEEK_CUR);
	if (offset < 0 || (uint64_t)offset >= size)
		return;
	undo_will_change(NULL, sl->dev, sl->ino, fd, id, size, (uint64_t)offset,
			 len > size - (uint64_t)offset ? size : (uint64_t)offset + len);
}

void fds_will_cut(int fd, int64_t from)
{
	FDS_LOCKED();
	const struct fds_slot *sl = fds_slot(fd);
	uint64_t size, id;

	if (fd < 3 || !sl || sl->state != SLOT_PROGRAM || overwrite_said ||
	    !checkpointed_size(sl->dev, sl->ino, &size, &id) || from < 0 || (uint64_t)from >= size)
		return;
	undo_will_change(NULL, sl->dev, sl->ino, fd, id, size, (uint64_t)from, size);
}

void fds_will_cut_path(const char *path, int64_t from)
{
	FDS_LOCKED();
	struct stat st;
	uint64_t size, id;

	if (!range || overwrite_said || stat(path, &st) ||
	    !checkpointed_size(st.st_dev, st.st_ino, &size, &id) || from < 0 ||
	    (uint64_t)from >= size)
		return;
	undo_will_change(path, st.st_dev, st.st_ino, -1, id, size, (uint64_t)from, size);
}

/* glibc's FILE flag for a stream that cannot write (libio.h). */
#define STDIO_NO_WRITES 0x0008

void fds_stream_positioned(FILE *fp)
{
	FDS_LOCKED();
	int fd = fp ? fp->_fileno : -1;
	off_t pos;

	if (!fp || (fp->_flags & STDIO_NO_WRITES) || fd < 3 || fd >= range)
		return;
	/* How much its writes will change is not known here: all from there
	 * to the length at the checkpoint. */
	pos = ftello(fp);
	if (pos >= 0)
		fds_will_write(fd, pos, UINT64_MAX);
}
