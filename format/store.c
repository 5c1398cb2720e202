/* The checkpoint directory of one rank, its file names and commit records
 * (store.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l/crc64.h>

#define LOG_PREFIX "store: "
#include "fault.h"
#include "fsutil.h"
#include "log.h"
#include "store.h"

/* A file path: the directory, "/" and a name of store_name. */
#define FILE_PATH_MAX (sizeof(((struct store *)0)->dir) + 64)


/* Returns 0, -EINVAL at an unknown or unfinished % sequence (*bad points at
 * it), or -ENAMETOOLONG. */
static int expand(const char *pattern, int node, int rank, char *out, size_t outlen,
		  const char **bad)
{
	size_t n = 0;

	for (const char *p = pattern; *p; p++) {
		char num[24];
		const char *add = num;

		if (*p != '%') {
			num[0] = *p;
			num[1] = '\0';
		} else if (p[1] == 'n') {
			snprintf(num, sizeof(num), "%d", node);
			p++;
		} else if (p[1] == 'r') {
			snprintf(num, sizeof(num), "%d", rank);
			p++;
		} else if (p[1] == '%') {
			add = "%";
			p++;
		} else {
			if (bad)
				*bad = p;
			return -EINVAL;
		}
		size_t len = strlen(add);

		if (n + len >= outlen)
			return -ENAMETOOLONG;
		memcpy(out + n, add, len);
		n += len;
	}
	if (!outlen)
		return -ENAMETOOLONG;
	out[n] = '\0';
	return 0;
}

int store_expand(const char *pattern, int node, int rank, char *out, size_t outlen)
{
	return expand(pattern, node, rank, out, outlen, NULL);
}

/* "a//b/" from a pattern with a trailing slash: harmless, but the path is
 * shown to users, so write it "a/b". */
static void squeeze_slashes(char *s)
{
	char *w = s;

	for (const char *r = s; *r; r++)
		if (*r != '/' || w == s || w[-1] != '/')
			*w++ = *r;
	*w = '\0';
}

/* mkdir -p. Components created here get exactly 0700 (chmod: umask must not
 * decide); existing ones are left alone, concurrent creation by another
 * rank of the same node is fine. */
static int mkdirs(char *path)
{
	struct stat st;

	for (char *p = path + 1;; p++) {
		char c = *p;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) == 0) {
			if (chmod(path, 0700) < 0) {
				*p = c;
				return -errno;
			}
		} else if (errno != EEXIST || stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
			int e = errno == EEXIST ? ENOTDIR : errno;

			*p = c;
			return -e;
		}
		*p = c;
		if (!c)
			return 0;
	}
}

/* STASIS_DIR itself (expanded): a real directory (not a symbolic link,
 * whose target someone else may choose), owned by us or root, and writable
 * by nobody else unless sticky (as /tmp is: then nobody else can rename or
 * remove what we make in it). The job directory below it is checked
 * tighter (check_job_dir): together nobody but us (and root) can swap a
 * directory or a file under our feet, so paths are safe to use after. */
static int check_base(const char *base, struct why *why)
{
	char path[sizeof(((struct store *)0)->dir)];
	size_t len = strlen(base);
	struct stat sb;

	/* lstat("link/") follows the link: look at the name itself. */
	memcpy(path, base, len + 1);
	while (len > 1 && path[len - 1] == '/')
		path[--len] = '\0';
	if (lstat(path, &sb) < 0) {
		return why_set(why, -errno, "STASIS_DIR: %s: %s", path,
			       errno == ENOENT ? "missing" : strerror(errno));
	}
	if (S_ISLNK(sb.st_mode)) {
		return why_set(why, -ELOOP,
			       "STASIS_DIR: %s is a symbolic link: refused (give the directory it "
			       "points to, if it is yours)",
			       path);
	}
	if (!S_ISDIR(sb.st_mode)) {
		return why_set(why, -ENOTDIR, "STASIS_DIR: %s is not a directory", path);
	}
	if (sb.st_uid != geteuid() && sb.st_uid != 0) {
		return why_set(why, -EACCES,
			       "STASIS_DIR: %s is owned by uid %u, not by you (uid %u): refused",
			       path, (unsigned)sb.st_uid, (unsigned)geteuid());
	}
	if ((sb.st_mode & 022) && !(sb.st_mode & S_ISVTX)) {
		return why_set(why, -EACCES,
			       "STASIS_DIR: %s is writable by group or others (mode %04o): refused "
			       "(chmod go-w it, or use a directory of your own)",
			       path, (unsigned)(sb.st_mode & 07777));
	}
	return 0;
}

