/* master: a master/worker code with no collective in its main loop. Rank 0
 * hands out tasks and collects results of varying length; workers block in
 * MPI_Recv from the master with MPI_ANY_TAG; the master learns who answered
 * and how much with MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG) and MPI_Get_count.
 * A checkpoint must come while workers wait and results are on their way.
 *
 *   master [N [TASKS]]
 *
 * Each task t asks for (t % 97) + 1 values of a small series; the master
 * folds every result, in task order, into one hash.
 *
 * Output (rank 0, stdout, at the end): one line with the hash.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"

#define TAG_TASK 1
#define TAG_STOP 2

/* A worker's answer to task t: len values, a little work each. */
static int work(int t, int n, double *out)
{
	int len = t % 97 + 1;

	for (int i = 0; i < len; i++) {
		double x = t + i;

		for (int k = 0; k < n; k++)
			x = x * 0.999 + 0.5 / (k + 1);
		out[i] = x;
	}
	return len;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2000, tasks = argc > 2 ? atoi(argv[2]) : 20000;
	int rank, size;
	double buf[128];

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		fprintf(stderr, "master: needs 2 ranks or more\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (rank == 0) {
		uint64_t h = HASH_START, *hs = calloc(tasks, sizeof(*hs));
		int *owner = malloc(sizeof(int) * size), next = 0, done = 0;

		/* One task to each worker to begin with. */
		for (int w = 1; w < size; w++) {
			int t = next < tasks ? next++ : -1;

			owner[w] = t;
			MPI_Send(&t, 1, MPI_INT, w, t < 0 ? TAG_STOP : TAG_TASK, MPI_COMM_WORLD);
		}
		while (done < tasks) {
			MPI_Status st;
			int count, w, t;

			MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_DOUBLE, &count);
			w = st.MPI_SOURCE;
			t = owner[w];
			if (st.MPI_TAG != t % 30000 || count != t % 97 + 1) {
				fprintf(stderr,
					"master: worker %d answered tag %d with %d values for task "
					"%d\n",
					w, st.MPI_TAG, count, t);
				MPI_Abort(MPI_COMM_WORLD, 1);
			}
			MPI_Recv(buf, count, MPI_DOUBLE, w, st.MPI_TAG, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			hs[t] = hash_mix(HASH_START, buf, sizeof(double) * count);
			done++;
			t = next < tasks ? next++ : -1;
			owner[w] = t;
			MPI_Send(&t, 1, MPI_INT, w, t < 0 ? TAG_STOP : TAG_TASK, MPI_COMM_WORLD);
		}
		for (int t = 0; t < tasks; t++)
			h = hash_mix(h, &hs[t], sizeof(hs[t]));
		printf("master: n=%d tasks=%d ranks=%d hash=%016llx\n", n, tasks, size,
		       (unsigned long long)h);
		free(hs);
		free(owner);
	} else {
		for (;;) {
			MPI_Status st;
			int t, len;

			MPI_Recv(&t, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
			if (st.MPI_TAG == TAG_STOP)
				break;
			len = work(t, n, buf);
			MPI_Send(buf, len, MPI_DOUBLE, 0, t % 30000, MPI_COMM_WORLD);
		}
	}
	MPI_Finalize();
	return 0;
}
