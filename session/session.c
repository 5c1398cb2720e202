#include <mpi.h>

#include <errno.h>
#include <unistd.h>

#include "agree.h"
#include "log.h"
#include "runtime.h"
#include "session.h"

static struct session session;
static bool ready;
/* Kept apart from ready: a feature may be refused before MPI_Init. */
static const char *blocked_by;

struct session *session_get(void)
{
	return ready ? &session : NULL;
}

struct session *session_storage(void)
{
	return &session;
}

void session_publish(bool now_ready)
{
	ready = now_ready;
}

void session_unsupported(const char *feature)
{
	if (blocked_by)
		return;
	blocked_by = feature;
	session.blocked_by = feature;
	if (stasis_active && getpid() == stasis_pid)
		pr_warn("%s: the program uses state stasis cannot restore yet; checkpoints are "
			"skipped from now on, the run goes on",
			feature);
}

void session_report(struct session *s, bool mine, const char *line)
{
	struct why w = WHY_INIT;

	if (mine)
		why_set(&w, -EIO, "%s", line);
	if (why_agree(s->comm, "report", mine ? -EIO : 0, &w) && w.rank == s->rank)
		pr_err("%s", w.msg);
}
