#define LOG_PREFIX "agree: "
#include <errno.h>
#include <string.h>

#include "agree.h"
#include "log.h"
#include "session.h"

int why_agree(MPI_Comm comm, const char *step, int ret, struct why *w)
{
	int rank, size, mine, lowest;

	PMPI_Comm_rank(comm, &rank);
	PMPI_Comm_size(comm, &size);
	pr_debug("%s: waiting for the other ranks", step);
	/* A failing rank that knows why explains before one that does not
	 * (a collective step fails on every rank, the cause is on one). */
	mine = !ret ? 2 * size : why_said(w) ? rank : size + rank;
	if (PMPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
		return why_set(w, -EIO, "%s: the ranks could not agree", step);
	if (lowest == 2 * size)
		return 0;
	lowest %= size;
	if (lowest == rank) {
		if (!why_said(w) || !w->err)
			why_set(w, ret, "%s", strerror(ret < 0 ? -ret : EIO));
		w->err = ret;
		w->rank = rank;
	}
	PMPI_Bcast(w, sizeof(*w), MPI_BYTE, lowest, comm);
	return w->err ? w->err : -EIO;
}

int stage_agree(struct session *s, const char *step, int ret, struct why *w)
{
	return why_agree(s->comm, step, ret, w);
}
