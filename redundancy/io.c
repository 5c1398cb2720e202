/* The schemes' data path (DESIGN.md section 11): buffers allocated and
 * populated once and kept for the life of the process, the data of a
 * member's files passing through them (read with pread, its crc64 noted
 * while in cache), and one io_uring for the writes.
 *
 * Nothing is mapped: reading a file through mmap faults on every page
 * (13-22 us each on the 2-core test VMs) and gives SIGBUS when the file
 * is truncated meanwhile, where pread gives a short read and an error.
 * Reads use pread rather than io_uring: on tmpfs (Linux 6.18) io_uring
 * cannot read without blocking and hands every read to a worker thread,
 * which measured half as fast as pread into the same buffer. Writes are
 * buffered, never O_DIRECT: io_uring's worker takes the writes to one file
 * one at a time (they are hashed by inode), and with O_DIRECT each piece
 * then waited on the device in turn; on the shared disk of a 2-core VM the
 * redundancy test took 17-198 s instead of 3.5 s. Buffered, the pieces land in
 * the page cache and the fsync that ends the file writes them together.
 *
 * One encode or rebuild runs at a time in a process (they are collective
 * over the set), so the buffers have one user per use at a time. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <isa-l.h>
#include <liburing.h>

#define LOG_PREFIX "redset: "
#include "log.h"
#include "internal.h"

#define HUGE_BYTES (2u << 20)
#define QUEUE_DEPTH 64

/* ---- kept buffers ---- */

static struct {
	unsigned char *base;
	size_t size;
} kept[KEPT_USES];

unsigned char *kept_buf(enum kept_use use, size_t bytes)
{
	size_t size = bytes >= HUGE_BYTES ? (bytes + HUGE_BYTES - 1) & ~(size_t)(HUGE_BYTES - 1)
					  : (bytes + 4095) & ~(size_t)4095;
	void *p;

	if (kept[use].size >= bytes)
		return kept[use].base;
	/* Straight from mmap: stasis's own memory, outside the application's
	 * arena and image, for as long as the process lives. */
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (size >= HUGE_BYTES)
		madvise(p, size, MADV_HUGEPAGE); /* fewer faults, fewer TLB misses */
	/* Every page now, in one call, rather than one fault per page of
	 * every piece of the first encode. Before Linux 5.14: touch them. */
	if (madvise(p, size, MADV_POPULATE_WRITE))
		memset(p, 0, size);
	if (kept[use].base)
		munmap(kept[use].base, kept[use].size);
	kept[use].base = p;
	kept[use].size = size;
	return p;
}

/* ---- a member's data passing through ---- */

int io_read_data(struct scheme_io *io, uint64_t lo, unsigned char *buf, size_t len)
{
	int ret = lfile_read(&io->lf, lo, buf, len);

	if (!ret && io->crc)
		crc_parts_feed(io->crc, &io->lf, lo, buf, len);
	return ret;
}

int io_read_section(struct scheme_io *io, int i, uint64_t off, unsigned char *buf, size_t len)
{
	int ret = full_pread(io->red_fd, buf, len, io->sec[i].offset + off);
	struct payload_section *seen = io->sec_seen ? &io->sec_seen[i] : NULL;

	/* In order from the start, or not at all (checked by a pass). */
	if (!ret && seen && seen->size == off) {
		seen->crc = crc64_ecma_refl(seen->crc, buf, len);
		seen->size += len;
	} else if (seen) {
		seen->size = UINT64_MAX;
	}
	return ret;
}

void io_note_data(struct scheme_io *io, uint64_t lo, unsigned char *buf, size_t len)
{
	/* The corrupt-rebuild fault point: one byte of the decoded data
	 * wrong, as a broken decode would leave it; the crc64 check of the
	 * rebuilt file must catch it. */
	if (io->corrupt_at >= lo && io->corrupt_at - lo < len)
		buf[io->corrupt_at - lo] ^= 0xff;
	if (io->crc)
		crc_parts_feed(io->crc, &io->lf, lo, buf, len);
}

int io_write_data(struct scheme_io *io, uint64_t lo, unsigned char *buf, size_t len)
{
	io_note_data(io, lo, buf, len);
	return lfile_write(&io->lf, lo, buf, len);
}

bool lfile_place(const struct lfile *lf, uint64_t lo, size_t len, int *fd, uint64_t *off, size_t *n)
{
	uint64_t start = 0;

	*n = 0;
	for (int i = 0; i < lf->n; start += lf->size[i], i++) {
		uint64_t end = start + lf->size[i];

		if (lo >= end)
			continue;
		*fd = lf->fd[i];
		*off = lo - start;
		*n = end - lo < len ? end - lo : len;
		/* The rest of the piece in another file: not one write. */
		return lo + len <= end || end == lf->total;
	}
	return true; /* all of it past the end: the zero padding */
}

/* ---- writes through io_uring ---- */

static struct io_uring ring;
static pid_t ring_pid;
static int ring_state; /* 0 not tried, 1 ready, -1 none (write synchronously) */
static unsigned inflight;

static bool ring_ready(void)
{
	pid_t pid = getpid();

	/* A child of fork() shares the parent's ring: it gets its own. */
	if (ring_state == 1 && ring_pid != pid) {
		io_uring_queue_exit(&ring);
		ring_state = 0;
		inflight = 0;
	}
	if (ring_state == 0) {
		int ret = io_uring_queue_init(QUEUE_DEPTH, &ring, 0);

		ring_state = ret ? -1 : 1;
		ring_pid = pid;
		if (ret)
			pr_debug("io_uring unavailable (%s): writing synchronously",
				 strerror(-ret));
	}
	return ring_state == 1;
}

static int submit(struct ring_write *w)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	int ret;

	if (!sqe)
		return -EBUSY; /* never: at most QUEUE_DEPTH in flight, each submitted */
	io_uring_prep_write(sqe, w->fd, w->buf, w->len, w->off);
	io_uring_sqe_set_data(sqe, w);
	do
		ret = io_uring_submit(&ring);
	while (ret == -EINTR || ret == -EAGAIN);
	if (ret < 0)
		return ret;
	inflight++;
	return 0;
}

int ring_write_start(struct ring_write *w)
{
	w->res = 0;
	if (ring_ready() && inflight < QUEUE_DEPTH && !submit(w))
		return 0;
	w->res = full_pwrite(w->fd, w->buf, w->len, w->off);
	return 1;
}

unsigned ring_write_inflight(void)
{
	return ring_state == 1 && ring_pid == getpid() ? inflight : 0;
}

struct ring_write *ring_write_reap(bool wait)
{
	struct io_uring_cqe *cqe;
	struct ring_write *w;
	int ret;

	while (ring_write_inflight()) {
		ret = wait ? io_uring_wait_cqe(&ring, &cqe) : io_uring_peek_cqe(&ring, &cqe);
		if (ret == -EINTR)
			continue;
		if (ret)
			return NULL;
		w = io_uring_cqe_get_data(cqe);
		ret = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
		inflight--;
		if (ret == -EINTR || ret == -EAGAIN) {
			ret = 0;
		} else if (ret > 0) {
			w->buf += ret;
			w->off += ret;
			w->len -= ret;
			ret = 0;
		} else if (ret == 0) {
			ret = -EIO; /* no progress on a regular file */
		}
		if (ret < 0 || !w->len) {
			w->res = ret;
			return w;
		}
		/* The rest of a short write, or a retry. */
		if (submit(w)) {
			w->res = full_pwrite(w->fd, w->buf, w->len, w->off);
			return w;
		}
	}
	return NULL;
}
