/* The blocks of one tracked range: see track_blocks.h. */
#define LOG_PREFIX "tracking: "
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include <isa-l/crc64.h>

#include "format.h"
#include "log.h"
#include "track_blocks.h"

#define PAGE ((uintptr_t)STASIS_PAGE)
/* Linux 6.1 (uapi asm-generic/mman-common.h); glibc 2.36 lacks it. */
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

void bits_set(uint64_t *bits, size_t first, size_t n)
{
	while (n && (first & 63)) {
		bits[first / 64] |= 1ULL << (first & 63);
		first++;
		n--;
	}
	for (; n >= 64; n -= 64, first += 64)
		bits[first / 64] = ~0ULL;
	for (; n; n--, first++)
		bits[first / 64] |= 1ULL << (first & 63);
}

size_t bits_count(const uint64_t *bits, size_t first, size_t n)
{
	size_t count = 0;

	while (n && (first & 63)) {
		count += bits[first / 64] >> (first & 63) & 1;
		first++;
		n--;
	}
	for (; n >= 64; n -= 64, first += 64)
		count += __builtin_popcountll(bits[first / 64]);
	for (; n; n--, first++)
		count += bits[first / 64] >> (first & 63) & 1;
	return count;
}

/* OR bits [0, n) of src into dst from bit first. */
static void bits_or(uint64_t *dst, size_t first, const uint64_t *src, size_t n)
{
	for (size_t w = 0; w * 64 < n; w++) {
		uint64_t v = src[w];

		if (w * 64 + 64 > n)
			v &= ~0ULL >> (w * 64 + 64 - n);
		for (; v; v &= v - 1)
			bits_set(dst, first + w * 64 + __builtin_ctzll(v), 1);
	}
}

static uintptr_t first_block(const struct tracked_range *t)
{
	return t->start & ~(TRACK_BLOCK - 1);
}

/* Block k of t as [*s, *e), clipped to [t->start, end). */
static void block_span(const struct tracked_range *t, size_t k, uintptr_t end, uintptr_t *s,
		       uintptr_t *e)
{
	uintptr_t b = first_block(t) + k * TRACK_BLOCK;

	*s = b > t->start ? b : t->start;
	*e = b + TRACK_BLOCK < end ? b + TRACK_BLOCK : end;
}

static size_t blocks_to(const struct tracked_range *t, uintptr_t end)
{
	return (end - first_block(t) + TRACK_BLOCK - 1) / TRACK_BLOCK;
}

/* A scratch bitmap for a run whose first page is not on a word boundary of
 * the caller's (data segments start anywhere). */
static uint64_t *scratch;
static size_t scratch_bytes;

static uint64_t *scratch_for(size_t pages)
{
	size_t need = ((pages + 63) / 64 * 8 + PAGE - 1) & ~(PAGE - 1);

	if (need > scratch_bytes) {
		void *p =
		    mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return NULL;
		if (scratch)
			munmap(scratch, scratch_bytes);
		scratch = p;
		scratch_bytes = need;
	}
	memset(scratch, 0, (pages + 63) / 64 * 8);
	return scratch;
}

/* Sample page i of a block [s, s + pages * PAGE) for a phase. */
static uintptr_t sample_page(uintptr_t s, size_t pages, unsigned i, unsigned phase)
{
	unsigned n = pages < TRACK_SAMPLES ? (unsigned)pages : TRACK_SAMPLES;
	size_t stride = pages / n;

	return s + (i * stride + phase % stride) * PAGE;
}

static uint64_t page_hash(uintptr_t p)
{
	return crc64_ecma_refl(0, (const unsigned char *)p, PAGE);
}

/* Remember what block k's sample pages hold now, at a new phase (so that
 * over the checkpoints every page of the block is sampled in turn). */
static void watch(const struct tracked_range *t, size_t k, uintptr_t s, size_t pages,
		  unsigned phase)
{
	unsigned n = pages < TRACK_SAMPLES ? (unsigned)pages : TRACK_SAMPLES;

	t->blocks[k].phase = (uint8_t)phase;
	for (unsigned i = 0; i < n; i++)
		t->hashes[k * TRACK_SAMPLES + i] = page_hash(sample_page(s, pages, i, phase));
}

/* How many of block k's sample pages changed since watch(); *n: of how many. */
static unsigned changed(const struct tracked_range *t, size_t k, uintptr_t s, size_t pages,
			unsigned *n)
{
	unsigned c = 0;

	*n = pages < TRACK_SAMPLES ? (unsigned)pages : TRACK_SAMPLES;
	for (unsigned i = 0; i < *n; i++)
		c += page_hash(sample_page(s, pages, i, t->blocks[k].phase)) !=
		     t->hashes[k * TRACK_SAMPLES + i];
	return c;
}

static unsigned phase_of(const struct block_env *env)
{
	return env->round * 7u;
}

