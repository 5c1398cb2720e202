/* Tracking that pays for itself: the decisions of track_policy.c on their
 * own, then track_blocks.c on real memory with a real backend: a region
 * rewritten every interval stops being protected and is saved whole, one that
 * goes quiet is protected again, and every page written is in every
 * interval's bitmap throughout, with 4 KiB pages and with transparent huge
 * pages (kept whole while saved whole).
 *
 *   test_tracking policy | uffd | mprotect
 * Exit 0 pass, 1 fail, 77 skip (the kernel lacks the backend). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "dirty.h"
#include "format.h"
#include "track_blocks.h"
#include "track_policy.h"

#define PAGE ((size_t)STASIS_PAGE)
#define BLOCK_PAGES (TRACK_BLOCK / PAGE)

/* The lead's machine kind (faults dear) and this one's (faults cheap). */
static const struct track_costs dear = {.fault_ns = 16000, .page_ns = 2000};
static const struct track_costs cheap = {.fault_ns = 700, .page_ns = 3000};

static void test_policy(void)
{
	struct block b;

	CHECK(policy_initial(&dear, false).mode == BLOCK_WHOLE);
	CHECK(policy_initial(&cheap, false).mode == BLOCK_PROTECTED);
	CHECK(policy_initial(&cheap, true).mode == BLOCK_WHOLE);
	/* STASIS_TRACK_FAULT_US=0 before any image was timed: protected. */
	CHECK(policy_initial(&(struct track_costs){0, 0}, false).mode == BLOCK_PROTECTED);

	/* Protecting pays below written / pages = p / (f + p): 11% and 81%. */
	for (int k = 0; k < 2; k++) {
		const struct track_costs *c = k ? &cheap : &dear;
		unsigned edge = (unsigned)(512 * c->page_ns / (c->fault_ns + c->page_ns));

		b = (struct block){.mode = BLOCK_PROTECTED};
		policy_decide(&b, c, 512, edge, 0, 0);
		CHECKF(b.mode == BLOCK_PROTECTED, "%u of 512 written: protecting still pays", edge);
		policy_decide(&b, c, 512, edge + 2, 0, 0);
		CHECKF(b.mode == BLOCK_WHOLE, "%u of 512 written: should be saved whole", edge + 2);
		b = (struct block){.mode = BLOCK_PROTECTED};
		policy_decide(&b, c, 512, 512, 0, 0);
		CHECK(b.mode == BLOCK_WHOLE);

		/* Whole: busy stays whole, quiet is protected again, and a
		 * block not watched stays as it is. */
		b = (struct block){.mode = BLOCK_WHOLE};
		policy_decide(&b, c, 512, 0, 16, 16);
		CHECK(b.mode == BLOCK_WHOLE);
		policy_decide(&b, c, 512, 0, 0, 0);
		CHECK(b.mode == BLOCK_WHOLE);
		policy_decide(&b, c, 512, 0, 16, 0);
		CHECK(b.mode == BLOCK_PROTECTED);
	}
	/* One sample page of 16 changed: too busy where faults are dear (est.
	 * 6.25% > 11% / 2), quiet enough where they are cheap (< 81% / 2). */
	b = (struct block){.mode = BLOCK_WHOLE};
	policy_decide(&b, &dear, 512, 0, 16, 1);
	CHECK(b.mode == BLOCK_WHOLE);
	policy_decide(&b, &cheap, 512, 0, 16, 1);
	CHECK(b.mode == BLOCK_PROTECTED);
}

/* --- blocks on real memory --------------------------------------------------- */

static const struct dirty_backend *be;
static char *base;
static size_t nblocks = 8, npages;
static uint64_t *want, *got;

static void write_page(size_t p, char v)
{
	base[p * PAGE + (p * 131) % PAGE] = v;
	want[p / 64] |= 1ULL << (p % 64);
}

static void write_block(size_t k, char v)
{
	for (size_t p = k * BLOCK_PAGES; p < (k + 1) * BLOCK_PAGES; p++)
		write_page(p, v);
}

