/* Dirty-page tracking, one backend per run: test_dirty mprotect | uffd.
 * Exit 0 pass, 1 fail, 77 skip (the kernel lacks the backend). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "dirty.h"

#define MiB ((size_t)1 << 20)

static const struct dirty_backend *be;
static size_t ps;
static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t *bitmap_new(size_t pages)
{
	uint64_t *b = calloc((pages + 63) / 64, sizeof(uint64_t));

	if (!b) {
		perror("calloc");
		exit(1);
	}
	return b;
}

static void bit_set(uint64_t *b, size_t i)
{
	b[i / 64] |= 1ULL << (i & 63);
}

static bool bit_get(const uint64_t *b, size_t i)
{
	return b[i / 64] >> (i & 63) & 1;
}

static void *map(size_t len, int prot, int extra)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

/* Mark in want, and write, page i of base (one byte at a random offset). */
static void write_page(char *base, uint64_t *want, size_t i, char v)
{
	base[i * ps + rnd() % ps] = v;
	bit_set(want, i);
}

/* Collect [base, base + pages) and compare with want: every wanted page must
 * be there; with exact, nothing else. Returns the number of extra pages. */
static size_t expect(const char *what, char *base, size_t pages, const uint64_t *want, bool exact)
{
	uint64_t *got = bitmap_new(pages);
	size_t i, missing = 0, extra = 0, shown = 0;
	int ret = be->collect((uintptr_t)base, pages * ps, got);

	CHECKF(ret == 0, "%s: collect: %s", what, strerror(-ret));
	for (i = 0; i < pages; i++) {
		bool g = bit_get(got, i), w = bit_get(want, i);

		if (g == w)
			continue;
		if (w)
			missing++;
		else
			extra++;
		if ((w || exact) && shown++ < 5)
			fprintf(stderr, "  %s: page %zu %s\n", what, i,
				w ? "written but not reported" : "reported but never written");
	}
	CHECKF(missing == 0, "%s: %zu written pages not reported", what, missing);
	if (exact)
		CHECKF(extra == 0, "%s: %zu pages reported but not written", what, extra);
	free(got);
	return extra;
}

static void test_exact(void)
{
	const size_t len = 64 * MiB, pages = len / ps;
	char *base = map(len, PROT_READ | PROT_WRITE, 0);
	uint64_t *want = bitmap_new(pages);
	volatile char sink;
	size_t i, k;
	int ret;

	/* Half populated before tracking, half never touched. */
	memset(base, 0x11, len / 2);
	ret = be->track((uintptr_t)base, len);
	CHECKF(ret == 0, "track: %s", strerror(-ret));
	CHECKF(be->track((uintptr_t)base + 5 * ps, ps) == -EEXIST, "overlapping track accepted");

	/* Reads never count. */
	for (i = 0; i < pages; i += 97)
		sink = base[i * ps];
	(void)sink;
	expect("after reads", base, pages, want, true);

	for (int round = 1; round <= 2; round++) {
		memset(want, 0, (pages + 63) / 64 * 8);
		write_page(base, want, 0, (char)round);
		write_page(base, want, pages - 1, (char)round);
		/* Scattered: many separate runs, more than one scan vector. */
		for (k = 0; k < 3000; k++)
			write_page(base, want, rnd() % pages, (char)round);
		/* memset across page boundaries, and across the populated /
		 * unpopulated border. */
		i = 1000 + round * 10;
		memset(base + i * ps + ps / 2, round, 3 * ps);
		for (k = i; k <= i + 3; k++)
			bit_set(want, k);
		i = pages / 2 - 2;
		memset(base + i * ps + 7, round, 3 * ps);
		for (k = i; k <= i + 3; k++)
			bit_set(want, k);
		expect(round == 1 ? "round 1" : "round 2", base, pages, want, true);
		memset(want, 0, (pages + 63) / 64 * 8);
		expect("no writes", base, pages, want, true);
	}
	CHECKF(base[(1000 + 20) * ps + ps / 2] == 2 && base[(pages / 2 - 2) * ps + 7] == 2,
	      "written data lost");

	/* read() into a protected buffer after prepare_write(). */
	{
		char path[] = "/tmp/test_dirty.XXXXXX";
		size_t n = 3 * ps + 100, off = 5000 * ps + 123;
		char *src = malloc(n);
		int fd = mkstemp(path);
		ssize_t r;

		CHECKF(fd >= 0 && src, "mkstemp: %s", strerror(errno));
		unlink(path);
		for (i = 0; i < n; i++)
			src[i] = (char)(i * 7 + 1);
		CHECKF(write(fd, src, n) == (ssize_t)n, "write tmp");
		lseek(fd, 0, SEEK_SET);
		memset(want, 0, (pages + 63) / 64 * 8);
		ret = be->prepare_write(base + off, n);
		CHECKF(ret == 0, "prepare_write: %s", strerror(-ret));
		r = read(fd, base + off, n);
		CHECKF(r == (ssize_t)n, "read into tracked buffer: %zd (%s)", r,
		      r < 0 ? strerror(errno) : "short");
		CHECKF(!memcmp(base + off, src, n), "read data differs");
		for (i = off / ps; i <= (off + n - 1) / ps; i++)
			bit_set(want, i);
		expect("read()", base, pages, want, true);
		close(fd);
		free(src);
	}

	/* Untrack the middle quarter: its writes are free and unreported, the
	 * rest stays tracked; track it again and it counts clean. */
	{
		size_t lo = pages / 4, hi = pages / 2;

		ret = be->untrack((uintptr_t)base + lo * ps, (hi - lo) * ps);
		CHECKF(ret == 0, "untrack sub range: %s", strerror(-ret));
		memset(want, 0, (pages + 63) / 64 * 8);
		for (k = 0; k < 200; k++)
			base[(lo + rnd() % (hi - lo)) * ps] = 5;
		write_page(base, want, lo - 1, 5);
		write_page(base, want, hi, 5);
		write_page(base, want, 3, 5);
		expect("after sub-range untrack", base, pages, want, true);
		ret = be->track((uintptr_t)base + lo * ps, (hi - lo) * ps);
		CHECKF(ret == 0, "track sub range again: %s", strerror(-ret));
		memset(want, 0, (pages + 63) / 64 * 8);
		write_page(base, want, lo, 6);
		write_page(base, want, hi - 1, 6);
		write_page(base, want, lo - 1, 6);
		write_page(base, want, hi, 6);
		expect("sub range tracked again", base, pages, want, true);
		/* A collect() span inside one range, off its start. */
		memset(want, 0, (pages + 63) / 64 * 8);
		write_page(base, want, lo + 70, 7);
		write_page(base, want, lo + 200, 7);
		write_page(base, want, lo + 10, 7);
		{
			uint64_t *got = bitmap_new(pages);

			be->collect((uintptr_t)base + (lo + 64) * ps, 100 * ps, got);
			CHECKF(got[0] == (1ULL << 6) && !got[1], "partial collect: %#llx %#llx",
			      (unsigned long long)got[0], (unsigned long long)got[1]);
			free(got);
		}
		memset(want, 0, (pages + 63) / 64 * 8);
		bit_set(want, lo + 200);
		bit_set(want, lo + 10);
		expect("rest after partial collect", base, pages, want, true);
	}

	ret = be->untrack((uintptr_t)base, len);
	CHECKF(ret == 0, "untrack: %s", strerror(-ret));
	memset(base, 9, len); /* writable everywhere again */
	munmap(base, len);
	free(want);
	printf("ok - exact sets, reads, read() after prepare_write, sub-range untrack/track\n");
}

