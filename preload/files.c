/* The calls that make, duplicate and close descriptors, seen for the
 * program's descriptors (process/fds.h): a descriptor is the program's when
 * for_application_fds() says so (interpose.h): stasis is active, the call
 * comes from application code (the executable, its libraries, libc on its
 * behalf) on the main thread or an application thread, outside every
 * stasis wrapper.
 * Everything else (the MPI library, its threads, stasis itself) passes
 * straight through.
 *
 * What a restart can open again (regular files, directories, /dev/null
 * and the like) or make again (pipes, eventfds, epoll instances, timerfds,
 * signalfds, AF_UNIX socketpairs, inotify instances: process/fds_event.c)
 * is moved into the program's range; what it cannot (sockets, memfds,
 * fanotify, FIFOs, other devices,
 * files without a name) switches checkpoints off where it is made, naming
 * it. Writes that would change bytes a checkpoint holds
 * are looked at before they happen (writes.c). */
#undef _FILE_OFFSET_BITS
#define _LARGEFILE64_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "runtime.h"
#include "fds.h"
#include "format.h"
#include "names.h"
#include "interpose.h"
#include "regions.h"
#include "sigstate.h"

static inline bool in_range(int fd)
{
	return fd >= 3 && fd < fds_range();
}

/* open(2)'s mode argument is there only with these flags (glibc's
 * __OPEN_NEEDS_MODE). */
static inline bool needs_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/* A restart's program before its checkpoint is back opens the
 * checkpoint's files: it must not empty them, nor fail on them. */
static inline int restart_flags(int flags)
{
	return fds_before_restore() ? flags & ~(O_TRUNC | O_EXCL) : flags;
}

#define OPEN_MODE(flags, last)                                                                     \
	mode_t mode = 0;                                                                           \
	if (needs_mode(flags)) {                                                                   \
		va_list ap;                                                                        \
		va_start(ap, last);                                                                \
		mode = va_arg(ap, int);                                                            \
		va_end(ap);                                                                        \
	}

/* An exclusive create (O_CREAT | O_EXCL: Fortran's STATUS='NEW', Python's
 * open(..., 'x')) that fd answered. Made after a checkpoint, it is named for
 * a restart (process/names.h); refused with EEXIST because the run a
 * restart replaced made it after the checkpoint, it is to be opened again
 * without O_EXCL and emptied, as the new file the program expects: true,
 * with *flags to do so. */
static bool exclusive_again(int fd, int dirfd, const char *path, int *flags)
{
	if ((*flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL))
		return false;
	if (fd >= 0) {
		names_done(NAME_CREATE, dirfd, path);
		return false;
	}
	if (errno != EEXIST || !names_redone(NAME_CREATE, dirfd, path))
		return false;
	*flags = (*flags & ~O_EXCL) | O_TRUNC;
	return true;
}

EXPORT int open(const char *path, int flags, ...)
{
	OPEN_MODE(flags, flags);
	REAL(open);
	int fd;

	if (!for_application_fds(CALLER))
		return real(path, flags, mode);
	flags = restart_flags(flags);
	fd = real(path, flags, mode);
	if (exclusive_again(fd, AT_FDCWD, path, &flags))
		fd = real(path, flags, mode);
	return fds_opened(fd, flags, "open()");
}

EXPORT int open64(const char *path, int flags, ...)
{
	OPEN_MODE(flags, flags);
	REAL(open64);
	int fd;

	if (!for_application_fds(CALLER))
		return real(path, flags, mode);
	flags = restart_flags(flags);
	fd = real(path, flags, mode);
	if (exclusive_again(fd, AT_FDCWD, path, &flags))
		fd = real(path, flags, mode);
	return fds_opened(fd, flags, "open()");
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	OPEN_MODE(flags, flags);
	REAL(openat);
	int fd;

	if (!for_application_fds(CALLER))
		return real(dirfd, path, flags, mode);
	flags = restart_flags(flags);
	fd = real(dirfd, path, flags, mode);
	if (exclusive_again(fd, dirfd, path, &flags))
		fd = real(dirfd, path, flags, mode);
	return fds_opened(fd, flags, "openat()");
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	OPEN_MODE(flags, flags);
	REAL(openat64);
	int fd;

	if (!for_application_fds(CALLER))
		return real(dirfd, path, flags, mode);
	flags = restart_flags(flags);
	fd = real(dirfd, path, flags, mode);
	if (exclusive_again(fd, dirfd, path, &flags))
		fd = real(dirfd, path, flags, mode);
	return fds_opened(fd, flags, "openat()");
}