/* End of an interval: collect, and check that every page written is
 * reported (the one thing tracking may never get wrong). */
static void interval(struct tracked_range *t, struct block_env *env, const char *what)
{
	size_t missing = 0;
	struct block_tally tally = {0};
	int ret;

	memset(got, 0, (npages + 63) / 64 * 8);
	env->round++;
	ret = blocks_collect(t, t->end, t->start, got, env, &tally);
	CHECKF(ret == 0, "%s: blocks_collect: %s", what, strerror(-ret));
	for (size_t p = 0; p < npages; p++)
		if ((want[p / 64] >> (p % 64) & 1) && !(got[p / 64] >> (p % 64) & 1))
			missing++;
	CHECKF(missing == 0, "%s: %zu written pages not reported", what, missing);
	memset(want, 0, (npages + 63) / 64 * 8);
}

static unsigned mode_of(const struct tracked_range *t, size_t k)
{
	return t->blocks[k].mode;
}

static bool block_huge(size_t k)
{
	uint64_t bits[BLOCK_PAGES / 64] = {0};

	return !dirty_huge_pages((uintptr_t)base + k * TRACK_BLOCK, TRACK_BLOCK, bits) &&
	       bits_count(bits, 0, BLOCK_PAGES) == BLOCK_PAGES;
}

/* costs: decide the first mode of blocks that are not huge pages; huge:
 * the memory is populated as huge pages (when the kernel gives them). */
