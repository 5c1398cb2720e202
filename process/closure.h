#pragma once
/* The room a dlopen() of an object needs with every library it needs that
 * is not loaded yet (its DT_NEEDED closure), read from the ELF files. */
#include <stddef.h>

/* The bytes the PT_LOAD segments of path and of its libraries not yet
 * loaded span, each page-rounded plus its alignment; 0 when path cannot
 * be read. A library not found is left out (the caller still checks
 * where everything landed). Allocates nothing: safe under the dlopen
 * lock. */
size_t closure_bytes(const char *path);
