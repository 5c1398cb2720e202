/* The record of protections and mapping kinds (process/maps.c): random
 * updates of a range of pages against a model with one entry per page.
 * After every update the table must hold exactly the model's non-default
 * pages, sorted, without overlaps, with alike neighbours merged. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "check.h"
#include "maps_int.h"

#define PAGES 512
#define BASE 0x100000000000ull
#define PG 4096ull

static struct {
	uint32_t prot, flags;
} model[PAGES];

static void check_table(int step)
{
	uint32_t prot[PAGES], flags[PAGES];
	uint64_t prev_end = 0;

	for (int p = 0; p < PAGES; p++) {
		prot[p] = MAPS_RW;
		flags[p] = 0;
	}
	for (size_t i = 0; i < maps_table.n; i++) {
		const struct maps_range *r = &maps_table.r[i];

		CHECKF(r->start < r->end && r->start >= BASE && r->end <= BASE + PAGES * PG,
		       "step %d: range %zu %#llx-%#llx out of bounds", step, i,
		       (unsigned long long)r->start, (unsigned long long)r->end);
		CHECKF(r->start >= prev_end, "step %d: range %zu overlaps or is unsorted", step, i);
		CHECKF(r->prot != MAPS_RW || r->flags, "step %d: range %zu has default attributes",
		       step, i);
		if (i > 0 && r->start == prev_end)
			CHECKF(r->prot != maps_table.r[i - 1].prot ||
				   r->flags != maps_table.r[i - 1].flags,
			       "step %d: ranges %zu and %zu are alike and not merged", step, i - 1,
			       i);
		prev_end = r->end;
		for (uint64_t a = r->start; a < r->end && a < BASE + PAGES * PG; a += PG) {
			prot[(a - BASE) / PG] = r->prot;
			flags[(a - BASE) / PG] = r->flags;
		}
	}
	for (int p = 0; p < PAGES; p++)
		CHECKF(prot[p] == model[p].prot && flags[p] == model[p].flags,
		       "step %d: page %d is prot %u flags %#x, model %u %#x", step, p, prot[p],
		       flags[p], model[p].prot, model[p].flags);
}

int main(void)
{
	sigset_t old;
	struct maps_range pieces[PAGES];

	srand(12345);
	for (int p = 0; p < PAGES; p++)
		model[p].prot = MAPS_RW;
	maps_lock(&old);
	for (int step = 0; step < 20000 && !failures; step++) {
		int first = rand() % PAGES, n = 1 + rand() % (rand() % 4 ? 8 : PAGES / 2);
		int last = first + n > PAGES ? PAGES : first + n;
		int prot = -1;
		uint32_t set = 0, clear = 0;

		switch (rand() % 4) {
		case 0:
			prot = rand() % 8;
			break;
		case 1:
			prot = MAPS_RW; /* often back to the default */
			break;
		case 2:
			/* A new mapping's: every flag cleared, then its own set. */
			set = 1u << (rand() % 4);
			clear = rand() % 2 ? ~0u : 0;
			break;
		default:
			clear = rand() % 2 ? ~0u : 1u << (rand() % 4);
			if (rand() % 2)
				prot = MAPS_RW;
		}
		CHECK(maps_update(BASE + first * PG, BASE + last * PG, prot, set, clear) == 0);
		for (int p = first; p < last; p++) {
			if (prot >= 0)
				model[p].prot = prot;
			model[p].flags = (model[p].flags & ~clear) | set;
		}
		check_table(step);
		if (step % 100 == 0) {
			/* The pieces over a window are the table clipped to it. */
			size_t k = maps_pieces(BASE + first * PG, BASE + last * PG, pieces, PAGES);

			for (size_t i = 0; i < k; i++) {
				CHECK(pieces[i].start >= BASE + first * PG &&
				      pieces[i].end <= BASE + last * PG);
				for (uint64_t a = pieces[i].start; a < pieces[i].end; a += PG)
					CHECK(model[(a - BASE) / PG].prot == pieces[i].prot &&
					      model[(a - BASE) / PG].flags == pieces[i].flags);
			}
		}
	}
	maps_unlock(&old);
	if (failures) {
		fprintf(stderr, "test_maps: %d failures\n", failures);
		return 1;
	}
	printf("test_maps: 20000 random updates agree with the page model\n");
	return 0;
}
