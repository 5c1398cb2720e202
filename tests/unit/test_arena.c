/* Unit test of the application arena (alloc/arena.c).
 *
 * Random alloc/free/realloc/memalign/calloc/map sequences with fixed seeds
 * against a shadow model (every block is filled with a pattern derived from
 * its id and checked on free, realloc and at every checkpoint of the test;
 * live blocks must never overlap), alignment, calloc zeroing and overflow,
 * usable sizes, big blocks and their release, arena_map/arena_unmap, double
 * and invalid frees, a checkpoint/restore of the arena's bytes in the same
 * process, memory overhead, and threads hammering the lock.
 *
 * Exit status: 0 pass, 1 fail, 77 skip (the range cannot be reserved). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "log.h"

#define BASE ((char *)STASIS_ARENA_BASE)
#define PAGE 4096UL
#define MiB (1UL << 20)

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static uint64_t pattern_word(uint64_t id, size_t i)
{
	return (id * 0x9E3779B97F4A7C15ULL) ^ (i * 0x100000001B3ULL) ^ (i << 56);
}

/* The block's bytes are the little-endian words of pattern_word(id, i). */
static void fill(void *p, size_t size, uint64_t id)
{
	size_t i;

	for (i = 0; i + 8 <= size; i += 8) {
		uint64_t w = pattern_word(id, i / 8);
		memcpy((char *)p + i, &w, 8);
	}
	if (i < size) {
		uint64_t w = pattern_word(id, i / 8);
		memcpy((char *)p + i, &w, size - i);
	}
}

/* Offset of the first byte not matching, or -1. */
static long verify(const void *p, size_t size, uint64_t id)
{
	size_t i;

	for (i = 0; i + 8 <= size; i += 8) {
		uint64_t w = pattern_word(id, i / 8), v;
		memcpy(&v, (const char *)p + i, 8);
		if (v != w)
			return (long)i;
	}
	if (i < size) {
		uint64_t w = pattern_word(id, i / 8);
		if (memcmp((const char *)p + i, &w, size - i))
			return (long)i;
	}
	return -1;
}

static bool all_zero(const void *p, size_t size)
{
	static const char zero[4096];
	const char *c = p;

	for (size_t i = 0; i < size; i += sizeof(zero))
		if (memcmp(c + i, zero, size - i < sizeof(zero) ? size - i : sizeof(zero)))
			return false;
	return true;
}

static void check_arena(const char *when, struct arena_stats *st)
{
	int err = arena_check(st);

	CHECK(!err, "arena_check failed %s", when);
}

/* ---- The shadow model ---- */

enum { K_EMPTY, K_HEAP, K_MAP };

struct slot {
	char *p;
	size_t size;
	uint64_t id;
	int kind;
};

struct model {
	struct slot *slot;
	size_t nslots;
	uint64_t rng, next_id;
	unsigned long ops, allocs, frees, reallocs, maps;
};

static size_t random_size(uint64_t *rng)
{
	uint64_t r = rng_next(rng) % 10000;

	if (r < 50)
		return 0;
	if (r < 6000)
		return 1 + rng_next(rng) % 128;
	if (r < 8500)
		return 129 + rng_next(rng) % 1920;
	if (r < 9500)
		return 2049 + rng_next(rng) % 30720;
	if (r < 9950)
		return 32769 + rng_next(rng) % (256 * 1024);
	if (r < 9997)
		return rng_next(rng) % (2 * MiB);
	return rng_next(rng) % (16 * MiB);
}

static void check_block(struct slot *s, const char *when)
{
	long bad = verify(s->p, s->size, s->id);

	CHECK(bad < 0, "%s: block %p (id %llu, size %zu) corrupt at offset %ld", when, s->p,
	      (unsigned long long)s->id, s->size, bad);
}

static void check_new(struct slot *s, size_t align, bool zero)
{
	CHECK(s->p && arena_contains(s->p), "allocation of %zu failed", s->size);
	CHECK(((uintptr_t)s->p & (align - 1)) == 0, "%p not aligned to %zu", s->p, align);
	if (s->kind == K_HEAP) {
		size_t us = arena_usable_size(s->p);
		CHECK(us >= s->size && us >= 1, "usable size %zu < %zu", us, s->size);
	}
	if (zero)
		CHECK(all_zero(s->p, s->size), "block %p of %zu bytes not zeroed", s->p, s->size);
}

