/* A first-in first-out queue of reads through liburing: see readq.h. */
#define LOG_PREFIX "readq: "
#include <errno.h>
#include <string.h>

#include "log.h"
#include "readq.h"

int readq_init(struct readq *q, unsigned depth)
{
	int ret;

	memset(q, 0, sizeof(*q));
	q->depth = depth < 1 ? 1 : depth > READQ_DEPTH ? READQ_DEPTH : depth;
	ret = io_uring_queue_init(q->depth, &q->ring, 0);
	if (ret < 0)
		return ret;
	q->ring_ok = true;
	return 0;
}

void readq_exit(struct readq *q)
{
	if (!q->ring_ok)
		return;
	readq_drain(q);
	io_uring_queue_exit(&q->ring);
	q->ring_ok = false;
}

static int submit(struct readq *q, struct readq_req *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	int ret;

	/* Never more SQEs than requests, each submitted at once. */
	if (!sqe)
		return -EBUSY;
	io_uring_prep_readv(sqe, r->fd, &r->left[r->first], r->niov - r->first, r->off);
	io_uring_sqe_set_data(sqe, r);
	do
		ret = io_uring_submit(&q->ring);
	while (ret == -EINTR || ret == -EAGAIN);
	return ret < 0 ? ret : 0;
}

int readq_push(struct readq *q, int fd, uint64_t off, const struct iovec *iov, unsigned niov,
	       uintptr_t tag)
{
	struct readq_req *r;
	int ret;

	if (readq_full(q) || !niov || niov > READQ_IOVS)
		return -EINVAL;
	r = &q->req[(q->head + q->count) % q->depth];
	r->fd = fd;
	r->off = off;
	r->niov = niov;
	r->first = 0;
	r->len = 0;
	memcpy(r->iov, iov, niov * sizeof(*iov));
	memcpy(r->left, iov, niov * sizeof(*iov));
	for (unsigned i = 0; i < niov; i++)
		r->len += iov[i].iov_len;
	r->rest = r->len;
	r->res = 0;
	r->done = false;
	r->tag = tag;
	ret = submit(q, r);
	if (ret)
		return ret;
	q->count++;
	return 0;
}

/* Account n bytes read by r; true when it has more to read. */
static bool advance(struct readq_req *r, size_t n)
{
	r->rest -= n;
	r->off += n;
	while (n) {
		struct iovec *v = &r->left[r->first];

		if (n < v->iov_len) {
			v->iov_base = (char *)v->iov_base + n;
			v->iov_len -= n;
			break;
		}
		n -= v->iov_len;
		r->first++;
	}
	return r->rest > 0;
}

/* Deal with one completion: continue a short read, retry what the kernel
 * asks to retry, else mark the request done. */
static void complete(struct readq *q, struct io_uring_cqe *cqe)
{
	struct readq_req *r = io_uring_cqe_get_data(cqe);
	int res = cqe->res;

	io_uring_cqe_seen(&q->ring, cqe);
	if (res == -EINTR || res == -EAGAIN) {
		res = submit(q, r);
		if (!res)
			return;
	} else if (res > 0 && advance(r, res)) {
		res = submit(q, r);
		if (!res)
			return;
	} else if (res == 0 && r->rest) {
		res = -EIO; /* the file ended first */
	}
	r->res = res < 0 ? res : 0;
	r->done = true;
}

int readq_pop(struct readq *q, const struct readq_req **req)
{
	struct readq_req *r = &q->req[q->head];
	struct io_uring_cqe *cqe;
	int ret;

	if (readq_empty(q) || q->broken)
		return -EINVAL;
	while (!r->done) {
		if (!io_uring_peek_cqe(&q->ring, &cqe)) {
			complete(q, cqe);
			continue;
		}
		ret = io_uring_wait_cqe(&q->ring, &cqe);
		if (ret == -EINTR || ret == -EAGAIN)
			continue;
		if (ret < 0) {
			q->broken = true; /* nothing more will come */
			return ret;
		}
		complete(q, cqe);
	}
	q->head = (q->head + 1) % q->depth;
	q->count--;
	*req = r;
	return r->res;
}

void readq_drain(struct readq *q)
{
	const struct readq_req *r;

	while (!readq_empty(q) && !q->broken)
		readq_pop(q, &r);
}
