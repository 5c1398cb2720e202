/* Checkpoint image files: writer (liburing, O_DIRECT when possible) and
 * verifying reader. The layout is format.h's; see image.h for the contract.
 *
 * The writer streams region data straight from live memory: every region is
 * page aligned and a page multiple, so its pages are valid O_DIRECT buffers
 * and nothing is copied. Only the header, the region table and the page
 * bitmaps of partial regions go through one page-aligned staging buffer.
 * Region data is written first and the header + table last, because the
 * table holds the data checksums, which are computed chunk by chunk just
 * before each chunk is queued (so the crc of chunk k+1 overlaps the I/O of
 * the chunks before it and memory is read by the CPU only once). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <isa-l/crc64.h>
#include <liburing.h>

#define LOG_PREFIX "image: "
#include "log.h"
#include "image.h"

#define PAGE ((uint64_t)STASIS_PAGE)
#define QUEUE_DEPTH 8
#define WRITE_CHUNK (1u << 20)		/* bytes per SQE */
#define SLOT_IOVS 64			/* iovecs per SQE (scattered dirty pages) */
#define READ_CHUNK (4u << 20)		/* read + crc granule; keeps data cache-warm */
#define MAX_REGIONS (UINT64_C(1) << 20) /* more is a corrupt table, not a program */

static inline uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static uint64_t crc64(uint64_t crc, const void *buf, uint64_t len)
{
	return crc64_ecma_refl(crc, buf, len);
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Bytes of the stored page bitmap of a region of `length` bytes: one bit per
 * page in u64 words, padded to a page so that the pages after it stay
 * aligned for O_DIRECT. */
uint64_t image_bitmap_bytes(uint64_t length)
{
	uint64_t words = (length / PAGE + 63) / 64;

	return round_up(words * 8, PAGE);
}

/* Test hook. STASIS_FAULT holds "<point>:<id>" (several joined by ','); a
 * fault point fires when its name and the checkpoint id match. Read on every
 * call: a test sets it between checkpoints, and a checkpoint is rare. */
bool stasis_fault(const char *point, uint64_t id)
{
	const char *s = getenv("STASIS_FAULT");
	size_t plen = strlen(point);

	while (s && *s) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);

		if (len > plen + 1 && !strncmp(s, point, plen) && s[plen] == ':') {
			char *num_end;
			unsigned long long v;

			errno = 0;
			v = strtoull(s + plen + 1, &num_end, 10);
			if (!errno && num_end == s + len && num_end != s + plen + 1 && v == id)
				return true;
		}
		s = end ? end + 1 : NULL;
	}
	return false;
}

/* ------------------------------------------------------------------ */
/* writer                                                             */

struct wslot {
	struct iovec iov[SLOT_IOVS];
	unsigned niov;
	unsigned first; /* first iovec not completely written (short writes) */
	uint64_t off;	/* file offset of iov[first] */
	size_t len;	/* bytes not yet written */
	size_t total;	/* bytes queued in the slot while it is being filled */
	bool busy;
	bool direct; /* submitted while the fd had O_DIRECT */
};

enum fault_kind { FAULT_NONE, FAULT_STALL, FAULT_FAIL };

struct writer {
	struct io_uring ring;
	int fd;
	bool direct;
	struct wslot slots[QUEUE_DEPTH];
	int fill; /* slot being filled, or -1 */
	unsigned inflight;
	uint64_t done;	   /* region bytes written, for the fault points */
	uint64_t fault_at; /* fire a fault once `done` reaches this */
	enum fault_kind fault;
	bool fault_hit;
	uint64_t ckpt_id;
};

static int submit_slot(struct writer *w, struct wslot *s)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
	int ret;

	/* Never more SQEs than slots, and every one is submitted at once. */
	if (!sqe)
		return -EBUSY;
	io_uring_prep_writev(sqe, w->fd, &s->iov[s->first], s->niov - s->first, s->off);
	io_uring_sqe_set_data(sqe, s);
	s->direct = w->direct;
	do
		ret = io_uring_submit(&w->ring);
	while (ret == -EINTR || ret == -EAGAIN);
	if (ret < 0)
		return ret;
	w->inflight++;
	return 0;
}

