/* The blocks of one tracked range: see track_blocks.h. */
#define LOG_PREFIX "tracking: "
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "format.h"
#include "log.h"
#include "track_blocks.h"

#define PAGE ((uintptr_t)STASIS_PAGE)

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

static void arm_probe(const struct block_env *env, struct block *b, uintptr_t s, size_t pages);

int blocks_grow(struct tracked_range *t, uintptr_t new_end, const struct block_env *env)
{
	size_t old = t->nblocks, n = blocks_to(t, new_end), bytes = n * sizeof(struct block);
	uintptr_t s, e, from;
	if (bytes > t->map_bytes) {
		size_t len = (bytes * 2 + PAGE - 1) & ~(PAGE - 1);
		void *p =
		    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return -errno;
		if (t->blocks) {
			memcpy(p, t->blocks, old * sizeof(struct block));
			munmap(t->blocks, t->map_bytes);
		}
		t->blocks = p;
		t->map_bytes = len;
	}
	from = t->end > t->start ? t->end : t->start;
	for (size_t k = old; k < n; k++)
		t->blocks[k] = policy_initial(&env->costs);
	t->nblocks = n;
	t->end = new_end;
	/* Leave WHOLE blocks writable over the part just tracked; a new WHOLE
	 * block probes in its first interval. */
	for (size_t k = old ? old - 1 : 0; k < n; k++) {
		struct block *b = &t->blocks[k];

		if (b->mode != BLOCK_WHOLE)
			continue;
		block_span(t, k, new_end, &s, &e);
		s = s > from ? s : from;
		if (s < e && env->be->unprotect(s, e - s)) {
			b->mode = BLOCK_PROTECTED; /* still protected, still exact */
			continue;
		}
		if (k >= old && policy_probe_now(b))
			arm_probe(env, b, s, (e - s) / PAGE);
	}
	return 0;
}

static uintptr_t sample_page(uintptr_t s, size_t pages, unsigned samples, unsigned i,
			     unsigned phase)
{
	size_t stride = pages / samples;

	return s + (i * stride + phase % stride) * PAGE;
}

static unsigned samples_of(const struct block_env *env, size_t pages)
{
	return env->samples < pages ? env->samples : (unsigned)pages;
}

/* A WHOLE block that probed: how many of its sample pages were written. */
static int probe_hits(const struct block_env *env, const struct block *b, uintptr_t s, size_t pages,
		      unsigned *hits)
{
	unsigned n = samples_of(env, pages);
	uint64_t w;
	int ret;

	*hits = 0;
	for (unsigned i = 0; i < n; i++) {
		w = 0;
		ret = env->be->collect(sample_page(s, pages, n, i, b->phase), PAGE, &w);
		if (ret)
			return ret;
		*hits += w & 1;
	}
	return 0;
}

/* Protect the sample pages of a WHOLE block for the coming interval. */
static void arm_probe(const struct block_env *env, struct block *b, uintptr_t s, size_t pages)
{
	unsigned n = samples_of(env, pages);

	b->phase = (uint8_t)(env->round * 37u);
	for (unsigned i = 0; i < n; i++)
		if (env->be->protect(sample_page(s, pages, n, i, b->phase), PAGE)) {
			env->be->unprotect(s, pages * PAGE);
			b->probing = 0;
			return;
		}
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
	unsigned hits;
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
			if (b->mode == BLOCK_WHOLE && be->unprotect(s, e - s))
				*b = old; /* still protected: exact next time too */
		} else {
			hits = 0;
			if (old.probing && (ret = probe_hits(env, &old, s, pages, &hits)))
				return ret;
			/* It was writable: every page of it goes into the image. */
			bits_set(bits, (s - base) / PAGE, pages);
			policy_decide(b, &env->costs, pages, 0,
				      old.probing ? samples_of(env, pages) : 0, hits);
			if (b->mode == BLOCK_PROTECTED && be->protect(s, e - s))
				*b = (struct block){.mode = BLOCK_WHOLE,
						    .backoff = POLICY_MAX_BACKOFF};
			else if (b->mode == BLOCK_WHOLE && old.probing)
				be->unprotect(s, e - s); /* disarm the samples */
		}
		if (b->mode == BLOCK_WHOLE && policy_probe_now(b)) {
			arm_probe(env, b, s, pages);
			tally->probes += b->probing;
		}
		tally->to_whole += old.mode == BLOCK_PROTECTED && b->mode == BLOCK_WHOLE;
		tally->to_protected += old.mode == BLOCK_WHOLE && b->mode == BLOCK_PROTECTED;
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
	if (t->blocks)
		munmap(t->blocks, t->map_bytes);
	t->blocks = NULL;
	t->nblocks = t->map_bytes = 0;
}
