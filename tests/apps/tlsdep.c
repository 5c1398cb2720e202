/* tlsdep: an application library with thread-local state of its own
 * (libtlsdep.so, linked by the tls program): its static TLS block must come
 * back with the executable's. */
#include <stdint.h>

#include "tlsdep.h"

static __thread uint64_t state[32] = {1, 2, 3};
static __thread unsigned steps;

uint64_t tlsdep_step(uint64_t x)
{
	uint64_t *s = &state[steps++ % 32];

	*s = *s * 6364136223846793005ull + x + steps;
	return *s ^ state[(steps + 7) % 32];
}

uint64_t tlsdep_hash(void)
{
	uint64_t h = steps;

	for (int i = 0; i < 32; i++)
		h = h * 31 + state[i];
	return h;
}
