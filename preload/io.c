/* Calls in which the kernel writes into the caller's memory. With the
 * mprotect backend a write-protected page makes the kernel fail the call
 * with EFAULT instead of faulting (DESIGN.md section 4), so the buffer is
 * made writable and counted dirty first. The uffd backend needs none of
 * this (its prepare_write does nothing). */
#define _LARGEFILE64_SOURCE
#undef _FILE_OFFSET_BITS
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dirty.h"
#include "preload.h"

/* The next definition of fn, found once. */
#define REAL(fn)                                                                                   \
	static __typeof__(fn) *real;                                                               \
	if (!real)                                                                                 \
	real = (__typeof__(fn) *)stasis_next_symbol(#fn)

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

/* stdio fills its buffer with an internal read(): that buffer is prepared
 * too, and one allocated during the call goes to the runtime's heap (the
 * stream itself cannot be restored anyway: its descriptor is not). */
EXPORT size_t fread(void *ptr, size_t size, size_t n, FILE *stream)
{
	size_t ret;

	REAL(fread);
	prepare(ptr, size * n);
	if (stream && stream->_IO_buf_base)
		prepare(stream->_IO_buf_base, stream->_IO_buf_end - stream->_IO_buf_base);
	stasis_depth++;
	ret = real(ptr, size, n, stream);
	stasis_depth--;
	return ret;
}