/* Account `n` written bytes of slot s: advance its iovecs past them. */
static void slot_advance(struct wslot *s, size_t n)
{
	s->len -= n;
	s->off += n;
	while (n) {
		struct iovec *v = &s->iov[s->first];

		if (n < v->iov_len) {
			v->iov_base = (char *)v->iov_base + n;
			v->iov_len -= n;
			return;
		}
		n -= v->iov_len;
		s->first++;
	}
}

/* Fault points fire once about half of the region data is on its way to the
 * file, so that a killed writer leaves a real half-written tmp file. */
static int fault_check(struct writer *w)
{
	static const char msg[] = "stasis: fault stall-write hit in checkpoint ";
	char line[128];
	int n;

	if (w->fault == FAULT_NONE || w->done < w->fault_at)
		return 0;
	if (w->fault == FAULT_FAIL) {
		w->fault_hit = true;
		return -EIO;
	}
	n = snprintf(line, sizeof(line), "%s%llu\n", msg, (unsigned long long)w->ckpt_id);
	if (write(STDERR_FILENO, line, n) < 0)
		(void)0;
	for (;;)
		pause();
}

/* Wait for one completion and deal with it: retry what the kernel asks us to
 * retry, resubmit the rest of a short write, free the slot when done. */
static int reap_one(struct writer *w)
{
	struct io_uring_cqe *cqe;
	struct wslot *s;
	int ret, res;

	do
		ret = io_uring_wait_cqe(&w->ring, &cqe);
	while (ret == -EINTR || ret == -EAGAIN);
	if (ret < 0)
		return ret;
	s = io_uring_cqe_get_data(cqe);
	res = cqe->res;
	io_uring_cqe_seen(&w->ring, cqe);
	w->inflight--;

	if (res == -EAGAIN || res == -EINTR)
		return submit_slot(w, s);
	if (res == -EINVAL && s->direct) {
		/* The filesystem took O_DIRECT at open but refuses the write
		 * (alignment rules stricter than a page): go buffered. */
		if (w->direct) {
			int fl = fcntl(w->fd, F_GETFL);

			if (fl < 0 || fcntl(w->fd, F_SETFL, fl & ~O_DIRECT) < 0)
				return -EINVAL;
			w->direct = false;
			pr_debug("O_DIRECT write refused, writing buffered");
		}
		return submit_slot(w, s);
	}
	if (res < 0)
		return res;
	if (res == 0)
		return -EIO; /* no progress on a non-empty write: do not spin */
	w->done += res;
	if ((size_t)res < s->len) {
		slot_advance(s, res);
		ret = submit_slot(w, s);
	} else {
		s->busy = false;
		ret = 0;
	}
	if (!ret)
		ret = fault_check(w);
	return ret;
}

static int flush_fill(struct writer *w)
{
	struct wslot *s;

	if (w->fill < 0)
		return 0;
	s = &w->slots[w->fill];
	w->fill = -1;
	s->len = s->total;
	s->first = 0;
	s->busy = true;
	return submit_slot(w, s);
}

/* Queue `len` bytes at ptr for file offset `off`. Pieces that continue the
 * slot being filled are gathered into one writev of up to WRITE_CHUNK. */