/* The job directory: ours, 0700, opened without following a link. */
static int check_job_dir(const char *dir, struct why *why)
{
	struct stat sb;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), ret = 0;

	if (fd < 0) {
		ret = -errno;
		/* O_DIRECTORY wins over O_NOFOLLOW: a link gives ENOTDIR. */
		if (ret == -ENOTDIR && !lstat(dir, &sb) && S_ISLNK(sb.st_mode))
			ret = -ELOOP;
		if (ret == -ENOENT)
			why_set(why, ret, "STASIS_DIR: job directory %s: missing", dir);
		else if (ret == -ELOOP)
			why_set(why, ret,
				"STASIS_DIR: job directory %s is a symbolic link: refused", dir);
		else if (ret == -ENOTDIR)
			why_set(why, ret, "STASIS_DIR: job directory %s is not a directory", dir);
		else
			why_set(why, ret, "STASIS_DIR: job directory %s: %s", dir, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &sb) < 0) {
		ret = -errno;
		why_set(why, ret, "STASIS_DIR: job directory %s: %s", dir, strerror(-ret));
	} else if (sb.st_uid != geteuid() || (sb.st_mode & 077)) {
		/* It holds the whole memory of the program. */
		ret = -EACCES;
		why_set(why, ret,
			"STASIS_DIR: job directory %s must be owned by you and mode 0700 (is "
			"%04o, owner uid %u): refused",
			dir, (unsigned)(sb.st_mode & 07777), (unsigned)sb.st_uid);
	}
	close(fd);
	return ret;
}

int store_open(struct store *st, const char *pattern, int node, int rank, const char *job_key,
	       bool create, struct why *why)
{
	char base[sizeof(st->dir)], cwd[sizeof(st->dir)];
	const char *bad = NULL;
	int ret;

	st->dir[0] = '\0';
	st->rank = rank;
	ret = expand(pattern, node, rank, base, sizeof(base), &bad);
	if (ret == -EINVAL) {
		if (bad[1])
			why_set(why, ret, "STASIS_DIR: unknown %%%c in %s", bad[1], pattern);
		else
			why_set(why, ret, "STASIS_DIR: lone %% at the end of %s", pattern);
		goto err;
	}
	if (ret)
		goto too_long;
	if (!base[0]) {
		ret = -EINVAL;
		why_set(why, ret, "STASIS_DIR: empty");
		goto err;
	}
	if (!job_key[0] || strchr(job_key, '/') || !strcmp(job_key, ".") ||
	    !strcmp(job_key, "..")) {
		ret = -EINVAL;
		why_set(why, ret, "invalid job key '%s'", job_key);
		goto err;
	}
	/* The directory must not depend on where a later process happens to
	 * run, and st->dir is documented absolute. */
	if (base[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd))) {
			ret = -errno;
			why_set(why, ret, "STASIS_DIR %s: cannot resolve: %s", base,
				strerror(errno));
			goto err;
		}
		if (snprintf(st->dir, sizeof(st->dir), "%s/%s", strcmp(cwd, "/") ? cwd : "",
			     base) >= (int)sizeof(st->dir))
			goto too_long;
	} else if (snprintf(st->dir, sizeof(st->dir), "%s", base) >= (int)sizeof(st->dir)) {
		goto too_long;
	}
	squeeze_slashes(st->dir);
	memcpy(base, st->dir, sizeof(base));
	if (snprintf(st->dir, sizeof(st->dir), "%s/%s", base, job_key) >= (int)sizeof(st->dir))
		goto too_long;
	squeeze_slashes(st->dir);

	if (create) {
		ret = mkdirs(base);
		if (ret) {
			why_set(why, ret, "STASIS_DIR: cannot create %s: %s", base, strerror(-ret));
			goto err;
		}
	}
	ret = check_base(base, why);
	if (ret)
		goto err;
	if (create && mkdir(st->dir, 0700) == 0 && chmod(st->dir, 0700) < 0) {
		ret = -errno;
		why_set(why, ret, "STASIS_DIR: cannot create %s: %s", st->dir, strerror(-ret));
		goto err;
	}
	ret = check_job_dir(st->dir, why);
	if (ret)
		goto err;
	return 0;

