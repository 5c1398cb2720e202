/* chain_compare JOBDIR RANK ID [--corrupt]: does a chain of incremental
 * images restore exactly what a full image would have?
 *
 * Under STASIS_SHADOW_FULL=1 every incremental image JOBDIR/ckpt-ID.rRANK.img
 * has a full image of the same memory beside it in JOBDIR/shadow/. This
 * follows parent_id from ID down to the full image, materializes memory the
 * way a restart does (the full image, then each incremental oldest first,
 * page by page: a REGION_PARTIAL region gives the pages of its bitmap, any
 * other region all of its pages, pages of zeros (REGION_ZEROS) included),
 * and compares the result with the shadow
 * page for page over the shadow's regions. Every page of the shadow must be
 * given by some image of the chain and be equal; the saved state (registers)
 * and the region layout must equal the shadow's too. The stack's pages are
 * only checked to be present, not compared: it is never incremental (saved
 * whole in every image, so no chain logic touches it), and the two images
 * copy it at two moments while stasis's own frames on it are live
 * (checkpoint_take's locals above the captured stack pointer change between
 * the incremental image and the shadow), which a restart never reads.
 *
 * --corrupt flips one byte of the last page a partial region gave
 * before comparing: the negative control, which must make it fail.
 *
 * Exit 0: equal; 1: a difference or an unreadable file; 77: ID is not an
 * incremental image of RANK, or it has no shadow (STASIS_SHADOW_FULL unset).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "image.h"

#define PG STASIS_PAGE
#define MAX_CHAIN 64

/* Materialized memory, one extent per region of the shadow image. */
struct extent {
	uint64_t addr, length;
	uint8_t *data;
	uint64_t *have; /* 1 bit per page: some image of the chain gave it */
	int *from;      /* index in the chain of the image that gave each page */
};

static struct extent *ext;
static size_t next;
static int last_incr_ext = -1;
static uint64_t zero_pages; /* pages the images gave as zeros (REGION_ZEROS) */
static uint64_t last_incr_page;

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "chain_compare: out of memory\n");
		exit(1);
	}
	return p;
}

static struct image *open_image(const char *path)
{
	struct image *img;
	struct why why = WHY_INIT;
	int ret = image_open(path, &img, &why);

	if (ret) {
		fprintf(stderr, "chain_compare: %s\n", why.msg);
		exit(ret == -ENOENT ? 77 : 1);
	}
	return img;
}

static uint8_t *read_region(struct image *img, size_t i)
{
	uint8_t *buf = xcalloc(1, image_region_bytes(img, i) + 1);
	struct why why = WHY_INIT;

	if (image_read_region(img, i, buf, &why)) {
		fprintf(stderr, "chain_compare: %s\n", why.msg);
		exit(1);
	}
	return buf;
}

/* All of region i of a full image, its pages of zeros (REGION_ZEROS)
 * included. */
static uint8_t *read_whole(struct image *img, size_t i)
{
	const struct region_record *r = &image_regions(img)[i];
	uint8_t *stored = read_region(img, i), *all = xcalloc(1, r->length);
	struct page_walk w;
	const void *data;
	uint64_t p;

	image_pages_begin(&w, r, stored);
	while (image_pages_next(&w, &p, &data))
		if (data)
			memcpy(all + p * PG, data, PG);
	free(stored);
	return all;
}

/* Write one page of the image at chain index c to address a, if the
 * shadow describes that address (pages outside are not compared). */
static void put_page(uint64_t a, const uint8_t *page, int c, bool incremental)
{
	for (size_t e = 0; e < next; e++) {
		struct extent *x = &ext[e];
		uint64_t p;

		if (a < x->addr || a >= x->addr + x->length)
			continue;
		p = (a - x->addr) / PG;
		memcpy(x->data + p * PG, page, PG);
		x->have[p / 64] |= 1ULL << (p % 64);
		x->from[p] = c;
		if (incremental) {
			last_incr_ext = (int)e;
			last_incr_page = p;
		}
		return;
	}
}

/* Apply every region of image c, as restore.c does. */
static void apply(struct image *img, int c)
{
	const struct image_header *h = image_header(img);
	const struct region_record *r = image_regions(img);

	for (size_t i = 0; i < h->nregions; i++) {
		static const uint8_t zero_page[PG];
		struct page_walk w;
		const void *data;
		uint8_t *buf;
		uint64_t p;

		if (r[i].kind >= SECTION_FIRST)
			continue; /* not memory: restore.c does not apply it either */
		buf = read_region(img, i);
		image_pages_begin(&w, &r[i], buf);
		while (image_pages_next(&w, &p, &data)) {
			zero_pages += !data;
			put_page(r[i].addr + p * PG, data ? data : zero_page, c,
				 r[i].flags & REGION_PARTIAL);
		}
		free(buf);
	}
}

