/* persist: a ring exchange built on persistent requests, a checkpoint test
 * subject for virtual handles and their replay. The requests are made once
 * (MPI_Send_init, MPI_Recv_init, MPI_Bsend_init with an attached buffer) and
 * started every step (MPI_Startall / MPI_Start); between steps they are
 * inactive, and a restart must give them back under the same handles. One
 * pair of requests is freed and made again halfway.
 *
 *   persist [N [ITERS]] [--early]
 *
 * --early starts the next step's receives as soon as this step's complete:
 * persistent requests are then active at every instant.
 *
 * Generalized requests too (MPI_Grequest_start): one is started every
 * step for a job in the program's memory, completed the step after
 * (MPI_Grequest_complete) and waited for the step after that, so that at
 * every step's MPI_Allreduce one is pending and one complete but not yet
 * waited for; its query function gives the job's step as the status's
 * element count, its free function counts frees and notes the job's step
 * in a list it allocates (malloc inside MPI_Wait, by the program's code:
 * the list must be the program's memory, saved and restored), which the
 * end hashes.
 *
 * Output (rank 0, stdout, at the end): one line hashing the field.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

static uint64_t hash = HASH_START;

static void mix(const void *buf, size_t len)
{
	hash = hash_mix(hash, buf, len);
}

struct job {
	int step, freed;
	double value;
};

static int job_query(void *extra, MPI_Status *st)
{
	struct job *j = extra;

	MPI_Status_set_elements(st, MPI_INT, j->step);
	MPI_Status_set_cancelled(st, 0);
	st->MPI_SOURCE = MPI_UNDEFINED;
	st->MPI_TAG = MPI_UNDEFINED;
	return MPI_SUCCESS;
}

/* Steps of the jobs freed, newest first. */
struct freed_step {
	int step;
	struct freed_step *next;
};

static struct freed_step *freed_steps;

static int job_free(void *extra)
{
	struct freed_step *f = malloc(sizeof(*f));

	((struct job *)extra)->freed++;
	if (!f)
		return MPI_ERR_NO_MEM;
	f->step = ((struct job *)extra)->step;
	f->next = freed_steps;
	freed_steps = f;
	return MPI_SUCCESS;
}

static int job_cancel(void *extra, int complete)
{
	(void)extra, (void)complete;
	return MPI_SUCCESS;
}

/* Wait for the generalized request of job j: its step and value go into
 * the hash. */
static void job_wait(MPI_Request *r, struct job *j)
{
	MPI_Status st;
	int count = -1;

	MPI_Wait(r, &st);
	MPI_Get_elements(&st, MPI_INT, &count);
	if (count != j->step || *r != MPI_REQUEST_NULL) {
		fprintf(stderr, "persist: generalized request of step %d: count %d\n", j->step,
			count);
		exit(1);
	}
	mix(&count, sizeof(count));
	mix(&j->value, sizeof(j->value));
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 8192, iters = argc > 2 ? atoi(argv[2]) : 2000;
	int early = argc > 3 && !strcmp(argv[3], "--early");
	int rank, size, left, right, bsize;
	double *u, *next_u, *from_left, *from_right, token = 0, got = 0;
	MPI_Request ring[4], tok[2], greq[3];
	static struct job jobs[3];
	int freed = 0;
	void *bbuf;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	left = (rank + size - 1) % size;
	right = (rank + 1) % size;

	u = malloc(sizeof(double) * n);
	next_u = malloc(sizeof(double) * n);
	from_left = malloc(sizeof(double) * n);
	from_right = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++)
		u[i] = (double)((rank * 131 + i) % 101) / 101.0;

	/* The buffer of buffered sends: application memory, attached once. */
	MPI_Pack_size(1, MPI_DOUBLE, MPI_COMM_WORLD, &bsize);
	bsize = 4 * (bsize + MPI_BSEND_OVERHEAD);
	bbuf = malloc(bsize);
	MPI_Buffer_attach(bbuf, bsize);

	MPI_Send_init(u, n, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &ring[0]);
	MPI_Send_init(u, n, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &ring[1]);
	MPI_Recv_init(from_left, n, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &ring[2]);
	MPI_Recv_init(from_right, n, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &ring[3]);
	MPI_Bsend_init(&token, 1, MPI_DOUBLE, right, 3, MPI_COMM_WORLD, &tok[0]);
	MPI_Recv_init(&got, 1, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &tok[1]);

	if (early)
		MPI_Startall(2, &ring[2]);
	for (int it = 0; it < iters; it++) {
		double sum = 0;

		if (!early)
			MPI_Startall(2, &ring[2]);
		MPI_Startall(2, &ring[0]);
		MPI_Waitall(4, ring, MPI_STATUSES_IGNORE);
		/* The next step's receives go out now: the data is in from_left
		 * and from_right only until the update below reads it, so the
		 * update reads copies. */
		for (int i = 0; i < n; i++)
			next_u[i] = 0.5 * u[i] + 0.25 * (from_left[i] + from_right[(i + 1) % n]);
		if (early && it + 1 < iters)
			MPI_Startall(2, &ring[2]);
		memcpy(u, next_u, sizeof(double) * n);

		token = u[it % n] + it;
		MPI_Start(&tok[1]);
		MPI_Start(&tok[0]);
		MPI_Wait(&tok[0], MPI_STATUS_IGNORE);
		MPI_Wait(&tok[1], MPI_STATUS_IGNORE);
		mix(&got, sizeof(got));

		if (it == iters / 2) {
			/* Requests freed and made again: the new ones are restored. */
			MPI_Request_free(&ring[0]);
			MPI_Send_init(u, n, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &ring[0]);
			if (!early) {
				MPI_Request_free(&ring[2]);
				MPI_Recv_init(from_left, n, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
					      &ring[2]);
			}
		}
		for (int i = 0; i < n; i++)
			sum += u[i];
		jobs[it % 3].step = it;
		MPI_Grequest_start(job_query, job_free, job_cancel, &jobs[it % 3], &greq[it % 3]);
		if (it >= 1) {
			jobs[(it - 1) % 3].value = sum;
			MPI_Grequest_complete(greq[(it - 1) % 3]);
		}
		if (it >= 2)
			job_wait(&greq[(it - 2) % 3], &jobs[(it - 2) % 3]);
		MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		mix(&sum, sizeof(sum));
	}
	/* The last two: the one pending completed, both waited for. */
	MPI_Grequest_complete(greq[(iters - 1) % 3]);
	for (int it = iters - 2; it < iters; it++)
		if (it >= 0)
			job_wait(&greq[it % 3], &jobs[it % 3]);
	for (int i = 0; i < 3; i++)
		freed += jobs[i].freed;
	if (freed != iters) {
		fprintf(stderr, "persist: %d generalized requests freed of %d\n", freed, iters);
		return 1;
	}
	while (freed_steps) {
		struct freed_step *f = freed_steps;

		mix(&f->step, sizeof(f->step));
		freed_steps = f->next;
		free(f);
	}

	for (int i = 0; i < 4; i++)
		MPI_Request_free(&ring[i]);
	free(next_u);
	MPI_Request_free(&tok[0]);
	MPI_Request_free(&tok[1]);
	MPI_Buffer_detach(&bbuf, &bsize);
	free(bbuf);
	if (rank == 0)
		printf("persist: n=%d iters=%d ranks=%d hash=%016llx\n", n, iters, size,
		       (unsigned long long)hash);
	MPI_Finalize();
	return 0;
}
