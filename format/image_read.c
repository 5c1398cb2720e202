/* Checkpoint image files: the verifying reader (and file_crc64). The layout
 * is format.h's; see image.h for the contract. Nothing read is trusted
 * before the checksum covering it has matched. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "image_int.h"
#include "log.h"

#define READ_CHUNK (4u << 20) /* read + crc granule; keeps data cache-warm */

struct image {
	int fd;
	uint64_t size; /* file size at open */
	struct image_header hdr;
	struct region_record *regions;
	uint64_t *bytes; /* each region's bytes unpacked (region_fits) */
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

void image_check_begin(const struct image *img, size_t i, struct region_check *c)
{
	*c = (struct region_check){.r = &img->regions[i], .bm_ok = true};
}

void image_check_feed(struct region_check *c, const void *data, uint64_t n)
{
	const struct region_record *r = c->r;
	uint64_t npages = r->length / PAGE, bm = (npages + 63) / 64 * 8;
	const uint8_t *b = data;

	uint64_t zstart = (r->flags & REGION_PARTIAL) ? image_bitmap_bytes(r->length) : 0;
	uint64_t last = (r->flags & REGION_ZEROS) ? zstart + bm : (r->flags & REGION_PARTIAL) ? bm : 0;

	c->crc = crc64(c->crc, data, n);
	/* The bitmaps, byte by byte (feeds may cut their words): count the
	 * pages the page bitmap and the zero bitmap name, none past the last
	 * page. */
	for (uint64_t j = 0; j < n && c->pos + j < last; j++) {
		uint64_t at = c->pos + j, page0;
		bool zero = (r->flags & REGION_ZEROS) && at >= zstart;
		uint8_t past;

		if (!zero && at >= bm)
			continue; /* the page bitmap's padding */
		page0 = (zero ? at - zstart : at) * 8;
		past = page0 + 8 <= npages ? 0
		       : page0 >= npages   ? 0xff
					   : (uint8_t)(0xff << (npages - page0));
		if (b[j] & past)
			c->bm_ok = false;
		if (zero)
			c->zbits += __builtin_popcount(b[j]);
		else
			c->bits += __builtin_popcount(b[j]);
	}
	c->pos += n;
}

int image_check_end(const struct image *img, size_t i, const struct region_check *c,
		    struct why *why)
{
	const struct region_record *r = c->r;

	if (c->pos != r->stored_bytes) {
		return why_set(why, -EBADMSG,
			       "%s: truncated: region %zu needs bytes up to %llu, file has %llu",
			       img->path, i, (unsigned long long)(r->file_offset + r->stored_bytes),
			       (unsigned long long)(r->file_offset + c->pos));
	}
	if (c->crc != r->data_crc) {
		return why_set(why, -EBADMSG, "%s: region %zu (addr 0x%llx) checksum mismatch",
			       img->path, i, (unsigned long long)r->addr);
	}
	uint64_t bytes;

	if (r->flags && (!c->bm_ok || !region_fits(r, c->bits, c->zbits, &bytes))) {
		return why_set(
		    why, -EBADMSG,
		    "%s: region %zu (addr 0x%llx): bitmap does not match its %llu stored bytes",
		    img->path, i, (unsigned long long)r->addr, (unsigned long long)r->stored_bytes);
	}
	return 0;
}

/* Region i's checked stored bytes (packed) unpacked into out
 * (img->bytes[i]): its bitmaps, then every frame's pages. */
static int unpack_region(const struct image *img, size_t i, const char *packed, char *out,
			 struct why *why)
{
	const struct region_record *r = &img->regions[i];
	uint64_t heads = (!!(r->flags & REGION_PARTIAL) + !!(r->flags & REGION_ZEROS)) *
			 image_bitmap_bytes(r->length);
	uint64_t in = heads, done = heads;

