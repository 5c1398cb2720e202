#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"
#include "log.h"

int fsutil_sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	while (fsync(fd) < 0) {
		if (errno != EINTR) {
			ret = -errno;
			break;
		}
	}
	close(fd);
	return ret;
}

int fsutil_sync_parent(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (!slash)
		return fsutil_sync_dir(".");
	if (slash == path)
		return fsutil_sync_dir("/");
	if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, slash - path);
	dir[slash - path] = '\0';
	return fsutil_sync_dir(dir);
}

int fsutil_open_private(const char *path, int flags, struct why *why)
{
	int fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC), ret;
	struct stat sb;

	if (fd < 0) {
		ret = -errno;
		if (ret == -ENOENT)
			why_set(why, ret, "%s: missing", path);
		else if (ret == -ELOOP)
			why_set(why, ret, "%s is a symbolic link: refused", path);
		else
			why_set(why, ret, "%s: %s", path, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &sb) < 0) {
		ret = -errno;
		why_set(why, ret, "%s: %s", path, strerror(-ret));
	} else if (!S_ISREG(sb.st_mode)) {
		ret = -EBADMSG;
		why_set(why, ret, "%s is not a regular file: refused", path);
	} else if (sb.st_uid != geteuid()) {
		ret = -EPERM;
		why_set(why, ret, "%s is owned by uid %u, not by you: refused", path,
			(unsigned)sb.st_uid);
	} else if (sb.st_mode & 077) {
		ret = -EPERM;
		why_set(why, ret, "%s has mode %04o, stasis writes 0600: refused", path,
			(unsigned)(sb.st_mode & 07777));
	} else {
		return fd;
	}
	close(fd);
	return ret;
}

int fsutil_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}