/* What _FORTIFY_SOURCE makes of open() without a mode. */
extern int __open_2(const char *path, int flags);
extern int __open64_2(const char *path, int flags);
extern int __openat_2(int dirfd, const char *path, int flags);
extern int __openat64_2(int dirfd, const char *path, int flags);

EXPORT int __open_2(const char *path, int flags)
{
	REAL(__open_2);
	if (!for_application_fds(CALLER))
		return real(path, flags);
	flags = restart_flags(flags);
	return fds_opened(real(path, flags), flags, "open()");
}

EXPORT int __open64_2(const char *path, int flags)
{
	REAL(__open64_2);
	if (!for_application_fds(CALLER))
		return real(path, flags);
	flags = restart_flags(flags);
	return fds_opened(real(path, flags), flags, "open()");
}

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	REAL(__openat_2);
	if (!for_application_fds(CALLER))
		return real(dirfd, path, flags);
	flags = restart_flags(flags);
	return fds_opened(real(dirfd, path, flags), flags, "openat()");
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	REAL(__openat64_2);
	if (!for_application_fds(CALLER))
		return real(dirfd, path, flags);
	flags = restart_flags(flags);
	return fds_opened(real(dirfd, path, flags), flags, "openat()");
}

EXPORT int creat(const char *path, mode_t mode)
{
	REAL(open);
	int flags = O_CREAT | O_WRONLY | O_TRUNC;

	if (!for_application_fds(CALLER))
		return real(path, flags, mode);
	flags = restart_flags(flags);
	return fds_opened(real(path, flags, mode), flags, "creat()");
}

EXPORT int creat64(const char *path, mode_t mode) __attribute__((alias("creat")));

/* --- stdio streams -------------------------------------------------------------- */

/* fopen's mode for a restart's program before its checkpoint is back:
 * "w" would empty the file, "x" fail on it; "r+" opens it as it is. */
static const char *restart_mode(const char *mode, char *buf, size_t len)
{
	size_t n = 0;

	if (!fds_before_restore() || mode[0] != 'w')
		return mode;
	buf[n++] = 'r';
	buf[n++] = '+';
	for (const char *m = mode + 1; *m && n < len - 1; m++)
		if (*m != '+' && *m != 'x')
			buf[n++] = *m;
	buf[n] = 0;
	return buf;
}

/* The open flags fopen's mode implies that fds_opened needs: whether the
 * file was emptied. */
static int mode_flags(const char *mode)
{
	return mode[0] == 'w' ? O_TRUNC : 0;
}

static FILE *adopt_stream(FILE *fp, int flags, const char *call)
{
	if (fp)
		fp->_fileno = fds_opened(fp->_fileno, flags, call);
	return fp;
}

static FILE *open_stream(FILE *(*real)(const char *, const char *), const char *path,
			 const char *mode, const char *call)
{
	char buf[16];
	const char *m = restart_mode(mode, buf, sizeof(buf));
	FILE *fp = real(path, m);

	if (!fp && m != mode)
		fp = real(path, m = mode); /* not there: nothing to empty */
	return adopt_stream(fp, mode_flags(m), call);
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
	REAL(fopen);
	if (!for_application_fds(CALLER))
		return real(path, mode);
	return open_stream(real, path, mode, "fopen()");
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
	REAL(fopen64);
	if (!for_application_fds(CALLER))
		return real(path, mode);
	return open_stream(real, path, mode, "fopen()");
}

