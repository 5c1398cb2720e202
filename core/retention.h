/* Which checkpoints stay on disk: the newest STASIS_KEEP complete ones and
 * every image they depend on. Older ones are removed only after a newer
 * one is complete; nothing is removed at restart or on error. */
#ifndef STASIS_RETENTION_H
#define STASIS_RETENTION_H

struct session;

/* After checkpoint s->last_id was committed: remove this rank's files of
 * checkpoints no kept checkpoint needs, and of failed attempts older than
 * the newest complete one. */
void retention_prune(struct session *s);

#endif