static int queue_write(struct writer *w, const void *ptr, size_t len, uint64_t off)
{
	const char *p = ptr;
	int ret;

	while (len) {
		struct wslot *s = w->fill >= 0 ? &w->slots[w->fill] : NULL;
		size_t n;

		if (s &&
		    (s->off + s->total != off || s->total == WRITE_CHUNK || s->niov == SLOT_IOVS)) {
			ret = flush_fill(w);
			if (ret)
				return ret;
			s = NULL;
		}
		if (!s) {
			int i;

			for (;;) {
				for (i = 0; i < QUEUE_DEPTH && w->slots[i].busy; i++)
					;
				if (i < QUEUE_DEPTH)
					break;
				ret = reap_one(w);
				if (ret)
					return ret;
			}
			s = &w->slots[i];
			memset(s, 0, sizeof(*s));
			s->off = off;
			s->busy = true; /* reserved while filling */
			w->fill = i;
		}
		n = WRITE_CHUNK - s->total;
		if (n > len)
			n = len;
		if (s->niov &&
		    (char *)s->iov[s->niov - 1].iov_base + s->iov[s->niov - 1].iov_len == p) {
			s->iov[s->niov - 1].iov_len += n;
		} else {
			s->iov[s->niov].iov_base = (void *)p;
			s->iov[s->niov].iov_len = n;
			s->niov++;
		}
		s->total += n;
		p += n;
		off += n;
		len -= n;
	}
	return 0;
}

static int drain(struct writer *w)
{
	int ret = flush_fill(w);

	while (!ret && w->inflight)
		ret = reap_one(w);
	return ret;
}

/* Checksum and queue [p, p + len) chunk by chunk. */
static int queue_data(struct writer *w, const char *p, uint64_t len, uint64_t *off, uint64_t *crc)
{
	while (len) {
		size_t n = len < WRITE_CHUNK ? len : WRITE_CHUNK;
		int ret;

		*crc = crc64(*crc, p, n);
		ret = queue_write(w, p, n, *off);
		if (ret)
			return ret;
		p += n;
		*off += n;
		len -= n;
	}
	return 0;
}

