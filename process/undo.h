/* Undo records of files written in place (README "Files written in
 * place"): before the program first overwrites bytes of a file below the
 * length it had at the newest checkpoint k, those bytes (and that length)
 * are appended to k's undo record, ckpt-<k>.r<rank>.undo in the rank's
 * checkpoint directory (format/store.h: removed with its checkpoint). A
 * restart from checkpoint k applies the records of k and of every newer
 * checkpoint, newest first, so that each file is back to its content at k,
 * byte for byte, before the program resumes.
 *
 * Only the first overwrite of a range in an interval is saved (the ranges
 * saved are kept per file). One interval's record is bounded by
 * STASIS_UNDO_MAX; past it, or when the record cannot be written (a full
 * disk), the write is refused as before: checkpoints stop and the
 * checkpoints before are marked unusable (fds_mark_overwritten). */
#ifndef STASIS_UNDO_H
#define STASIS_UNDO_H
#include <stdbool.h>
#include <stdint.h>

#include "session.h"
#include "why.h"

/* The program is about to change bytes [from, to) of the file path
 * (NULL: the one fd names, looked up only when needed; dev, ino: 0, 0 to
 * stat path), which had old_size bytes at the newest checkpoint id. fd, if
 * >= 0, is open on it (any mode; it is read through /proc/self/fd). Saves
 * what is not saved yet; on failure refuses, naming the file and the
 * cause. */
void undo_will_change(const char *path, uint64_t dev, uint64_t ino, int fd, uint64_t id,
		      uint64_t old_size, uint64_t from, uint64_t to);

/* The program opens fd's file (dev, ino), which it did not hold open at the
 * newest checkpoint id, for writing, for the first time since: its length
 * now, size, is the one it had at id. Kept in id's record (once per file
 * and interval), so that a restart cuts it back: what a killed run appended
 * after id (a log reopened in append mode every step) must not stay before
 * what the restarted run appends again. On failure refuses, naming it. */
void undo_keep_length(int fd, uint64_t dev, uint64_t ino, uint64_t id, uint64_t size);
/* size for a file this open emptied (O_TRUNC): its length then is lost, and
 * the restart leaves it as the program last wrote it; none kept later in
 * the interval either. */
#define UNDO_LENGTH_LOST UINT64_MAX

/* The program made or removed path (names.h, op an enum name_op) after the
 * newest checkpoint id: kept in id's record for a restart. */
void undo_note_name(uint32_t op, const char *path, uint64_t id);

/* Restart from checkpoint id: check that the undo records of id and newer
 * are readable and the files they name are there (the same files); the
 * files the records will cut back to a length, for fds_image.c's check
 * (undo_restores). Changes nothing. 0 or -errno with why. */
int undo_restart_check(struct session *s, uint64_t id, struct why *why);
/* Whether the records undo_restart_check read put file (dev, ino) back. */
bool undo_restores(uint64_t dev, uint64_t ino);
/* Apply them, newest first; then remove them (the files are at id's
 * content: the interval after id begins again empty). 0 or -errno. */
int undo_restart_apply(struct session *s, uint64_t id, struct why *why);

#endif
