/* plugdep: a library that only a library loaded with dlopen() needs
 * (libplugstate.so): loaded with it, by the same call. */
#include <stdint.h>

static uint64_t mixed = 0x9e3779b97f4a7c15ull;

uint64_t plugdep_mix(uint64_t x)
{
	mixed = (mixed ^ x) * 0xbf58476d1ce4e5b9ull;
	return mixed >> 7;
}