static void model_alloc(struct model *m, struct slot *s)
{
	uint64_t r = rng_next(&m->rng) % 100;
	size_t align = 16;

	s->size = random_size(&m->rng);
	s->id = ++m->next_id;
	s->kind = K_HEAP;
	if (r < 55) {
		s->p = arena_malloc(s->size);
	} else if (r < 70) {
		size_t n = 1 + rng_next(&m->rng) % 16;
		s->size = s->size / n * n;
		s->p = arena_calloc(n, s->size / n);
		check_new(s, align, true);
	} else if (r < 85) {
		unsigned k = rng_next(&m->rng) % 100 < 95 ? rng_next(&m->rng) % 14 : 21;
		align = (size_t)1 << k;
		s->p = arena_memalign(align, s->size);
		if (align < 16)
			align = 16;
	} else if (r < 97) {
		s->p = arena_realloc(NULL, s->size);
	} else {
		s->kind = K_MAP;
		s->size = 1 + rng_next(&m->rng) % (64 * PAGE);
		s->p = arena_map(s->size);
		align = PAGE;
		check_new(s, align, true);
		m->maps++;
	}
	check_new(s, align, false);
	fill(s->p, s->size, s->id);
	m->allocs++;
}

static void model_release(struct model *m, struct slot *s)
{
	check_block(s, "free");
	if (s->kind == K_MAP) {
		size_t len = (s->size + PAGE - 1) & ~(PAGE - 1);

		/* Sometimes unmap the tail first, like code trimming a mapping. */
		if (len > PAGE && rng_next(&m->rng) % 2) {
			size_t cut = (1 + rng_next(&m->rng) % (len / PAGE - 1)) * PAGE;
			CHECK(arena_unmap(s->p + cut, len - cut) == 0, "partial unmap");
			len = cut;
		}
		CHECK(arena_unmap(s->p, len) == 0, "unmap");
	} else {
		arena_free(s->p);
	}
	s->kind = K_EMPTY;
	m->frees++;
}

static void model_realloc(struct model *m, struct slot *s)
{
	size_t size = random_size(&m->rng), keep = size < s->size ? size : s->size;
	char *q;

	check_block(s, "realloc");
	q = arena_realloc(s->p, size);
	m->reallocs++;
	if (!size) {
		CHECK(!q, "realloc(p, 0) must free and return NULL");
		s->kind = K_EMPTY;
		return;
	}
	CHECK(q && ((uintptr_t)q & 15) == 0 && arena_usable_size(q) >= size, "realloc to %zu",
	      size);
	CHECK(verify(q, keep, s->id) < 0, "realloc %zu -> %zu lost contents", s->size, size);
	s->p = q;
	s->size = size;
	s->id = ++m->next_id;
	fill(q, size, s->id);
}

static int cmp_slot(const void *a, const void *b)
{
	const struct slot *x = *(struct slot *const *)a, *y = *(struct slot *const *)b;

	return x->p < y->p ? -1 : x->p > y->p;
}

/* All live blocks intact, none overlapping another (by usable size), and
 * the allocator's own invariants hold. */
static void model_check(struct model *m)
{
	struct slot **live = malloc(m->nslots * sizeof(*live));
	size_t n = 0;

	for (size_t i = 0; i < m->nslots; i++)
		if (m->slot[i].kind != K_EMPTY) {
			check_block(&m->slot[i], "check");
			live[n++] = &m->slot[i];
		}
	qsort(live, n, sizeof(*live), cmp_slot);
	for (size_t i = 1; i < n; i++) {
		struct slot *a = live[i - 1];
		size_t len =
		    a->kind == K_MAP ? (a->size + PAGE - 1) & ~(PAGE - 1) : arena_usable_size(a->p);
		CHECK(a->p + len <= live[i]->p, "blocks %p+%zu and %p overlap", a->p, len,
		      live[i]->p);
	}
	free(live);
	check_arena("in the random test", NULL);
}

