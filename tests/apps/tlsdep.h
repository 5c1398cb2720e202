#ifndef TLSDEP_H
#define TLSDEP_H

#include <stdint.h>

/* One step of the library's thread-local generator, fed x. */
uint64_t tlsdep_step(uint64_t x);
/* All of its thread-local state, hashed. */
uint64_t tlsdep_hash(void);

#endif
