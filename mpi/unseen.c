/* MPI initialised behind stasis's back (unseen.h). Checked where a program
 * ends: its MPI_Finalize (stasis's, when that one is seen) and the exit
 * of the process (a destructor), for a program none of whose calls stasis
 * sees. MPI_Initialized stays true after MPI_Finalize, and may be called
 * at any time. */
#define LOG_PREFIX ""
#include <mpi.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "log.h"
#include "unseen.h"

static bool seen, said;

void unseen_init_seen(void)
{
	seen = true;
}

/* Rank 0 of the job, from the launcher's environment (the same variables
 * that make this process a rank, preload/load.c): MPI may be finalised. */
static bool rank_zero(void)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);

		if (v)
			return !strcmp(v, "0");
	}
	return false;
}

void unseen_check(void)
{
	const char *restart = getenv("STASIS_RESTART");
	int flag = 0;

	if (!stasis_active || seen || said || PMPI_Initialized(&flag) != MPI_SUCCESS || !flag)
		return;
	said = true;
	if (!rank_zero())
		return;
	pr_warn("the program initialised MPI without passing through stasis's MPI_Init (a "
		"binding stasis does not wrap, PMPI_Init called directly, or another MPI library "
		"than the one stasis was built for): %s",
		restart && !strcmp(restart, "1")
			? "nothing was restored, it ran from its start, unprotected"
			: "it ran unprotected, no checkpoint was taken");
}

__attribute__((destructor)) static void unseen_at_exit(void)
{
	unseen_check();
}