/* Grow the two arrays of t to hold n blocks (mmap'ed, never the heap). */
static int reserve(struct tracked_range *t, size_t n)
{
	size_t cap = n * 2, bb = cap * sizeof(struct block), hb = cap * TRACK_SAMPLES * 8;
	void *b, *h;

	if (n <= t->cap)
		return 0;
	b = mmap(NULL, bb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	h = mmap(NULL, hb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED || h == MAP_FAILED) {
		if (b != MAP_FAILED)
			munmap(b, bb);
		if (h != MAP_FAILED)
			munmap(h, hb);
		return -ENOMEM;
	}
	if (t->blocks) {
		memcpy(b, t->blocks, t->nblocks * sizeof(struct block));
		memcpy(h, t->hashes, t->nblocks * TRACK_SAMPLES * 8);
		blocks_free(t);
	}
	t->blocks = b;
	t->hashes = h;
	t->cap = cap;
	return 0;
}

/* Whether every page of [s, e) is mapped as part of a huge page now. */
static bool all_huge(uintptr_t s, uintptr_t e)
{
	uint64_t bits[TRACK_BLOCK / PAGE / 64] = {0};

	if (e - s != TRACK_BLOCK || dirty_huge_pages(s, e - s, bits))
		return false;
	return bits_count(bits, 0, TRACK_BLOCK / PAGE) == TRACK_BLOCK / PAGE;
}

int blocks_grow(struct tracked_range *t, uintptr_t new_end, const struct block_env *env)
{
	size_t old = t->nblocks, n = blocks_to(t, new_end);
	uintptr_t s, e, from = t->end > t->start ? t->end : t->start;
	int ret = reserve(t, n);

	if (ret)
		return ret;
	t->nblocks = n;
	t->end = new_end;
	for (size_t k = old ? old - 1 : 0; k < n; k++) {
		struct block *b = &t->blocks[k];

		block_span(t, k, new_end, &s, &e);
		if (k >= old)
			*b = policy_initial(&env->costs, all_huge(s, e));
		if (b->mode != BLOCK_WHOLE || e <= from)
			continue;
		/* Writable over the part just tracked, and watched. */
		if (env->be->unprotect(s > from ? s : from, e - (s > from ? s : from))) {
			b->mode = BLOCK_PROTECTED; /* still protected, still exact */
			continue;
		}
		watch(t, k, s, (e - s) / PAGE, phase_of(env));
	}
	return 0;
}

/* Collect one run of PROTECTED blocks, [s, e), into bits. */
static int collect_run(const struct block_env *env, uintptr_t s, uintptr_t e, uintptr_t base,
		       uint64_t *bits)
{
	size_t first = (s - base) / PAGE, pages = (e - s) / PAGE;
	uint64_t *tmp;
	int ret;

	if (!(first & 63))
		return env->be->collect(s, e - s, bits + first / 64);
	tmp = scratch_for(pages);
	if (!tmp)
		return -ENOMEM;
	ret = env->be->collect(s, e - s, tmp);
	if (!ret)
		bits_or(bits, first, tmp, pages);
	return ret;
}

int blocks_collect(struct tracked_range *t, uintptr_t end, uintptr_t base, uint64_t *bits,
		   const struct block_env *env, struct block_tally *tally)
{
	size_t n = blocks_to(t, end), k, j, pages, written;
	const struct dirty_backend *be = env->be;
	uintptr_t s, e, rs, re;
	unsigned samples, moved;
	int ret;

	if (n > t->nblocks)
		n = t->nblocks;
	/* Runs of PROTECTED blocks, one collect() each. */
	for (k = 0; k < n; k = j) {
		for (j = k; j < n && t->blocks[j].mode == BLOCK_PROTECTED; j++)
			;
		if (j == k) {
			j++;
			continue;
		}
		block_span(t, k, end, &rs, &e);
		block_span(t, j - 1, end, &s, &re);
		ret = collect_run(env, rs, re, base, bits);
		if (ret)
			return ret;
	}
	for (k = 0; k < n; k++) {
		struct block *b = &t->blocks[k], old = *b;

		block_span(t, k, end, &s, &e);
		pages = (e - s) / PAGE;
		if (old.mode == BLOCK_PROTECTED) {
			written = bits_count(bits, (s - base) / PAGE, pages);
			policy_decide(b, &env->costs, pages, written, 0, 0);
			if (b->mode != BLOCK_WHOLE)
				continue;
			if (be->unprotect(s, e - s)) {
				*b = old; /* still protected: exact next time too */
				continue;
			}
			tally->to_whole++;
			/* Its writes split its huge page, if it was one: all of
			 * it is there, so one costs no memory. Advice only. */
			if (written == TRACK_BLOCK / PAGE &&
			    !madvise((void *)s, e - s, MADV_COLLAPSE))
				tally->collapsed++;
			watch(t, k, s, pages, phase_of(env));
			continue;
		}
		/* It was writable: every page of it goes into the image. */
		bits_set(bits, (s - base) / PAGE, pages);
		moved = changed(t, k, s, pages, &samples);
		policy_decide(b, &env->costs, pages, 0, samples, moved);
		if (b->mode == BLOCK_PROTECTED && be->protect(s, e - s))
			b->mode = BLOCK_WHOLE; /* whatever could not be protected */
		if (b->mode == BLOCK_PROTECTED)
			tally->to_protected++;
		else
			watch(t, k, s, pages, phase_of(env));
	}
	return 0;
}

void blocks_tally(const struct tracked_range *t, struct block_tally *tally)
{
	uintptr_t s, e;

	for (size_t k = 0; k < t->nblocks; k++) {
		block_span(t, k, t->end, &s, &e);
		if (t->blocks[k].mode == BLOCK_PROTECTED)
			tally->protected_bytes += e - s;
		else
			tally->whole_bytes += e - s;
	}
}

void blocks_free(struct tracked_range *t)
{
	if (t->blocks) {
		munmap(t->blocks, t->cap * sizeof(struct block));
		munmap(t->hashes, t->cap * TRACK_SAMPLES * 8);
	}
	t->blocks = NULL;
	t->hashes = NULL;
	t->nblocks = t->cap = 0;
}
