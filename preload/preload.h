/* Shared by the interposed functions of the preload layer. */
#ifndef STASIS_PRELOAD_H
#define STASIS_PRELOAD_H

#include "format.h"
#include "session.h"

/* Interposed symbols are the only ones libstasis.so exports (with the
 * version script); everything else is hidden. */
#define EXPORT __attribute__((visibility("default")))

#endif
