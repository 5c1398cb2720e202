/* workers: a solver whose work is done by threads of its own: two workers
 * compute halves of a grid between barriers with the main thread, which alone
 * calls MPI (MPI_THREAD_FUNNELED); a consumer thread takes the values the
 * main thread produces through a queue guarded by a mutex and two condition
 * variables. Each thread keeps state of its own in __thread variables and a
 * pthread key; all of it feeds the answer, which the main thread collects
 * with pthread_join.
 *
 *   workers [N [ITERS]]
 *
 * Output (rank 0, stdout, at the end): one line hashing every rank's state.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

#define QUEUE 16

static int n, iters;
static double *u, *next;
static pthread_barrier_t start_step, end_step;
static pthread_key_t key;

static __thread uint64_t t_steps;
static __thread double t_sum;

static struct {
	pthread_mutex_t lock;
	pthread_cond_t not_empty, not_full;
	double items[QUEUE];
	int head, count;
	int done;
} q = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .not_empty = PTHREAD_COND_INITIALIZER,
       .not_full = PTHREAD_COND_INITIALIZER};

struct result {
	uint64_t hash;
	double sum;
};

static void *worker(void *arg)
{
	int half = (int)(intptr_t)arg, lo = half ? n / 2 : 1, hi = half ? n - 1 : n / 2;
	struct result *r = calloc(1, sizeof(*r));
	uint64_t *mine = calloc(1, sizeof(*mine));

	pthread_setspecific(key, mine);
	for (int it = 0; it < iters; it++) {
		pthread_barrier_wait(&start_step);
		for (int i = lo; i < hi; i++)
			next[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
		t_steps++;
		t_sum += next[lo + it % (hi - lo)];
		*(uint64_t *)pthread_getspecific(key) ^= t_steps * 2654435761u;
		pthread_barrier_wait(&end_step);
	}
	r->hash = hash_mix(HASH_START, &t_steps, sizeof(t_steps));
	r->hash = hash_mix(r->hash, mine, sizeof(*mine));
	r->sum = t_sum;
	return r;
}

static void *consumer(void *arg)
{
	struct result *r = calloc(1, sizeof(*r));

	(void)arg;
	r->hash = HASH_START;
	pthread_mutex_lock(&q.lock);
	for (;;) {
		while (!q.count && !q.done)
			pthread_cond_wait(&q.not_empty, &q.lock);
		if (!q.count)
			break;
		double v = q.items[q.head];
		q.head = (q.head + 1) % QUEUE;
		q.count--;
		pthread_cond_signal(&q.not_full);
		pthread_mutex_unlock(&q.lock);
		r->hash = hash_mix(r->hash, &v, sizeof(v));
		r->sum += v;
		pthread_mutex_lock(&q.lock);
	}
	pthread_mutex_unlock(&q.lock);
	return r;
}

static void produce(double v)
{
	pthread_mutex_lock(&q.lock);
	while (q.count == QUEUE)
		pthread_cond_wait(&q.not_full, &q.lock);
	q.items[(q.head + q.count) % QUEUE] = v;
	q.count++;
	pthread_cond_signal(&q.not_empty);
	pthread_mutex_unlock(&q.lock);
}

int main(int argc, char **argv)
{
	int rank, size, provided;
	pthread_t w[2], c;
	struct result *r;
	uint64_t h = HASH_START, all;
	double sum;

	n = argc > 1 ? atoi(argv[1]) : 4096;
	iters = argc > 2 ? atoi(argv[2]) : 4000;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	u = malloc(sizeof(double) * n);
	next = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++)
		u[i] = next[i] = (double)((rank * 7 + i) % 13);
	pthread_key_create(&key, NULL);
	pthread_barrier_init(&start_step, NULL, 3);
	pthread_barrier_init(&end_step, NULL, 3);
	for (int i = 0; i < 2; i++)
		pthread_create(&w[i], NULL, worker, (void *)(intptr_t)i);
	pthread_create(&c, NULL, consumer, NULL);

	for (int it = 0; it < iters; it++) {
		double *t;

		pthread_barrier_wait(&start_step);
		pthread_barrier_wait(&end_step);
		t = u;
		u = next;
		next = t;
		MPI_Allreduce(&u[n / 2], &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		u[n / 2] = sum / size;
		produce(sum);
	}
	pthread_mutex_lock(&q.lock);
	q.done = 1;
	pthread_cond_signal(&q.not_empty);
	pthread_mutex_unlock(&q.lock);

	h = hash_mix(h, u, sizeof(double) * n);
	for (int i = 0; i < 2; i++) {
		pthread_join(w[i], (void **)&r);
		h = hash_mix(h, r, sizeof(*r));
		free(r);
	}
	pthread_join(c, (void **)&r);
	h = hash_mix(h, r, sizeof(*r));
	free(r);
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("workers: n=%d iters=%d ranks=%d hash=%016llx\n", n, iters, size,
		       (unsigned long long)all);
	MPI_Finalize();
	return 0;
}