	memcpy(out, packed, heads);
	while (in < r->stored_bytes) {
		uint64_t len = codec_frame_length(packed + in, r->stored_bytes - in), got = 0;

		if (len && in + len <= r->stored_bytes)
			got = codec_unpack(img->hdr.codec, packed + in, out + done,
					   img->bytes[i] - done);
		if (!got)
			break;
		in += len;
		done += got;
	}
	if (in != r->stored_bytes || done != img->bytes[i]) {
		return why_set(why, -EBADMSG, "%s: region %zu (addr 0x%llx): its %s frames do not "
			       "unpack to its pages", img->path, i, (unsigned long long)r->addr,
			       codec_name(img->hdr.codec));
	}
	return 0;
}

/* Read region i's stored bytes chunk by chunk into buf (or, when buf is
 * NULL, through a scratch buffer), checking the crc and, for a partial
 * region, that the bitmap agrees with the number of stored pages. */
static int check_region(struct image *img, size_t i, char *buf, struct why *why)
{
	const struct region_record *r = &img->regions[i];
	struct region_check c;
	char *scratch = NULL, *packed = NULL, *out = buf;
	uint64_t pos = 0;
	int ret;

	/* A packed region is read whole, then unpacked into buf. */
	if (buf && (r->flags & REGION_PACKED)) {
		packed = malloc(r->stored_bytes ? r->stored_bytes : 1);
		if (!packed) {
			ret = -ENOMEM;
			why_set(why, ret, "%s: %s", img->path, strerror(ENOMEM));
			goto err;
		}
		buf = packed;
	}
	if (!buf) {
		scratch = mmap(NULL, READ_CHUNK, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (scratch == MAP_FAILED) {
			scratch = NULL;
			ret = -errno;
			why_set(why, ret, "%s: %s", img->path, strerror(-ret));
			goto err;
		}
	}
	image_check_begin(img, i, &c);
	while (pos < r->stored_bytes) {
		uint64_t n =
		    r->stored_bytes - pos < READ_CHUNK ? r->stored_bytes - pos : READ_CHUNK;
		char *dst = buf ? buf + pos : scratch;
		ssize_t got = pread_full(img->fd, dst, n, r->file_offset + pos);

		if (got < 0) {
			ret = got;
			why_set(why, ret, "%s: region %zu: %s", img->path, i, strerror(-ret));
			goto err;
		}
		image_check_feed(&c, dst, got);
		if ((uint64_t)got < n)
			break; /* image_check_end says truncated */
		pos += n;
	}
	ret = image_check_end(img, i, &c, why);
	if (!ret && packed)
		ret = unpack_region(img, i, packed, out, why);
err:
	if (scratch)
		munmap(scratch, READ_CHUNK);
	free(packed);
	return ret;
}

/* Structural checks of region i against the verified table and the file
 * size. The bitmap of a partial region is not covered by any crc yet (its
 * crc is the whole region's), so its popcount is checked here only as an
 * early, cheap sign of damage; check_region checks it again after the crc. */
static int check_record(struct image *img, size_t i, uint64_t data_start, uint64_t *prev_end,
			struct why *why)
{
	const struct region_record *r = &img->regions[i];
	const char *p = img->path;
	uint64_t end = r->file_offset + r->stored_bytes;
	uint64_t npages = r->length / PAGE, words = (npages + 63) / 64;

	if (end < r->file_offset || end > img->size) {
		return why_set(why, -EBADMSG,
			       "%s: truncated: region %zu needs bytes up to %llu, file has %llu", p,
			       i, (unsigned long long)(end < r->file_offset ? UINT64_MAX : end),
			       (unsigned long long)img->size);
	}
	if (r->addr % PAGE || r->length % PAGE || r->file_offset % PAGE ||
	    r->addr + r->length < r->addr) {
		return why_set(
		    why, -EBADMSG,
		    "%s: region %zu (addr 0x%llx, length %llu, offset %llu) is not page aligned", p,
		    i, (unsigned long long)r->addr, (unsigned long long)r->length,
		    (unsigned long long)r->file_offset);
	}
	bool paged = r->kind == REGION_DATA || r->kind == REGION_ARENA;

	if (r->kind < REGION_DATA || r->kind > SECTION_LAST ||
	    (r->flags & ~(REGION_PARTIAL | REGION_ZEROS | REGION_PACKED)) ||
	    (r->kind >= SECTION_FIRST && r->flags) ||
	    ((r->flags & REGION_ZEROS) && (img->hdr.version < 6 || !paged)) ||
	    ((r->flags & REGION_PACKED) &&
	     (img->hdr.version < 7 || !paged ||
	      (img->hdr.codec != CODEC_LZ4 && img->hdr.codec != CODEC_ZSTD)))) {
		return why_set(why, -EBADMSG, "%s: region %zu has unknown kind %u or flags 0x%x", p,
			       i, r->kind, r->flags);
	}
	if (r->file_offset < data_start || r->file_offset < *prev_end) {
		return why_set(why, -EBADMSG,
			       "%s: region %zu data at %llu overlaps what precedes it", p, i,
			       (unsigned long long)r->file_offset);
	}
	*prev_end = end;
	img->bytes[i] = r->stored_bytes;
	if (!r->flags) {
		if (r->stored_bytes != r->length || r->bitmap_offset) {
			return why_set(why, -EBADMSG,
				       "%s: region %zu stores %llu bytes of a %llu-byte region", p,
				       i, (unsigned long long)r->stored_bytes,
				       (unsigned long long)r->length);
		}
		return 0;
	}

	bool partial = r->flags & REGION_PARTIAL, zeros = r->flags & REGION_ZEROS;
	uint64_t bm_bytes = image_bitmap_bytes(r->length), bits = 0, zbits = 0;
	uint64_t heads = (partial + zeros) * bm_bytes, zoff = r->file_offset + (partial ? bm_bytes : 0);
	uint64_t buf[1024], zbuf[1024];

	if (r->bitmap_offset != (partial ? r->file_offset : 0) || r->stored_bytes < heads ||
	    (r->stored_bytes - heads) % PAGE ||
	    (!(r->flags & REGION_PACKED) && (r->stored_bytes - heads) / PAGE > npages))
		goto bad_bitmap;
	for (uint64_t k = 0; k < words;) {
		uint64_t n = words - k < 1024 ? words - k : 1024;
		ssize_t got = partial ? pread_full(img->fd, buf, n * 8, r->file_offset + k * 8)
				      : (ssize_t)(n * 8);
		ssize_t zgot = zeros ? pread_full(img->fd, zbuf, n * 8, zoff + k * 8) : (ssize_t)(n * 8);

		if (got < 0 || zgot < 0) {
			got = got < 0 ? got : zgot;
			return why_set(why, (int)got, "%s: %s", p, strerror((int)-got));
		}
		if ((uint64_t)got != n * 8 || (uint64_t)zgot != n * 8 ||
		    (partial && !bitmap_count(buf, k, n, npages, &bits)) ||
		    (zeros && !bitmap_count(zbuf, k, n, npages, &zbits)))
			goto bad_bitmap;
		/* Only a saved page can be a page of zeros. */
		for (uint64_t j = 0; partial && zeros && j < n; j++)
			if (zbuf[j] & ~buf[j])
				goto bad_bitmap;
		k += n;
	}
	if (region_fits(r, bits, zbits, &img->bytes[i]))
		return 0;
bad_bitmap:
	return why_set(why, -EBADMSG,
		       "%s: region %zu (addr 0x%llx): bitmap does not match its %llu stored bytes",
		       p, i, (unsigned long long)r->addr, (unsigned long long)r->stored_bytes);
}

/* Checks run in the order that gives the most useful message: a short file
 * says so before its (absent) magic is judged, a foreign file says it is not
 * an image before any checksum talk, and no field steers anything (sizes,
 * counts, offsets) before the crc covering it has matched. */
int image_open(const char *path, struct image **out, struct why *why)
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
		why_set(why, ret, "%s: %s", path, strerror(ENOMEM));
		goto err;
	}
	memcpy(img->path, path, plen + 1);
	img->fd = fsutil_open_private(path, O_RDONLY, why);
	if (img->fd < 0) {
		ret = img->fd;
		goto err;
	}
	if (fstat(img->fd, &st) < 0) {
		ret = -errno;
		why_set(why, ret, "%s: %s", path, strerror(-ret));
		goto err;
	}
	ret = -EBADMSG; /* from here on every failure is a bad file */
	img->size = st.st_size;
	if (img->size < STASIS_PAGE) {
		why_set(why, ret, "%s: truncated (%llu bytes)", path,
			(unsigned long long)img->size);
		goto err;
	}
	got = pread_full(img->fd, u.b, STASIS_PAGE, 0);
	if (got != STASIS_PAGE) {
		ret = got < 0 ? (int)got : -EIO;
		why_set(why, ret, "%s: %s", path, strerror(-ret));
		goto err;
	}
	if (memcmp(h->magic, STASIS_IMAGE_MAGIC, sizeof(h->magic))) {
		why_set(why, ret, "%s: not a stasis image (bad magic)", path);
		goto err;
	}
	if (h->version < STASIS_FORMAT_OLDEST || h->version > STASIS_FORMAT_VERSION) {
		why_set(why, ret, "%s: format version %u, this stasis reads %u", path, h->version,
			STASIS_FORMAT_VERSION);
		goto err;
	}
	want_crc = h->header_crc;
	h->header_crc = 0;
	if (crc64(0, h, sizeof(*h)) != want_crc) {
		why_set(why, ret, "%s: header checksum mismatch", path);
		goto err;
	}
	h->header_crc = want_crc;
	/* The header says who wrote it, the inode (fsutil_open_private) who
	 * owns it: both must be us (a crc is no signature). */
	if (h->uid != getuid()) {
		why_set(why, ret, "%s: written by uid %u, not by you", path, h->uid);
		goto err;
	}
	if (h->header_size != sizeof(*h)) {
		why_set(why, ret, "%s: header size %u, this stasis expects %zu", path,
			h->header_size, sizeof(*h));
		goto err;
	}
	if (h->kind < IMAGE_FULL || h->kind > IMAGE_INCREMENTAL ||
	    h->state_size > STASIS_STATE_MAX || h->rank >= h->nranks) {
		why_set(why, ret, "%s: implausible header (kind %u, state %u bytes, rank %u of %u)",
			path, h->kind, h->state_size, h->rank, h->nranks);
		goto err;
	}
	if (h->nregions > MAX_REGIONS) {
		why_set(why, ret, "%s: implausible region count %llu", path,
			(unsigned long long)h->nregions);
		goto err;
	}
	table_end = PAGE + h->nregions * sizeof(struct region_record);
	if (table_end > img->size) {
		why_set(why, ret,
			"%s: truncated: region table needs bytes up to %llu, file has %llu", path,
			(unsigned long long)table_end, (unsigned long long)img->size);
		goto err;
	}
	img->hdr = *h;
	img->regions = malloc(h->nregions ? h->nregions * sizeof(struct region_record) : 1);
	img->bytes = calloc(h->nregions ? h->nregions : 1, sizeof(*img->bytes));
	if (!img->regions || !img->bytes) {
		ret = -ENOMEM;
		why_set(why, ret, "%s: %s", path, strerror(ENOMEM));
		goto err;
	}
	got = pread_full(img->fd, img->regions, table_end - PAGE, PAGE);
	if (got != (ssize_t)(table_end - PAGE)) {
		ret = got < 0 ? (int)got : -EIO;
		why_set(why, ret, "%s: %s", path, strerror(-ret));
		goto err;
	}
	if (crc64(0, img->regions, table_end - PAGE) != h->table_crc) {
		why_set(why, ret, "%s: region table checksum mismatch", path);
		goto err;
	}
	data_start = round_up(table_end, PAGE);
	for (size_t i = 0; i < h->nregions; i++) {
		ret = check_record(img, i, data_start, &prev_end, why);
		if (ret)
			goto err;
		sum += img->regions[i].stored_bytes;
	}
	if (sum != h->data_bytes) {
		ret = -EBADMSG;
		why_set(why, ret, "%s: regions store %llu bytes, header says %llu", path,
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

int image_fd(const struct image *img)
{
	return img->fd;
}

const char *image_path(const struct image *img)
{
	return img->path;
}

uint64_t image_region_bytes(const struct image *img, size_t i)
{
	return i < img->hdr.nregions ? img->bytes[i] : 0;
}

int image_read_region(struct image *img, size_t i, void *buf, struct why *why)
{
	if (i >= img->hdr.nregions || !buf) {
		return why_set(why, -EINVAL, "%s: no region %zu", img->path, i);
	}
	return check_region(img, i, buf, why);
}

int image_verify(struct image *img, struct why *why)
{
	for (size_t i = 0; i < img->hdr.nregions; i++) {
		int ret = check_region(img, i, NULL, why);

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
	free(img->bytes);
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

void image_pages_begin(struct page_walk *w, const struct region_record *r, const void *buf)
{
	const char *b = buf;

	*w = (struct page_walk){.r = r};
	if (r->flags & REGION_PARTIAL) {
		w->saved = (const uint64_t *)b;
		b += image_bitmap_bytes(r->length);
	}
	if (r->flags & REGION_ZEROS) {
		w->zero = (const uint64_t *)b;
		b += image_bitmap_bytes(r->length);
	}
	w->next = b;
}

bool image_pages_next(struct page_walk *w, uint64_t *page, const void **data)
{
	uint64_t npages = w->r->length / PAGE;

	while (w->pg < npages && w->saved && !(w->saved[w->pg / 64] >> (w->pg % 64) & 1))
		w->pg++;
	if (w->pg >= npages)
		return false;
	*page = w->pg;
	if (w->zero && (w->zero[w->pg / 64] >> (w->pg % 64) & 1)) {
		*data = NULL;
	} else {
		*data = w->next;
		w->next += PAGE;
	}
	w->pg++;
	return true;
}
