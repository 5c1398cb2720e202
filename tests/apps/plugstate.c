/* plugstate: a library the plugin program loads with dlopen() after
 * MPI_Init, keeping state of every kind a library keeps: static data, a
 * heap block it points to, thread-local storage (a block allocated on
 * first use, as for any library loaded with dlopen()), and the state of a
 * library it needs (libplugdep.so). */
#include <stdint.h>
#include <stdlib.h>

uint64_t plugdep_mix(uint64_t x);

static uint64_t table[4096];
static uint64_t *heap;
static __thread uint64_t calls;

uint64_t plugstate_step(uint64_t x)
{
	uint64_t r;

	if (!heap)
		heap = calloc(8192, sizeof(*heap));
	calls++;
	r = plugdep_mix(x + calls);
	table[r % 4096] += x;
	heap[(r >> 12) % 8192] ^= r;
	return r ^ table[x % 4096];
}

uint64_t plugstate_hash(void)
{
	uint64_t h = calls;

	for (int i = 0; i < 4096; i++)
		h = h * 31 + table[i];
	for (int i = 0; heap && i < 8192; i++)
		h = h * 31 + heap[i];
	return h ^ plugdep_mix(0);
}
