/* What leaving pages of zeros out of images (format.h, REGION_ZEROS) saves:
 * image bytes and image_write time for memory of which a fraction of the
 * pages are zeros, side by side with the same memory where each of those
 * pages holds one non-zero byte (stored whole, as before format 6), and the
 * time of the zero scan alone (isal_zero_detect over every page, what the
 * writer adds before the layout), in one run:
 *
 *   zeros_perf [MiB [DIR]]     (default 256 MiB in /var/tmp)
 *
 * Best of REPS writes each; the image is removed between writes. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <isa-l/mem_routines.h>

#include "image.h"

#define PG 4096u
#define REPS 3

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Page p is a page of zeros for fraction f (spread, not one block). */
static int zero_page(size_t p, int pct)
{
	return (int)((p * 37) % 100) < pct;
}

static void fill(char *mem, size_t pages, int pct, int mark)
{
	for (size_t p = 0; p < pages; p++) {
		char *page = mem + p * PG;

		if (zero_page(p, pct)) {
			memset(page, 0, PG);
			page[0] = (char)mark; /* 0: a page of zeros; else data, found at once */
		} else {
			for (unsigned i = 0; i < PG; i += 8)
				*(uint64_t *)(page + i) = (p * 2654435761u) ^ i ^ 0x5bd1e995;
		}
	}
}

static double write_best(const char *path, struct image_region *r, uint64_t *bytes)
{
	double best = 1e30;

	for (int rep = 0; rep < REPS; rep++) {
		struct image_header h = {.ckpt_id = 1, .kind = IMAGE_FULL, .nranks = 1};
		struct why w = WHY_INIT;
		double t0 = now();

		if (image_write(path, &h, r, 1, bytes, &w)) {
			fprintf(stderr, "zeros_perf: %s\n", w.msg);
			exit(1);
		}
		t0 = now() - t0;
		best = t0 < best ? t0 : best;
		unlink(path);
	}
	return best;
}

int main(int argc, char **argv)
{
	static const int pcts[] = {0, 10, 50, 90, 100};
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256, pages = (mib << 20) / PG;
	const char *dir = argc > 2 ? argv[2] : "/var/tmp";
	char path[4096];
	char *mem = mmap(NULL, pages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);

	if (mem == MAP_FAILED || !pages)
		return 77;
	snprintf(path, sizeof(path), "%s/zeros_perf.%d.img", dir, (int)getpid());
	printf("zeros_perf: %zu MiB of memory, images in %s, best of %d\n", mib, dir, REPS);
	printf("%6s | %10s %10s %6s | %9s %9s %6s | %8s\n", "zeros", "MiB elided", "MiB whole",
	       "ratio", "ms elided", "ms whole", "ratio", "scan ms");
	for (size_t c = 0; c < sizeof(pcts) / sizeof(pcts[0]); c++) {
		struct image_region r = {(uintptr_t)mem, pages * PG, REGION_ARENA, NULL};
		uint64_t be = 0, bw = 0;
		double te, tw, ts = 1e30;

		/* The same memory, the pages of zeros holding one byte. */
		fill(mem, pages, pcts[c], 1);
		tw = write_best(path, &r, &bw);
		fill(mem, pages, pcts[c], 0);
		te = write_best(path, &r, &be);
		for (int rep = 0; rep < REPS; rep++) {
			double t0 = now();
			size_t n = 0;

			for (size_t p = 0; p < pages; p++)
				n += !isal_zero_detect(mem + p * PG, PG);
			t0 = now() - t0;
			ts = t0 < ts ? t0 : ts;
			if (n > pages)
				return 1; /* keeps the scan from being optimised away */
		}
		printf("%5d%% | %10.1f %10.1f %6.2f | %9.1f %9.1f %6.2f | %8.1f\n", pcts[c],
		       be / 1048576.0, bw / 1048576.0, (double)be / bw, te * 1e3, tw * 1e3, te / tw,
		       ts * 1e3);
	}
	munmap(mem, pages * PG);
	return 0;
}