static void model_run(struct model *m, unsigned long nops)
{
	for (unsigned long i = 0; i < nops; i++) {
		struct slot *s = &m->slot[rng_next(&m->rng) % m->nslots];

		if (s->kind == K_EMPTY)
			model_alloc(m, s);
		else if (s->kind == K_MAP || rng_next(&m->rng) % 100 < 60)
			model_release(m, s);
		else
			model_realloc(m, s);
		if (++m->ops % 25000 == 0)
			model_check(m);
	}
}

static void model_init(struct model *m, size_t nslots, uint64_t seed)
{
	memset(m, 0, sizeof(*m));
	m->nslots = nslots;
	m->slot = calloc(nslots, sizeof(*m->slot));
	m->rng = seed;
}

static void model_free_all(struct model *m)
{
	for (size_t i = 0; i < m->nslots; i++)
		if (m->slot[i].kind != K_EMPTY)
			model_release(m, &m->slot[i]);
	free(m->slot);
}

static void check_empty(const char *when)
{
	struct arena_stats st;

	check_arena(when, &st);
	CHECK(st.small_live == 0 && st.large_bytes == 0 && st.map_bytes == 0,
	      "%s: %zu small blocks, %zu large bytes, %zu mapped bytes still live", when,
	      st.small_live, st.large_bytes, st.map_bytes);
}

static void test_random(void)
{
	static const uint64_t seeds[] = {0x1234567, 0xdeadbeef, 0x5eed5eed};

	for (size_t k = 0; k < sizeof(seeds) / sizeof(seeds[0]); k++) {
		struct model m;

		model_init(&m, k == 1 ? 200 : 5000, seeds[k]);
		model_run(&m, 60000);
		model_check(&m);
		printf("random seed %#llx: %lu allocs, %lu frees, %lu reallocs, %lu maps\n",
		       (unsigned long long)seeds[k], m.allocs, m.frees, m.reallocs, m.maps);
		model_free_all(&m);
		check_empty("after a random run");
	}
}

/* Save the arena's committed bytes, go on, put the bytes back: the allocator
 * must continue from the saved state (what a restart does). */
static void test_restore(void)
{
	struct model m, saved;
	size_t len;
	char *image;

	model_init(&m, 3000, 42);
	model_run(&m, 50000);
	model_check(&m);
	len = arena_committed();
	image = malloc(len);
	CHECK(image, "no memory for a %zu byte image", len);
	memcpy(image, BASE, len);
	saved = m;
	saved.slot = malloc(m.nslots * sizeof(*m.slot));
	memcpy(saved.slot, m.slot, m.nslots * sizeof(*m.slot));

	/* Diverge: other blocks, one big one that grows the arena. */
	m.rng = 4242;
	model_run(&m, 50000);
	void *big = arena_malloc(len + 64 * MiB);
	CHECK(big, "big block after the snapshot");
	memset(big, 0x5a, len + 64 * MiB);
	CHECK(arena_committed() > len, "the arena did not grow");
	free(m.slot);

	CHECK(arena_prepare_restore(len) == 0, "prepare_restore");
	memcpy(BASE, image, len);
	CHECK(arena_finish_restore() == 0, "finish_restore");
	CHECK(arena_committed() == len, "committed length not restored");
	free(image);
	m = saved;
	model_check(&m);
	/* Everything above the restored bump pointer reads as zero again. */
	void *z = arena_calloc(1, len + 32 * MiB);
	CHECK(z && all_zero(z, len + 32 * MiB), "fresh memory after restore not zero");
	arena_free(z);
	m.rng = 777;
	model_run(&m, 50000);
	model_check(&m);
	printf("restore: %zu byte image, allocator continued from it\n", len);
	model_free_all(&m);
	check_empty("after the restore test");
}

