/* AF_UNIX socketpairs whose both ends are the program's (format.h
 * FILE_SOCKETPAIR), stream, datagram and seqpacket: a restart makes the
 * pair again and sends what waited in each end's receive queue again from
 * the other end, message by message.
 *
 * Which two sockets are a pair is noted when socketpair() returns (the
 * kernel shows a socket's peer only through sock_diag netlink); a socket in
 * the program's hands whose peer is not known, or not the program's, stops
 * checkpoints, named, as a pipe to another process does.
 *
 * The queue is read with MSG_PEEK at a peek offset (SO_PEEK_OFF, as CRIU
 * does), which leaves it as it was: the program goes on after the
 * checkpoint with its sockets untouched, and nothing is lost if the
 * checkpoint fails halfway. Not kept: a shutdown() (a stream end that
 * reads end-of-file is refused), descriptors or credentials in flight
 * (refused), the peek offset's value is given back. */
#define LOG_PREFIX "files: "
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fds.h"
#include "format.h"
#include "log.h"

#define MAX_PAIRS 128

/* The pairs socketpair() made: inode numbers of the two ends. */
static struct {
	uint64_t a, b;
} pairs[MAX_PAIRS];
static int npairs;

/* Whether a descriptor of the program is the socket ino. */
static int program_fd_of(uint64_t ino)
{
	for (int fd = 3; fd < fds_range(); fd++) {
		struct stat st;

		if (fds_slot(fd)->state == SLOT_PROGRAM && !fstat(fd, &st) &&
		    S_ISSOCK(st.st_mode) && st.st_ino == ino)
			return fd;
	}
	return -1;
}

static void forget_ino(uint64_t ino)
{
	for (int i = 0; i < npairs; i++)
		if (pairs[i].a == ino || pairs[i].b == ino)
			pairs[i--] = pairs[--npairs];
}

static void add_pair(uint64_t a, uint64_t b)
{
	/* Inode numbers come back after a close: the newest pair wins. */
	forget_ino(a);
	forget_ino(b);
	if (npairs == MAX_PAIRS)
		for (int i = 0; i < npairs; i++)
			if (program_fd_of(pairs[i].a) < 0 && program_fd_of(pairs[i].b) < 0)
				pairs[i--] = pairs[--npairs];
	if (npairs == MAX_PAIRS) {
		fds_refuse("more than %d socketpairs at once", MAX_PAIRS);
		return;
	}
	pairs[npairs].a = a;
	pairs[npairs++].b = b;
}

void fds_socket_paired(int a, int b)
{
	FDS_LOCKED();
	struct stat sa, sb;

	if (!fstat(a, &sa) && !fstat(b, &sb))
		add_pair(sa.st_ino, sb.st_ino);
}

static uint64_t peer_of(uint64_t ino)
{
	for (int i = 0; i < npairs; i++)
		if (pairs[i].a == ino || pairs[i].b == ino)
			return pairs[i].a == ino ? pairs[i].b : pairs[i].a;
	return 0;
}

/* --- saving ---------------------------------------------------------------------- */

/* fds_payload's storage, as the last peek_queue grew it. */
static char *payload;

static int int_opt(int fd, int opt, int *v)
{
	socklen_t l = sizeof(*v);

	return getsockopt(fd, SOL_SOCKET, opt, v, &l) ? -errno : 0;
}

/* What waits in fd's receive queue, peeked message by message into
 * payload (u32 length, bytes); each message at most cap bytes. */
static int peek_queue(int fd, int type, size_t cap, const char *path, size_t *plen, struct why *why)
{
	int off, zero = 0, inq = 0;
	size_t len = 0, bytes = 0;
	int ret = 0;

	*plen = 0;
	if (int_opt(fd, SO_PEEK_OFF, &off) || ioctl(fd, FIONREAD, &inq) ||
	    setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)))
		return why_set(why, -errno, "%s (descriptor %d): %s", path, fd, strerror(errno));
	for (;;) {
		struct iovec iov;
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		ssize_t n;
		uint32_t u;

		payload = fds_payload(len + 4 + cap);
		if (!payload) {
			ret = why_set(why, -ENOMEM, "out of memory copying %s", path);
			break;
		}
		iov = (struct iovec){payload + len + 4, cap};
		n = recvmsg(fd, &m, MSG_PEEK | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0) {
			ret =
			    why_set(why, -errno, "cannot copy what waits in %s (descriptor %d): %s",
				    path, fd, strerror(errno));
			break;
		}
		if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
			fds_refuse("%s (descriptor %d) holds %s in flight", path, fd,
				   m.msg_flags & MSG_CTRUNC ? "descriptors or credentials"
							    : "a message larger than its buffers");
			ret = why_set(why, -EXDEV,
				      "%s (descriptor %d): what is in flight cannot be "
				      "copied",
				      path, fd);
			break;
		}
		if (n == 0) {
			/* End of file on a stream, or an empty datagram, which
			 * a peek offset cannot step over. */
			fds_refuse("%s (descriptor %d), %s", path, fd,
				   type == SOCK_STREAM ? "a socket whose peer shut it down"
						       : "a socket holding an empty message");
			ret = why_set(why, -EXDEV, "%s (descriptor %d) cannot be made again", path,
				      fd);
			break;
		}
		u = (uint32_t)n;
		memcpy(payload + len, &u, 4);
		len += 4 + (size_t)n;
		bytes += (size_t)n;
	}
	setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off));
	if (ret)
		return ret;
	/* A stream's queue length is all its bytes: nothing may be missed. */
	if (type == SOCK_STREAM && bytes != (size_t)inq)
		return why_set(why, -EIO, "cannot copy the %d bytes waiting in %s (descriptor %d)",
			       inq, path, fd);
	*plen = len;
	return 0;
}