static int path_dir_fsync(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd, ret = 0;

	if (!slash)
		strcpy(dir, ".");
	else if (slash == path)
		strcpy(dir, "/");
	else if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	else
		memcpy(dir, path, slash - path), dir[slash - path] = '\0';

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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

/* Mask of the bits of the last bitmap word that name real pages. */
static uint64_t tail_mask(uint64_t npages)
{
	unsigned r = npages % 64;

	return r ? (UINT64_C(1) << r) - 1 : ~UINT64_C(0);
}

/* Layout: header page, table padded to a page, then each region's data in
 * order at page-aligned offsets. A partial region is its bitmap (copied into
 * the staging buffer with bits past the last page cleared, so that the file
 * is self-consistent whatever the caller left there) and its dirty pages. */
int image_write(const char *path, struct image_header *hdr, const struct image_region *regions,
		size_t nregions, uint64_t *bytes_written, char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	struct writer w = {.fd = -1, .fill = -1};
	bool ring_ok = false, tmp_made = false;
	struct region_record *table;
	uint64_t table_bytes, data_start, off, data_bytes = 0, stage_bytes;
	char *stage = MAP_FAILED, *bm;
	struct timespec ts;
	size_t i;
	int ret;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		ret = -ENAMETOOLONG;
		goto err;
	}
	if (nregions > MAX_REGIONS || hdr->state_size > STASIS_STATE_MAX) {
		ret = -EINVAL;
		goto err;
	}

	/* Sizes first: the staging buffer holds header, table and bitmaps. */
	table_bytes = round_up((uint64_t)nregions * sizeof(struct region_record), PAGE);
	data_start = PAGE + table_bytes;
	stage_bytes = data_start;
	for (i = 0; i < nregions; i++) {
		if (regions[i].addr % PAGE || regions[i].length % PAGE) {
			ret = -EINVAL;
			goto err;
		}
		if (regions[i].dirty)
			stage_bytes += image_bitmap_bytes(regions[i].length);
	}
	stage = mmap(NULL, stage_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (stage == MAP_FAILED) {
		stage = MAP_FAILED;
		ret = -errno;
		goto err;
	}
	table = (struct region_record *)(stage + PAGE);
	bm = stage + data_start;
	off = data_start;
	for (i = 0; i < nregions; i++) {
		const struct image_region *r = &regions[i];
		struct region_record *rec = &table[i];
		uint64_t npages = r->length / PAGE;

		rec->addr = r->addr;
		rec->length = r->length;
		rec->kind = r->kind;
		rec->file_offset = off;
		if (r->dirty) {
			uint64_t words = (npages + 63) / 64, pages = 0, *copy = (uint64_t *)bm;

			memcpy(copy, r->dirty, words * 8);
			if (words)
				copy[words - 1] &= tail_mask(npages);
			for (uint64_t k = 0; k < words; k++)
				pages += __builtin_popcountll(copy[k]);
			rec->flags = REGION_PARTIAL;
			rec->bitmap_offset = off;
			rec->stored_bytes = image_bitmap_bytes(r->length) + pages * PAGE;
			bm += image_bitmap_bytes(r->length);
		} else {
			rec->stored_bytes = r->length;
		}
		off += rec->stored_bytes;
		data_bytes += rec->stored_bytes;
	}

	w.ckpt_id = hdr->ckpt_id;
	if (stasis_fault("stall-write", hdr->ckpt_id))
		w.fault = FAULT_STALL;
	else if (stasis_fault("fail-write", hdr->ckpt_id))
		w.fault = FAULT_FAIL;
	w.fault_at = data_bytes / 2;

	/* O_DIRECT doubles the speed on a disk; tmpfs before Linux 6.6 refuses
	 * it at open. "buffered-write" lets tests take the other path. */
	if (stasis_fault("buffered-write", hdr->ckpt_id))
		errno = EINVAL;
	else
		w.fd = open(tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_DIRECT, 0600);
	w.direct = w.fd >= 0;
	if (w.fd < 0 && errno == EINVAL)
		w.fd = open(tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	if (w.fd < 0) {
		ret = -errno;
		goto err;
	}
	tmp_made = true;
	/* An old tmp file keeps its mode through O_TRUNC, and umask applies to
	 * a new one: either way the result must be exactly 0600. */
	if (fchmod(w.fd, 0600) < 0) {
		ret = -errno;
		goto err;
	}
	ret = io_uring_queue_init(QUEUE_DEPTH, &w.ring, 0);
	if (ret < 0)
		goto err;
	ring_ok = true;

	bm = stage + data_start;
	for (i = 0; i < nregions; i++) {
		const struct image_region *r = &regions[i];
		struct region_record *rec = &table[i];
		uint64_t crc = 0, pos = rec->file_offset;

		if (!r->dirty) {
			ret = queue_data(&w, (const char *)r->addr, r->length, &pos, &crc);
		} else {
			const uint64_t *map = (const uint64_t *)bm;
			uint64_t npages = r->length / PAGE, pg = 0;

			ret = queue_data(&w, bm, image_bitmap_bytes(r->length), &pos, &crc);
			bm += image_bitmap_bytes(r->length);
			/* One queue_data per run of consecutive dirty pages. */
			while (!ret && pg < npages) {
				uint64_t start;

				if (!map[pg / 64] && pg % 64 == 0) {
					pg += 64;
					continue;
				}
				if (!(map[pg / 64] >> (pg % 64) & 1)) {
					pg++;
					continue;
				}
				start = pg;
				while (pg < npages && (map[pg / 64] >> (pg % 64) & 1))
					pg++;
				ret = queue_data(&w, (const char *)r->addr + start * PAGE,
						 (pg - start) * PAGE, &pos, &crc);
			}
		}
		if (ret)
			goto err;
		rec->data_crc = crc;
	}
	ret = drain(&w);
	if (!ret)
		ret = fault_check(&w); /* for images with no data at all */
	if (ret)
		goto err;

	memcpy(hdr->magic, STASIS_IMAGE_MAGIC, sizeof(hdr->magic));
	hdr->version = STASIS_FORMAT_VERSION;
	hdr->header_size = sizeof(*hdr);
	hdr->uid = getuid();
	hdr->nregions = nregions;
	hdr->data_bytes = data_bytes;
	clock_gettime(CLOCK_REALTIME, &ts);
	hdr->created_ns = (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
	hdr->table_crc = crc64(0, table, nregions * sizeof(*table));
	hdr->header_crc = 0;
	hdr->header_crc = crc64(0, hdr, sizeof(*hdr));
	memcpy(stage, hdr, sizeof(*hdr));
	ret = queue_write(&w, stage, data_start, 0);
	if (!ret)
		ret = drain(&w);
	if (ret)
		goto err;

	while (fdatasync(w.fd) < 0) {
		if (errno != EINTR) {
			ret = -errno;
			goto err;
		}
	}
	if (close(w.fd) < 0) {
		w.fd = -1;
		ret = -errno;
		goto err;
	}
	w.fd = -1;
	if (rename(tmp, path) < 0) {
		ret = -errno;
		goto err;
	}
	tmp_made = false;
	ret = path_dir_fsync(path);
	if (ret)
		goto err;

	io_uring_queue_exit(&w.ring);
	munmap(stage, stage_bytes);
	if (bytes_written)
		*bytes_written = off;
	return 0;

err:
	if (ring_ok) {
		/* The kernel may still read our buffers: wait for it. */
		while (w.inflight) {
			struct io_uring_cqe *cqe;

			if (io_uring_wait_cqe(&w.ring, &cqe) == -EINTR)
				continue;
			io_uring_cqe_seen(&w.ring, cqe);
			w.inflight--;
		}
		io_uring_queue_exit(&w.ring);
	}
	if (w.fd >= 0)
		close(w.fd);
	if (tmp_made)
		unlink(tmp);
	if (stage != MAP_FAILED)
		munmap(stage, stage_bytes);
	if (w.fault_hit)
		set_err(err, errlen, "cannot write %s: injected fault", path);
	else
		set_err(err, errlen, "cannot write %s: %s", path, strerror(-ret));
	return ret;
}

/* ------------------------------------------------------------------ */
/* reader                                                             */

struct image {
	int fd;
	uint64_t size; /* file size at open */
	struct image_header hdr;
	struct region_record *regions;
	char path[];
};

/* pread all of len unless the file ends: returns bytes read or -errno. */
static ssize_t pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		/* Linux moves at most 2 GiB - 4 KiB per call anyway. */
		size_t n = len - done < (1u << 30) ? len - done : (1u << 30);
		ssize_t r = pread(fd, (char *)buf + done, n, off + done);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		done += r;
	}
	return done;
}

/* Count the set bits of bitmap words [first, first + n) of a region of
 * npages pages; false when a bit past the last page is set. */
static bool bitmap_count(const uint64_t *w, uint64_t first, uint64_t n, uint64_t npages,
			 uint64_t *count)
{
	uint64_t words = (npages + 63) / 64;

	for (uint64_t k = 0; k < n; k++) {
		uint64_t v = w[k];

		if (first + k == words - 1 && (v & ~tail_mask(npages)))
			return false;
		*count += __builtin_popcountll(v);
	}
	return true;
}

/* Read region i's stored bytes chunk by chunk into buf (or, when buf is
 * NULL, through a scratch buffer), checking the crc and, for a partial
 * region, that the bitmap agrees with the number of stored pages. */
static int check_region(struct image *img, size_t i, char *buf, char *err, size_t errlen)
{
	const struct region_record *r = &img->regions[i];
	uint64_t npages = r->length / PAGE, words = (npages + 63) / 64;
	uint64_t crc = 0, pos = 0, bits = 0;
	bool partial = r->flags & REGION_PARTIAL, bm_ok = true;
	char *scratch = NULL;
	int ret;

	if (!buf) {
		scratch = mmap(NULL, READ_CHUNK, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (scratch == MAP_FAILED) {
			scratch = NULL;
			ret = -errno;
			set_err(err, errlen, "%s: %s", img->path, strerror(-ret));
			goto err;
		}
	}
	while (pos < r->stored_bytes) {
		uint64_t n =
		    r->stored_bytes - pos < READ_CHUNK ? r->stored_bytes - pos : READ_CHUNK;
		char *dst = buf ? buf + pos : scratch;
		ssize_t got = pread_full(img->fd, dst, n, r->file_offset + pos);

		if (got < 0) {
			ret = got;
			set_err(err, errlen, "%s: region %zu: %s", img->path, i, strerror(-ret));
			goto err;
		}
		if ((uint64_t)got < n) {
			ret = -EBADMSG;
			set_err(err, errlen,
				"%s: truncated: region %zu needs bytes up to %llu, file has %llu",
				img->path, i,
				(unsigned long long)(r->file_offset + r->stored_bytes),
				(unsigned long long)(r->file_offset + pos + got));
			goto err;
		}
		crc = crc64(crc, dst, n);
		/* READ_CHUNK is a multiple of 8: words never straddle chunks. */
		if (partial && pos < words * 8) {
			uint64_t end = words * 8 < pos + n ? words * 8 : pos + n;

			if (!bitmap_count((const uint64_t *)dst, pos / 8, (end - pos) / 8, npages,
					  &bits))
				bm_ok = false;
		}
		pos += n;
	}
	if (crc != r->data_crc) {
		ret = -EBADMSG;
		set_err(err, errlen, "%s: region %zu (addr 0x%llx) checksum mismatch", img->path, i,
			(unsigned long long)r->addr);
		goto err;
	}
	if (partial && (!bm_ok || image_bitmap_bytes(r->length) + bits * PAGE != r->stored_bytes)) {
		ret = -EBADMSG;
		set_err(err, errlen,
			"%s: region %zu (addr 0x%llx): bitmap does not match its %llu stored bytes",
			img->path, i, (unsigned long long)r->addr,
			(unsigned long long)r->stored_bytes);
		goto err;
	}
	ret = 0;
err:
	if (scratch)
		munmap(scratch, READ_CHUNK);
	return ret;
}

/* Structural checks of region i against the verified table and the file
 * size. The bitmap of a partial region is not covered by any crc yet (its
 * crc is the whole region's), so its popcount is checked here only as an
 * early, cheap sign of damage; check_region checks it again after the crc. */
static int check_record(struct image *img, size_t i, uint64_t data_start, uint64_t *prev_end,
			char *err, size_t errlen)
{
	const struct region_record *r = &img->regions[i];
	const char *p = img->path;
	uint64_t end = r->file_offset + r->stored_bytes;
	uint64_t npages = r->length / PAGE, words = (npages + 63) / 64;

	if (end < r->file_offset || end > img->size) {
		set_err(err, errlen,
			"%s: truncated: region %zu needs bytes up to %llu, file has %llu", p, i,
			(unsigned long long)(end < r->file_offset ? UINT64_MAX : end),
			(unsigned long long)img->size);
		return -EBADMSG;
	}
	if (r->addr % PAGE || r->length % PAGE || r->file_offset % PAGE ||
	    r->addr + r->length < r->addr) {
		set_err(
		    err, errlen,
		    "%s: region %zu (addr 0x%llx, length %llu, offset %llu) is not page aligned", p,
		    i, (unsigned long long)r->addr, (unsigned long long)r->length,
		    (unsigned long long)r->file_offset);
		return -EBADMSG;
	}
	if (r->kind < REGION_DATA || r->kind > REGION_STACK || (r->flags & ~REGION_PARTIAL)) {
		set_err(err, errlen, "%s: region %zu has unknown kind %u or flags 0x%x", p, i,
			r->kind, r->flags);
		return -EBADMSG;
	}
	if (r->file_offset < data_start || r->file_offset < *prev_end) {
		set_err(err, errlen, "%s: region %zu data at %llu overlaps what precedes it", p, i,
			(unsigned long long)r->file_offset);
		return -EBADMSG;
	}
	*prev_end = end;
	if (!(r->flags & REGION_PARTIAL)) {
		if (r->stored_bytes != r->length || r->bitmap_offset) {
			set_err(err, errlen,
				"%s: region %zu stores %llu bytes of a %llu-byte region", p, i,
				(unsigned long long)r->stored_bytes, (unsigned long long)r->length);
			return -EBADMSG;
		}
		return 0;
	}

	uint64_t bm_bytes = image_bitmap_bytes(r->length), bits = 0;
	uint64_t buf[1024];

	if (r->bitmap_offset != r->file_offset || r->stored_bytes < bm_bytes ||
	    (r->stored_bytes - bm_bytes) % PAGE || (r->stored_bytes - bm_bytes) / PAGE > npages)
		goto bad_bitmap;
	for (uint64_t k = 0; k < words;) {
		uint64_t n = words - k < 1024 ? words - k : 1024;
		ssize_t got = pread_full(img->fd, buf, n * 8, r->bitmap_offset + k * 8);

		if (got < 0) {
			set_err(err, errlen, "%s: %s", p, strerror((int)-got));
			return got;
		}
		if ((uint64_t)got != n * 8 || !bitmap_count(buf, k, n, npages, &bits))
			goto bad_bitmap;
		k += n;
	}
	if (bm_bytes + bits * PAGE == r->stored_bytes)
		return 0;
bad_bitmap:
	set_err(err, errlen,
		"%s: region %zu (addr 0x%llx): bitmap does not match its %llu stored bytes", p, i,
		(unsigned long long)r->addr, (unsigned long long)r->stored_bytes);
	return -EBADMSG;
}

/* Checks run in the order that gives the most useful message: a short file
 * says so before its (absent) magic is judged, a foreign file says it is not
 * an image before any checksum talk, and no field steers anything (sizes,
 * counts, offsets) before the crc covering it has matched. */
int image_open(const char *path, struct image **out, char *err, size_t errlen)
{
	union {
		struct image_header h;
		char b[STASIS_PAGE];
	} u;
	struct image *img = NULL;
	struct image_header *h = &u.h;
	uint64_t want_crc, table_end, data_start, prev_end = 0, sum = 0;
	size_t plen = strlen(path);
	struct stat st;
	ssize_t got;
	int ret;

	*out = NULL;
	img = calloc(1, sizeof(*img) + plen + 1);
	if (!img) {
		ret = -ENOMEM;
		set_err(err, errlen, "%s: %s", path, strerror(ENOMEM));
		goto err;
	}
	memcpy(img->path, path, plen + 1);
	img->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (img->fd < 0) {
		ret = -errno;
		if (ret == -ENOENT)
			set_err(err, errlen, "%s: missing", path);
		else
			set_err(err, errlen, "%s: %s", path, strerror(-ret));
		goto err;
	}
	if (fstat(img->fd, &st) < 0) {
		ret = -errno;
		set_err(err, errlen, "%s: %s", path, strerror(-ret));
		goto err;
	}
	ret = -EBADMSG; /* from here on every failure is a bad file */
	if (!S_ISREG(st.st_mode)) {
		set_err(err, errlen, "%s: not a regular file", path);
		goto err;
	}
	img->size = st.st_size;
	if (img->size < STASIS_PAGE) {
		set_err(err, errlen, "%s: truncated (%llu bytes)", path,
			(unsigned long long)img->size);
		goto err;
	}
	got = pread_full(img->fd, u.b, STASIS_PAGE, 0);
	if (got != STASIS_PAGE) {
		ret = got < 0 ? (int)got : -EIO;
		set_err(err, errlen, "%s: %s", path, strerror(-ret));
		goto err;
	}
	if (memcmp(h->magic, STASIS_IMAGE_MAGIC, sizeof(h->magic))) {
		set_err(err, errlen, "%s: not a stasis image (bad magic)", path);
		goto err;
	}
	if (h->version != STASIS_FORMAT_VERSION) {
		set_err(err, errlen, "%s: format version %u, this stasis reads %u", path,
			h->version, STASIS_FORMAT_VERSION);
		goto err;
	}
	want_crc = h->header_crc;
	h->header_crc = 0;
	if (crc64(0, h, sizeof(*h)) != want_crc) {
		set_err(err, errlen, "%s: header checksum mismatch", path);
		goto err;
	}
	h->header_crc = want_crc;
	/* The header says who wrote it, the inode who owns it: both must be us
	 * (a crc is no signature, anyone can forge the first). */
	if (h->uid != getuid() || st.st_uid != getuid()) {
		set_err(err, errlen, "%s: owned by uid %u, not by you", path,
			h->uid != getuid() ? h->uid : (unsigned)st.st_uid);
		goto err;
	}
	if (h->header_size != sizeof(*h)) {
		set_err(err, errlen, "%s: header size %u, this stasis expects %zu", path,
			h->header_size, sizeof(*h));
		goto err;
	}
	if (h->kind < IMAGE_FULL || h->kind > IMAGE_INCREMENTAL ||
	    h->state_size > STASIS_STATE_MAX || h->rank >= h->nranks) {
		set_err(err, errlen,
			"%s: implausible header (kind %u, state %u bytes, rank %u of %u)", path,
			h->kind, h->state_size, h->rank, h->nranks);
		goto err;
	}
	if (h->nregions > MAX_REGIONS) {
		set_err(err, errlen, "%s: implausible region count %llu", path,
			(unsigned long long)h->nregions);
		goto err;
	}
	table_end = PAGE + h->nregions * sizeof(struct region_record);
	if (table_end > img->size) {
		set_err(err, errlen,
			"%s: truncated: region table needs bytes up to %llu, file has %llu", path,
			(unsigned long long)table_end, (unsigned long long)img->size);
		goto err;
	}
	img->hdr = *h;
	img->regions = malloc(h->nregions ? h->nregions * sizeof(struct region_record) : 1);
	if (!img->regions) {
		ret = -ENOMEM;
		set_err(err, errlen, "%s: %s", path, strerror(ENOMEM));
		goto err;
	}
	got = pread_full(img->fd, img->regions, table_end - PAGE, PAGE);
	if (got != (ssize_t)(table_end - PAGE)) {
		ret = got < 0 ? (int)got : -EIO;
		set_err(err, errlen, "%s: %s", path, strerror(-ret));
		goto err;
	}
	if (crc64(0, img->regions, table_end - PAGE) != h->table_crc) {
		set_err(err, errlen, "%s: region table checksum mismatch", path);
		goto err;
	}
	data_start = round_up(table_end, PAGE);
	for (size_t i = 0; i < h->nregions; i++) {
		ret = check_record(img, i, data_start, &prev_end, err, errlen);
		if (ret)
			goto err;
		sum += img->regions[i].stored_bytes;
	}
	if (sum != h->data_bytes) {
		ret = -EBADMSG;
		set_err(err, errlen, "%s: regions store %llu bytes, header says %llu", path,
			(unsigned long long)sum, (unsigned long long)h->data_bytes);
		goto err;
	}
	*out = img;
	return 0;
err:
	image_close(img);
	return ret;
}

const struct image_header *image_header(const struct image *img)
{
	return &img->hdr;
}

const struct region_record *image_regions(const struct image *img)
{
	return img->regions;
}

int image_read_region(struct image *img, size_t i, void *buf, char *err, size_t errlen)
{
	if (i >= img->hdr.nregions || !buf) {
		set_err(err, errlen, "%s: no region %zu", img->path, i);
		return -EINVAL;
	}
	return check_region(img, i, buf, err, errlen);
}

int image_verify(struct image *img, char *err, size_t errlen)
{
	for (size_t i = 0; i < img->hdr.nregions; i++) {
		int ret = check_region(img, i, NULL, err, errlen);

		if (ret)
			return ret;
	}
	return 0;
}

void image_close(struct image *img)
{
	if (!img)
		return;
	if (img->fd >= 0)
		close(img->fd);
	free(img->regions);
	free(img);
}

int file_crc64(const char *path, uint64_t *crc)
{
	const size_t chunk = 1u << 20;
	uint64_t c = 0, off = 0;
	char *buf = NULL;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(chunk);
	if (!buf) {
		ret = -ENOMEM;
		goto err;
	}
	for (;;) {
		ssize_t got = pread_full(fd, buf, chunk, off);

		if (got < 0) {
			ret = got;
			goto err;
		}
		c = crc64(c, buf, got);
		off += got;
		if ((size_t)got < chunk)
			break;
	}
	*crc = c;
	ret = 0;
err:
	free(buf);
	close(fd);
	return ret;
}