too_long:
	ret = -ENAMETOOLONG;
	why_set(why, ret, "STASIS_DIR: %s: path too long", pattern);
err:
	return ret;
}

void store_name(int rank, uint64_t id, enum store_file what, char *buf, size_t len)
{
	const char *ext = what == STORE_IMAGE	     ? "img"
			  : what == STORE_REDUNDANCY ? "red"
			  : what == STORE_UNDO	     ? "undo"
						     : "done";

	snprintf(buf, len, "ckpt-%llu.r%d.%s", (unsigned long long)id, rank, ext);
}

void store_path(const struct store *st, uint64_t id, enum store_file what, char *buf, size_t len)
{
	char name[64];

	store_name(st->rank, id, what, name, sizeof(name));
	snprintf(buf, len, "%s/%s", st->dir, name);
}


static uint64_t commit_crc(const struct commit_record *rec)
{
	struct commit_record c = *rec;

	c.crc = 0;
	return crc64_ecma_refl(0, (const unsigned char *)&c, sizeof(c));
}

int store_commit(const struct store *st, const struct commit_record *rec, struct why *why)
{
	char path[FILE_PATH_MAX], tmp[FILE_PATH_MAX + 8];
	struct commit_record c = *rec;
	size_t done = 0;
	int fd = -1, ret;

	store_path(st, rec->ckpt_id, STORE_COMMIT, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	memcpy(c.magic, STASIS_COMMIT_MAGIC, sizeof(c.magic));
	c.version = STASIS_FORMAT_VERSION;
	c.crc = commit_crc(&c);

	fd = fault_hit_at(FAULT_FAIL_COMMIT, rec->ckpt_id)
		 ? -1
		 : open(tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		ret = -errno;
		goto err;
	}
	if (fchmod(fd, 0600) < 0) {
		ret = -errno;
		goto err_unlink;
	}
	while (done < sizeof(c)) {
		ssize_t n = write(fd, (char *)&c + done, sizeof(c) - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			goto err_unlink;
		}
		done += n;
	}
	while (fsync(fd) < 0) {
		if (errno != EINTR) {
			ret = -errno;
			goto err_unlink;
		}
	}
	ret = close(fd);
	fd = -1;
	if (ret < 0 || rename(tmp, path) < 0) {
		ret = -errno;
		goto err_unlink;
	}
	ret = fsutil_sync_dir(st->dir);
	if (ret)
		goto err;
	return 0;

err_unlink:
	unlink(tmp);
err:
	if (fd >= 0)
		close(fd);
	return why_set(why, ret, "cannot write %s: %s", path, strerror(-ret));
}

int store_read_commit(const struct store *st, uint64_t id, struct commit_record *rec,
		      struct why *why)
{
	char path[FILE_PATH_MAX];
	struct commit_record c;
	struct stat sb;
	ssize_t n;
	int fd, ret;

	store_path(st, id, STORE_COMMIT, path, sizeof(path));
	fd = fsutil_open_private(path, O_RDONLY, why);
	if (fd < 0)
		return fd;
	ret = -EBADMSG;
	if (fstat(fd, &sb) < 0) {
		ret = -errno;
		why_set(why, ret, "%s: %s", path, strerror(-ret));
		goto err;
	}
	if (sb.st_size < (off_t)sizeof(c)) {
		why_set(why, ret, "%s: truncated (%lld bytes)", path, (long long)sb.st_size);
		goto err;
	}
	do
		n = pread(fd, &c, sizeof(c), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(c)) {
		ret = n < 0 ? -errno : -EIO;
		why_set(why, ret, "%s: %s", path, strerror(-ret));
		goto err;
	}
	if (memcmp(c.magic, STASIS_COMMIT_MAGIC, sizeof(c.magic))) {
		why_set(why, ret, "%s: not a stasis commit record (bad magic)", path);
		goto err;
	}
	if (c.version < STASIS_FORMAT_OLDEST || c.version > STASIS_FORMAT_VERSION) {
		why_set(why, ret, "%s: format version %u, this stasis reads %u", path, c.version,
			STASIS_FORMAT_VERSION);
		goto err;
	}
	if (commit_crc(&c) != c.crc) {
		why_set(why, ret, "%s: checksum mismatch", path);
		goto err;
	}
	if (c.ckpt_id != id) {
		why_set(why, ret, "%s: records checkpoint %llu", path,
			(unsigned long long)c.ckpt_id);
		goto err;
	}
	*rec = c;
	ret = 0;
err:
	close(fd);
	return ret;
}

bool store_parse_name(const char *name, uint64_t *id, int *rank, const char **rest)
{
	unsigned long long v;
	long r;
	char *end;

	if (strncmp(name, "ckpt-", 5) || name[5] < '0' || name[5] > '9')
		return false;
	errno = 0;
	v = strtoull(name + 5, &end, 10);
	if (errno || strncmp(end, ".r", 2) || end[2] < '0' || end[2] > '9')
		return false;
	r = strtol(end + 2, &end, 10);
	if (errno || r > INT_MAX || *end != '.')
		return false;
	*id = v;
	*rank = (int)r;
	*rest = end + 1;
	return true;
}

/* One of rank's files (any suffix: a .tmp left over names its checkpoint). */
static bool parse_name(const char *name, int rank, uint64_t *id)
{
	const char *rest;
	int r;

	return store_parse_name(name, id, &r, &rest) && r == rank;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Every id found is collected (the directory holds a handful), sorted and
 * made unique; the smallest `max` are returned. ids == NULL counts them. */
int store_list(const struct store *st, uint64_t *ids, int max)
{
	uint64_t *all = NULL, *grown, id;
	size_t n = 0, cap = 0, uniq = 0;
	struct dirent *de;
	DIR *d;
	int ret;

	d = opendir(st->dir);
	if (!d)
		return -errno;
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno) {
				ret = -errno;
				goto err;
			}
			break;
		}
		if (!parse_name(de->d_name, st->rank, &id))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			grown = realloc(all, cap * sizeof(*all));
			if (!grown) {
				ret = -ENOMEM;
				goto err;
			}
			all = grown;
		}
		all[n++] = id;
	}
	if (n)
		qsort(all, n, sizeof(*all), cmp_u64);
	for (size_t i = 0; i < n; i++)
		if (!uniq || all[uniq - 1] != all[i])
			all[uniq++] = all[i];
	if (ids) {
		size_t skip = 0;

		if (max < 0)
			max = 0;
		/* The newest matter most (restart, numbering): keep the tail. */
		if (uniq > (size_t)max) {
			skip = uniq - max;
			uniq = max;
		}
		if (uniq)
			memcpy(ids, all + skip, uniq * sizeof(*ids));
	}
	ret = uniq > INT_MAX ? INT_MAX : (int)uniq;