int fds_socket_describe(int fd, const struct stat *st, const char *path, struct file_record *r,
			const void **data, size_t *plen, struct why *why)
{
	int dom = 0, type = 0, snd = 0, rcv = 0, psnd = 0, other, ret;
	uint64_t peer = peer_of(st->st_ino);

	*data = NULL;
	*plen = 0;
	if (int_opt(fd, SO_DOMAIN, &dom) || int_opt(fd, SO_TYPE, &type) ||
	    int_opt(fd, SO_SNDBUF, &snd) || int_opt(fd, SO_RCVBUF, &rcv))
		return why_set(why, -errno, "%s (descriptor %d): %s", path, fd, strerror(errno));
	other = peer ? program_fd_of(peer) : -1;
	if (dom != AF_UNIX || other < 0 || int_opt(other, SO_SNDBUF, &psnd)) {
		fds_refuse("%s (descriptor %d), a socket whose other end is not the program's "
			   "(another process's, a listening or connected socket, or closed): a "
			   "restart could not make it again",
			   path, fd);
		return why_set(why, -EXDEV, "%s (descriptor %d): a socket to another process", path,
			       fd);
	}
	r->kind = FILE_SOCKETPAIR;
	r->ino = st->st_ino;
	r->rdev = peer;
	r->size = (uint64_t)type;
	r->mtime_sec = snd;
	r->mtime_nsec = rcv;
	if (!fds_event_first_of_desc(fd))
		return 1;
	/* What waits was sent within the peer's send buffer: a message is
	 * never larger. */
	ret = peek_queue(fd, type, (size_t)(psnd > 65536 ? psnd : 65536), path, plen, why);
	if (ret)
		return ret;
	*data = *plen ? payload : NULL;
	return 1;
}

/* --- the restart ------------------------------------------------------------------ */

static int send_queue(int k, const char *q, size_t len)
{
	for (size_t at = 0; at < len;) {
		uint32_t u;

		if (len - at < 4)
			return -EBADMSG;
		memcpy(&u, q + at, 4);
		at += 4;
		if (u > len - at)
			return -EBADMSG;
		if (send(k, q + at, u, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)u)
			return errno ? -errno : -EIO;
		at += u;
	}
	return 0;
}

int fds_socket_make(const struct file_record *recs, char *const *data, const size_t *len, int *made,
		    int n, int i, struct why *why)
{
	const struct file_record *r = &recs[i];
	int j, sv[2], ret = 0;

	if (made[i] >= 0)
		return 0;
	for (j = 0; j < n; j++)
		if (j != i && recs[j].kind == FILE_SOCKETPAIR && recs[j].ino == r->rdev &&
		    recs[j].rdev == r->ino)
			break;
	if (j == n || recs[j].size != r->size)
		return why_set(why, -EBADMSG, "the record of open files in the image is damaged");
	if (socketpair(AF_UNIX, (int)r->size | SOCK_CLOEXEC, 0, sv))
		return why_set(why, -errno, "cannot make a socketpair: %s", strerror(errno));
	/* The kernel doubles what it is given; the saved sizes are doubled. */
	for (int e = 0; e < 2; e++) {
		const struct file_record *q = e ? &recs[j] : r;
		int snd = (int)q->mtime_sec / 2, rcv = (int)q->mtime_nsec / 2;

		setsockopt(sv[e], SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
		setsockopt(sv[e], SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	}
	/* What waited for end i was sent by end j, and the other way. */
	ret = send_queue(sv[1], data[i], len[i]);
	if (!ret)
		ret = send_queue(sv[0], data[j], len[j]);
	if (ret) {
		close(sv[0]);
		close(sv[1]);
		return why_set(why, ret,
			       "cannot put what waited in a socketpair (descriptors %d "
			       "and %d) back: %s",
			       r->fd, recs[j].fd, strerror(-ret));
	}
	for (int e = 0; e < 2; e++) {
		int fl = fcntl(sv[e], F_GETFL);
		uint32_t want = (e ? &recs[j] : r)->flags & O_NONBLOCK;

		if (fl < 0 || fcntl(sv[e], F_SETFL, (fl & ~O_NONBLOCK) | (int)want)) {
			why_set(why, -errno, "cannot set a socket's flags: %s", strerror(errno));
			close(sv[0]);
			close(sv[1]);
			return why->err;
		}
	}
	made[i] = sv[0];
	made[j] = sv[1];
	fds_socket_paired(sv[0], sv[1]);
	return 0;
}