static void test_blocks(const struct track_costs *costs, bool huge)
{
	struct block_env env = {.be = be, .costs = *costs};
	struct tracked_range t = {0};
	size_t len = nblocks * TRACK_BLOCK;
	char what[96];
	bool thp;
	char *raw;
	int ret;

	raw = mmap(NULL, len + TRACK_BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		   0);
	CHECKF(raw != MAP_FAILED, "mmap: %s", strerror(errno));
	base = (char *)(((uintptr_t)raw + TRACK_BLOCK - 1) & ~(TRACK_BLOCK - 1));
	madvise(base, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	madvise(base, len, MADV_POPULATE_WRITE);
	npages = len / PAGE;
	want = calloc((npages + 63) / 64, 8);
	got = calloc((npages + 63) / 64, 8);
	thp = huge && block_huge(0);
	if (huge && !thp)
		printf("note: no transparent huge pages here: the huge-page checks are skipped\n");

	ret = be->track((uintptr_t)base, len);
	CHECKF(ret == 0, "track: %s", strerror(-ret));
	t.start = t.end = (uintptr_t)base;
	t.kind = REGION_ARENA;
	ret = blocks_grow(&t, (uintptr_t)base + len, &env);
	CHECKF(ret == 0 && t.nblocks == nblocks, "blocks_grow: %d, %zu blocks", ret, t.nblocks);
	for (size_t k = 0; k < nblocks; k++)
		CHECK(mode_of(&t, k) == policy_initial(costs, thp).mode);

	/* Blocks 0-3 rewritten every interval, one page of block 5, nothing
	 * of 6 and 7. */
	for (int i = 0; i < 4; i++) {
		for (size_t k = 0; k < 4; k++)
			write_block(k, (char)(i + 1));
		write_page(5 * BLOCK_PAGES + 17, (char)(i + 1));
		snprintf(what, sizeof(what), "busy interval %d", i);
		interval(&t, &env, what);
	}
	for (size_t k = 0; k < 4; k++)
		CHECKF(mode_of(&t, k) == BLOCK_WHOLE, "block %zu rewritten every interval is %s", k,
		       mode_of(&t, k) ? "whole" : "still protected");
	for (size_t k = 5; k < nblocks; k++)
		CHECKF(mode_of(&t, k) == BLOCK_PROTECTED, "quiet block %zu is not protected", k);
	if (thp)
		CHECKF(block_huge(1), "block 1, rewritten and saved whole, is not a huge page");
	/* Protected and quiet but for one page: that page alone. */
	for (size_t k = 0; k < 4; k++)
		write_block(k, 8);
	write_page(6 * BLOCK_PAGES + 3, 9);
	interval(&t, &env, "one page of block 6");
	CHECKF(bits_count(got, 6 * BLOCK_PAGES, BLOCK_PAGES) == 1,
	       "one page written in protected block 6, %zu reported",
	       bits_count(got, 6 * BLOCK_PAGES, BLOCK_PAGES));

	/* Blocks 0-3 go quiet: protected again at the next checkpoint (one
	 * page of block 0 is written meanwhile: saved, as all of block 0). */
	write_page(2, 7);
	interval(&t, &env, "quiet interval");
	CHECKF(bits_count(got, 0, BLOCK_PAGES) == BLOCK_PAGES,
	       "whole block 0 not saved whole: %zu of %zu pages", bits_count(got, 0, BLOCK_PAGES),
	       (size_t)BLOCK_PAGES);
	interval(&t, &env, "quiet interval 2");
	for (size_t k = 1; k < 4; k++)
		CHECKF(mode_of(&t, k) == BLOCK_PROTECTED,
		       "block %zu quiet for 2 intervals is still saved whole", k);
	write_page(2 * BLOCK_PAGES + 100, 5);
	interval(&t, &env, "one page of block 2 again");
	CHECKF(bits_count(got, 2 * BLOCK_PAGES, BLOCK_PAGES) == 1,
	       "block 2 protected again: one page written, %zu reported",
	       bits_count(got, 2 * BLOCK_PAGES, BLOCK_PAGES));

	/* Busy again: the writes to protected block 3 split its huge page;
	 * saved whole from then on, it is made one again. */
	for (int i = 0; i < 2; i++) {
		write_block(3, (char)(20 + i));
		interval(&t, &env, "block 3 busy again");
	}
	CHECKF(mode_of(&t, 3) == BLOCK_WHOLE, "block 3 busy again is not saved whole");
	if (thp)
		CHECKF(block_huge(3), "block 3 saved whole again is not a huge page again");

	be->untrack((uintptr_t)base, len);
	blocks_free(&t);
	munmap(raw, len + TRACK_BLOCK);
	free(want);
	free(got);
}

/* unprotect() and protect() of parts of a tracked range. */
static void test_protect_ops(void)
{
	size_t len = 64 * PAGE;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t bits;
	int ret;

	memset(p, 1, len);
	CHECK(be->track((uintptr_t)p, len) == 0);
	ret = be->unprotect((uintptr_t)p + 8 * PAGE, 8 * PAGE);
	CHECKF(ret == 0, "unprotect: %s", strerror(-ret));
	p[9 * PAGE] = 2;  /* unprotected: not seen */
	p[20 * PAGE] = 2; /* protected: seen */
	bits = 0;
	CHECK(be->collect((uintptr_t)p + 16 * PAGE, 48 * PAGE, &bits) == 0);
	CHECKF(bits == 1ULL << 4, "collect beside an unprotected part: %#llx",
	       (unsigned long long)bits);
	ret = be->protect((uintptr_t)p + 8 * PAGE, 8 * PAGE);
	CHECKF(ret == 0, "protect: %s", strerror(-ret));
	p[10 * PAGE] = 3;
	bits = 0;
	CHECK(be->collect((uintptr_t)p, len, &bits) == 0);
	CHECKF(bits == 1ULL << 10, "after protect(): %#llx", (unsigned long long)bits);
	be->untrack((uintptr_t)p, len);
	munmap(p, len);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "policy";
	struct why why = WHY_INIT;

	if (!strcmp(mode, "policy")) {
		test_policy();
	} else {
		be = dirty_select(mode, &why);
		if (!be) {
			printf("SKIP: %s\n", why.msg);
			return 77;
		}
		test_protect_ops();
		test_blocks(&dear, false);
		test_blocks(&cheap, false);
		test_blocks(&cheap, true);
		be->fini();
	}
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("PASS: %s\n", mode);
	return 0;
}
