/* Unit test of which freed pages the application arena gives back to the
 * kernel (alloc/arena_int.h, the dynamic threshold r->keep and the budget
 * r->kept): a run freed and allocated again is given back once, then stays
 * resident and is not reported to the discard hook; runs longer than
 * KEEP_MAX go back at once; dirty free runs hold at most KEEP_BUDGET pages
 * and the bump space fewer than 2 * keep; calloc and arena_map over kept
 * pages read zero, and calloc writes no more than the kept pages; arena_check agrees at every step.
 * White box: it reads the arena's root.
 *
 * Exit status: 0 pass, 1 fail, 77 skip (the range cannot be reserved). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "arena_int.h"

#define MiB ((size_t)1 << 20)

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static size_t discarded; /* bytes the discard hook heard of */

static void count_discard(uintptr_t addr, size_t len)
{
	(void)addr;
	discarded += len;
}

static size_t resident(const void *p, size_t len)
{
	size_t n = (len + PAGE - 1) / PAGE, r = 0;
	unsigned char *vec = malloc(n);

	CHECK(vec && mincore((void *)p, len, vec) == 0, "mincore: %s", strerror(errno));
	for (size_t i = 0; i < n; i++)
		r += vec[i] & 1;
	free(vec);
	return r;
}

static void touch(char *p, size_t len)
{
	for (size_t i = 0; i < len; i += PAGE)
		p[i] = 1;
}