static FILE *reopen_stream(FILE *(*real)(const char *, const char *, FILE *), const char *path,
			   const char *mode, FILE *fp)
{
	int fd = fp ? fp->_fileno : -1;
	char buf[16];
	FILE *r;

	if (fd >= 0 && fd < 3) {
		fds_refuse("freopen() of standard %s, which a restart gives back to the launcher",
			   fd == 0   ? "input"
			   : fd == 1 ? "output"
				     : "error");
		return real(path, mode, fp);
	}
	/* glibc keeps the stream's number (it dup3()s the new file onto it). */
	mode = restart_mode(mode, buf, sizeof(buf));
	r = real(path, mode, fp);
	if (!r)
		fds_reclaim(fd);
	else if (r->_fileno == fd)
		fds_reopened(fd, mode_flags(mode), "freopen()");
	else
		r->_fileno = fds_opened(r->_fileno, mode_flags(mode), "freopen()");
	return r;
}

EXPORT FILE *freopen(const char *path, const char *mode, FILE *fp)
{
	REAL(freopen);
	if (!for_application_fds(CALLER))
		return real(path, mode, fp);
	return reopen_stream(real, path, mode, fp);
}

EXPORT FILE *freopen64(const char *path, const char *mode, FILE *fp)
{
	REAL(freopen64);
	if (!for_application_fds(CALLER))
		return real(path, mode, fp);
	return reopen_stream(real, path, mode, fp);
}

EXPORT FILE *tmpfile(void)
{
	REAL(tmpfile);
	if (!for_application_fds(CALLER))
		return real();
	return adopt_stream(real(), 0, "tmpfile()");
}

EXPORT FILE *tmpfile64(void)
{
	REAL(tmpfile64);
	if (!for_application_fds(CALLER))
		return real();
	return adopt_stream(real(), 0, "tmpfile()");
}

EXPORT int fclose(FILE *fp)
{
	REAL(fclose);
	/* libc closes the descriptor itself: the number gets its placeholder
	 * first, libc closes a duplicate. */
	if (fp && for_application_fds(CALLER))
		fp->_fileno = fds_release(fp->_fileno);
	return real(fp);
}

EXPORT int fcloseall(void)
{
	static int held[FDS_RANGE_MAX];
	int n = 0, ret;

	REAL(fcloseall);
	if (!for_application_fds(CALLER))
		return real();
	for (int fd = 3; fd < fds_range(); fd++)
		if (fds_slot(fd)->state == SLOT_PROGRAM)
			held[n++] = fd;
	ret = real();
	for (int i = 0; i < n; i++)
		fds_reclaim(held[i]);
	return ret;
}

/* A checkpoint waits while the pipe is open (fds_child_pipes). */
EXPORT FILE *popen(const char *command, const char *type)
{
	REAL(popen);
	FILE *fp = real(command, type);

	if (fp && for_application_fds(CALLER))
		fds_child_pipe(+1, command);
	return fp;
}

EXPORT int pclose(FILE *fp)
{
	REAL(pclose);
	if (fp && for_application_fds(CALLER))
		fds_child_pipe(-1, NULL);
	return real(fp);
}

/* --- directories and temporary files ------------------------------------------ */

/* glibc's DIR starts with its descriptor (struct __dirstream, dirstream.h). */
static void set_dir_fd(DIR *d, int fd)
{
	*(int *)d = fd;
}

EXPORT DIR *opendir(const char *path)
{
	REAL(opendir);
	DIR *d = real(path);

	if (d && for_application_fds(CALLER))
		set_dir_fd(d, fds_opened(dirfd(d), O_DIRECTORY, "opendir()"));
	return d;
}

EXPORT int closedir(DIR *d)
{
	REAL(closedir);
	if (for_application_fds(CALLER))
		set_dir_fd(d, fds_release(dirfd(d)));
	return real(d);
}

EXPORT int mkstemp(char *tmpl)
{
	REAL(mkstemp);
	int fd = real(tmpl);

	return for_application_fds(CALLER) ? fds_opened(fd, 0, "mkstemp()") : fd;
}

EXPORT int mkstemp64(char *tmpl) __attribute__((alias("mkstemp")));

EXPORT int mkostemp(char *tmpl, int flags)
{
	REAL(mkostemp);
	int fd = real(tmpl, flags);

	return for_application_fds(CALLER) ? fds_opened(fd, flags, "mkostemp()") : fd;
}

