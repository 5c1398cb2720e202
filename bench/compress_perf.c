/* What compressing images (STASIS_COMPRESS, format/codec.h) and leaving
 * pages of zeros out (REGION_ZEROS) do to real programs' checkpoints: the
 * memory regions of each image given (a full image a real program's run
 * left, bench/compress_perf.sh) are put back into memory, then written
 * again by image_write with each codec, side by side in one run:
 *
 *   compress_perf DIR IMAGE...
 *
 * Per image: its memory (what it would store with every page, zeros
 * included), and for none (zeros left out) / lz4 / zstd the bytes written and the best of
 * REPS write times (O_DIRECT into DIR where the file system takes it,
 * synced, as a checkpoint writes), and the time a read + unpack of the
 * written image takes (image_verify is a crc pass; the restart's path is
 * image_read_region's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "image.h"

#define PG 4096u
#define REPS 3
#define MAXR 4096

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The memory regions of path, each mapped anew with its pages (zeros
 * where it left them out). Returns how many, or -1. */
static int load(const char *path, struct image_region *out, uint64_t *zero_pages)
{
	struct image *img;
	struct why w = WHY_INIT;
	int n = 0;

	if (image_open(path, &img, &w)) {
		fprintf(stderr, "compress_perf: %s\n", w.msg);
		return -1;
	}
	for (size_t i = 0; i < image_header(img)->nregions && n < MAXR; i++) {
		const struct region_record *r = &image_regions(img)[i];
		struct page_walk pw;
		const void *data;
		uint64_t pg;
		char *buf, *mem;

		if (r->kind != REGION_DATA && r->kind != REGION_ARENA)
			continue;
		if (r->flags & REGION_PARTIAL) {
			fprintf(stderr, "compress_perf: %s is incremental: give a full image\n", path);
			image_close(img);
			return -1;
		}
		buf = malloc(image_region_bytes(img, i) + 1);
		mem = mmap(NULL, r->length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			   0);
		if (!buf || mem == MAP_FAILED || image_read_region(img, i, buf, &w)) {
			fprintf(stderr, "compress_perf: %s: %s\n", path, w.msg[0] ? w.msg : "no memory");
			image_close(img);
			return -1;
		}
		image_pages_begin(&pw, r, buf);
		while (image_pages_next(&pw, &pg, &data))
			if (data)
				memcpy(mem + pg * PG, data, PG);
			else
				++*zero_pages;
		free(buf);
		out[n++] = (struct image_region){(uintptr_t)mem, r->length, r->kind, NULL};
	}
	image_close(img);
	return n;
}

int main(int argc, char **argv)
{
	static struct image_region regs[MAXR];
	char path[4096];

	if (argc < 3) {
		fprintf(stderr, "usage: compress_perf DIR IMAGE...\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/compress_perf.img", argv[1]);
	printf("%-28s %9s | %-24s | %-24s | %-24s\n", "image", "memory",
	       "none: MiB  write  read", "lz4: MiB  write  read", "zstd: MiB  write  read");
	for (int a = 2; a < argc; a++) {
		uint64_t zeros = 0, mem = 0;
		int n = load(argv[a], regs, &zeros);
		const char *name = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];

		if (n < 0)
			return 1;
		for (int i = 0; i < n; i++)
			mem += regs[i].length;
		printf("%-28.28s %7.1fMi", name, mem / 1048576.0);
		for (uint32_t codec = CODEC_NONE; codec <= CODEC_ZSTD; codec++) {
			double best = 1e30, rbest = 1e30;
			uint64_t bytes = 0;

			for (int rep = 0; rep < REPS; rep++) {
				struct image_header h = {.ckpt_id = 1, .kind = IMAGE_FULL, .nranks = 1};
				struct why w = WHY_INIT;
				struct image *img;
				double t0 = now(), t1;

				h.codec = codec;
				if (image_write(path, &h, regs, n, &bytes, &w)) {
					fprintf(stderr, "compress_perf: %s\n", w.msg);
					return 1;
				}
				t1 = now();
				best = t1 - t0 < best ? t1 - t0 : best;
				/* Read back as a restart would (from the page cache). */
				t0 = now();
				if (image_open(path, &img, &w))
					return 1;
				for (size_t i = 0; i < image_header(img)->nregions; i++) {
					char *buf = malloc(image_region_bytes(img, i) + 1);

					if (!buf || image_read_region(img, i, buf, &w))
						return 1;
					free(buf);
				}
				image_close(img);
				t1 = now();
				rbest = t1 - t0 < rbest ? t1 - t0 : rbest;
				unlink(path);
			}
			printf(" | %6.1f %6.0fms %5.0fms", bytes / 1048576.0, best * 1e3, rbest * 1e3);
		}
		printf("   (%llu pages of zeros left out)\n", (unsigned long long)zeros);
		for (int i = 0; i < n; i++)
			munmap((void *)regs[i].addr, regs[i].length);
	}
	return 0;
}
