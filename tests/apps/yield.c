/* yield: what Open MPI made of mpi_yield_when_idle in each rank, read back
 * through the MPI tool interface (the control variable, not the
 * environment: what MPI_Init took). tests/cr/slurm.sh yield runs it under
 * srun with more ranks than cores, and with fewer.
 *
 * Usage: yield
 * Output (rank 0, stdout): one line per rank, in rank order,
 *   rank <R>: mpi_yield_when_idle=<0|1>
 * or "rank <R>: mpi_yield_when_idle=unknown" where the variable is not
 * found (not Open MPI). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The variable's value, or -1 when it cannot be read. */
static int yield_when_idle(void)
{
	int provided, index, count, value = -1;
	int64_t buf[4] = {0}; /* wide enough for any scalar the variable has */
	MPI_T_cvar_handle handle;

	if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
		return -1;
	if (MPI_T_cvar_get_index("mpi_yield_when_idle", &index) == MPI_SUCCESS &&
	    MPI_T_cvar_handle_alloc(index, NULL, &handle, &count) == MPI_SUCCESS) {
		if (count == 1 && MPI_T_cvar_read(handle, buf) == MPI_SUCCESS)
			value = memcmp(buf, &(int64_t){0}, sizeof(buf[0])) != 0;
		MPI_T_cvar_handle_free(&handle);
	}
	MPI_T_finalize();
	return value;
}

int main(int argc, char **argv)
{
	int rank, size, mine;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	mine = yield_when_idle();
	int all[size];
	MPI_Gather(&mine, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
	for (int r = 0; rank == 0 && r < size; r++) {
		if (all[r] < 0)
			printf("rank %d: mpi_yield_when_idle=unknown\n", r);
		else
			printf("rank %d: mpi_yield_when_idle=%d\n", r, all[r]);
	}
	MPI_Finalize();
	return 0;
}