EXPORT int mkostemp64(char *tmpl, int flags) __attribute__((alias("mkostemp")));

EXPORT int mkstemps(char *tmpl, int suffixlen)
{
	REAL(mkstemps);
	int fd = real(tmpl, suffixlen);

	return for_application_fds(CALLER) ? fds_opened(fd, 0, "mkstemps()") : fd;
}

EXPORT int mkstemps64(char *tmpl, int suffixlen) __attribute__((alias("mkstemps")));

EXPORT int mkostemps(char *tmpl, int suffixlen, int flags)
{
	REAL(mkostemps);
	int fd = real(tmpl, suffixlen, flags);

	return for_application_fds(CALLER) ? fds_opened(fd, flags, "mkostemps()") : fd;
}

EXPORT int mkostemps64(char *tmpl, int suffixlen, int flags) __attribute__((alias("mkostemps")));

/* --- duplicates and closes ------------------------------------------------------ */

EXPORT int dup(int oldfd)
{
	REAL(dup);
	int fd = real(oldfd);

	return for_application_fds(CALLER) ? fds_duplicated(oldfd, fd, 3, "dup()") : fd;
}

EXPORT int dup2(int oldfd, int newfd)
{
	REAL(dup2);
	bool program = for_application_fds(CALLER);
	int fd;

	if (program)
		fds_dup_to_check(oldfd, newfd, "dup2()");
	fd = real(oldfd, newfd);
	if (program && fd == newfd)
		fds_duplicated_to(oldfd, newfd);
	return fd;
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
	REAL(dup3);
	bool program = for_application_fds(CALLER);
	int fd;

	if (program)
		fds_dup_to_check(oldfd, newfd, "dup3()");
	fd = real(oldfd, newfd, flags);
	if (program && fd == newfd)
		fds_duplicated_to(oldfd, newfd);
	return fd;
}

static int fcntl_common(int (*real)(int, int, ...), uintptr_t caller, int fd, int cmd, void *arg)
{
	int ret = real(fd, cmd, arg);

	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && ret >= 0 &&
	    for_application_fds(caller))
		return fds_duplicated(fd, ret, (int)(intptr_t)arg, "fcntl(F_DUPFD)");
	return ret;
}

/* fcntl's third argument, whatever its type, travels in one register. */
EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	REAL(fcntl);
	return fcntl_common(real, CALLER, fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	REAL(fcntl64);
	return fcntl_common(real, CALLER, fd, cmd, arg);
}

EXPORT int close(int fd)
{
	REAL(close);
	int ret;

	if (in_range(fd) && for_application_fds(CALLER) && fds_close(fd, &ret))
		return ret;
	return real(fd);
}

EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	REAL(close_range);
	unsigned int range = (unsigned int)fds_range();
	int ret;

	if ((flags & CLOSE_RANGE_CLOEXEC) || first >= range || !for_application_fds(CALLER))
		return real(first, last, flags);
	for (unsigned int fd = first; fd <= last && fd < range; fd++)
		if (fd < 3 || !fds_close((int)fd, &ret))
			real(fd, fd, flags);
	return last >= range ? real(range, last, flags) : 0;
}

EXPORT void closefrom(int lowfd)
{
	close_range(lowfd < 0 ? 0 : (unsigned int)lowfd, ~0u, 0);
}

/* --- what cannot be restored ----------------------------------------------------- */

#define REFUSE_IF_MADE(ok, what)                                                                   \
	do {                                                                                       \
		if ((ok) && for_application_fds(CALLER))                                   \
			fds_refuse(what);                                                          \
	} while (0)

/* What a restart makes again (process/fds_event.c): placed in the range
 * like a file. */
#define PLACE_IF_MADE(ok, fd, call)                                                                \
	do {                                                                                       \
		if ((ok) && for_application_fds(CALLER))                                   \
			(fd) = fds_made((fd), call);                                               \
	} while (0)

EXPORT int pipe(int fds[2])
{
	REAL(pipe);
	int ret = real(fds);

	PLACE_IF_MADE(ret == 0, fds[0], "pipe()");
	PLACE_IF_MADE(ret == 0, fds[1], "pipe()");
	return ret;
}

