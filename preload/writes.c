/* Writes that would change bytes a checkpoint holds (process/fds.h): the
 * write family, truncation and hole punching on the program's descriptors,
 * and stdio streams open for writing sent back by fseek and the like (their
 * writes happen inside libc, unseen). Each looks before the real call, on
 * the rule of files.c for what is the program's (interpose.h). */
#undef _FILE_OFFSET_BITS
#define _LARGEFILE64_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#include "runtime.h"
#include "fds.h"
#include "interpose.h"
#include "regions.h"

/* A descriptor of the program's range, while a checkpoint holds written
 * files: only then can a write change what a checkpoint holds. */
static inline bool in_range(int fd)
{
	return fd >= 3 && fd < fds_range() && fds_watching();
}

/* A stream open for writing put elsewhere: its next writes land there. */
EXPORT int fseek(FILE *fp, long offset, int whence)
{
	REAL(fseek);
	int ret = real(fp, offset, whence);

	if (!ret && fds_watching() && for_application_fds(CALLER))
		fds_stream_positioned(fp);
	return ret;
}

EXPORT int fseeko(FILE *fp, off_t offset, int whence)
{
	REAL(fseeko);
	int ret = real(fp, offset, whence);

	if (!ret && fds_watching() && for_application_fds(CALLER))
		fds_stream_positioned(fp);
	return ret;
}

EXPORT int fseeko64(FILE *fp, off64_t offset, int whence)
{
	REAL(fseeko64);
	int ret = real(fp, offset, whence);

	if (!ret && fds_watching() && for_application_fds(CALLER))
		fds_stream_positioned(fp);
	return ret;
}

EXPORT int fsetpos(FILE *fp, const fpos_t *pos)
{
	REAL(fsetpos);
	int ret = real(fp, pos);

	if (!ret && fds_watching() && for_application_fds(CALLER))
		fds_stream_positioned(fp);
	return ret;
}

EXPORT int fsetpos64(FILE *fp, const fpos64_t *pos)
{
	REAL(fsetpos64);
	int ret = real(fp, pos);

	if (!ret && fds_watching() && for_application_fds(CALLER))
		fds_stream_positioned(fp);
	return ret;
}

EXPORT void rewind(FILE *fp)
{
	REAL(rewind);
	real(fp);
	if (fds_watching() && for_application_fds(CALLER))
		fds_stream_positioned(fp);
}

/* --- writes under a checkpoint ------------------------------------------------------ */

#define WILL_WRITE(fd, offset, len)                                                                \
	do {                                                                                       \
		if (in_range(fd) && for_application_fds(CALLER))                           \
			fds_will_write(fd, offset, len);                                           \
	} while (0)

static uint64_t iov_bytes(const struct iovec *iov, int iovcnt)
{
	uint64_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
	REAL(write);
	WILL_WRITE(fd, -1, count);
	return real(fd, buf, count);
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
	REAL(pwrite);
	WILL_WRITE(fd, offset, count);
	return real(fd, buf, count, offset);
}

EXPORT ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset)
{
	REAL(pwrite64);
	WILL_WRITE(fd, offset, count);
	return real(fd, buf, count, offset);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	REAL(writev);
	WILL_WRITE(fd, -1, iov_bytes(iov, iovcnt));
	return real(fd, iov, iovcnt);
}

EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	REAL(pwritev);
	WILL_WRITE(fd, offset, iov_bytes(iov, iovcnt));
	return real(fd, iov, iovcnt, offset);
}

EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off64_t offset)
{
	REAL(pwritev64);
	WILL_WRITE(fd, offset, iov_bytes(iov, iovcnt));
	return real(fd, iov, iovcnt, offset);
}

EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags)
{
	REAL(pwritev2);
	WILL_WRITE(fd, offset, iov_bytes(iov, iovcnt));
	return real(fd, iov, iovcnt, offset, flags);
}

EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int iovcnt, off64_t offset, int flags)
{
	REAL(pwritev64v2);
	WILL_WRITE(fd, offset, iov_bytes(iov, iovcnt));
	return real(fd, iov, iovcnt, offset, flags);
}

EXPORT ssize_t copy_file_range(int fd_in, off64_t *off_in, int fd_out, off64_t *off_out, size_t len,
			       unsigned int flags)
{
	REAL(copy_file_range);
	WILL_WRITE(fd_out, off_out ? *off_out : -1, len);
	return real(fd_in, off_in, fd_out, off_out, len, flags);
}

EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	REAL(sendfile);
	WILL_WRITE(out_fd, -1, count);
	return real(out_fd, in_fd, offset, count);
}

EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	REAL(sendfile64);
	WILL_WRITE(out_fd, -1, count);
	return real(out_fd, in_fd, offset, count);
}

EXPORT int ftruncate(int fd, off_t length)
{
	REAL(ftruncate);
	if (in_range(fd) && for_application_fds(CALLER))
		fds_will_cut(fd, length);
	return real(fd, length);
}

EXPORT int ftruncate64(int fd, off64_t length)
{
	REAL(ftruncate64);
	if (in_range(fd) && for_application_fds(CALLER))
		fds_will_cut(fd, length);
	return real(fd, length);
}

EXPORT int truncate(const char *path, off_t length)
{
	REAL(truncate);
	if (for_application_fds(CALLER))
		fds_will_cut_path(path, length);
	return real(path, length);
}

EXPORT int truncate64(const char *path, off64_t length)
{
	REAL(truncate64);
	if (for_application_fds(CALLER))
		fds_will_cut_path(path, length);
	return real(path, length);
}

/* Modes that change bytes already there (falloc.h). */
#define FALLOC_CHANGES (0x02 | 0x08 | 0x10 | 0x20)

EXPORT int fallocate(int fd, int mode, off_t offset, off_t len)
{
	REAL(fallocate);
	if ((mode & FALLOC_CHANGES) && in_range(fd) && for_application_fds(CALLER))
		fds_will_cut(fd, offset);
	return real(fd, mode, offset, len);
}

EXPORT int fallocate64(int fd, int mode, off64_t offset, off64_t len)
{
	REAL(fallocate64);
	if ((mode & FALLOC_CHANGES) && in_range(fd) && for_application_fds(CALLER))
		fds_will_cut(fd, offset);
	return real(fd, mode, offset, len);
}
