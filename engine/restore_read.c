/* Reading the chain of images a restart resumes: see restore_read.h. */
#define LOG_PREFIX "restore: "
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "codec.h"
#include "fault.h"
#include "format.h"
#include "log.h"
#include "readq.h"
#include "regions.h"
#include "restore_read.h"

#define PAGE ((uint64_t)STASIS_PAGE)
/* Reads of 4 MiB, four at a time: 3.1 GB/s from a cold file here, against
 * 2.8 with 1 MiB x 8 and 1.2 for one pread() at a time. */
#define CHUNK ((uint64_t)4 << 20)
#define DEPTH 4

static bool is_memory(uint32_t kind)
{
	return kind < SECTION_FIRST;
}

/* ------------------------------------------------------------------ */
/* memory: committed, asked for huge pages, populated in bulk          */

#define MAX_POPULATE 64
static struct span populate[MAX_POPULATE];
static int npopulate;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int restore_read_prepare(const struct restore_image *chain, int n)
{
	const struct region_record *r = image_regions(chain[0].img);
	uint64_t arena_len = 0;
	int ret;

	npopulate = 0;
	for (int c = 0; c < n; c++) {
		const struct region_record *rc = image_regions(chain[c].img);

		for (size_t i = 0; i < image_header(chain[c].img)->nregions; i++)
			if (rc[i].kind == REGION_ARENA && rc[i].addr + rc[i].length > arena_len)
				arena_len = rc[i].addr + rc[i].length;
	}
	if (arena_len) {
		arena_len -= STASIS_ARENA_BASE;
		ret = arena_prepare_restore(arena_len);
		if (ret)
			return ret;
		/* Every page of it is written: huge pages cost nothing extra and
		 * populate at memory speed (DESIGN.md section 11). Advice only. */
		madvise((void *)STASIS_ARENA_BASE, arena_len, MADV_HUGEPAGE);
		populate[npopulate++] =
		    (struct span){STASIS_ARENA_BASE, STASIS_ARENA_BASE + arena_len};
	}
	for (size_t i = 0; i < image_header(chain[0].img)->nregions && npopulate < MAX_POPULATE;
	     i++)
		if (r[i].kind == REGION_DATA)
			populate[npopulate++] = (struct span){r[i].addr, r[i].addr + r[i].length};
	return 0;
}

/* Every page restore_read_prepare named, allocated in bulk: what the pages
 * hold is kept, the missing ones are made. A failure (no memory now) only
 * leaves the faults to the reads into place. */
static void populate_all(void)
{
	double t0 = now_s();

	for (int i = 0; i < npopulate; i++)
		madvise((void *)populate[i].start, populate[i].end - populate[i].start,
			MADV_POPULATE_WRITE);
	pr_debug("populated the program's memory in %.0f ms", (now_s() - t0) * 1e3);
}

/* ------------------------------------------------------------------ */
/* verify                                                             */

/* The read buffers of verify, populated once and reused (warm). */
static char *bufs;

