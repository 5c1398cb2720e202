/* phases: memory that is rewritten all over, then goes quiet: dirty-page
 * tracking must save the first phase's memory whole, without write faults,
 * and write-protect it again once it is quiet (memory/track_policy.h).
 *
 * An ordinary MPI program with two heap arrays of MIB MiB per rank: BUSY
 * and STILL. STILL is filled once. In phase 1 every iteration rewrites all
 * of BUSY; in phase 2 every iteration writes one page of BUSY. Every
 * iteration reads all of BUSY and a word per page of STILL, and ends with
 * an MPI_Allreduce of their sum on MPI_COMM_WORLD.
 *
 *   phases [MIB [ITERS]] [--switch FILE] [--all]
 *
 * Phase 2 starts at iteration ITERS / 2; with --switch, instead, at the
 * first iteration that finds FILE, and rank 0 then says on stderr
 *   phases: quiet from iteration <i>
 * (for tests that watch what tracking decides; such a run is not
 * deterministic). With --all, phase 1 rewrites STILL too: all memory
 * changes between any two checkpoints. Output (rank 0, stdout):
 *   phases: mib=<MIB> iters=<ITERS> checksum=<16 hex>
 * where the checksum hashes both arrays and every reduced sum. */
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hash.h"

int main(int argc, char **argv)
{
	long mib = 32, iters = 2000, pos = 0, quiet_from = -1;
	const char *sw = NULL;
	int all = 0;
	size_t words, page_words = 4096 / sizeof(uint64_t);
	uint64_t *busy, *still, sum, total, h = HASH_START;
	int rank;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--switch") && i + 1 < argc)
			sw = argv[++i];
		else if (!strcmp(argv[i], "--all"))
			all = 1;
		else if (pos++ == 0)
			mib = atol(argv[i]);
		else
			iters = atol(argv[i]);
	}
	words = (size_t)mib << 17;
	busy = malloc(words * sizeof(*busy));
	still = malloc(words * sizeof(*still));
	if (!busy || !still || mib < 1 || iters < 2) {
		fprintf(stderr, "phases: usage: phases [MIB [ITERS]] [--switch FILE] [--all]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (size_t i = 0; i < words; i++)
		busy[i] = still[i] = i * 2654435761u + (uint64_t)rank;
	for (long it = 0; it < iters; it++) {
		int quiet = quiet_from >= 0 ? 1 : 0;

		if (!quiet) {
			quiet = sw ? access(sw, F_OK) == 0 : it >= iters / 2;
			/* Every rank switches at the same iteration. */
			MPI_Allreduce(MPI_IN_PLACE, &quiet, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
			if (quiet) {
				quiet_from = it;
				if (rank == 0 && sw)
					fprintf(stderr, "phases: quiet from iteration %ld\n", it);
			}
		}
		if (!quiet) {
			for (size_t i = 0; i < words; i++)
				busy[i] = busy[i] * 6364136223846793005u + (uint64_t)it;
			for (size_t i = 0; all && i < words; i++)
				still[i] += (uint64_t)it;
		} else {
			size_t p = (size_t)it * 7919 % (words / page_words);

			busy[p * page_words + it % page_words] += (uint64_t)it;
		}
		/* Read all of BUSY in both phases: they take about as long. */
		sum = 0;
		for (size_t i = 0; i < words; i++)
			sum += busy[i] ^ (i % page_words ? 0 : still[i + it % page_words]);
		MPI_Allreduce(&sum, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
		h = hash_mix(h, &total, sizeof(total));
	}
	h = hash_mix(h, busy, words * sizeof(*busy));
	h = hash_mix(h, still, words * sizeof(*still));
	MPI_Allreduce(MPI_IN_PLACE, &h, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
	if (rank == 0)
		printf("phases: mib=%ld iters=%ld checksum=%016" PRIx64 "\n", mib, iters, h);
	free(busy);
	free(still);
	MPI_Finalize();
	return 0;
}
