/* Speed of the application arena's allocator (alloc/arena*.c) against the
 * libc malloc it replaces for the program's heap, in the same run:
 * small malloc+free pairs (a batch of 64 sizes from 16 to 512 bytes, then
 * all freed), best of 5 rounds of each, alternating.
 *
 *   arena_perf [ROUNDS]
 *
 * Prints ns per malloc+free for each and the ratio arena / libc. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	return 0;
}