int main(int argc, char **argv)
{
	char path[4200];
	struct image *chain[MAX_CHAIN], *shadow;
	const struct image_header *sh, *th;
	const struct region_record *sr, *tr;
	uint64_t id, next_id, bad = 0, missing = 0, pages = 0;
	int rank, n = 0;
	bool corrupt = argc > 4 && !strcmp(argv[4], "--corrupt");

	if (argc < 4 || (argc > 4 && !corrupt)) {
		fprintf(stderr, "usage: chain_compare JOBDIR RANK ID [--corrupt]\n");
		return 1;
	}
	rank = atoi(argv[2]);
	id = strtoull(argv[3], NULL, 10);

	/* The chain, newest first. */
	for (next_id = id; n == 0 || image_header(chain[n - 1])->kind != IMAGE_FULL;) {
		if (n == MAX_CHAIN) {
			fprintf(stderr, "chain_compare: chain of %d images and no full one\n", n);
			return 1;
		}
		snprintf(path, sizeof(path), "%s/ckpt-%llu.r%d.img", argv[1],
			 (unsigned long long)next_id, rank);
		chain[n++] = open_image(path);
		th = image_header(chain[n - 1]);
		if (th->ckpt_id != next_id || (int)th->rank != rank) {
			fprintf(stderr, "chain_compare: %s holds checkpoint %llu of rank %u\n", path,
				(unsigned long long)th->ckpt_id, th->rank);
			return 1;
		}
		if (n == 1 && th->kind != IMAGE_INCREMENTAL) {
			printf("SKIP: checkpoint %llu of rank %d is not incremental\n",
			       (unsigned long long)id, rank);
			return 77;
		}
		if (th->kind == IMAGE_INCREMENTAL && th->parent_id >= th->ckpt_id) {
			fprintf(stderr, "chain_compare: %s: parent %llu is not older\n", path,
				(unsigned long long)th->parent_id);
			return 1;
		}
		next_id = th->parent_id;
	}

	snprintf(path, sizeof(path), "%s/shadow/ckpt-%llu.r%d.img", argv[1], (unsigned long long)id,
		 rank);
	if (access(path, F_OK)) {
		printf("SKIP: no shadow image %s (STASIS_SHADOW_FULL=1 not set?)\n", path);
		return 77;
	}
	shadow = open_image(path);
	sh = image_header(shadow);
	sr = image_regions(shadow);
	th = image_header(chain[0]);
	tr = image_regions(chain[0]);

	/* The shadow is the same checkpoint: same state, same layout. */
	if (sh->kind != IMAGE_FULL || sh->ckpt_id != id || sh->state_size != th->state_size ||
	    memcmp(sh->state, th->state, th->state_size)) {
		fprintf(stderr, "chain_compare: the shadow's header differs from checkpoint %llu's\n",
			(unsigned long long)id);
		return 1;
	}
	if (sh->nregions != th->nregions) {
		fprintf(stderr, "chain_compare: the shadow has %llu regions, the image %llu\n",
			(unsigned long long)sh->nregions, (unsigned long long)th->nregions);
		return 1;
	}
	for (size_t i = 0; i < sh->nregions; i++)
		if (sr[i].addr != tr[i].addr || sr[i].length != tr[i].length || sr[i].kind != tr[i].kind) {
			fprintf(stderr, "chain_compare: region %zu differs: shadow %#llx+%#llx, image "
					"%#llx+%#llx\n",
				i, (unsigned long long)sr[i].addr, (unsigned long long)sr[i].length,
				(unsigned long long)tr[i].addr, (unsigned long long)tr[i].length);
			return 1;
		}

	next = sh->nregions;
	ext = xcalloc(next, sizeof(*ext));
	for (size_t i = 0; i < next; i++) {
		uint64_t np = sr[i].length / PG;

		ext[i] = (struct extent){sr[i].addr, sr[i].length, xcalloc(np, PG),
					 xcalloc((np + 63) / 64, 8), xcalloc(np, sizeof(int))};
	}

	/* Materialize: the full image first, then each incremental. */
	for (int c = n - 1; c >= 0; c--)
		apply(chain[c], c);

	if (corrupt) {
		if (last_incr_ext < 0) {
			fprintf(stderr, "chain_compare: --corrupt: no page of a partial region to corrupt\n");
			return 1;
		}
		ext[last_incr_ext].data[last_incr_page * PG + PG - 123] ^= 0x5a;
		printf("corrupted one byte of page %#llx (from a partial region)\n",
		       (unsigned long long)(ext[last_incr_ext].addr + last_incr_page * PG));
	}

	/* Compare page by page with the shadow. */
	for (size_t i = 0; i < next; i++) {
		uint8_t *want;
		uint64_t np = sr[i].length / PG;

		if (sr[i].kind >= SECTION_FIRST)
			continue;
		want = read_whole(shadow, i);

		for (uint64_t p = 0; p < np; p++) {
			uint64_t a = sr[i].addr + p * PG;

			pages++;
			if (!(ext[i].have[p / 64] >> (p % 64) & 1)) {
				if (missing++ < 10)
					fprintf(stderr, "page %#llx: no image of the chain holds it\n",
						(unsigned long long)a);
				continue;
			}
			if (sr[i].kind == REGION_STACK) /* see the top */
				continue;
			if (memcmp(ext[i].data + p * PG, want + p * PG, PG)) {
				int c = ext[i].from[p];

				if (bad++ < 10)
					fprintf(stderr, "page %#llx (region %zu, kind %u) differs; taken "
							"from checkpoint %llu (%s)\n",
						(unsigned long long)a, i, sr[i].kind,
						(unsigned long long)image_header(chain[c])->ckpt_id,
						image_header(chain[c])->kind == IMAGE_FULL ? "full"
											  : "incremental");
			}
		}
		free(want);
	}

	printf("rank %d checkpoint %llu: chain of %d images (full %llu), %llu pages checked, "
	       "%llu differ, %llu missing; pages of zeros: %llu\n",
	       rank, (unsigned long long)id, n, (unsigned long long)image_header(chain[n - 1])->ckpt_id,
	       (unsigned long long)pages, (unsigned long long)bad, (unsigned long long)missing,
	       (unsigned long long)zero_pages);
	for (int c = 0; c < n; c++)
		image_close(chain[c]);
	image_close(shadow);
	return bad || missing ? 1 : 0;
}
