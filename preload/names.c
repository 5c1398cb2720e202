/* Names the program makes and removes (process/names.h): mkdir, unlink,
 * rmdir and their at- forms, and remove(). Each is the real call; one that
 * succeeds is kept for a restart, and one that fails only because the run
 * the restart replaced did it already succeeds. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"
#include "format.h"
#include "interpose.h"
#include "names.h"

/* The program's call op on path (dirfd-relative) returned ret. */
static int after(int ret, uint32_t op, int dirfd, const char *path)
{
	int err = errno;

	if (!ret)
		names_done(op, dirfd, path);
	else if (errno == (op == NAME_MKDIR ? EEXIST : ENOENT) && names_redone(op, dirfd, path))
		return 0;
	errno = err;
	return ret;
}

EXPORT int mkdir(const char *path, mode_t mode)
{
	REAL(mkdir);
	if (!for_application_fds(CALLER))
		return real(path, mode);
	return after(real(path, mode), NAME_MKDIR, AT_FDCWD, path);
}

EXPORT int mkdirat(int dirfd, const char *path, mode_t mode)
{
	REAL(mkdirat);
	if (!for_application_fds(CALLER))
		return real(dirfd, path, mode);
	return after(real(dirfd, path, mode), NAME_MKDIR, dirfd, path);
}

EXPORT int unlink(const char *path)
{
	REAL(unlink);
	if (!for_application_fds(CALLER))
		return real(path);
	return after(real(path), NAME_UNLINK, AT_FDCWD, path);
}

EXPORT int rmdir(const char *path)
{
	REAL(rmdir);
	if (!for_application_fds(CALLER))
		return real(path);
	return after(real(path), NAME_RMDIR, AT_FDCWD, path);
}

EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
	REAL(unlinkat);
	if (!for_application_fds(CALLER))
		return real(dirfd, path, flags);
	return after(real(dirfd, path, flags), flags & AT_REMOVEDIR ? NAME_RMDIR : NAME_UNLINK,
		     dirfd, path);
}

/* remove() is unlink(), or rmdir() for a directory (glibc calls them
 * inside itself, unseen). */
EXPORT int remove(const char *path)
{
	REAL(remove);
	struct stat st;
	bool dir;
	int ret;

	if (!for_application_fds(CALLER))
		return real(path);
	dir = !lstat(path, &st) && S_ISDIR(st.st_mode);
	ret = real(path);
	if (!ret || errno != ENOENT)
		return after(ret, dir ? NAME_RMDIR : NAME_UNLINK, AT_FDCWD, path);
	/* Gone already: removed by the run the restart replaced, as either. */
	if (names_redone(NAME_UNLINK, AT_FDCWD, path) || names_redone(NAME_RMDIR, AT_FDCWD, path))
		return 0;
	errno = ENOENT;
	return ret;
}
