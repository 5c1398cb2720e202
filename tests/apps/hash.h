/* The test programs' answer: FNV-1a over every byte they received or
 * computed, so that one wrong bit anywhere changes the line they print. */
#ifndef STASIS_TESTS_HASH_H
#define STASIS_TESTS_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_START 0xcbf29ce484222325ull

static inline uint64_t hash_mix(uint64_t h, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#endif
