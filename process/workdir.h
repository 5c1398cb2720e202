/* The process's working directory and umask, which a program may change
 * while it runs (chdir into a run directory, umask for its output): a
 * restarted rank starts where the restart was launched, with the
 * launcher's umask, and would open its relative paths elsewhere and make
 * its files with other modes. Saved with every checkpoint, checked before
 * a restart changes anything (the directory must still be there: one line
 * naming it otherwise), and set again once the memory is back. */
#ifndef STASIS_WORKDIR_H
#define STASIS_WORKDIR_H

#include "part.h"

extern const struct part_ops workdir_part;

#endif
