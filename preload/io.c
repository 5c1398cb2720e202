/* Calls in which the kernel writes into the caller's memory. With the
 * mprotect backend a write-protected page makes the kernel fail the call
 * with EFAULT instead of faulting (DESIGN.md section 4), so the buffer is
 * made writable and counted dirty first. The uffd backend needs none of
 * this (its prepare_write does nothing). */
#define _LARGEFILE64_SOURCE
#undef _FILE_OFFSET_BITS
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "runtime.h"
#include "dirty.h"
#include "interpose.h"

static inline void prepare(const void *buf, size_t len)
{
	struct session *s = session_get();

	if (s && s->dirty && buf && len)
		s->dirty->prepare_write(buf, len);
}

static void prepare_iov(const struct iovec *iov, int n)
{
	for (int i = 0; iov && i < n; i++)
		prepare(iov[i].iov_base, iov[i].iov_len);
}

EXPORT ssize_t read(int fd, void *buf, size_t count)
{
	REAL(read);
	prepare(buf, count);
	return real(fd, buf, count);
}

EXPORT ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
	REAL(pread);
	prepare(buf, count);
	return real(fd, buf, count, offset);
}

EXPORT ssize_t pread64(int fd, void *buf, size_t count, off64_t offset)
{
	REAL(pread64);
	prepare(buf, count);
	return real(fd, buf, count, offset);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	REAL(readv);
	prepare_iov(iov, iovcnt);
	return real(fd, iov, iovcnt);
}

EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	REAL(recv);
	prepare(buf, len);
	return real(fd, buf, len, flags);
}

EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
			socklen_t *alen)
{
	REAL(recvfrom);
	prepare(buf, len);
	return real(fd, buf, len, flags, addr, alen);
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	REAL(recvmsg);
	if (msg)
		prepare_iov(msg->msg_iov, (int)msg->msg_iovlen);
	return real(fd, msg, flags);
}

/* stdio fills a stream's buffer with an internal read(), which no
 * interposition sees: every call that may refill it makes the buffer
 * writable first, and gives the stream one first if it has none yet (as
 * the refill would: _IO_doallocbuf), so that it is never a fresh page of
 * the arena the kernel cannot write. The buffer stays in the arena: the
 * program's streams are restored with its memory (process/fds.h). */
extern void _IO_doallocbuf(FILE *fp);

/* Some of these are macros of glibc's optimised headers. */
#undef fread_unlocked
#undef fgetc_unlocked
#undef getc_unlocked
#undef getc
#undef getchar

static void prepare_stream(FILE *fp)
{
	struct session *s = session_get();

	if (!s || !s->dirty || !fp)
		return;
	if (!fp->_IO_buf_base)
		_IO_doallocbuf(fp);
	if (fp->_IO_buf_base)
		s->dirty->prepare_write(fp->_IO_buf_base, fp->_IO_buf_end - fp->_IO_buf_base);
}

EXPORT size_t fread(void *ptr, size_t size, size_t n, FILE *stream)
{
	REAL(fread);
	prepare(ptr, size * n);
	prepare_stream(stream);
	return real(ptr, size, n, stream);
}

EXPORT size_t fread_unlocked(void *ptr, size_t size, size_t n, FILE *stream)
{
	REAL(fread_unlocked);
	prepare(ptr, size * n);
	prepare_stream(stream);
	return real(ptr, size, n, stream);
}

extern size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *stream);

EXPORT size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *stream)
{
	REAL(__fread_chk);
	prepare(ptr, size * n);
	prepare_stream(stream);
	return real(ptr, ptrlen, size, n, stream);
}

EXPORT char *fgets(char *buf, int n, FILE *stream)
{
	REAL(fgets);
	prepare(buf, n > 0 ? (size_t)n : 0);
	prepare_stream(stream);
	return real(buf, n, stream);
}

EXPORT char *fgets_unlocked(char *buf, int n, FILE *stream)
{
	REAL(fgets_unlocked);
	prepare(buf, n > 0 ? (size_t)n : 0);
	prepare_stream(stream);
	return real(buf, n, stream);
}

extern char *__fgets_chk(char *buf, size_t size, int n, FILE *stream);

EXPORT char *__fgets_chk(char *buf, size_t size, int n, FILE *stream)
{
	REAL(__fgets_chk);
	prepare(buf, n > 0 ? (size_t)n : 0);
	prepare_stream(stream);
	return real(buf, size, n, stream);
}

EXPORT int fgetc(FILE *stream)
{
	REAL(fgetc);
	prepare_stream(stream);
	return real(stream);
}

EXPORT int getc(FILE *stream)
{
	REAL(getc);
	prepare_stream(stream);
	return real(stream);
}

EXPORT int fgetc_unlocked(FILE *stream)
{
	REAL(fgetc_unlocked);
	prepare_stream(stream);
	return real(stream);
}

EXPORT int getc_unlocked(FILE *stream)
{
	REAL(getc_unlocked);
	prepare_stream(stream);
	return real(stream);
}

EXPORT int getchar(void)
{
	REAL(getchar);
	prepare_stream(stdin);
	return real();
}

/* What getc() and friends inlined into the program call to refill. */
extern int __uflow(FILE *stream);
extern int __underflow(FILE *stream);

EXPORT int __uflow(FILE *stream)
{
	REAL(__uflow);
	prepare_stream(stream);
	return real(stream);
}

EXPORT int __underflow(FILE *stream)
{
	REAL(__underflow);
	prepare_stream(stream);
	return real(stream);
}

EXPORT ssize_t getdelim(char **line, size_t *n, int delim, FILE *stream)
{
	REAL(getdelim);
	if (line && *line && n)
		prepare(*line, *n);
	prepare_stream(stream);
	return real(line, n, delim, stream);
}

EXPORT ssize_t __getdelim(char **line, size_t *n, int delim, FILE *stream)
    __attribute__((alias("getdelim")));

EXPORT ssize_t getline(char **line, size_t *n, FILE *stream)
{
	return getdelim(line, n, '\n', stream);
}

/* glibc's headers rename vfscanf and fscanf to their C99 forms (below):
 * the pre-C99 symbols are defined under their own names here. */
EXPORT int plain_vfscanf(FILE *stream, const char *format, va_list ap) __asm__("vfscanf");
EXPORT int plain_fscanf(FILE *stream, const char *format, ...) __asm__("fscanf");

EXPORT int plain_vfscanf(FILE *stream, const char *format, va_list ap)
{
	REAL(vfscanf);
	prepare_stream(stream);
	return real(stream, format, ap);
}

EXPORT int plain_fscanf(FILE *stream, const char *format, ...)
{
	va_list ap;
	int ret;

	va_start(ap, format);
	ret = plain_vfscanf(stream, format, ap);
	va_end(ap);
	return ret;
}

/* The C99 scanf family, which programs built for C99 or later call. */
extern int __isoc99_vfscanf(FILE *stream, const char *format, va_list ap);

EXPORT int __isoc99_vfscanf(FILE *stream, const char *format, va_list ap)
{
	REAL(__isoc99_vfscanf);
	prepare_stream(stream);
	return real(stream, format, ap);
}

EXPORT int __isoc99_fscanf(FILE *stream, const char *format, ...)
{
	va_list ap;
	int ret;

	va_start(ap, format);
	ret = __isoc99_vfscanf(stream, format, ap);
	va_end(ap);
	return ret;
}

EXPORT int __isoc99_scanf(const char *format, ...)
{
	va_list ap;
	int ret;

	va_start(ap, format);
	ret = __isoc99_vfscanf(stdin, format, ap);
	va_end(ap);
	return ret;
}
