/* Checkpoint image files: the writer (liburing, O_DIRECT when possible),
 * with its fault points (fault.h); the verifying reader is image_read.c.
 * The layout is format.h's; see image.h for the contract.
 *
 * The writer streams region data straight from live memory: every region is
 * page aligned and a page multiple, so its pages are valid O_DIRECT buffers
 * and nothing is copied. Only the header, the region table and the page
 * bitmaps of partial regions go through one page-aligned staging buffer.
 * Region data is written first and the header + table last, because the
 * table holds the data checksums, which are computed chunk by chunk just
 * before each chunk is queued (so the crc of chunk k+1 overlaps the I/O of
 * the chunks before it and memory is read by the CPU only once). Pages of
 * zeros are found before (a look at the first bytes of a page that holds
 * data) and not written at all (REGION_ZEROS). */
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

#include <isa-l/mem_routines.h>
#include <liburing.h>

#define LOG_PREFIX "image: "
#include "log.h"
#include "fault.h"
#include "fsutil.h"
#include "codec.h"
#include "image_int.h"

#define QUEUE_DEPTH 8
#define WRITE_CHUNK (1u << 20) /* bytes per SQE */
#define SLOT_IOVS 64	       /* iovecs per SQE (scattered dirty pages) */


/* Bytes of the stored page bitmap of a region of `length` bytes: one bit per
 * page in u64 words, padded to a page so that the pages after it stay
 * aligned for O_DIRECT. */