static void test_alignment(void)
{
	for (unsigned k = 0; k <= 30; k++) {
		size_t align = (size_t)1 << k;
		static const size_t sizes[] = {0, 1, 17, 100, 4096, 5000, 40000, 3 * MiB};

		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			char *p = arena_memalign(align, sizes[i]);

			CHECK(p && ((uintptr_t)p & (align - 1)) == 0 && ((uintptr_t)p & 15) == 0,
			      "memalign(%zu, %zu) = %p", align, sizes[i], p);
			CHECK(arena_usable_size(p) >= sizes[i], "usable size");
			memset(p, 0xa5, sizes[i]);
			arena_free(p);
		}
	}
	/* Non-power-of-two alignments are rounded up, like glibc. */
	char *p = arena_memalign(48, 10);
	CHECK(p && ((uintptr_t)p & 63) == 0, "memalign(48)");
	arena_free(p);
	/* Many small aligned blocks in a row: all aligned, none overlapping. */
	char *v[256];
	for (int i = 0; i < 256; i++) {
		v[i] = arena_memalign(256, 200);
		CHECK(v[i] && ((uintptr_t)v[i] & 255) == 0, "memalign(256, 200)");
		memset(v[i], i, 200);
	}
	for (int i = 0; i < 256; i++) {
		for (int j = 0; j < 200; j++)
			CHECK(v[i][j] == (char)i, "aligned block %d overwritten", i);
		arena_free(v[i]);
	}
	for (size_t size = 0; size <= 70000; size += size < 300 ? 1 : 97) {
		p = arena_malloc(size);
		CHECK(p && ((uintptr_t)p & 15) == 0 && arena_usable_size(p) >= size,
		      "malloc(%zu): %p usable %zu", size, p, arena_usable_size(p));
		arena_free(p);
	}
	check_empty("after the alignment test");
}

static void test_calloc(void)
{
	errno = 0;
	CHECK(!arena_calloc(SIZE_MAX / 2 + 1, 2) && errno == ENOMEM, "calloc overflow");
	errno = 0;
	CHECK(!arena_calloc((size_t)1 << 33, (size_t)1 << 33) && errno == ENOMEM,
	      "calloc overflow");
	errno = 0;
	CHECK(!arena_malloc(SIZE_MAX) && errno == ENOMEM, "malloc(SIZE_MAX)");
	errno = 0;
	CHECK(!arena_malloc((size_t)4 << 40) && errno == ENOMEM, "malloc(4 TiB)");
	char *e0 = arena_calloc(0, 10), *e1 = arena_calloc(10, 0);
	CHECK(e0 && e1 && e0 != e1, "calloc of nothing");
	arena_free(e0);
	arena_free(e1);

	/* Recycled memory comes back zeroed, for every size range. */
	static const size_t sizes[] = {8, 100, 1000, 4000, 30000, 40000, 100000, 300000, 3 * MiB};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int round = 0; round < 20; round++) {
			char *p = arena_malloc(sizes[i]);
			CHECK(p, "malloc");
			memset(p, 0xff, sizes[i]);
			arena_free(p);
			p = arena_calloc(1, sizes[i]);
			CHECK(p && all_zero(p, sizes[i]), "recycled calloc(%zu) not zero",
			      sizes[i]);
			memset(p, 0xee, sizes[i]);
			arena_free(p);
		}
	}
	/* A dirty small free run merged back into the bump space: fresh again. */
	char *a = arena_malloc(40000), *b = arena_malloc(40000);
	memset(a, 1, 40000);
	memset(b, 1, 40000);
	arena_free(b);
	arena_free(a);
	a = arena_calloc(4, 20000);
	CHECK(a && all_zero(a, 80000), "calloc over freed dirty pages");
	arena_free(a);
	check_arena("after calloc", NULL);
}

static size_t resident_pages(void *p, size_t len)
{
	size_t n = (len + PAGE - 1) / PAGE, r = 0;
	unsigned char *vec = malloc(n);

	CHECK(mincore(p, len, vec) == 0, "mincore");
	for (size_t i = 0; i < n; i++)
		r += vec[i] & 1;
	free(vec);
	return r;
}

static _Atomic size_t discarded;

static void count_discard(uintptr_t addr, size_t len)
{
	CHECK(arena_contains((void *)addr) && arena_contains((void *)(addr + len - 1)) &&
		  addr % PAGE == 0 && len % PAGE == 0,
	      "discard hook got %#lx+%zu", (unsigned long)addr, len);
	discarded += len;
}

