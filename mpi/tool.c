/* MPI_T_init_thread and MPI_T_finalize, counted: see tool.h. MPI_T may be
 * initialized before MPI_Init (a restart runs that part of the program
 * again) or after; a restart makes the count the checkpoint's. */
#include <errno.h>
#include <mpi.h>

#include "export.h"
#include "runtime.h"
#include "tool.h"
#include "tool_vars.h"

static int opened;	      /* initializations not finalized */
static int required = MPI_THREAD_SINGLE; /* the last one's level */

EXPORT int MPI_T_init_thread(int req, int *provided)
{
	int ret;

	/* Inside MPI: what it allocates and opens is its own (runtime.h). */
	stasis_depth++;
	ret = PMPI_T_init_thread(req, provided);
	stasis_depth--;
	if (ret == MPI_SUCCESS) {
		__atomic_add_fetch(&opened, 1, __ATOMIC_SEQ_CST);
		required = req;
	}
	return ret;
}

EXPORT int MPI_T_finalize(void)
{
	int ret;

	stasis_depth++;
	ret = PMPI_T_finalize();
	/* The last one ends the interface's objects. */
	if (ret == MPI_SUCCESS && __atomic_sub_fetch(&opened, 1, __ATOMIC_SEQ_CST) == 0)
		tool_vars_forget();
	stasis_depth--;
	return ret;
}

void tool_save(struct rec_builder *b)
{
	recbuf_int(b, __atomic_load_n(&opened, __ATOMIC_SEQ_CST));
	recbuf_int(b, required);
	tool_vars_save(b);
}

int tool_replay(struct rec_reader *r, struct why *why)
{
	int n = recread_int(r), req = recread_int(r), provided;

	if (r->bad || n < 0)
		return why_set(why, -EBADMSG, "the MPI state in the image is damaged");
	/* Its objects go first: the interface may end below. */
	tool_vars_discard();
	/* What the program did before MPI_Init ran again in this process
	 * (a restart starts it anew up to there): the difference is made. */
	while (__atomic_load_n(&opened, __ATOMIC_SEQ_CST) < n) {
		if (PMPI_T_init_thread(req, &provided) != MPI_SUCCESS)
			return why_set(why, -EIO, "MPI_T_init_thread failed when made again");
		__atomic_add_fetch(&opened, 1, __ATOMIC_SEQ_CST);
	}
	while (__atomic_load_n(&opened, __ATOMIC_SEQ_CST) > n) {
		if (PMPI_T_finalize() != MPI_SUCCESS)
			return why_set(why, -EIO, "MPI_T_finalize failed when made again");
		__atomic_sub_fetch(&opened, 1, __ATOMIC_SEQ_CST);
	}
	required = req;
	return tool_vars_read(r, why);
}