err:
	free(all);
	closedir(d);
	return ret;
}

static int unlink_ok(const char *path)
{
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

/* The commit record goes first and its removal is synced before anything
 * else goes, so that no crash leaves a record naming a missing image. The
 * .tmp and .rebuild leftovers of an interrupted write or rebuild go too:
 * they name the checkpoint, and store_list would otherwise report it
 * forever. */
int store_remove(const struct store *st, uint64_t id)
{
	static const enum store_file order[] = {STORE_COMMIT, STORE_UNDO, STORE_REDUNDANCY,
							STORE_IMAGE};
	char path[FILE_PATH_MAX], tmp[FILE_PATH_MAX + 16];
	int ret;

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		store_path(st, id, order[i], path, sizeof(path));
		snprintf(tmp, sizeof(tmp), "%s.tmp", path);
		ret = unlink_ok(path);
		if (!ret)
			ret = unlink_ok(tmp);
		snprintf(tmp, sizeof(tmp), "%s.rebuild", path);
		if (!ret)
			ret = unlink_ok(tmp);
		if (!ret && order[i] == STORE_COMMIT)
			ret = fsutil_sync_dir(st->dir);
		if (ret)
			return ret;
	}
	return 0;
}

int store_lock(const struct store *st, struct why *why)
{
	char path[sizeof(st->dir) + 32];
	int fd;

	snprintf(path, sizeof(path), "%s/lock.r%d", st->dir, st->rank);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		return why_set(why, -errno, "cannot open %s: %s", path,
			       errno == ELOOP ? "a symbolic link, refused" : strerror(errno));
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		int e = errno;

		close(fd);
		if (e == EWOULDBLOCK) {
			return why_set(
			    why, -EBUSY,
			    "%s: another process of this job still runs as rank %d and "
			    "holds its checkpoints (a rank left over from a killed run?)",
			    st->dir, st->rank);
		}
		return why_set(why, -e, "cannot lock %s: %s", path, strerror(e));
	}
	return 0; /* fd stays open: the lock lasts as long as the process */
}
