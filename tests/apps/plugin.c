/* plugin: a solver that loads libraries of its own with dlopen() after
 * MPI_Init and keeps state in them: libplugstate.so (with libplugdep.so,
 * which it needs) at the start, libplugtwo.so a third of the way through.
 * Both are closed before the answer is printed.
 *
 *   plugin [N [ITERS]]
 *
 * The libraries are looked for beside the executable. Output (rank 0,
 * stdout, at the end): one line hashing the state of every rank; on
 * stderr, when it loads libplugtwo.so.
 */
#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hash.h"

static void *load(const char *name)
{
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	char *slash;
	void *h;

	path[n > 0 ? n : 0] = 0;
	slash = strrchr(path, '/');
	snprintf(slash ? slash + 1 : path, sizeof(path) - (slash ? slash + 1 - path : 0), "%s",
		 name);
	h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "plugin: %s\n", dlerror());
		exit(1);
	}
	return h;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096, iters = argc > 2 ? atoi(argv[2]) : 4000;
	uint64_t (*step)(uint64_t), (*state_hash)(void), h = HASH_START, all;
	double (*add)(double) = NULL, (*total)(void) = NULL, *u, sum, t = 0;
	void *state, *two = NULL;
	int rank, size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	state = load("libplugstate.so");
	step = (uint64_t(*)(uint64_t))dlsym(state, "plugstate_step");
	state_hash = (uint64_t(*)(void))dlsym(state, "plugstate_hash");
	u = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++)
		u[i] = (double)((rank * 3 + i) % 17);

	for (int it = 0; it < iters; it++) {
		uint64_t r = step((uint64_t)it * 7 + rank);

		for (int i = 1; i < n - 1; i++)
			u[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
		u[it % n] += (double)(r % 1000) / 1000.0;
		if (it == iters / 3) {
			two = load("libplugtwo.so");
			if (rank == 0)
				fprintf(stderr, "plugin: loaded libplugtwo.so at step %d\n", it);
			add = (double (*)(double))dlsym(two, "plugtwo_add");
			total = (double (*)(void))dlsym(two, "plugtwo_total");
		}
		if (add)
			u[n / 3] += add(u[(it * 5) % n]) * 1e-9;
		MPI_Allreduce(&u[n / 2], &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		u[n / 2] = sum / size;
	}

	h = hash_mix(h, u, sizeof(double) * n);
	all = state_hash();
	h = hash_mix(h, &all, sizeof(all));
	if (total)
		t = total();
	h = hash_mix(h, &t, sizeof(t));
	dlclose(state);
	if (two)
		dlclose(two);
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("plugin: n=%d iters=%d ranks=%d hash=%016llx\n", n, iters, size,
		       (unsigned long long)all);
	MPI_Finalize();
	return 0;
}