EXPORT int pipe2(int fds[2], int flags)
{
	REAL(pipe2);
	int ret = real(fds, flags);

	PLACE_IF_MADE(ret == 0, fds[0], "pipe2()");
	PLACE_IF_MADE(ret == 0, fds[1], "pipe2()");
	return ret;
}

EXPORT int socket(int domain, int type, int protocol)
{
	REAL(socket);
	int fd = real(domain, type, protocol);

	REFUSE_IF_MADE(fd >= 0, "a socket (socket())");
	return fd;
}

EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
	REAL(socketpair);
	int ret = real(domain, type, protocol, sv);

	if (ret || !for_application_fds(CALLER))
		return ret;
	if (domain != AF_UNIX) {
		fds_refuse("a pair of sockets of domain %d (socketpair())", domain);
		return ret;
	}
	/* Both ends the program's: made again by a restart (fds_socket.c). */
	sv[0] = fds_made(sv[0], "socketpair()");
	sv[1] = fds_made(sv[1], "socketpair()");
	fds_socket_paired(sv[0], sv[1]);
	return ret;
}

EXPORT int eventfd(unsigned int initval, int flags)
{
	REAL(eventfd);
	int fd = real(initval, flags);

	PLACE_IF_MADE(fd >= 0, fd, "eventfd()");
	return fd;
}

EXPORT int epoll_create(int size)
{
	REAL(epoll_create);
	int fd = real(size);

	PLACE_IF_MADE(fd >= 0, fd, "epoll_create()");
	return fd;
}

EXPORT int epoll_create1(int flags)
{
	REAL(epoll_create1);
	int fd = real(flags);

	PLACE_IF_MADE(fd >= 0, fd, "epoll_create1()");
	return fd;
}

EXPORT int timerfd_create(int clockid, int flags)
{
	REAL(timerfd_create);
	int fd = real(clockid, flags);

	PLACE_IF_MADE(fd >= 0, fd, "timerfd_create()");
	return fd;
}

EXPORT int signalfd(int fd, const sigset_t *mask, int flags)
{
	REAL(signalfd);
	int ret;

	/* Taking stasis's own signals this way is a conflict (sigstate.h). */
	if (stasis_active && regions_app_code(CALLER))
		sigstate_program_waits(mask, "signalfd");
	ret = real(fd, mask, flags);

	PLACE_IF_MADE(ret >= 0 && fd == -1, ret, "signalfd()");
	return ret;
}

EXPORT int memfd_create(const char *name, unsigned int flags)
{
	REAL(memfd_create);
	int fd = real(name, flags);

	REFUSE_IF_MADE(fd >= 0, "a memfd (memfd_create())");
	return fd;
}

EXPORT int inotify_init(void)
{
	REAL(inotify_init);
	int fd = real();

	PLACE_IF_MADE(fd >= 0, fd, "inotify_init()");
	return fd;
}

EXPORT int inotify_init1(int flags)
{
	REAL(inotify_init1);
	int fd = real(flags);

	PLACE_IF_MADE(fd >= 0, fd, "inotify_init1()");
	return fd;
}

/* The path of each watch: the kernel keeps only a file handle. */
EXPORT int inotify_add_watch(int fd, const char *path, uint32_t mask)
{
	REAL(inotify_add_watch);
	int wd = real(fd, path, mask);

	if (wd >= 0 && path && for_application_fds(CALLER))
		fds_inotify_added(fd, wd, path, mask);
	return wd;
}

EXPORT int fanotify_init(unsigned int flags, unsigned int event_f_flags)
{
	REAL(fanotify_init);
	int fd = real(flags, event_f_flags);

	REFUSE_IF_MADE(fd >= 0, "a fanotify instance (fanotify_init())");
	return fd;
}

EXPORT int posix_openpt(int flags)
{
	REAL(posix_openpt);
	int fd = real(flags);

	REFUSE_IF_MADE(fd >= 0, "a pseudo-terminal (posix_openpt())");
	return fd;
}