uint64_t image_bitmap_bytes(uint64_t length)
{
	uint64_t words = (length / PAGE + 63) / 64;

	return round_up(words * 8, PAGE);
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
	if (w->fault == FAULT_NONE || w->done < w->fault_at)
		return 0;
	if (w->fault == FAULT_FAIL) {
		w->fault_hit = true;
		return -EIO;
	}
	fault_stall(FAULT_STALL_WRITE, w->ckpt_id);
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

/* Packed regions (REGION_PACKED): stored pages gathered into raw frames of
 * CODEC_FRAME_RAW bytes, each packed into one of PACK_BUFS buffers and
 * queued from there. A buffer is used again only once every write queued
 * before it completed (drain), as the kernel reads it until then. */
#define PACK_BUFS QUEUE_DEPTH

struct packer {
	uint32_t codec;
	char *raw, *bufs; /* one raw frame; PACK_BUFS packed ones */
	uint64_t fill, frame_cap;
	int next;
	size_t map_bytes;
};

static int pack_flush(struct writer *w, struct packer *pk, uint64_t *off, uint64_t *crc)
{
	char *out;
	uint64_t n;
	int ret;

	if (!pk->fill)
		return 0;
	if (pk->next == PACK_BUFS) {
		ret = drain(w);
		if (ret)
			return ret;
		pk->next = 0;
	}
	out = pk->bufs + (uint64_t)pk->next++ * pk->frame_cap;
	n = codec_pack(pk->codec, pk->raw, pk->fill, out);
	pk->fill = 0;
	return queue_data(w, out, n, off, crc);
}

/* Queue [p, p + len) as queue_data does, or into pk's frames when packing. */
static int emit(struct writer *w, struct packer *pk, const char *p, uint64_t len, uint64_t *off,
		uint64_t *crc)
{
	if (!pk)
		return queue_data(w, p, len, off, crc);
	while (len) {
		uint64_t n = CODEC_FRAME_RAW - pk->fill < len ? CODEC_FRAME_RAW - pk->fill : len;
		int ret;

		memcpy(pk->raw + pk->fill, p, n);
		pk->fill += n;
		p += n;
		len -= n;
		if (pk->fill == CODEC_FRAME_RAW && (ret = pack_flush(w, pk, off, crc)))
			return ret;
	}
	return 0;
}

static int packer_init(struct packer *pk, uint32_t codec)
{
	pk->codec = codec;
	pk->frame_cap = codec_frame_bound(CODEC_FRAME_RAW);
	pk->map_bytes = CODEC_FRAME_RAW + PACK_BUFS * pk->frame_cap;
	pk->raw = mmap(NULL, pk->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (pk->raw == MAP_FAILED) {
		pk->raw = NULL;
		return -errno;
	}
	pk->bufs = pk->raw + CODEC_FRAME_RAW;
	return 0;
}

/* Whether region r's pages of zeros are left out (REGION_ZEROS): memory
 * that a restart writes back page by page. Not the stack (saved whole and
 * copied back whole by restore_read_stacks), never a section. */
static bool zeros_kept(const struct image_region *r)
{
	return r->kind == REGION_DATA || r->kind == REGION_ARENA;
}

/* Marks in zero (a bitmap of r's pages, cleared here) the saved pages of r
 * (every page, or those of saved) that are all zeros, by ISA-L's
 * isal_zero_detect: it stops at the first byte that is not zero, so a page
 * of data costs a few bytes read. Returns how many. */
static uint64_t zeros_find(const struct image_region *r, const uint64_t *saved, uint64_t *zero)
{
	uint64_t npages = r->length / PAGE, n = 0;

	memset(zero, 0, image_bitmap_bytes(r->length));
	for (uint64_t pg = 0; pg < npages; pg++) {
		if (saved && !(saved[pg / 64] >> (pg % 64) & 1))
			continue;
		if (!isal_zero_detect((void *)(r->addr + pg * PAGE), PAGE)) {
			zero[pg / 64] |= UINT64_C(1) << (pg % 64);
			n++;
		}
	}
	return n;
}

/* Word k of the pages a region stores: saved (all when NULL) and not zero
 * (none when NULL), no bit past the last page. */
static uint64_t stored_word(const uint64_t *saved, const uint64_t *zero, uint64_t npages,
			    uint64_t k)
{
	uint64_t w = saved ? saved[k] : ~UINT64_C(0);

	if (zero)
		w &= ~zero[k];
	if (k == (npages + 63) / 64 - 1)
		w &= tail_mask(npages);
	return w;
}

/* Layout: header page, table padded to a page, then each region's data in
 * order at page-aligned offsets. A partial region is its bitmap (copied into
 * the staging buffer with bits past the last page cleared, so that the file
 * is self-consistent whatever the caller left there) and its dirty pages. */
int image_write(const char *path, struct image_header *hdr, const struct image_region *regions,
		size_t nregions, uint64_t *bytes_written, struct why *why)
{
	char tmp[PATH_MAX];
	struct writer w = {.fd = -1, .fill = -1};
	struct packer pk = {0};
	size_t npacked = 0;
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
		if (regions[i].addr % PAGE || regions[i].length % PAGE ||
		    (regions[i].kind >= SECTION_FIRST && regions[i].dirty)) {
			ret = -EINVAL;
			goto err;
		}
		if (regions[i].dirty)
			stage_bytes += image_bitmap_bytes(regions[i].length);
		if (zeros_kept(&regions[i]))
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
	/* Flags and sizes first; offsets as the regions are written. */
	for (i = 0; i < nregions; i++) {
		const struct image_region *r = &regions[i];
		struct region_record *rec = &table[i];
		uint64_t npages = r->length / PAGE;

		/* Data regions have no address: addr only says where it came from. */
		rec->addr = r->kind >= SECTION_FIRST ? 0 : r->addr;
		rec->length = r->length;
		rec->kind = r->kind;
		if (r->dirty) {
			uint64_t words = (npages + 63) / 64, pages = 0, *copy = (uint64_t *)bm;

			memcpy(copy, r->dirty, words * 8);
			if (words)
				copy[words - 1] &= tail_mask(npages);
			for (uint64_t k = 0; k < words; k++)
				pages += __builtin_popcountll(copy[k]);
			rec->flags = REGION_PARTIAL;
			rec->stored_bytes = image_bitmap_bytes(r->length) + pages * PAGE;
			bm += image_bitmap_bytes(r->length);
		} else {
			rec->stored_bytes = r->length;
		}
		if (zeros_kept(r)) {
			/* The page bitmap, when there is one, was just copied. */
			const uint64_t *saved =
			    r->dirty ? (const uint64_t *)(bm - image_bitmap_bytes(r->length)) : NULL;
			uint64_t zeros = zeros_find(r, saved, (uint64_t *)bm);

			/* Only where the pages left out outweigh the bitmap. */
			if (zeros * PAGE > image_bitmap_bytes(r->length)) {
				rec->flags |= REGION_ZEROS;
				rec->stored_bytes += image_bitmap_bytes(r->length) - zeros * PAGE;
				bm += image_bitmap_bytes(r->length);
			}
		}
		/* Its pages packed: stored_bytes is known once they are written. */
		if (hdr->codec && zeros_kept(r)) {
			rec->flags |= REGION_PACKED;
			npacked++;
		}
		data_bytes += rec->stored_bytes; /* packed: an estimate, for fault_at */
	}
	if (npacked && hdr->codec != CODEC_LZ4 && hdr->codec != CODEC_ZSTD) {
		ret = -EINVAL;
		goto err;
	}
	if (npacked && (ret = packer_init(&pk, hdr->codec)))
		goto err;

	w.ckpt_id = hdr->ckpt_id;
	if (fault_hit_at(FAULT_STALL_WRITE, hdr->ckpt_id))
		w.fault = FAULT_STALL;
	else if (fault_hit_at(FAULT_FAIL_WRITE, hdr->ckpt_id))
		w.fault = FAULT_FAIL;
	w.fault_at = data_bytes / 2;

	/* O_DIRECT doubles the speed on a disk; tmpfs before Linux 6.6 refuses
	 * it at open. "buffered-write" lets tests take the other path.
	 * O_NOFOLLOW: a link planted at the tmp name writes nothing through. */
	if (fault_hit_at(FAULT_BUFFERED_WRITE, hdr->ckpt_id))
		errno = EINVAL;
	else
		w.fd = open(tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_DIRECT,
			    0600);
	w.direct = w.fd >= 0;
	if (w.fd < 0 && errno == EINVAL)
		w.fd = open(tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
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
	off = data_start;
	data_bytes = 0;
	for (i = 0; i < nregions; i++) {
		const struct image_region *r = &regions[i];
		struct region_record *rec = &table[i];
		struct packer *rpk = (rec->flags & REGION_PACKED) ? &pk : NULL;
		uint64_t crc = 0, pos = off;

		/* Where the packed regions before it ended. */
		rec->file_offset = pos;
		if (rec->flags & REGION_PARTIAL)
			rec->bitmap_offset = pos;
		if (!rec->flags) {
			ret = queue_data(&w, (const char *)r->addr, r->length, &pos, &crc);
		} else {
			const uint64_t *saved = NULL, *zero = NULL;
			uint64_t npages = r->length / PAGE, pg = 0;

			/* The bitmaps, then one queue_data per run of pages stored. */
			if (rec->flags & REGION_PARTIAL) {
				saved = (const uint64_t *)bm;
				ret = queue_data(&w, bm, image_bitmap_bytes(r->length), &pos, &crc);
				bm += image_bitmap_bytes(r->length);
			}
			if (!ret && (rec->flags & REGION_ZEROS)) {
				zero = (const uint64_t *)bm;
				ret = queue_data(&w, bm, image_bitmap_bytes(r->length), &pos, &crc);
				bm += image_bitmap_bytes(r->length);
			}
			while (!ret && pg < npages) {
				uint64_t start, word = stored_word(saved, zero, npages, pg / 64);

				if (!(word >> (pg % 64))) {
					pg = (pg / 64 + 1) * 64;
					continue;
				}
				pg += __builtin_ctzll(word >> (pg % 64));
				start = pg;
				while (pg < npages &&
				       (stored_word(saved, zero, npages, pg / 64) >> (pg % 64) & 1))
					pg++;
				ret = emit(&w, rpk, (const char *)r->addr + start * PAGE,
					   (pg - start) * PAGE, &pos, &crc);
			}
			if (!ret && rpk)
				ret = pack_flush(&w, rpk, &pos, &crc);
		}
		if (ret)
			goto err;
		rec->data_crc = crc;
		rec->stored_bytes = pos - rec->file_offset;
		off = pos;
		data_bytes += rec->stored_bytes;
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

	while (fault_hit_at(FAULT_FAIL_IMAGE_SYNC, hdr->ckpt_id) || fdatasync(w.fd) < 0) {
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
	if (fault_hit_at(FAULT_FAIL_IMAGE_INSTALL, hdr->ckpt_id) || rename(tmp, path) < 0) {
		ret = -errno;
		goto err;
	}
	tmp_made = false;
	ret = fsutil_sync_parent(path);
	if (ret)
		goto err;

	io_uring_queue_exit(&w.ring);
	munmap(stage, stage_bytes);
	if (pk.raw)
		munmap(pk.raw, pk.map_bytes);
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
	if (pk.raw)
		munmap(pk.raw, pk.map_bytes);
	if (w.fault_hit)
		return why_set(why, ret, "cannot write %s: injected fault", path);
	return why_set(why, ret, "cannot write %s: %s", path, strerror(-ret));
}
