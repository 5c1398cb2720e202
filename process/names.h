/* Names the program made or removed after a checkpoint: directories it made
 * (mkdir), files it made exclusively (O_CREAT | O_EXCL: Fortran's
 * STATUS='NEW'), files and directories it removed (unlink, rmdir).
 *
 * A restart puts the program's memory back at the checkpoint, but not the
 * file system: a directory the killed run made after the checkpoint is
 * still there when the restarted program makes it again, and a file it
 * removed is gone when the restarted program removes it again. Python's
 * os.makedirs() and os.remove() raise on that (FileExistsError,
 * FileNotFoundError), C programs that check mkdir()'s result stop. So each
 * such name is kept in the checkpoint's undo record (process/undo.h) as the
 * program changes it; a restart reads them back, and when the restarted
 * program does the same thing again and the kernel says EEXIST or ENOENT
 * for a name on that list, the call succeeds, as it did in the run the
 * restart replaces. Nothing is made or removed on the program's behalf.
 * Names not done again yet are carried in every checkpoint the restarted
 * run takes (SECTION_NAMES), for a restart from one of those. */
#ifndef STASIS_NAMES_H
#define STASIS_NAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "part.h"

/* The program's call op (enum name_op) on path (relative to dirfd, or to
 * the working directory for AT_FDCWD) succeeded: kept for a restart. */
void names_done(uint32_t op, int dirfd, const char *path);
/* The program's call op on path failed with EEXIST (NAME_MKDIR,
 * NAME_CREATE) or ENOENT (the others): true when the run a restart replaced did it already, so
 * that it succeeds now (once per name). */
bool names_redone(uint32_t op, int dirfd, const char *path);
/* A restart's undo records name path as done by op after the checkpoint. */
int names_pending_add(uint32_t op, const char *path);

extern const struct part_ops names_part;

#endif
