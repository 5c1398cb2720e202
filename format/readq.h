/* A first-in first-out queue of reads through liburing: reads are
 * submitted as they are pushed, run in parallel, and are handed back in
 * the order they were pushed, each complete (short reads are continued,
 * EINTR and EAGAIN retried). What a restore needs to read images at disk
 * speed while checking their crc64 in file order (restore_read.c).
 *
 * Not thread-safe: one queue per thread. Functions return 0 or -errno. */
#ifndef STASIS_READQ_H
#define STASIS_READQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <liburing.h>

#define READQ_DEPTH 8
#define READQ_IOVS 64 /* destinations per read (scattered pages of one run of the file) */

struct readq_req {
	int fd;
	uint64_t off;		       /* file offset of the rest */
	struct iovec iov[READQ_IOVS];  /* as pushed */
	struct iovec left[READQ_IOVS]; /* what is still to read */
	unsigned niov, first;	       /* first: first iovec of left not complete */
	size_t len, rest;
	int res; /* 0, or -errno once failed; -EIO: the file ended first */
	bool done;
	uintptr_t tag; /* the caller's */
};

struct readq {
	struct io_uring ring;
	bool ring_ok, broken; /* broken: waiting on the ring failed */
	unsigned depth, head, count;
	struct readq_req req[READQ_DEPTH];
};

int readq_init(struct readq *q, unsigned depth);
void readq_exit(struct readq *q);

static inline bool readq_full(const struct readq *q)
{
	return q->count == q->depth;
}

static inline bool readq_empty(const struct readq *q)
{
	return q->count == 0;
}

/* Queue a read of the file fd at off into iov[0..niov) (niov <=
 * READQ_IOVS, copied) and submit it. The queue must not be full. */
int readq_push(struct readq *q, int fd, uint64_t off, const struct iovec *iov, unsigned niov,
	       uintptr_t tag);

/* Wait for the oldest read and remove it from the queue: *req stays valid
 * until the next push. Returns its result: 0, or -errno (-EIO when the
 * file ended before it did). */
int readq_pop(struct readq *q, const struct readq_req **req);

/* Wait for every read under way (the destinations are the kernel's until
 * then): for an error path. */
void readq_drain(struct readq *q);

#endif
