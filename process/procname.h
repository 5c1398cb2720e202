/* A restarted rank's command line and environment as /proc shows them
 * (procname.c): the restart's own, not the tail of the first run's. */
#ifndef STASIS_PROCNAME_H
#define STASIS_PROCNAME_H

#include "part.h"

/* Restart only: CHECK copies the restart's strings, REATTACH points the
 * kernel at them (PR_SET_MM_MAP); never fails a restart. */
extern const struct part_ops procname_part;

#endif
