/* Which checkpoints stay on disk: the newest STASIS_KEEP complete ones and
 * every image they depend on. Older ones are removed only after a newer
 * one is complete; nothing is removed at restart or on error. When the
 * disk is full, older ones go early to make room (retention_make_room),
 * never the newest complete checkpoint or an image it depends on. */
#ifndef STASIS_RETENTION_H
#define STASIS_RETENTION_H

#include <stdint.h>

struct session;
struct store;

/* After checkpoint s->last_id was committed: remove this rank's files of
 * checkpoints no kept checkpoint needs, and of failed attempts older than
 * the newest complete one. */
void retention_prune(struct session *s);
/* The same on any level's directory: keep the keep_n newest checkpoints
 * with a commit record up to newest, and their chains; leave alone ids
 * above newest (being written) and below own_from (an earlier run's).
 * Returns 0 or -errno from listing the directory. */
int retention_prune_store(const struct store *st, uint64_t newest, uint64_t own_from, int keep_n);

/* Out of space: remove this rank's files of every checkpoint the newest
 * complete one (s->last_id) does not depend on, whatever STASIS_KEEP says.
 * Returns the bytes freed (0: nothing to remove). */
uint64_t retention_make_room(struct session *s);
/* The bytes retention_make_room would free now, without removing. */
uint64_t retention_spare_bytes(struct session *s);
/* Bytes on disk of this rank's files of checkpoint id (image, redundancy
 * file, commit record), and of the newest complete checkpoint's chain. */
uint64_t retention_bytes(struct session *s, uint64_t id);
uint64_t retention_chain_bytes(struct session *s);

#endif