/* The arena's pattern: a PROT_NONE reservation committed by mprotect in
 * steps, each new part tracked when committed. */
static void test_grow(void)
{
	const size_t len = 8 * MiB, pages = len / ps, step = 2 * MiB / ps;
	char *base = map(len, PROT_NONE, MAP_NORESERVE);
	uint64_t *want = bitmap_new(pages);
	int ret;

	CHECKF(!mprotect(base, step * ps, PROT_READ | PROT_WRITE), "commit");
	ret = be->track((uintptr_t)base, step * ps);
	CHECKF(ret == 0, "track first step: %s", strerror(-ret));
	write_page(base, want, 1, 1);
	write_page(base, want, step - 1, 1);
	CHECKF(!mprotect(base + step * ps, step * ps, PROT_READ | PROT_WRITE), "commit 2");
	ret = be->track((uintptr_t)base + step * ps, step * ps);
	CHECKF(ret == 0, "track second step: %s", strerror(-ret));
	write_page(base, want, step, 2);
	write_page(base, want, 2 * step - 1, 2);
	write_page(base, want, 7, 2);
	/* The span includes the uncommitted, untracked rest. */
	expect("grown range", base, pages, want, true);

	if (!strcmp(be->name, "uffd")) {
		/* The uffd-wp bit survives the application's own mprotect(). */
		memset(want, 0, (pages + 63) / 64 * 8);
		CHECKF(!mprotect(base, step * ps, PROT_READ), "mprotect R");
		CHECKF(!mprotect(base, step * ps, PROT_READ | PROT_WRITE), "mprotect RW");
		CHECKF(!mprotect(base + step * ps, step * ps, PROT_NONE), "mprotect NONE");
		CHECKF(!mprotect(base + step * ps, step * ps, PROT_READ | PROT_WRITE), "RW");
		write_page(base, want, 3, 3);
		write_page(base, want, step + 5, 3);
		expect("across mprotect", base, pages, want, true);
	}
	ret = be->untrack((uintptr_t)base, 2 * step * ps);
	CHECKF(ret == 0, "untrack: %s", strerror(-ret));
	munmap(base, len);
	free(want);
	printf("ok - range grown by mprotect commits%s\n",
	       strcmp(be->name, "uffd") ? "" : ", tracking across mprotect");
}

/* DESIGN.md section 4: scattered unprotects split the mapping past
 * vm.max_map_count, and mprotect() then fails with ENOMEM. The mprotect
 * backend must fall back to coarser blocks: a superset, never a failure.
 * Done without lowering the (machine-wide) sysctl: enough scattered pages of
 * a NORESERVE region. */
