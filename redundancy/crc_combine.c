/* crc64 of a member's files computed on the data a scheme moves anyway
 * (DESIGN.md section 11: one pass over memory, while it is in cache),
 * instead of in a pass of its own.
 *
 * The exchange reads (encode) or writes (rebuild) a logical file in
 * segments of C bytes, each one in order but the segments interleaved, so
 * each (segment, file) part gets its own crc64 and the parts are joined at
 * the end: crc(A || B) = Z(crc(A), |B|) ^ crc(B), where Z feeds |B| zero
 * bytes through the bare CRC register (the pre- and post-inversion of
 * crc64_ecma_refl cancel out, as in zlib's crc32_combine). Z is linear;
 * its matrices for 2^i zero bytes are built once from ISA-L's own
 * crc64_ecma_refl applied to the 64 unit vectors, so no polynomial is
 * written down here. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l.h>

#define LOG_PREFIX "redset: "
#include "log.h"
#include "internal.h"

/* zeros[i]: the register after 2^i zero bytes, as 64 columns (column b is
 * the image of bit b). */
static uint64_t zeros[64][64];
static pthread_once_t zeros_once = PTHREAD_ONCE_INIT;

static uint64_t mat_apply(const uint64_t *m, uint64_t v)
{
	uint64_t r = 0;

	for (int b = 0; v; b++, v >>= 1)
		if (v & 1)
			r ^= m[b];
	return r;
}

static void zeros_init(void)
{
	const unsigned char zero = 0;

	/* The bare register fed one zero byte, through ISA-L: state s maps to
	 * ~crc64_ecma_refl(~s, "\0", 1). */
	for (int b = 0; b < 64; b++)
		zeros[0][b] = ~crc64_ecma_refl(~(1ull << b), &zero, 1);
	for (int i = 1; i < 64; i++)
		for (int b = 0; b < 64; b++)
			zeros[i][b] = mat_apply(zeros[i - 1], zeros[i - 1][b]);
}

uint64_t crc64_combine(uint64_t crc_a, uint64_t crc_b, uint64_t len_b)
{
	pthread_once(&zeros_once, zeros_init);
	for (int i = 0; len_b; i++, len_b >>= 1)
		if (len_b & 1)
			crc_a = mat_apply(zeros[i], crc_a);
	return crc_a ^ crc_b;
}

/* ---- the crc64 of each file of a logical file, by parts ---- */

int crc_parts_init(struct crc_parts *t, const struct lfile *lf, uint64_t seg)
{
	memset(t, 0, sizeof(*t));
	t->n = lf->n;
	t->seg = seg ? seg : (lf->total ? lf->total : 1);
	t->nseg = (int)((lf->total + t->seg - 1) / t->seg);
	if (!t->nseg)
		t->nseg = 1;
	t->crc = calloc((size_t)t->nseg * (t->n ? t->n : 1), sizeof(*t->crc));
	t->fed = calloc((size_t)t->nseg * (t->n ? t->n : 1), sizeof(*t->fed));
	return t->crc && t->fed ? 0 : -ENOMEM;
}

void crc_parts_free(struct crc_parts *t)
{
	free(t->crc);
	free(t->fed);
	memset(t, 0, sizeof(*t));
}

/* Bytes of file i inside segment j. */
static uint64_t part_len(const struct crc_parts *t, const struct lfile *lf, int j, int i,
			 uint64_t start)
{
	uint64_t lo = (uint64_t)j * t->seg, hi = lo + t->seg, end = start + lf->size[i];

	lo = lo > start ? lo : start;
	hi = hi < end ? hi : end;
	return hi > lo ? hi - lo : 0;
}

/* A part read again (a scheme reading some data twice) or out of order no
 * longer counts: crc_parts_finish reads it back from the file. */
#define PART_BROKEN UINT64_MAX

void crc_parts_feed(struct crc_parts *t, const struct lfile *lf, uint64_t lo,
		    const unsigned char *buf, size_t len)
{
	uint64_t start = 0;

	for (int i = 0; i < lf->n && len; start += lf->size[i], i++) {
		uint64_t end = start + lf->size[i], n, first, *fed;
		int j;

		if (lo >= end)
			continue;
		n = end - lo < len ? end - lo : len;
		j = (int)(lo / t->seg);
		first = (uint64_t)j * t->seg > start ? (uint64_t)j * t->seg : start;
		if (j >= t->nseg)
			return;
		fed = &t->fed[j * t->n + i];
		if (*fed != PART_BROKEN && first + *fed == lo &&
		    lo + n <= (uint64_t)(j + 1) * t->seg) {
			t->crc[j * t->n + i] = crc64_ecma_refl(t->crc[j * t->n + i], buf, n);
			*fed += n;
		} else {
			*fed = PART_BROKEN;
		}
		buf += n;
		lo += n;
		len -= n;
	}
}

int crc_parts_finish(const struct crc_parts *t, const struct lfile *lf, uint64_t *crc)
{
	uint64_t start = 0;
	int ret;

	for (int i = 0; i < lf->n; start += lf->size[i], i++) {
		uint64_t c = 0;

		for (int j = 0; j < t->nseg; j++) {
			uint64_t want = part_len(t, lf, j, i, start), part = t->crc[j * t->n + i];

			if (!want)
				continue;
			/* A part the exchange did not see whole once, in order
			 * (a scheme that does not read everything): a pass of
			 * its own. */
			if (t->fed[j * t->n + i] != want) {
				uint64_t off = (j * t->seg > start ? j * t->seg : start) - start;

				ret = crc64_range(lf->fd[i], off, want, &part);
				if (ret)
					return ret;
			}
			/* Z is linear: joining onto the empty prefix (0) is part. */
			c = crc64_combine(c, part, want);
		}
		crc[i] = c;
	}
	return 0;
}

int crc64_range(int fd, uint64_t off, uint64_t size, uint64_t *crc)
{
	unsigned char *buf = kept_buf(KEPT_PASS, PASS_PIECE);
	uint64_t c = 0;
	int ret;

	if (!buf)
		return -ENOMEM;
	/* Read into a warm buffer, never mapped: a mapping faults on every
	 * page (13-22 us each on some machines) and gives SIGBUS when someone
	 * truncates the file meanwhile; pread gives a short read. */
	for (uint64_t o = 0; o < size; o += PASS_PIECE) {
		size_t n = size - o < PASS_PIECE ? size - o : PASS_PIECE;

		ret = full_pread(fd, buf, n, off + o);
		if (ret)
			return ret;
		c = crc64_ecma_refl(c, buf, n);
	}
	*crc = c;
	return 0;
}