static void test_big(void)
{
	size_t len = 200 * MiB;
	char *p = arena_malloc(len);

	CHECK(p && ((uintptr_t)p & (PAGE - 1)) == 0 && arena_usable_size(p) >= len, "200 MiB");
	memset(p, 0x77, len);
	CHECK(resident_pages(p, len) == len / PAGE, "touched pages not resident");
	/* A neighbour, so that the block is not at the top of the heap. */
	char *guard = arena_malloc(100);
	arena_set_discard_hook(count_discard);
	arena_free(p);
	arena_set_discard_hook(NULL);
	CHECK(resident_pages(p, len) == 0, "freed 200 MiB block still resident");
	CHECK(discarded >= len, "the discard hook saw %zu bytes", (size_t)discarded);
	p = arena_calloc(1, 150 * MiB);
	CHECK(p && all_zero(p, 150 * MiB), "calloc(150 MiB)");
	arena_free(p);
	arena_free(guard);

	/* Realloc in place: shrink, grow into a free neighbour, grow at top. */
	/* Sizes no free run can hold: x and y come from the top, adjacent. */
	char *x = arena_malloc(40 * MiB), *y = arena_malloc(40 * MiB), *z = arena_malloc(64 * 1024);
	CHECK(y == x + 40 * MiB, "large blocks from the top not adjacent");
	fill(x, 4 * MiB, 1);
	arena_free(y);
	char *x2 = arena_realloc(x, 60 * MiB);
	CHECK(x2 == x && verify(x, 4 * MiB, 1) < 0, "realloc did not grow into the free run");
	x2 = arena_realloc(x, 1 * MiB);
	CHECK(x2 == x && verify(x, 1 * MiB, 1) < 0, "realloc did not shrink in place");
	arena_free(z);
	arena_free(x);
	char *t = arena_malloc(300 * MiB);
	fill(t, 1 * MiB, 9);
	char *t2 = arena_realloc(t, 500 * MiB);
	CHECK(t2 && verify(t2, 1 * MiB, 9) < 0, "realloc 300 -> 500 MiB");
	arena_free(t2);
	check_empty("after the big test");

	/* Many large blocks at once, freed in random order. */
	uint64_t rng = 99;
	char *v[64];
	for (int i = 0; i < 64; i++) {
		v[i] = arena_malloc(1 * MiB + rng_next(&rng) % (8 * MiB));
		CHECK(v[i], "large block %d", i);
		fill(v[i], 4096, i);
	}
	for (int i = 63; i > 0; i--) {
		int j = rng_next(&rng) % (i + 1);
		char *tmp = v[i];
		v[i] = v[j];
		v[j] = tmp;
	}
	for (int i = 0; i < 64; i++)
		arena_free(v[i]);
	check_empty("after many large blocks");
	printf("big: 200 MiB released, 150 MiB calloc zero, realloc in place\n");
}

static void test_map(void)
{
	char *m = arena_map(1);

	CHECK(m && ((uintptr_t)m & (PAGE - 1)) == 0 && all_zero(m, PAGE), "map(1)");
	memset(m, 0xff, PAGE);
	CHECK(arena_unmap(m, 1) == 0, "unmap(1)");
	for (int i = 0; i < 50; i++) {
		size_t len = (1 + i % 20) * PAGE + i;
		m = arena_map(len);
		CHECK(m && ((uintptr_t)m & (PAGE - 1)) == 0, "map");
		CHECK(all_zero(m, len), "recycled mapping of %zu not zero", len);
		memset(m, 0xff, len);
		CHECK(arena_unmap(m, len) == 0, "unmap");
	}
	/* Cuts in the middle, at the front and at the back. */
	m = arena_map(16 * PAGE);
	memset(m, 1, 16 * PAGE);
	CHECK(arena_unmap(m + 4 * PAGE, 4 * PAGE) == 0, "unmap middle");
	memset(m, 2, 4 * PAGE);
	memset(m + 8 * PAGE, 2, 8 * PAGE);
	check_arena("after a cut mapping", NULL);
	CHECK(arena_unmap(m, 2 * PAGE) == 0, "unmap front");
	CHECK(arena_unmap(m + 14 * PAGE, 2 * PAGE) == 0, "unmap back");
	CHECK(arena_unmap(m, 16 * PAGE) == 0, "unmap the rest across the holes");
	check_empty("after the cut mapping");
	/* A mapping the application made read-only comes back writable. */
	m = arena_map(4 * PAGE);
	CHECK(mprotect(m, 4 * PAGE, PROT_READ) == 0, "mprotect");
	CHECK(arena_unmap(m, 4 * PAGE) == 0, "unmap read-only");
	char *p = arena_malloc(3 * 4096 + 100);
	memset(p, 3, 3 * 4096 + 100);
	arena_free(p);
	m = arena_map(4 * PAGE);
	memset(m, 4, 4 * PAGE);
	/* Invalid unmaps. */
	p = arena_malloc(100000);
	CHECK(arena_unmap(p, 4096) == -EINVAL, "unmap of a heap block");
	CHECK(arena_usable_size(p) >= 100000, "heap block survived the bad unmap");
	arena_free(p);
	CHECK(arena_unmap(m + 1, 4096) == -EINVAL, "unaligned unmap");
	CHECK(arena_unmap(m, 0) == -EINVAL, "empty unmap");
	CHECK(arena_unmap(m, 4 * PAGE) == 0, "unmap");
	CHECK(!arena_map(0) && errno == EINVAL, "map(0)");
	/* A big mapping is released on unmap. */
	m = arena_map(64 * MiB);
	memset(m, 9, 64 * MiB);
	CHECK(arena_unmap(m, 64 * MiB) == 0, "unmap 64 MiB");
	CHECK(resident_pages(m, 64 * MiB) == 0, "unmapped pages still resident");
	check_empty("after the map test");
}

