/* tls: a solver whose state lives partly in thread-local storage: __thread
 * variables of the executable and of an application library (libtlsdep.so),
 * and pthread keys with values, some made before MPI_Init, some after, one
 * deleted (a hole in the numbering), one made halfway through the run, and
 * one made by a pthread_once routine that ends by tail-calling
 * pthread_key_create (as HDF5's thread-safety set-up does: the key's maker
 * returns into libc). Every one of them feeds the answer.
 *
 *   tls [N [ITERS]]
 *
 * Output (rank 0, stdout, at the end): one line hashing the state of every
 * rank (MPI_Reduce).
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"
#include "tlsdep.h"

static __thread uint64_t t_count = 7;
static __thread double t_acc[64];

static pthread_key_t k_once;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* A jmp to pthread_key_create, not a call (checked with objdump). */
__attribute__((noinline, optimize("O2", "optimize-sibling-calls"))) static void make_once_key(void)
{
	pthread_key_create(&k_once, NULL);
}

struct keyed {
	uint64_t v[8];
};

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096, iters = argc > 2 ? atoi(argv[2]) : 4000;
	pthread_key_t k_before, k_hole, k_after, k_late = 0;
	int rank, size, have_late = 0;
	struct keyed *kv;
	uint64_t h = HASH_START, all;
	double *u, sum;

	/* Made before MPI_Init: a restart's own start makes it again. */
	pthread_key_create(&k_before, free);
	kv = calloc(1, sizeof(*kv));
	pthread_setspecific(k_before, kv);

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	pthread_key_create(&k_hole, NULL);
	pthread_key_create(&k_after, NULL);
	pthread_key_delete(k_hole);
	pthread_once(&once, make_once_key);
	pthread_setspecific(k_once, (void *)(uintptr_t)(rank + 1));
	u = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++)
		u[i] = (double)((rank * 5 + i) % 11);

	for (int it = 0; it < iters; it++) {
		uint64_t r = tlsdep_step(t_count + (uint64_t)it);
		uintptr_t after = (uintptr_t)pthread_getspecific(k_after);

		for (int i = 1; i < n - 1; i++)
			u[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
		u[it % n] += (double)(r % 1000) / 1000.0;
		t_acc[it % 64] += u[(it * 7) % n];
		t_count = t_count * 3 + (r & 0xff);
		kv->v[it % 8] ^= r + after;
		pthread_setspecific(k_after, (void *)(after * 31 + (uintptr_t)(r >> 3)));
		pthread_setspecific(k_once,
				    (void *)((uintptr_t)pthread_getspecific(k_once) * 7 + (uintptr_t)it));
		if (it == iters / 3) {
			pthread_key_create(&k_late, NULL);
			have_late = 1;
		}
		if (have_late)
			pthread_setspecific(k_late,
					    (void *)((uintptr_t)pthread_getspecific(k_late) + it));
		MPI_Allreduce(&u[n / 2], &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		u[n / 2] = sum / size;
	}

	h = hash_mix(h, u, sizeof(double) * n);
	h = hash_mix(h, t_acc, sizeof(t_acc));
	h = hash_mix(h, &t_count, sizeof(t_count));
	all = tlsdep_hash();
	h = hash_mix(h, &all, sizeof(all));
	h = hash_mix(h, pthread_getspecific(k_before), sizeof(struct keyed));
	all = (uintptr_t)pthread_getspecific(k_after) + (uintptr_t)pthread_getspecific(k_late) +
	      (uintptr_t)pthread_getspecific(k_once);
	h = hash_mix(h, &all, sizeof(all));
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("tls: n=%d iters=%d ranks=%d hash=%016llx\n", n, iters, size,
		       (unsigned long long)all);
	MPI_Finalize();
	return 0;
}
