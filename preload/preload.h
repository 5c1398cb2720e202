/* Shared by the interposed functions of the preload layer. */
#ifndef STASIS_PRELOAD_H
#define STASIS_PRELOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "export.h"
#include "format.h"
#include "regions.h"
#include "runtime.h"
#include "session.h"
#include "threads.h"

/* Set up stasis (once) if it is not yet: at libstasis.so's constructor, or
 * earlier, at the first allocation not made by ld.so (caller: the
 * allocation's return address), from the constructor of a library that
 * ld.so initialises first (load.c). */
extern bool stasis_loaded;
void stasis_load_early(uintptr_t caller);

#endif