static void test_bad_frees(void)
{
	struct arena_stats st;

	fprintf(stderr, "--- the following error messages are expected ---\n");
	char *p = arena_malloc(40);
	arena_free(p);
	arena_free(p); /* double free */
	char *a = arena_malloc(40), *b = arena_malloc(40);
	CHECK(a != b, "a double free put the block twice on the free list");
	CHECK(arena_usable_size(p) == 0 || p == a || p == b, "freed block has a usable size");
	arena_free(a + 16); /* not a block start */
	CHECK(arena_usable_size(a) >= 40, "interior free damaged the block");
	arena_free(a + 1);
	check_arena("after bad small frees", &st);
	CHECK(st.small_live == 2, "%zu small blocks live, expected 2", st.small_live);
	arena_free(a);
	arena_free(b);

	char *l = arena_malloc(100000), *g = arena_malloc(100);
	arena_free(l);
	arena_free(l); /* large double free */
	arena_free(g + 4096 * 3);
	char *l2 = arena_malloc(200000);
	arena_free(l2 + 4096);
	arena_free(l2 + 8);
	CHECK(arena_usable_size(l2) >= 200000, "large block damaged by interior frees");
	CHECK(!arena_realloc(l, 10) && errno == EINVAL, "realloc of a freed block");
	arena_free(BASE + ((size_t)512 << 30)); /* beyond the heap */
	arena_free(BASE);			/* the root structure */
	char *m = arena_map(PAGE);
	arena_free(m); /* a mapping is not a heap block */
	CHECK(arena_unmap(m, PAGE) == 0, "unmap");
	arena_free(l2);
	arena_free(g);
	fprintf(stderr, "--- end of expected error messages ---\n");
	check_empty("after bad frees");
}

/* Memory overhead: the heap span used by many blocks of one size. */
static void test_overhead(void)
{
	static const size_t sizes[] = {1,    16,   24,	 100,	129,   200,
				       1000, 3000, 5000, 20000, 33000, 40000};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t size = sizes[i], n = 32 * MiB / size > 100000 ? 100000 : 32 * MiB / size;
		char **v = malloc(n * sizeof(*v));
		struct arena_stats a, b;
		double ratio;

		check_arena("overhead", &a);
		for (size_t k = 0; k < n; k++)
			v[k] = arena_malloc(size);
		check_arena("overhead", &b);
		ratio = (double)((b.heap_bytes - b.free_bytes) - (a.heap_bytes - a.free_bytes)) /
			(double)(n * (size < 16 ? 16 : size));
		printf("overhead: %zu x %zu B -> %.3f\n", n, size, ratio);
		CHECK(ratio < 1.45, "%zu-byte blocks cost %.2f times their size", size, ratio);
		for (size_t k = 0; k < n; k++)
			arena_free(v[k]);
		free(v);
	}
	check_empty("after the overhead test");
}

/* ---- Threads ---- */

#define NTHREADS 4
static _Atomic(char *) mailbox[64];

