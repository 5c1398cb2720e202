#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "files.h"

int files_sync_dir(const char *dir)
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

int files_sync_parent(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (!slash)
		return files_sync_dir(".");
	if (slash == path)
		return files_sync_dir("/");
	if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, slash - path);
	dir[slash - path] = '\0';
	return files_sync_dir(dir);
}
