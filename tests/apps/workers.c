/* workers: a solver whose work is done by threads of its own: two workers
 * compute halves of a grid between barriers with the main thread, which alone
 * calls MPI (MPI_THREAD_FUNNELED); a consumer thread takes the values the
 * main thread produces through a queue guarded by a mutex and two condition
 * variables. Each thread keeps state of its own in __thread variables and a
 * pthread key; all of it feeds the answer, which the main thread collects
 * with pthread_join. The consumer blocks every signal, as the helper
 * threads of many libraries do (Boehm GC's markers), and the mask it reads
 * back feeds the answer. The workers scale their values by a table read
 * from a file through a MAP_PRIVATE mapping (read-only, part of it made
 * writable and changed, one page dropped with MADV_DONTNEED), the file
 * removed at once: a restart cannot read it again. The consumer opens a
 * file of its own and adds every value it takes to one of its records, in
 * place (pread, pwrite): the file, read back at the end, feeds the answer
 * (a restart must see the descriptor a thread opened, and undo what that
 * thread wrote in place after the checkpoint).
 *
 *   workers [N [ITERS]]
 *
 * Output (rank 0, stdout, at the end): one line hashing every rank's state.
 */
#include <mpi.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hash.h"

#define QUEUE 16

#define TABLE 4096 /* doubles: 8 pages */
#define RECORDS 64 /* the consumer's file: doubles */

static int n, iters;
static char acc_path[64];
static double *u, *next, *table;
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
			next[i] = table[i % TABLE] * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
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
	double rec[RECORDS] = {0};
	sigset_t all, now;
	int view[2], fd;
	long taken = 0;

	(void)arg;
	fd = open(acc_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || pwrite(fd, rec, sizeof(rec), 0) != (ssize_t)sizeof(rec)) {
		perror("workers: the consumer's file");
		exit(1);
	}
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_sigmask(SIG_SETMASK, NULL, &now);
	view[0] = sigismember(&now, SIGRTMIN + 3);
	view[1] = sigismember(&now, SIGSEGV);
	r->hash = hash_mix(HASH_START, view, sizeof(view));
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
		/* Read, add, write back: bytes the file had at the checkpoint. */
		off_t at = (off_t)(taken++ % RECORDS) * (off_t)sizeof(double);
		double old;
		if (pread(fd, &old, sizeof(old), at) != (ssize_t)sizeof(old) ||
		    (old += v, pwrite(fd, &old, sizeof(old), at)) != (ssize_t)sizeof(old)) {
			perror("workers: the consumer's record");
			exit(1);
		}
		pthread_mutex_lock(&q.lock);
	}
	pthread_mutex_unlock(&q.lock);
	if (pread(fd, rec, sizeof(rec), 0) != (ssize_t)sizeof(rec)) {
		perror("workers: reading the consumer's file back");
		exit(1);
	}
	r->hash = hash_mix(r->hash, rec, sizeof(rec));
	close(fd);
	unlink(acc_path);
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

/* The table: a file's bytes through a private mapping, changed in memory. */
static double *map_table(int rank)
{
	char path[] = "/tmp/workers-table-XXXXXX";
	int fd = mkstemp(path);
	double *t, v[TABLE];

	if (fd < 0)
		return NULL;
	for (int i = 0; i < TABLE; i++)
		v[i] = 0.5 - (double)((i * 31 + rank) % 17) / 4096.0;
	if (write(fd, v, sizeof(v)) != (ssize_t)sizeof(v)) {
		close(fd);
		unlink(path);
		return NULL;
	}
	t = mmap(NULL, sizeof(v), PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	unlink(path);
	if (t == MAP_FAILED)
		return NULL;
	/* Read-only pages dropped read the file's bytes again. */
	madvise(t, 4096, MADV_DONTNEED);
	mprotect(t + TABLE / 2, sizeof(v) / 2, PROT_READ | PROT_WRITE);
	for (int i = TABLE / 2; i < TABLE; i++)
		t[i] *= 0.99;
	return t;
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
	table = map_table(rank);
	snprintf(acc_path, sizeof(acc_path), "/tmp/workers-acc-%d-%d", (int)getpid(), rank);
	if (!table) {
		perror("workers: the table's file mapping");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
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
