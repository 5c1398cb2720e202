/* Speed of the application arena's allocator (alloc/arena*.c) against the
 * libc malloc it replaces for the program's heap, in the same run:
 *  - small malloc+free pairs (a batch of 64 sizes from 16 to 512 bytes, then
 *    all freed), best of 5 rounds of each, alternating;
 *  - large blocks of 128 KiB to 1 MiB, as numpy's temporaries: each round
 *    allocates four, writes every page, and frees them, while a fifth
 *    block lives from one round to the next (so that some frees land in
 *    the middle of the heap, some at its top); best of 5, alternating, with
 *    the page faults of a round (getrusage).
 *
 *   arena_perf [ROUNDS]
 *
 * Prints ns per block (malloc + page writes + free) for each and the ratio
 * arena / libc. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "arena.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ns per malloc+free of rounds batches of 64 small blocks, each touched
 * once. Not inlined: the compiler must not see (and elide) the pairs. */
static __attribute__((noinline)) double batches(void *(*alloc)(size_t), void (*release)(void *), int rounds)
{
	void *v[64];
	double t = now();

	for (int round = 0; round < rounds; round++) {
		for (int i = 0; i < 64; i++) {
			v[i] = alloc(16 + (i * 24) % 512);
			*(volatile char *)v[i] = (char)i;
		}
		for (int i = 0; i < 64; i++)
			release(v[i]);
	}
	return (now() - t) * 1e9 / (64.0 * rounds);
}

static long minflt(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static void touch(char *p, size_t size)
{
	for (size_t i = 0; i < size; i += 4096)
		((volatile char *)p)[i] = 1;
}

/* ns per large block of about `size` bytes (sizes vary by a few pages
 * around it), page faults per round in *faults. */
static __attribute__((noinline)) double large(void *(*alloc)(size_t), void (*release)(void *),
					      size_t size, int rounds, double *faults)
{
	void *v[4], *survivor = NULL;
	long f = minflt();
	double t = now();

	for (int round = 0; round < rounds; round++) {
		for (int i = 0; i < 4; i++) {
			size_t sz = size + (size_t)i * 4096 + 64;

			v[i] = alloc(sz);
			touch(v[i], sz);
		}
		release(survivor);
		survivor = alloc(size / 2 + 4096 * (round % 3));
		touch(survivor, size / 2);
		for (int i = 0; i < 4; i++)
			release(v[i]);
	}
	release(survivor);
	t = (now() - t) * 1e9 / (5.0 * rounds);
	*faults = (double)(minflt() - f) / rounds;
	return t;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 50000, err = arena_init();
	double arena = 1e30, libc = 1e30, t;

	if (err) {
		fprintf(stderr, "arena_perf: cannot reserve the arena: %s\n", strerror(-err));
		return 77;
	}
	for (int rep = 0; rep < 5; rep++) {
		t = batches(arena_malloc, arena_free, rounds);
		arena = t < arena ? t : arena;
		t = batches(malloc, free, rounds);
		libc = t < libc ? t : libc;
	}
	printf("small malloc+free, best of 5 x %d batches of 64:\n", rounds);
	printf("  arena %.1f ns   libc %.1f ns   arena/libc %.2f\n", arena, libc, arena / libc);
	printf("large blocks (4 per round + 1 living on, every page written), best of 5 x %d "
	       "rounds:\n",
	       rounds / 250);
	for (size_t size = 128 << 10; size <= 1 << 20; size *= 2) {
		double fa = 0, fl = 0, f;

		arena = libc = 1e30;
		for (int rep = 0; rep < 5; rep++) {
			t = large(arena_malloc, arena_free, size, rounds / 250, &f);
			if (t < arena)
				arena = t, fa = f;
			t = large(malloc, free, size, rounds / 250, &f);
			if (t < libc)
				libc = t, fl = f;
		}
		printf("  %4zu KiB: arena %7.0f ns %6.1f faults/round   libc %7.0f ns %6.1f "
		       "faults/round   arena/libc %.2f\n",
		       size >> 10, arena, fa, libc, fl, arena / libc);
	}
	return 0;
}