static bool all_zero(const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

static void check(const char *when)
{
	CHECK(arena_check(NULL) == 0, "arena_check %s", when);
}

/* A large block after p, so that p's run does not end at top. */
static void *guard(void)
{
	void *g = arena_malloc(40000);

	CHECK(g, "guard");
	return g;
}

/* Freed, allocated again, freed again: given back the first time only. */
static void test_reuse(void)
{
	char *a = arena_malloc(MiB), *g = guard(), *b, *m;

	touch(a, MiB);
	discarded = 0;
	arena_free(a);
	CHECK(discarded >= MiB && resident(a, MiB) == 0, "first free kept %zu pages",
	      resident(a, MiB));
	CHECK(R->keep > MiB / PAGE, "threshold %u not raised past 1 MiB", R->keep);
	for (int round = 0; round < 3; round++) {
		b = arena_malloc(MiB);
		CHECK(b == a, "the freed run is not reused");
		touch(b, MiB);
		discarded = 0;
		arena_free(b);
		CHECK(!discarded && resident(a, MiB) == MiB / PAGE,
		      "freed again: %zu bytes discarded, %zu pages resident", discarded,
		      resident(a, MiB));
		check("after a kept free");
	}
	b = arena_calloc(1, MiB);
	CHECK(b == a && all_zero(b, MiB), "calloc over kept pages");
	memset(b, 0xaa, MiB);
	arena_free(b);
	m = arena_map(MiB);
	CHECK(m == a && all_zero(m, MiB), "arena_map over kept pages");
	CHECK(arena_unmap(m, MiB) == 0, "unmap");
	arena_free(g);
	check("after the reuse test");
	printf("reuse: 1 MiB given back once, then kept (threshold %u pages)\n", R->keep);
}

/* Longer than KEEP_MAX: given back at once, the threshold stays. */
static void test_cap(void)
{
	size_t len = (KEEP_MAX + 1) * PAGE;
	char *p = arena_malloc(len), *g = guard();
	uint32_t keep = R->keep;

	touch(p, len);
	discarded = 0;
	arena_free(p);
	CHECK(discarded >= len && resident(p, len) == 0 && R->keep == keep,
	      "a run of KEEP_MAX + 1 pages: %zu pages kept, threshold %u", resident(p, len),
	      R->keep);
	arena_free(g);
	check("after the cap test");
}

/* Many 4 MiB blocks freed: no more than KEEP_BUDGET pages stay. */
static void test_budget(void)
{
	enum { N = 40 };
	size_t len = 4 * MiB, kept = 0;
	char *v[N], *g[N];

	for (int i = 0; i < N; i++) {
		v[i] = arena_malloc(len);
		g[i] = guard();
		CHECK(v[i], "4 MiB block");
		touch(v[i], len);
	}
	for (int i = 0; i < N; i++)
		arena_free(v[i]);
	for (int i = 0; i < N; i++)
		kept += resident(v[i], len);
	CHECK(kept <= KEEP_BUDGET && R->kept <= KEEP_BUDGET,
	      "%zu pages resident in freed blocks, %llu counted: budget %u", kept,
	      (unsigned long long)R->kept, KEEP_BUDGET);
	CHECK(kept >= KEEP_BUDGET / 2, "only %zu pages of freed 4 MiB blocks kept", kept);
	check("after freeing 40 blocks of 4 MiB");
	for (int i = 0; i < N; i++) {
		v[i] = i % 2 ? arena_calloc(1, len) : arena_malloc(len);
		CHECK(v[i] && (i % 2 == 0 || all_zero(v[i], len)), "calloc after the budget");
	}
	for (int i = 0; i < N; i++) {
		arena_free(v[i]);
		arena_free(g[i]);
	}
	check("after the budget test");
	printf("budget: %zu of %d MiB freed kept (budget %u MiB)\n", kept * PAGE / MiB, N * 4,
	       KEEP_BUDGET / 256);
}

/* The bump space (first, on a fresh heap, where blocks come from top):
 * freed blocks at top stay while fewer than 2 * keep pages are dirty above
 * it; more are given back, and the threshold rises so that as many stay
 * the next time; 100 MiB (beyond 2 * KEEP_MAX) go back at once. */
static void test_top(void)
{
	size_t small = (size_t)R->keep * PAGE, mid = 3 * small, big = 100 * MiB;
	uint32_t keep = R->keep;
	char *p;

	for (int round = 0; round < 2; round++) {
		p = arena_malloc(small);
		CHECK(p && (size_t)(p - BASE) + small == (size_t)R->top * PAGE, "not at top");
		touch(p, small);
		arena_free(p);
		CHECK(resident(p, small) == small / PAGE && R->dirty_end - R->top >= small / PAGE,
		      "a run of keep pages freed at top not kept");
		p = arena_calloc(1, small);
		CHECK(p && all_zero(p, small), "calloc from the dirty bump space");
		arena_free(p);
	}
	for (int round = 0; round < 2; round++) {
		p = arena_malloc(mid);
		touch(p, mid);
		discarded = 0;
		arena_free(p);
		if (round == 0)
			CHECK(discarded && R->keep > mid / PAGE / 2 && R->keep > keep,
			      "3 * keep pages freed at top: %zu bytes discarded, threshold %u",
			      discarded, R->keep);
		else
			CHECK(!discarded && resident(p, mid) == mid / PAGE,
			      "3 * keep pages freed at top again: %zu bytes discarded", discarded);
		check("after freeing at top");
	}
	/* calloc over the kept pages and beyond writes only the kept ones. */
	p = arena_calloc(1, big);
	CHECK(p && resident(p, big) <= mid / PAGE, "calloc(100 MiB) wrote %zu pages",
	      resident(p, big));
	CHECK(all_zero(p, big), "calloc(100 MiB) not zero");
	arena_free(p);
	keep = R->keep;
	p = arena_malloc(big);
	touch(p, big);
	discarded = 0;
	arena_free(p);
	CHECK(discarded >= big && R->dirty_end <= R->top && resident(p, big) == 0 &&
		  R->keep == keep,
	      "100 MiB freed at top: %zu pages kept, threshold %u", resident(p, big), R->keep);
	check("after the top test");
	printf("top: %zu KiB kept above top, %zu KiB given back then kept, 100 MiB given back\n",
	       small >> 10, mid >> 10);
}

int main(void)
{
	int err = arena_init();

	if (err) {
		fprintf(stderr, "SKIP: cannot reserve the arena: %s\n", strerror(-err));
		return 77;
	}
	arena_set_discard_hook(count_discard);
	test_top();
	test_reuse();
	test_cap();
	test_budget();
	printf("PASS\n");
	return 0;
}
