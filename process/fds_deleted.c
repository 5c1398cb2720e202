/* Regular files without a name in a checkpoint: a file deleted while the
 * program holds it open (a Fortran STATUS='SCRATCH' unit: gfortran
 * creates and unlinks it at once), tmpfile(), an O_TMPFILE file. No path
 * can open them again, so their bytes go into the checkpoint (CRIU's
 * "ghost files" do the same) and a restart makes a new nameless file with
 * those bytes, in the directory the old one was in (else $TMPDIR, else
 * /tmp: a job's own temporary directory may not exist on the node of the
 * restart), at the same position with the same flags.
 *
 * Every checkpoint copies them whole: they are bounded by
 * STASIS_DELETED_MAX per rank and checkpoint, past which the checkpoint is
 * skipped with a line naming the file. */
#define LOG_PREFIX "files: "
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fds.h"
#include "format.h"
#include "fsutil.h"
#include "log.h"
#include "session.h"

/* Bytes of nameless files recorded by this checkpoint so far. */
static uint64_t recorded;

void fds_deleted_begin(void)
{
	recorded = 0;
}

/* Whether a lower descriptor of the program holds the same inode: its
 * record carries the bytes. */
static bool held_lower(int fd, const struct stat *st)
{
	for (int g = 3; g < fd; g++) {
		const struct fds_slot *sl = fds_slot(g);

		if (sl->state == SLOT_PROGRAM && sl->dev == st->st_dev && sl->ino == st->st_ino)
			return true;
	}
	return false;
}

/* The directory a nameless file's /proc link names ("/tmp/#123 (deleted)",
 * "/tmp/gfortrantmpX (deleted)"): what precedes its last slash. */
static size_t directory_of(const char *path, char *dir, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (!n || path[0] != '/' || n >= cap)
		n = 0;
	memcpy(dir, path, n);
	dir[n] = 0;
	return n;
}

/* len bytes of fd's file, through a description of stasis's own (fd
 * may be open for writing only). */
static int read_all(int fd, char *to, size_t len)
{
	char link[64];
	int k, ret = 0;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	k = open(link, O_RDONLY | O_CLOEXEC);
	if (k < 0)
		return -errno;
	for (size_t at = 0; at < len && !ret;) {
		ssize_t n = pread(k, to + at, len - at, (off_t)at);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			ret = n < 0 ? -errno : -EIO;
		else
			at += (size_t)n;
	}
	close(k);
	return ret;
}

int fds_deleted_describe(int fd, const struct stat *st, const char *path, struct file_record *r,
			 const void **data, size_t *len, struct why *why)
{
	struct session *s = session_get();
	unsigned long long max = s ? s->cfg.deleted_max : 0;
	uint64_t bytes = held_lower(fd, st) ? 0 : (uint64_t)st->st_size;
	char dir[PATH_MAX], *p;
	size_t dlen = directory_of(path, dir, sizeof(dir));
	off_t off = lseek(fd, 0, SEEK_CUR);
	int ret;

	if (recorded + bytes > max)
		return why_set(why, -EFBIG,
			       "%s (descriptor %d) is a file without a name of %llu bytes: the "
			       "checkpoint must hold its bytes, which would pass "
			       "STASIS_DELETED_MAX=%llu; this checkpoint is skipped",
			       path, fd, (unsigned long long)st->st_size, max);
	p = fds_payload(dlen + 1 + bytes);
	if (!p)
		return why_set(why, -ENOMEM, "out of memory copying %s (descriptor %d)", path, fd);
	memcpy(p, dir, dlen + 1);
	ret = read_all(fd, p + dlen + 1, bytes);
	if (ret)
		return why_set(why, ret, "cannot copy %s (descriptor %d): %s", path, fd,
			       strerror(-ret));
	recorded += bytes;
	r->kind = FILE_DELETED;
	r->offset = off < 0 ? 0 : (uint64_t)off;
	r->size = (uint64_t)st->st_size;
	r->rdev = st->st_mode;
	r->dev = st->st_dev;
	r->ino = st->st_ino;
	*data = p;
	*len = dlen + 1 + bytes;
	return 1;
}

/* --- the restart ------------------------------------------------------------------ */

/* A new nameless file, read-write, in dir (else $TMPDIR, else /tmp). */
static int nameless_file(const char *dir, mode_t mode)
{
	const char *tmp = getenv("TMPDIR");
	const char *where[] = {dir, tmp && *tmp ? tmp : "/tmp", "/tmp"};

	for (int w = 0; w < 3; w++) {
		char name[PATH_MAX];
		int k;

		if (!where[w][0])
			continue;
		k = open(where[w], O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
		if (k >= 0)
			return k;
		if (errno != EOPNOTSUPP && errno != EISDIR)
			continue;
		/* A file system without O_TMPFILE: a named file, unlinked at once. */
		if (snprintf(name, sizeof(name), "%s/.stasis-nameless-XXXXXX", where[w]) >=
		    (int)sizeof(name))
			continue;
		k = mkostemp(name, O_CLOEXEC);
		if (k >= 0) {
			unlink(name);
			return k;
		}
	}
	return -1;
}

/* k opened again with the record's own access mode and flags. */
static int open_as_recorded(int k, const struct file_record *r)
{
	char link[64];

	snprintf(link, sizeof(link), "/proc/self/fd/%d", k);
	return open(link, fds_reopen_flags(r));
}

int fds_deleted_make(const struct file_record *recs, char *const *data, const size_t *len,
		     int *made, int n, int i, struct why *why)
{
	const struct file_record *r = &recs[i];
	size_t dlen = len[i] ? strnlen(data[i], len[i]) : len[i];
	int holder = i, k, own;

	for (int j = 0; j < i && holder == i; j++)
		if (recs[j].kind == FILE_DELETED && recs[j].dev == r->dev && recs[j].ino == r->ino)
			holder = j;
	if (dlen >= len[i] || (holder == i && len[i] - dlen - 1 != r->size) ||
	    (holder != i && (len[i] - dlen - 1 || made[holder] < 0)) || i >= n)
		return why_set(why, -EBADMSG, "the record of open files in the image is damaged");
	if (holder == i) {
		int ret;

		/* Its mode, and always the owner's reading and writing: its
		 * descriptors are opened again from it below. */
		k = nameless_file(data[i], (mode_t)(r->rdev & 07777) | S_IRUSR | S_IWUSR);
		if (k < 0)
			return why_set(why, -errno,
				       "cannot make the file without a name of descriptor %d again "
				       "in %s: %s",
				       r->fd, data[i][0] ? data[i] : "/tmp", strerror(errno));
		ret = fsutil_write_all(k, data[i] + dlen + 1, r->size);
		if (ret) {
			close(k);
			return why_set(why, ret,
				       "cannot write the %llu bytes of descriptor %d's file without a "
				       "name again: %s",
				       (unsigned long long)r->size, r->fd, strerror(-ret));
		}
	} else {
		k = made[holder];
	}
	/* Its own description: access mode, O_APPEND, position. */
	own = open_as_recorded(k, r);
	if (holder == i)
		close(k);
	if (own < 0)
		return why_set(why, -errno, "cannot open descriptor %d's file without a name again: %s",
			       r->fd, strerror(errno));
	if (lseek(own, (off_t)r->offset, SEEK_SET) < 0) {
		int err = errno;

		close(own);
		return why_set(why, -err, "cannot seek descriptor %d's file without a name to %llu: %s",
			       r->fd, (unsigned long long)r->offset, strerror(err));
	}
	made[i] = own;
	return 0;
}
