/* The flush level (STASIS_FLUSH_DIR, a shared or parallel file system):
 * every STASIS_FLUSH_EVERY-th committed checkpoint is copied there by a
 * helper thread of stasis while the application runs on, so that a job
 * survives losing more nodes than the redundancy of the node-local level
 * covers (SCR's flush, Vaidya's two-level recovery).
 *
 * Layout: <STASIS_FLUSH_DIR expanded>/<job key>/ (store.h; %n, %r allowed)
 * holds, per rank, the images of each flushed checkpoint and of its chain
 * back to a full image, each followed by its own commit record (written
 * after the image is synced and read back whole), and a file "flush-level"
 * that says what the directory is. Unlike the node-local level, where any
 * rank's record proves the checkpoint complete on all ranks, here a
 * checkpoint is complete when every rank has its record: the copies end at
 * different times on different ranks.
 *
 * The worker is runtime, not application: it is created inside stasis (so
 * the "application threads" refusal does not apply), its allocations go to
 * libc (it is not the main thread), its stack is libc's, and it takes no
 * MPI call (agreement happens on the main thread at the next commit). */
#ifndef STASIS_FLUSH_H
#define STASIS_FLUSH_H

#include <stddef.h>
#include <stdint.h>

struct session;
struct why;

/* At MPI_Init, after the node-local store: open (create) the flush
 * directory when STASIS_FLUSH_DIR is set. 0 or -errno with why set. */
int flush_open(struct session *s, struct why *why);
/* Newest checkpoint id this rank has at the flush level (0: none): ids of
 * a new run or a restart are numbered above it. */
uint64_t flush_newest_id(void);
/* Collective, after checkpoint s->last_id was committed: learn which
 * flushes ended on every rank, prune the flush level to STASIS_KEEP, and
 * start flushing s->last_id when it is due and no copy is under way. */
void flush_committed(struct session *s);
/* MPI_Finalize: wait for the copy under way (the last checkpoint's flush
 * is worth the wait). */
void flush_stop(void);

/* Restart, collective: the newest id below `below` that every rank has
 * whole at the flush level (its commit record there), 0 if none. */
uint64_t flush_complete_below(struct session *s, uint64_t below);
/* Restart, collective: copy checkpoint id's chain of images from the
 * flush level back to the node-local directory and commit it there.
 * 0, or -errno on every rank with why set on the ranks that failed. */
int flush_fetch(struct session *s, uint64_t id, struct why *why);
/* The flush directory of this rank ("" without a flush level). */
const char *flush_dir(void);

#endif
