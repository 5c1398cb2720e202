/* Which checkpoints stay on disk: the newest STASIS_KEEP complete ones and
 * every image they depend on. Older ones are removed only after a newer
 * one is complete; nothing is removed at restart or on error. */
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

#endif