static void *thread_main(void *arg)
{
	struct model m;
	uint64_t rng = 1000 + (uintptr_t)arg;

	model_init(&m, 300, 7 + (uintptr_t)arg);
	m.next_id = (uint64_t)(uintptr_t)arg << 40;
	for (int i = 0; i < 150000; i++) {
		struct slot *s = &m.slot[rng_next(&m.rng) % m.nslots];
		uint64_t r = rng_next(&rng) % 100;

		if (r < 5) {
			/* Hand a block to whichever thread looks in this box next. */
			size_t size = 16 + rng_next(&rng) % 2000;
			char *p = arena_malloc(size);
			CHECK(p, "malloc in a thread");
			memcpy(p, &size, sizeof(size));
			fill(p + 8, size - 8, size);
			p = atomic_exchange(&mailbox[rng_next(&rng) % 64], p);
			if (p) {
				memcpy(&size, p, sizeof(size));
				CHECK(verify(p + 8, size - 8, size) < 0,
				      "handed-over block corrupt");
				arena_free(p);
			}
		} else if (s->kind == K_EMPTY) {
			s->size = rng_next(&m.rng) % 100 < 97 ? 1 + rng_next(&m.rng) % 1024
							      : rng_next(&m.rng) % (300 * 1024);
			s->id = ++m.next_id;
			s->p = r < 50 ? arena_malloc(s->size) : arena_memalign(64, s->size);
			s->kind = K_HEAP;
			CHECK(s->p && arena_usable_size(s->p) >= s->size, "thread alloc");
			fill(s->p, s->size, s->id);
		} else if (r < 70) {
			model_realloc(&m, s);
		} else {
			check_block(s, "thread free");
			arena_free(s->p);
			s->kind = K_EMPTY;
		}
	}
	for (size_t i = 0; i < m.nslots; i++)
		if (m.slot[i].kind != K_EMPTY) {
			check_block(&m.slot[i], "thread end");
			arena_free(m.slot[i].p);
		}
	free(m.slot);
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[NTHREADS];
	double t0 = now();

	for (uintptr_t i = 0; i < NTHREADS; i++)
		CHECK(pthread_create(&t[i], NULL, thread_main, (void *)i) == 0, "pthread_create");
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 64; i++) {
		char *p = atomic_exchange(&mailbox[i], NULL);
		if (p)
			arena_free(p);
	}
	check_empty("after the thread test");
	printf("threads: %d threads x 150000 ops in %.2f s\n", NTHREADS, now() - t0);
}

#define RUN(test)                                                                                  \
	do {                                                                                       \
		double t0 = now();                                                                 \
		if (only && strcmp(only, &#test[5]))                                               \
			break;                                                                     \
		test();                                                                            \
		printf("ok %s (%.2f s)\n", #test, now() - t0);                                     \
		fflush(stdout);                                                                    \
	} while (0)

/* argv[1], when given, names the one test to run ("random", "threads"...). */
int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	int err = arena_init();

	if (err) {
		fprintf(stderr, "SKIP: cannot reserve the arena: %s\n", strerror(-err));
		return 77;
	}
	CHECK(arena_ready() && arena_init() == 0, "arena_init is not idempotent");
	CHECK(arena_contains(BASE) && !arena_contains(BASE - 1) &&
		  !arena_contains(BASE + STASIS_ARENA_SIZE),
	      "arena_contains");
	CHECK(arena_committed() >= 2 * MiB && arena_committed() % (2 * MiB) == 0, "committed");
	size_t c0 = arena_committed();
	CHECK(arena_commit_to(c0 + 1) == 0 && arena_committed() == c0 + 2 * MiB, "commit_to");
	memset(BASE + c0, 0, 2 * MiB); /* writable now */
	CHECK(arena_commit_to(1) == 0 && arena_committed() == c0 + 2 * MiB, "committed shrank");
	check_arena("after commit_to", NULL);

	/* The restore test first: it copies the whole committed range, which
	 * only grows (the 1 GiB alignments below commit over a GiB). */
	RUN(test_restore);
	RUN(test_random);
	RUN(test_calloc);
	RUN(test_bad_frees);
	RUN(test_map);
	RUN(test_big);
	RUN(test_overhead);
	RUN(test_alignment);
	RUN(test_threads);
	check_arena("at the end", NULL);
	printf("PASS\n");
	return 0;
}
