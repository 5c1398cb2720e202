/* What a rank started by srun needs that mpirun gives its ranks: Open MPI
 * reached through PMIx, and ranks that yield when there are more of them
 * than cores (SLURM.md, gotchas 2 and the --mpi table). */
#define LOG_PREFIX ""
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "slurm.h"

/* A task of a Slurm job step: srun started it, not mpirun inside a job. */
static bool srun_task(void)
{
	return getenv("SLURM_STEP_ID") && getenv("SLURM_PROCID") && !getenv("OMPI_COMM_WORLD_RANK");
}

/* Tasks of the step on this node, from SLURM_STEP_TASKS_PER_NODE ("4",
 * "2(x3),1": node i's count) and SLURM_NODEID; 0 if unknown. */
static long tasks_here(void)
{
	const char *s = getenv("SLURM_STEP_TASKS_PER_NODE"), *id = getenv("SLURM_NODEID");
	long node = id ? strtol(id, NULL, 10) : 0, n, times;
	char *end;

	while (s && *s) {
		n = strtol(s, &end, 10);
		if (end == s)
			return 0;
		times = 1;
		if (*end == '(' && end[1] == 'x')
			times = strtol(end + 2, &end, 10), end += *end == ')';
		if (node < times)
			return n;
		node -= times;
		s = *end == ',' ? end + 1 : end;
	}
	return 0;
}

/* Before the real MPI_Init (where Open MPI reads its MCA variables):
 * - mpirun --oversubscribe makes Open MPI's ranks yield when idle; under
 *   srun nothing does, and ranks over cores busy-poll one another off the
 *   processors (a 1.5 s test took 91 s). The user's own setting wins.
 * - Open MPI under srun needs --mpi=pmix: with pmi2 or none (Debian's
 *   MpiDefault) its MPI_Init fails with an OPAL ERROR that names neither.
 *   Say so in one line (from task 0) and end the task as MPI_Init would. */
void slurm_before_init(void)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	const char *type = getenv("SLURM_MPI_TYPE"), *procid = getenv("SLURM_PROCID");

	if (!srun_task())
		return;
	if (cores > 0 && tasks_here() > cores)
		setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
#ifdef OPEN_MPI
	if (getenv("PMIX_RANK"))
		return;
	if (procid && !strcmp(procid, "0"))
		pr_err("srun started this Open MPI program without PMIx (--mpi=%s): run it with "
		       "srun --mpi=pmix (or set MpiDefault=pmix in slurm.conf)",
		       type ? type : "none");
	fflush(stderr);
	_exit(1);
#endif
}