static void test_map_count(void)
{
	long max = dirty_kerndat()->max_map_count;
	size_t stride = 4, nw, pages, len, i, extra;
	bool mp = !strcmp(be->name, "mprotect");
	uint64_t *want;
	char *base;
	int ret;

	if (max <= 0 || max > (1L << 20)) {
		printf("ok - vm.max_map_count trap # SKIP max_map_count %ld\n", max);
		return;
	}
	nw = (size_t)max; /* each isolated writable page adds up to 2 mappings */
	pages = nw * stride;
	len = (pages * ps + 2 * MiB - 1) & ~(2 * MiB - 1);
	pages = len / ps;
	base = map(len, PROT_READ | PROT_WRITE, MAP_NORESERVE);
	want = bitmap_new(pages);
	ret = be->track((uintptr_t)base, len);
	CHECKF(ret == 0, "track %zu MiB: %s", len / MiB, strerror(-ret));
	for (int round = 0; round < 2; round++) {
		memset(want, 0, (pages + 63) / 64 * 8);
		for (i = round; i < pages; i += stride)
			write_page(base, want, i, 1);
		extra = expect("scattered past max_map_count", base, pages, want, !mp);
		if (mp)
			CHECKF(extra > 0, "no coarse unprotect happened: did the mappings not "
					 "reach vm.max_map_count?");
	}
	ret = be->untrack((uintptr_t)base, len);
	CHECKF(ret == 0, "untrack: %s", strerror(-ret));
	munmap(base, len);
	free(want);
	printf("ok - %zu scattered writes, vm.max_map_count %ld\n", pages / stride, max);
}

struct writer {
	char *base;
	size_t first, pages;
	uint64_t *written;
	uint64_t seed;
	atomic_bool *stop;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint64_t x = w->seed;
	size_t i;

	while (!atomic_load(w->stop)) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = w->first + x % w->pages;
		w->base[i * ps + (x >> 40) % ps] = (char)x;
		bit_set(w->written, i);
	}
	return NULL;
}

/* Threads write while the main thread collects: the union of what collect()
 * returned must hold every page any thread wrote (no mark lost to a race
 * between a fault and collect()'s clear-then-protect). */
static void test_threads(void)
{
	const size_t len = 32 * MiB, pages = len / ps;
	char *base = map(len, PROT_READ | PROT_WRITE, 0);
	uint64_t *seen = bitmap_new(pages), *got = bitmap_new(pages);
	struct writer w[2];
	pthread_t t[2];
	atomic_bool stop = false;
	size_t i, k, missing = 0;
	int ret;

	ret = be->track((uintptr_t)base, len);
	CHECKF(ret == 0, "track: %s", strerror(-ret));
	for (k = 0; k < 2; k++) {
		/* Overlapping halves: both threads fault on some same pages. */
		w[k] = (struct writer){
		    base, k * pages / 4, pages * 3 / 4, bitmap_new(pages), 0x1234567ULL * (k + 1),
		    &stop};
		pthread_create(&t[k], NULL, writer_main, &w[k]);
	}
	for (int round = 0; round < 50; round++) {
		usleep(2000);
		memset(got, 0, (pages + 63) / 64 * 8);
		ret = be->collect((uintptr_t)base, len, got);
		CHECKF(ret == 0, "collect: %s", strerror(-ret));
		for (i = 0; i < (pages + 63) / 64; i++)
			seen[i] |= got[i];
	}
	atomic_store(&stop, true);
	for (k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	memset(got, 0, (pages + 63) / 64 * 8);
	be->collect((uintptr_t)base, len, got);
	for (i = 0; i < (pages + 63) / 64; i++) {
		seen[i] |= got[i];
		missing += __builtin_popcountll((w[0].written[i] | w[1].written[i]) & ~seen[i]);
	}
	CHECKF(missing == 0, "%zu pages written by threads were never reported", missing);
	ret = be->untrack((uintptr_t)base, len);
	CHECKF(ret == 0, "untrack: %s", strerror(-ret));
	munmap(base, len);
	free(seen);
	free(got);
	free(w[0].written);
	free(w[1].written);
	printf("ok - two writer threads against 50 collects\n");
}

int main(int argc, char **argv)
{
	struct why why = WHY_INIT;

	if (argc != 2 || (strcmp(argv[1], "mprotect") && strcmp(argv[1], "uffd"))) {
		fprintf(stderr, "usage: %s mprotect|uffd\n", argv[0]);
		return 1;
	}
	ps = (size_t)sysconf(_SC_PAGESIZE);
	be = dirty_select(argv[1], &why);
	if (!be) {
		fprintf(stderr, "%s\n", why.msg);
		/* The kernel lacking the feature is a skip, mprotect failing is not. */
		return strcmp(argv[1], "uffd") ? 1 : 77;
	}
	test_exact();
	test_grow();
	test_threads();
	test_map_count();
	be->fini();
	if (failures) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	return 0;
}
