/* zeros: memory whose pages turn to zeros and back, the subject of the
 * tests of pages of zeros left out of images (format.h, REGION_ZEROS).
 *
 *   zeros [PAGES [ITERS]]
 *
 * Each rank keeps PAGES pages on the heap and as many in a static array.
 * Every iteration rewrites a third of them: some become all zeros, the
 * others zeros but for one word somewhere in the page (a zero test that
 * looked only at the start of a page would call them zero), so that a
 * checkpoint holds many pages of zeros, some of which held data at the
 * checkpoint before (an incremental image must put zeros over them), and
 * pages of data that held zeros. Each page's old contents are folded into
 * a hash before it is rewritten. An MPI_Allreduce per iteration; rank 0
 * prints, at the end, a hash of every rank's hash and pages:
 *   zeros: pages=<P> iters=<I> hash=<16 hex>
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PG 4096
#define MAX_PAGES 1024

static uint64_t statics[MAX_PAGES * PG / 8]; /* .bss */
/* What every page held before it was rewritten, folded in: a page a
 * restart put back wrong changes it even though it is rewritten later. */
static uint64_t seen;

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x | 1; /* never zero */
}

static void rewrite(uint64_t *mem, int pages, int it, int rank, uint64_t salt)
{
	for (int p = 0; p < pages; p++) {
		uint64_t *page = mem + (size_t)p * (PG / 8);

		if ((p + it) % 3)
			continue;
		for (int w = 0; w < PG / 8; w++)
			seen = (seen ^ page[w]) * 0x100000001b3ull + (uint64_t)w;
		memset(page, 0, PG);
		if ((p * 7 + it) % 5 < 2)
			continue; /* all zeros */
		page[(p * 31 + it) % (PG / 8)] = mix(salt ^ ((uint64_t)rank << 40) ^
						     ((uint64_t)p << 20) ^ (uint64_t)it);
	}
}

static uint64_t fnv(uint64_t h, const void *buf, size_t len)
{
	const unsigned char *b = buf;

	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

int main(int argc, char **argv)
{
	int pages = argc > 1 ? atoi(argv[1]) : 256, iters = argc > 2 ? atoi(argv[2]) : 2000;
	int rank, size;
	uint64_t *heap = NULL, h, *all;
	double x = 0, sum;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (pages < 1 || pages > MAX_PAGES || iters < 1) {
		if (!rank)
			fprintf(stderr, "usage: zeros [PAGES (1..%d) [ITERS]]\n", MAX_PAGES);
		MPI_Finalize();
		return 2;
	}
	if (posix_memalign((void **)&heap, PG, (size_t)pages * PG))
		MPI_Abort(MPI_COMM_WORLD, 2);
	memset(heap, 0, (size_t)pages * PG);
	for (int it = 0; it < iters; it++) {
		rewrite(heap, pages, it, rank, 0x1111);
		rewrite(statics, pages, it, rank, 0x2222);
		x += 1.0 / (it + 1);
		MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		usleep(1000);
	}
	h = fnv(fnv(seen, heap, (size_t)pages * PG), statics, (size_t)pages * PG);
	all = malloc(sizeof(uint64_t) * size);
	MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	if (!rank)
		printf("zeros: pages=%d iters=%d hash=%016llx\n", pages, iters,
		       (unsigned long long)fnv(0xcbf29ce484222325ull, all, sizeof(uint64_t) * size));
	free(all);
	free(heap);
	MPI_Finalize();
	return 0;
}
