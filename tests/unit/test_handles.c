/* The map from real MPI handles back to virtual ones (mpi/handles.c)
 * against a plain model, under the patterns MPI gives it: one address
 * reused for object after object (BLACS makes and frees a datatype per
 * message; the map once kept a deleted slot per reuse, so lookups of that
 * address walked all of them and the map doubled without end), random
 * births and deaths over a small set of addresses whose homes collide,
 * and replay's binds at given indices.
 *
 * Checked after every operation: each address of the set maps back to
 * exactly the virtual handle the model says (or to none), and the map
 * stays sized by its live entries. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "handles.h"

#define ADDRESSES 600
#define OPS 200000

static void *model[ADDRESSES]; /* the live virtual handle bound to each address */

static void *address(int i)
{
	/* 64 bytes apart, as an allocator places objects of one size */
	return (void *)(uintptr_t)(0x5500000000ULL + (uint64_t)i * 64);
}

static int check_all(const char *when, long op)
{
	for (int i = 0; i < ADDRESSES; i++) {
		void *v = vh_lookup_real(VH_TYPE, address(i));

		if (v != model[i]) {
			CHECKF(0, "%s, operation %ld: address %d maps back to %p, not %p", when, op, i,
			       v, model[i]);
			return -1;
		}
	}
	return 0;
}

int main(void)
{
	size_t cap_small;

	if (vh_init()) {
		fprintf(stderr, "cannot reserve the virtual range\n");
		return 77;
	}

	/* One address, made and freed again and again. */
	for (long op = 0; op < OPS; op++) {
		void *v = vh_mint(VH_TYPE, address(0), 0, NULL);

		CHECK(v && vh_lookup_real(VH_TYPE, address(0)) == v);
		vh_release(VH_TYPE, v);
		if (vh_lookup_real(VH_TYPE, address(0))) {
			CHECKF(0, "reuse %ld: a released handle still maps back", op);
			break;
		}
	}
	cap_small = vh_reverse_capacity(VH_TYPE);
	CHECKF(cap_small <= 256, "after %d reuses of one address the map has %zu slots", OPS,
	       cap_small);

	/* Random births and deaths over a set of addresses, a handful live at
	 * a time or most of them. */
	srand(7);
	for (long op = 0; op < OPS && !failures; op++) {
		int i = rand() % ADDRESSES;
		bool dense = (op / 20000) % 2;

		if (!model[i] && (dense || rand() % 8 == 0)) {
			model[i] = vh_mint(VH_TYPE, address(i), 0, NULL);
			CHECK(model[i]);
		} else if (model[i]) {
			vh_release(VH_TYPE, model[i]);
			model[i] = NULL;
		}
		if (op % 97 == 0 || op < 2000)
			check_all("random", op);
	}
	check_all("random, end", OPS);
	CHECKF(vh_reverse_capacity(VH_TYPE) <= 4 * ADDRESSES, "%zu slots for %d addresses",
	       vh_reverse_capacity(VH_TYPE), ADDRESSES);

	/* A new object at a live object's address (MPI freed it behind the
	 * program's back) takes the address over; the old handle no longer
	 * removes the new one's mapping when it goes. */
	for (int i = 0; i < ADDRESSES; i++)
		if (model[i]) {
			void *old = model[i];

			model[i] = vh_mint(VH_TYPE, address(i), 0, NULL);
			vh_release(VH_TYPE, old);
		}
	check_all("taken over", 0);

	/* Replay: everything released, then bound again at given indices. */
	for (int i = 0; i < ADDRESSES; i++)
		if (model[i]) {
			vh_release(VH_TYPE, model[i]);
			model[i] = NULL;
		}
	check_all("all released", 0);
	for (int i = 0; i < ADDRESSES; i += 3) {
		CHECK(vh_bind(VH_TYPE, (uint32_t)(5000 + i), address(i), 0, NULL) == 0);
		model[i] = vh_value(VH_TYPE, (uint32_t)(5000 + i));
	}
	check_all("bound", 0);
	CHECK(vh_bind(VH_TYPE, 5000, address(1), 0, NULL) == -EEXIST);

	if (failures)
		return 1;
	printf("reverse map: %d reuses of one address in %zu slots, %d random operations over %d "
	       "addresses, takeovers and binds: every lookup as the model\n",
	       OPS, cap_small, OPS, ADDRESSES);
	return 0;
}