static int verify_buffers(void)
{
	if (bufs)
		return 0;
	bufs =
	    mmap(NULL, DEPTH * CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (bufs == MAP_FAILED) {
		bufs = NULL;
		return -errno;
	}
	madvise(bufs, DEPTH * CHUNK, MADV_POPULATE_WRITE);
	return 0;
}

static void verify_buffers_free(void)
{
	if (bufs)
		munmap(bufs, DEPTH * CHUNK);
	bufs = NULL;
}

/* Bytes of the bitmaps that start a memory region's data: its page bitmap
 * (REGION_PARTIAL), then its zero bitmap (REGION_ZEROS). */
static uint64_t bitmaps_bytes(const struct region_record *r)
{
	return (!!(r->flags & REGION_PARTIAL) + !!(r->flags & REGION_ZEROS)) *
	       image_bitmap_bytes(r->length);
}

/* Bytes of region r verify keeps: all it stores of a stack and of a
 * record that is not memory (MPI state, signals, mappings: small), the
 * bitmap of another partial memory region. */
static uint64_t kept_bytes(const struct region_record *r)
{
	if (!is_memory(r->kind) || r->kind == REGION_STACK)
		return r->stored_bytes;
	if (is_memory(r->kind) && r->flags)
		return bitmaps_bytes(r);
	return 0;
}

struct verifier {
	struct readq q;
	struct restore_image *ri;
	const struct region_record *r;
	struct region_check *chk;
	struct why *why;
};

/* The oldest read: keep what is kept of it, feed it to its region's check,
 * and end the check at the region's last byte. */
static int verify_pop(struct verifier *v)
{
	const struct readq_req *req = NULL;
	int ret = readq_pop(&v->q, &req);
	size_t i;
	struct region_check *c;
	uint64_t keep, n;

	if (!req) {
		return why_set(v->why, ret, "%s: %s", image_path(v->ri->img), strerror(-ret));
	}
	i = req->tag;
	c = &v->chk[i];
	keep = kept_bytes(&v->r[i]);
	n = req->len;
	if (ret == -EIO)
		return image_check_end(v->ri->img, i, c, v->why); /* truncated */
	if (ret) {
		return why_set(v->why, ret, "%s: region %zu: %s", image_path(v->ri->img), i,
			       strerror(-ret));
	}
	if (c->pos < keep)
		memcpy((char *)v->ri->kept[i] + c->pos, req->iov[0].iov_base,
		       keep - c->pos < n ? keep - c->pos : n);
	image_check_feed(c, req->iov[0].iov_base, n);
	if (c->pos == v->r[i].stored_bytes)
		return image_check_end(v->ri->img, i, c, v->why);
	return 0;
}

int restore_read_verify(struct restore_image *ri, uint64_t id, struct why *why)
{
	const struct image_header *h = image_header(ri->img);
	struct verifier v = {.ri = ri, .r = image_regions(ri->img), .why = why};
	int fd = image_fd(ri->img), ret;
	double t0 = now_s();

	why_clear(why); /* as the buffer it replaces: a caller may try again with it */
	ri->kept = calloc(h->nregions ? h->nregions : 1, sizeof(*ri->kept));
	v.chk = calloc(h->nregions ? h->nregions : 1, sizeof(*v.chk));
	ret = !ri->kept || !v.chk ? -ENOMEM : verify_buffers();
	if (!ret)
		ret = readq_init(&v.q, DEPTH);
	if (ret) {
		why_set(why, ret, "%s: cannot read it: %s", image_path(ri->img), strerror(-ret));
		free(v.chk);
		return ret;
	}
	for (size_t i = 0; i < h->nregions && !ret; i++) {
		const struct region_record *r = &v.r[i];

		if (i == h->nregions / 2 && fault_hit_at(FAULT_FAIL_RESTORE_READ, id)) {
			ret = -errno;
			why_set(why, ret, "%s: region %zu: %s", image_path(ri->img), i,
				strerror(-ret));
			break;
		}
		image_check_begin(ri->img, i, &v.chk[i]);
		if (kept_bytes(r) && !(ri->kept[i] = malloc(kept_bytes(r)))) {
			ret = -ENOMEM;
			why_set(why, ret, "out of memory reading %s", image_path(ri->img));
			break;
		}
		if (!r->stored_bytes)
			ret = image_check_end(ri->img, i, &v.chk[i], why);
		for (uint64_t pos = 0; pos < r->stored_bytes && !ret; pos += CHUNK) {
			struct iovec iov;

			if (readq_full(&v.q) && (ret = verify_pop(&v)))
				break;
			/* The request's slot in the queue names its buffer. */
			iov.iov_base = bufs + (v.q.head + v.q.count) % DEPTH * CHUNK;
			iov.iov_len = r->stored_bytes - pos < CHUNK ? r->stored_bytes - pos : CHUNK;
			ret = readq_push(&v.q, fd, r->file_offset + pos, &iov, 1, i);
			if (ret)
				why_set(why, ret, "%s: region %zu: %s", image_path(ri->img), i,
					strerror(-ret));
		}
	}
	while (!ret && !readq_empty(&v.q))
		ret = verify_pop(&v);
	readq_exit(&v.q);
	free(v.chk);
	pr_debug("%s: %s in %.0f ms", image_path(ri->img), ret ? "verification failed" : "verified",
		 (now_s() - t0) * 1e3);
	return ret;
}

const void *restore_read_kept(const struct restore_image *ri, uint32_t kind, size_t *len)
{
	const struct region_record *r = image_regions(ri->img);

	*len = 0;
	for (size_t i = 0; ri->kept && i < image_header(ri->img)->nregions; i++)
		if (r[i].kind == kind) {
			*len = r[i].stored_bytes; /* never partial: its length */
			return ri->kept[i];
		}
	return NULL;
}

void restore_read_release(struct restore_image *ri)
{
	for (size_t i = 0; ri->kept && ri->img && i < image_header(ri->img)->nregions; i++)
		free(ri->kept[i]);
	free(ri->kept);
	if (ri->img)
		image_close(ri->img);
	*ri = (struct restore_image){0};
}

/* ------------------------------------------------------------------ */
/* apply                                                              */

/* Copy len bytes to dst, leaving the copy-relocated runtime objects of the
 * executable as the new runtime made them (DESIGN.md fact 2). MPI's own
 * threads may read them meanwhile, so they are never written, not even
 * briefly. */
static void copy_around_exclusions(uintptr_t dst, const char *src, size_t len)
{
	const struct span *ex;
	size_t nex = regions_exclusions(&ex);
	uintptr_t pos = dst, end = dst + len;

	while (pos < end) {
		const struct span *first = NULL;

		/* The first exclusion that overlaps [pos, end), if any. */
		for (size_t i = 0; i < nex; i++)
			if (ex[i].end > pos && ex[i].start < end &&
			    (!first || ex[i].start < first->start))
				first = &ex[i];
		if (!first) {
			memcpy((void *)pos, src + (pos - dst), end - pos);
			return;
		}
		if (first->start > pos)
			memcpy((void *)pos, src + (pos - dst), first->start - pos);
		pos = first->end;
	}
}

/* The first page of [s, e) that holds part of an exclusion, or e. */
static uintptr_t next_excluded_page(uintptr_t s, uintptr_t e)
{
	const struct span *ex;
	size_t nex = regions_exclusions(&ex);
	uintptr_t first = e;

	for (size_t i = 0; i < nex; i++)
		if (ex[i].end > s && ex[i].start < e) {
			uintptr_t p = ex[i].start > s ? ex[i].start & ~(PAGE - 1) : s;

			if (p < first)
				first = p;
		}
	return first;
}

struct applier {
	struct readq q;
	const struct restore_image *ri;
	const struct region_record *r;
	struct region_check *chk;
	int fd;
	/* The read being gathered: pages contiguous in the file. */
	struct iovec iov[READQ_IOVS];
	unsigned niov;
	uint64_t off, bytes;
	size_t region;
	char *bounce;
	/* packed regions: the frame read last and its pages unpacked */
	char *frame, *raw;
	uint64_t raw_pos, raw_len;
	struct why *why;
};

static int apply_feed(struct applier *a, size_t i, const void *data, uint64_t n)
{
	image_check_feed(&a->chk[i], data, n);
	if (a->chk[i].pos == a->r[i].stored_bytes)
		return image_check_end(a->ri->img, i, &a->chk[i], a->why);
	return 0;
}

static int apply_pop(struct applier *a)
{
	const struct readq_req *req = NULL;
	int ret = readq_pop(&a->q, &req);

	if (ret) {
		return why_set(a->why, ret, "%s: %s", image_path(a->ri->img),
			       ret == -EIO ? "truncated" : strerror(-ret));
	}
	for (unsigned k = 0; k < req->niov && !ret; k++)
		ret = apply_feed(a, req->tag, req->iov[k].iov_base, req->iov[k].iov_len);
	return ret;
}

static int apply_flush(struct applier *a)
{
	int ret = 0;

	if (!a->niov)
		return 0;
	if (readq_full(&a->q))
		ret = apply_pop(a);
	if (!ret)
		ret = readq_push(&a->q, a->fd, a->off, a->iov, a->niov, a->region);
	if (ret) /* kept when apply_pop said why first */
		why_set(a->why, ret, "%s: %s", image_path(a->ri->img), strerror(-ret));
	a->niov = 0;
	a->bytes = 0;
	return ret;
}

/* Queue the read of len bytes at file offset off into dst. */
static int apply_direct(struct applier *a, size_t i, uintptr_t dst, uint64_t off, uint64_t len)
{
	int ret;

	while (len) {
		uint64_t n;
		struct iovec *last = a->niov ? &a->iov[a->niov - 1] : NULL;

		if (a->niov &&
		    (a->region != i || a->off + a->bytes != off || a->bytes == CHUNK ||
		     (a->niov == READQ_IOVS &&
		      (char *)last->iov_base + last->iov_len != (char *)dst)) &&
		    (ret = apply_flush(a)))
			return ret;
		if (!a->niov) {
			a->region = i;
			a->off = off;
			last = NULL;
		}
		n = CHUNK - a->bytes < len ? CHUNK - a->bytes : len;
		if (last && (char *)last->iov_base + last->iov_len == (char *)dst) {
			last->iov_len += n;
		} else {
			a->iov[a->niov].iov_base = (void *)dst;
			a->iov[a->niov++].iov_len = n;
		}
		a->bytes += n;
		dst += n;
		off += n;
		len -= n;
	}
	return 0;
}

/* A page holding copy-relocated objects: read on its own, in file order
 * (after every read queued before it), and copied around them. */
static int apply_bounce(struct applier *a, size_t i, uintptr_t dst, uint64_t off)
{
	ssize_t got;
	int ret = apply_flush(a);

	while (!ret && !readq_empty(&a->q))
		ret = apply_pop(a);
	if (ret)
		return ret;
	do
		got = pread(a->fd, a->bounce, PAGE, off);
	while (got < 0 && errno == EINTR);
	if (got != (ssize_t)PAGE) {
		ret = got < 0 ? -errno : -EIO;
		return why_set(a->why, ret, "%s: region %zu: %s", image_path(a->ri->img), i,
			       got < 0 ? strerror(-ret) : "truncated");
	}
	ret = apply_feed(a, i, a->bounce, PAGE);
	if (!ret)
		copy_around_exclusions(dst, a->bounce, PAGE);
	return ret;
}

static int apply_range(struct applier *a, size_t i, uintptr_t dst, uint64_t off, uint64_t len)
{
	uintptr_t end = dst + len, x;
	int ret = 0;

	while (!ret && dst < end) {
		x = next_excluded_page(dst, end);
		if (x > dst)
			ret = apply_direct(a, i, dst, off, x - dst);
		off += x - dst;
		dst = x;
		if (!ret && dst < end) {
			ret = apply_bounce(a, i, dst, off);
			dst += PAGE;
			off += PAGE;
		}
	}
	return ret;
}

/* Pages of zeros (REGION_ZEROS) put back as zeros, around the
 * copy-relocated objects as the pages read are (copy_around_exclusions). */
static void zero_range(uintptr_t dst, uint64_t len)
{
	static const char zero_page[STASIS_PAGE];
	uintptr_t end = dst + len, x;

	while (dst < end) {
		x = next_excluded_page(dst, end);
		memset((void *)dst, 0, x - dst);
		dst = x;
		if (dst < end) {
			copy_around_exclusions(dst, zero_page, PAGE);
			dst += PAGE;
		}
	}
}

static bool bit(const uint64_t *bm, uint64_t p)
{
	return bm[p / 64] >> (p % 64) & 1;
}

/* The next page of a packed region's pages: from the frame unpacked last,
 * or from the next frame, read (synchronously, in file order), checked
 * as the region's bytes and unpacked. */
static int packed_page(struct applier *a, size_t i, uint64_t *off, const char **page)
{
	const struct region_record *r = &a->r[i];
	uint64_t end = r->file_offset + r->stored_bytes, len;
	ssize_t got;
	int ret;

	if (a->raw_pos == a->raw_len) {
		got = *off + PAGE <= end ? pread(a->fd, a->frame, PAGE, *off) : 0;
		len = got == (ssize_t)PAGE ? codec_frame_length(a->frame, PAGE) : 0;
		if (len && *off + len <= end && len > PAGE)
			got = pread(a->fd, a->frame + PAGE, len - PAGE, *off + PAGE);
		if (!len || *off + len > end || (len > PAGE && got != (ssize_t)(len - PAGE)))
			return -EPROTO; /* said by apply_packed */
		ret = apply_feed(a, i, a->frame, len);
		if (ret)
			return ret;
		*off += len;
		a->raw_pos = 0;
		a->raw_len = codec_unpack(image_header(a->ri->img)->codec, a->frame, a->raw,
					  CODEC_FRAME_RAW);
		if (!a->raw_len)
			return -EPROTO; /* said by apply_packed */
	}
	*page = a->raw + a->raw_pos;
	a->raw_pos += PAGE;
	return 0;
}

/* A packed region's stored pages, frame by frame, copied into place. */
static int apply_packed(struct applier *a, size_t i, const uint64_t *saved, const uint64_t *zero,
			uint64_t off)
{
	const struct region_record *r = &a->r[i];
	uint64_t pages = r->length / PAGE;
	int ret = 0;

	a->raw_pos = a->raw_len = 0;
	for (uint64_t p = 0; p < pages && !ret; p++) {
		const char *src;

		if (saved && !bit(saved, p))
			continue;
		if (zero && bit(zero, p)) {
			zero_range(r->addr + p * PAGE, PAGE);
			continue;
		}
		ret = packed_page(a, i, &off, &src);
		if (!ret)
			copy_around_exclusions(r->addr + p * PAGE, src, PAGE);
	}
	if (ret != -EPROTO && (ret || (a->chk[i].pos == r->stored_bytes && a->raw_pos == a->raw_len)))
		return ret; /* the checks said why */
	return why_set(a->why, -EBADMSG, "%s: region %zu (addr 0x%llx): its %s frames do not "
		       "unpack to its pages", image_path(a->ri->img), i,
		       (unsigned long long)r->addr, codec_name(image_header(a->ri->img)->codec));
}

static int apply_region(struct applier *a, size_t i)
{
	const struct region_record *r = &a->r[i];
	const uint64_t *bm = a->ri->kept[i], *saved = NULL, *zero = NULL;
	uint64_t pages = r->length / PAGE, off, p, q;
	int ret;

	image_check_begin(a->ri->img, i, &a->chk[i]);
	if (!r->flags)
		return apply_range(a, i, r->addr, r->file_offset, r->length);
	if (r->flags & REGION_PARTIAL)
		saved = bm;
	if (r->flags & REGION_ZEROS)
		zero = saved ? bm + image_bitmap_bytes(r->length) / 8 : bm;
	ret = apply_feed(a, i, bm, bitmaps_bytes(r));
	off = r->file_offset + bitmaps_bytes(r);
	if (!ret && (r->flags & REGION_PACKED))
		return apply_packed(a, i, saved, zero, off);
	for (p = 0; !ret && p < pages; p = q) {
		bool z;

		if (saved && !bit(saved, p)) {
			q = p + 1;
			if (!saved[p / 64] && !(p % 64))
				q = p + 64;
			continue;
		}
		/* A run of saved pages, all zeros or all stored. */
		z = zero && bit(zero, p);
		for (q = p; q < pages && (!saved || bit(saved, q)) && (zero && bit(zero, q)) == z;
		     q++)
			;
		if (z) {
			zero_range(r->addr + p * PAGE, (q - p) * PAGE);
			continue;
		}
		ret = apply_range(a, i, r->addr + p * PAGE, off, (q - p) * PAGE);
		off += (q - p) * PAGE;
	}
	return ret;
}

static int apply_image(struct applier *a)
{
	size_t n = image_header(a->ri->img)->nregions;
	int ret = 0;

	a->r = image_regions(a->ri->img);
	a->fd = image_fd(a->ri->img);
	a->chk = calloc(n ? n : 1, sizeof(*a->chk));
	if (!a->chk) {
		return why_set(a->why, -ENOMEM, "out of memory restoring %s",
			       image_path(a->ri->img));
	}
	for (size_t i = 0; i < n && !ret; i++)
		if (is_memory(a->r[i].kind) && a->r[i].kind != REGION_STACK)
			ret = apply_region(a, i);
	if (!ret)
		ret = apply_flush(a);
	while (!ret && !readq_empty(&a->q))
		ret = apply_pop(a);
	readq_drain(&a->q);
	/* Every byte of every region put back went through its check. */
	for (size_t i = 0; i < n && !ret; i++)
		if (is_memory(a->r[i].kind) && a->r[i].kind != REGION_STACK &&
		    a->chk[i].pos != a->r[i].stored_bytes) {
			ret = why_set(a->why, -EIO, "%s: region %zu: %llu of %llu bytes put back",
				      image_path(a->ri->img), i, (unsigned long long)a->chk[i].pos,
				      (unsigned long long)a->r[i].stored_bytes);
		}
	free(a->chk);
	a->chk = NULL;
	return ret;
}

int restore_read_apply(const struct restore_image *chain, int n, struct why *why)
{
	struct applier a = {.why = why};
	int ret;

	double t0;

	/* Room for a frame and its pages, when an image has packed regions. */
	uint64_t packed_room = 0;

	for (int c = 0; c < n; c++)
		if (image_header(chain[c].img)->codec)
			packed_room = codec_frame_bound(CODEC_FRAME_RAW) + CODEC_FRAME_RAW;
	why_clear(why); /* as the buffer it replaces */
	verify_buffers_free();
	populate_all();
	t0 = now_s();
	a.bounce = mmap(NULL, PAGE + packed_room, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a.bounce == MAP_FAILED)
		return -errno;
	a.frame = a.bounce + PAGE;
	a.raw = a.frame + codec_frame_bound(CODEC_FRAME_RAW);
	ret = readq_init(&a.q, DEPTH);
	for (int c = n - 1; c >= 0 && !ret; c--) {
		a.ri = &chain[c];
		ret = apply_image(&a);
	}
	if (ret) /* kept when a step above said why first */
		why_set(why, ret, "cannot read the images: %s", strerror(-ret));
	readq_exit(&a.q);
	munmap(a.bounce, PAGE + packed_room);
	pr_debug("memory read into place in %.0f ms", (now_s() - t0) * 1e3);
	return ret;
}

void restore_read_stacks(const struct restore_image *chain, int n)
{
	for (int c = n - 1; c >= 0; c--) {
		const struct region_record *r = image_regions(chain[c].img);

		for (size_t i = 0; i < image_header(chain[c].img)->nregions; i++) {
			const char *data = chain[c].kept[i];
			const uint64_t *bm = (const uint64_t *)data;
			uint64_t off = image_bitmap_bytes(r[i].length);

			if (r[i].kind != REGION_STACK)
				continue;
			if (!(r[i].flags & REGION_PARTIAL)) {
				memcpy((void *)r[i].addr, data, r[i].length);
				continue;
			}
			/* stasis saves stacks whole; a partial one is applied
			 * all the same, as the format allows it. */
			for (uint64_t p = 0; p < r[i].length / PAGE; p++)
				if (bm[p / 64] >> (p % 64) & 1) {
					memcpy((void *)(r[i].addr + p * PAGE), data + off, PAGE);
					off += PAGE;
				}
		}
	}
}
