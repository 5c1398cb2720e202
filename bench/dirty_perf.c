/* Dirty-page tracking cost, every backend side by side in one run:
 *   - first write to a page, sequential and scattered (1/16 of the pages in
 *     random order), against the same loop on untracked memory;
 *   - collect() per GiB with 1% and with 100% of the pages written.
 * The region is populated before tracking, so no figure includes the first
 * touch of fresh memory. Usage: dirty_perf [MiB] (default 1024). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "dirty.h"

struct result {
	const char *name;
	bool ok;
	double seq_ns, scat_ns;		   /* per page */
	double collect1_ms, collect100_ms; /* per GiB */
};

static size_t ps, pages, nscat, n1;
static char *base;
static size_t *scat, *one_pct;
static uint64_t *bitmap;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void shuffle_pick(size_t *out, size_t n, uint64_t seed)
{
	size_t *perm = malloc(pages * sizeof(*perm)), i, j, t;

	for (i = 0; i < pages; i++)
		perm[i] = i;
	for (i = 0; i < n; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		j = i + seed % (pages - i);
		t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
		out[i] = perm[i];
	}
	free(perm);
}

static double write_seq(char v)
{
	double t = now();

	for (size_t i = 0; i < pages; i++)
		((volatile char *)base)[i * ps] = v;
	return (now() - t) / pages * 1e9;
}

static double write_list(const size_t *list, size_t n, char v)
{
	double t = now();

	for (size_t i = 0; i < n; i++)
		((volatile char *)base)[list[i] * ps + 64] = v;
	return (now() - t) / n * 1e9;
}

static double timed_collect(const struct dirty_backend *be, size_t want)
{
	size_t got = 0;
	double t;

	memset(bitmap, 0, (pages + 63) / 64 * 8);
	t = now();
	if (be->collect((uintptr_t)base, pages * ps, bitmap))
		fprintf(stderr, "%s: collect failed\n", be->name);
	t = now() - t;
	for (size_t i = 0; i < (pages + 63) / 64; i++)
		got += __builtin_popcountll(bitmap[i]);
	if (got < want)
		fprintf(stderr, "%s: collect reported %zu pages, %zu written\n", be->name, got,
			want);
	return t * 1e3 * ((double)(1 << 30) / (pages * ps));
}

static void run(const char *mode, struct result *r)
{
	struct why why = WHY_INIT;
	const struct dirty_backend *be = dirty_select(mode, &why);

	r->name = mode;
	if (!be) {
		fprintf(stderr, "%s\n", why.msg);
		return;
	}
	if (be->track((uintptr_t)base, pages * ps)) {
		fprintf(stderr, "%s: track failed\n", mode);
		be->fini();
		return;
	}
	r->seq_ns = write_seq(1);
	timed_collect(be, pages);
	r->scat_ns = write_list(scat, nscat, 2);
	timed_collect(be, nscat);
	write_list(one_pct, n1, 3);
	r->collect1_ms = timed_collect(be, n1);
	write_seq(4);
	r->collect100_ms = timed_collect(be, pages);
	be->untrack((uintptr_t)base, pages * ps);
	be->fini();
	r->ok = true;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 1024;
	struct result none = {"untracked", true, 0, 0, 0, 0}, res[2] = {{0}};
	const char *modes[2] = {"mprotect", "uffd"};
	int k;

	ps = (size_t)sysconf(_SC_PAGESIZE);
	pages = mib * (1 << 20) / ps;
	nscat = pages / 16;
	n1 = pages / 100;
	base = mmap(NULL, pages * ps, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	scat = malloc(nscat * sizeof(*scat));
	one_pct = malloc(n1 * sizeof(*one_pct));
	bitmap = calloc((pages + 63) / 64, 8);
	if (base == MAP_FAILED || !scat || !one_pct || !bitmap) {
		perror("allocation");
		return 1;
	}
	/* Small pages everywhere, as the tracked heap will mostly have. */
	madvise(base, pages * ps, MADV_NOHUGEPAGE);
	memset(base, 0, pages * ps);
	shuffle_pick(scat, nscat, 0x9e3779b97f4a7c15ULL);
	shuffle_pick(one_pct, n1, 0x2545f4914f6cdd1dULL);

	/* Untracked baseline: the same loops, twice, keeping the faster. */
	for (k = 0; k < 2; k++) {
		double s = write_seq(1), c = write_list(scat, nscat, 2);

		none.seq_ns = k ? (s < none.seq_ns ? s : none.seq_ns) : s;
		none.scat_ns = k ? (c < none.scat_ns ? c : none.scat_ns) : c;
	}
	for (k = 0; k < 2; k++)
		run(modes[k], &res[k]);

	printf("dirty_perf: %zu MiB region, %zu KiB pages; first write per page, %zu scattered "
	       "pages; collect per GiB\n",
	       mib, ps >> 10, nscat);
	printf("%-10s %12s %9s %12s %9s %14s %14s\n", "backend", "seq us/page", "x untrk",
	       "scat us/page", "x untrk", "collect 1% ms", "collect 100%");
	printf("%-10s %12.4f %9s %12.4f %9s %14s %14s\n", none.name, none.seq_ns / 1e3, "1",
	       none.scat_ns / 1e3, "1", "-", "-");
	for (k = 0; k < 2; k++) {
		if (!res[k].ok) {
			printf("%-10s %12s\n", res[k].name, "unavailable");
			continue;
		}
		printf("%-10s %12.3f %9.0f %12.3f %9.0f %14.2f %14.2f\n", res[k].name,
		       res[k].seq_ns / 1e3, res[k].seq_ns / none.seq_ns, res[k].scat_ns / 1e3,
		       res[k].scat_ns / none.scat_ns, res[k].collect1_ms, res[k].collect100_ms);
	}
	if (res[0].ok && res[1].ok)
		printf("mprotect/uffd: first write seq %.1fx, scattered %.1fx; collect 1%% %.1fx, "
		       "100%% %.1fx\n",
		       res[0].seq_ns / res[1].seq_ns, res[0].scat_ns / res[1].scat_ns,
		       res[0].collect1_ms / res[1].collect1_ms,
		       res[0].collect100_ms / res[1].collect100_ms);
	return 0;
}
