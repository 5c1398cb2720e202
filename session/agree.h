/* Agreement on a result, the one way every collective step of stasis ends:
 * each rank brings its own result and why; every rank leaves with the same
 * result, and the same why, that of the lowest-ranked rank that failed, so
 * that a cause several ranks share is said once and every rank takes the
 * same branch. step names the point ("checkpoint:write", "restart:files"):
 * at STASIS_VERBOSE=2 each rank logs it before it waits, so a job that
 * hangs shows where. */
#ifndef STASIS_AGREE_H
#define STASIS_AGREE_H

#include <mpi.h>

#include "why.h"

struct session;

/* Collective over comm. Returns 0 when every rank's ret was 0, else the
 * explaining rank's error (< 0), its why copied into *w on every rank
 * (w->rank: its rank in comm). The explaining rank is the lowest failing
 * rank that said why, else the lowest failing rank, explained by
 * strerror. */
int why_agree(MPI_Comm comm, const char *step, int ret, struct why *w);
/* The same over the session's private world communicator. */
int stage_agree(struct session *s, const char *step, int ret, struct why *w);

#endif
