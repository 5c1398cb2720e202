/* protected_io: a test subject whose memory is written by the kernel and by
 * other processes rather than by its own stores (DESIGN.md section 4: with
 * the mprotect backend such writes to a write-protected page fail with
 * EFAULT instead of faulting, so stasis must unprotect them first).
 *
 * It is an ordinary MPI program that knows nothing of stasis. Every
 * iteration each rank
 *   - receives from both ring neighbours with MPI_Irecv (into a static array
 *     and a heap buffer) and with MPI_Recv (into a heap buffer and a static
 *     array); messages are large enough for Open MPI's shared-memory
 *     single-copy path (CMA: the sender's process_vm_writev writes here);
 *   - gathers words of every rank with the v-collectives (MPI_Allgatherv
 *     into a static array, MPI_Alltoallv into a heap buffer, MPI_Gatherv
 *     to rank 0, MPI_Reduce_scatter), whose receive sizes come from count
 *     and displacement arrays, with gaps between the blocks;
 *   - read()s two slices of a file it wrote at start, one into a heap buffer
 *     and one into a static array, at unaligned addresses;
 *   - checks every received word against what the sender must have sent
 *     (a failed or short read, or a wrong word, aborts the job: an EFAULT
 *     must not go unnoticed), and folds everything into its state;
 *   - folds in words of a static lookup table filled once at start;
 *   - ends with an MPI_Allreduce on MPI_COMM_WORLD.
 * The receive buffers are never written by the program itself, so after
 * every checkpoint they are clean, write-protected pages again.
 *
 *   protected_io [N [ITERS]]      N 64-bit words per message (64..65536)
 *
 * The file is $TMPDIR/protected_io.<rank> (or /tmp): the same path in a
 * restarted job, which no longer has the descriptor (it opens the file
 * anew every iteration). Removed at the end.
 *
 * Output (rank 0, stdout, only at the end):
 *   protected_io: n=<N> iters=<ITERS> checksum=<16 hex>
 */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXN 65536
#define FILE_WORDS (4 * MAXN)

/* Static receive targets (.bss). One spare word so that the data can start
 * at an address that is not page aligned. */
static uint64_t s_irecv[MAXN + 1], s_recv[MAXN + 1], s_read[MAXN + 1];
/* Static target of MPI_Allgatherv: up to 8 ranks' blocks with gaps. */
#define MAXV 8
static uint64_t s_allgv[MAXV * (MAXN + 64)];
/* A lookup table filled once at start and only read afterwards: its pages
 * stay clean through every later checkpoint, yet every image must hold them
 * (a full image above all). */
#define LUT_WORDS 32768
static uint64_t lut[LUT_WORDS];
static char path[4096];
static int rank, size;

static void die(const char *what)
{
	fprintf(stderr, "protected_io[%d]: %s\n", rank, what);
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* Word i of what rank r sends with tag t in iteration it. */
static uint64_t word(long it, int r, int t, long i)
{
	return mix(((uint64_t)it << 40) ^ ((uint64_t)r << 32) ^ ((uint64_t)t << 28) ^ (uint64_t)i);
}

/* Word i of rank r's file. */
static uint64_t file_word(int r, long i)
{
	return mix(0x5eed0000ULL + ((uint64_t)r << 32) + (uint64_t)i);
}

static void write_file(void)
{
	uint64_t *buf = malloc(FILE_WORDS * sizeof(uint64_t));
	int fd;

	if (!buf)
		die("out of memory");
	for (long i = 0; i < FILE_WORDS; i++)
		buf[i] = file_word(rank, i);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, buf, FILE_WORDS * sizeof(uint64_t)) != FILE_WORDS * sizeof(uint64_t) ||
	    close(fd))
		die("cannot write the data file");
	free(buf);
}

/* Read n words at word offset off of the file into dst with read(). */
static void read_slice(uint64_t *dst, long off, long n)
{
	size_t want = n * sizeof(uint64_t), got = 0;
	ssize_t r;
	int fd = open(path, O_RDONLY);
	char msg[128];

	if (fd < 0 || lseek(fd, off * (off_t)sizeof(uint64_t), SEEK_SET) < 0)
		die("cannot open the data file");
	while (got < want) {
		r = read(fd, (char *)dst + got, want - got);
		if (r <= 0) {
			snprintf(msg, sizeof(msg), "read() returned %zd (%s) after %zu of %zu bytes", r,
				 r < 0 ? strerror(errno) : "end of file", got, want);
			die(msg);
		}
		got += r;
	}
	close(fd);
	for (long i = 0; i < n; i++)
		if (dst[i] != file_word(rank, off + i))
			die("read() delivered wrong data");
}

static void check(const uint64_t *buf, long n, long it, int from, int tag)
{
	char msg[128];

	for (long i = 0; i < n; i++)
		if (buf[i] != word(it, from, tag, i)) {
			snprintf(msg, sizeof(msg), "iteration %ld: word %ld from rank %d tag %d is wrong",
				 it, i, from, tag);
			die(msg);
		}
}

/* The v-collectives of one iteration: rank r contributes n - 8 * r words
 * (block r of tag 4, 5, 6, 7), placed with a gap of 64 words between
 * blocks. Every received word is checked; returns their fold. */
static uint64_t vcollectives(long it, long n, uint64_t *h_alltoallv, uint64_t *h_gatherv,
			     uint64_t *h_rscatter, uint64_t *vsend)
{
	int counts[MAXV], displs[MAXV], scounts[MAXV], sdispls[MAXV];
	long mine = n - 8 * rank, gap = 64, at = 0;
	uint64_t fold = 0, ranks = 0;

	for (int r = 0, next = 0; r < size; r++) {
		counts[r] = (int)(n - 8 * r);
		displs[r] = next;
		next += counts[r] + gap;
	}
	/* Allgatherv: everyone gets every rank's block of tag 4. */
	for (long i = 0; i < mine; i++)
		vsend[i] = word(it, rank, 4, i);
	MPI_Allgatherv(vsend, (int)mine, MPI_UINT64_T, s_allgv, counts, displs, MPI_UINT64_T,
		       MPI_COMM_WORLD);
	for (int r = 0; r < size; r++) {
		check(s_allgv + displs[r], counts[r], it, r, 4);
		fold += s_allgv[displs[r] + it % counts[r]];
	}
	/* Alltoallv: rank r's block for rank d is its first n - 8 * r words of
	 * tag 5; every block lands at displs[r] here. */
	for (int d = 0; d < size; d++) {
		scounts[d] = (int)mine;
		sdispls[d] = 0;
	}
	for (long i = 0; i < mine; i++)
		vsend[i] = word(it, rank, 5, i);
	MPI_Alltoallv(vsend, scounts, sdispls, MPI_UINT64_T, h_alltoallv, counts, displs,
		      MPI_UINT64_T, MPI_COMM_WORLD);
	for (int r = 0; r < size; r++) {
		check(h_alltoallv + displs[r], counts[r], it, r, 5);
		fold += h_alltoallv[displs[r] + (it * 3) % counts[r]];
	}
	/* Gatherv to rank 0 of tag 6 (the counts are significant only there). */
	for (long i = 0; i < mine; i++)
		vsend[i] = word(it, rank, 6, i);
	MPI_Gatherv(vsend, (int)mine, MPI_UINT64_T, h_gatherv, rank == 0 ? counts : NULL,
		    rank == 0 ? displs : NULL, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	if (rank == 0)
		for (int r = 0; r < size; r++) {
			check(h_gatherv + displs[r], counts[r], it, r, 6);
			fold += h_gatherv[displs[r] + (it * 5) % counts[r]];
		}
	/* Reduce_scatter with BXOR: rank r gets counts[r] words, the XOR over
	 * every rank of its words of tag 7 (all equal but the rank bits). */
	for (long i = 0; i < size * n; i++)
		vsend[i] = word(it, 0, 7, i) ^ (uint64_t)rank;
	MPI_Reduce_scatter(vsend, h_rscatter, counts, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
	for (int r = 0; r < size; r++) {
		ranks ^= (uint64_t)r;
		at += r < rank ? counts[r] : 0; /* where this rank's block starts */
	}
	for (long i = 0; i < counts[rank]; i++) {
		uint64_t want = (size % 2 ? word(it, 0, 7, at + i) : 0) ^ ranks;

		if (h_rscatter[i] != want)
			die("MPI_Reduce_scatter delivered wrong data");
	}
	fold += h_rscatter[it % counts[rank]];
	return fold;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 16384, iters = argc > 2 ? atol(argv[2]) : 4000;
	uint64_t *send[4], *h_irecv, *h_recv, *h_read, *state, sum, total, h;
	uint64_t *h_alltoallv, *h_gatherv, *h_rscatter, *vsend, vfold;
	int left, right;
	MPI_Request req[6];
	const char *tmp = getenv("TMPDIR");

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (n < 64 || n > MAXN || iters < 1)
		die("usage: protected_io [N (64..65536) [ITERS]]");
	if (size > MAXV)
		die("at most 8 ranks");
	left = (rank + size - 1) % size;
	right = (rank + 1) % size;
	snprintf(path, sizeof(path), "%s/protected_io.%d", tmp && *tmp ? tmp : "/tmp", rank);
	write_file();
	for (long i = 0; i < LUT_WORDS; i++)
		lut[i] = mix(0x107ULL + (uint64_t)i);

	for (int t = 0; t < 4; t++)
		send[t] = malloc(n * sizeof(uint64_t));
	/* One spare word each, for the unaligned targets. */
	h_irecv = malloc((n + 1) * sizeof(uint64_t));
	h_recv = malloc((n + 1) * sizeof(uint64_t));
	h_read = malloc((n + 1) * sizeof(uint64_t));
	state = calloc(n, sizeof(uint64_t));
	h_alltoallv = malloc(MAXV * (n + 64) * sizeof(uint64_t));
	h_gatherv = malloc(MAXV * (n + 64) * sizeof(uint64_t));
	h_rscatter = malloc(n * sizeof(uint64_t));
	vsend = malloc(MAXV * n * sizeof(uint64_t));
	if (!send[0] || !send[1] || !send[2] || !send[3] || !h_irecv || !h_recv || !h_read || !state ||
	    !h_alltoallv || !h_gatherv || !h_rscatter || !vsend)
		die("out of memory");

	for (long it = 0; it < iters; it++) {
		long off = (it * 7919) % (FILE_WORDS - n);
		uint64_t *ri = s_irecv, *hi = h_irecv + (it & 1), *hr = h_recv, *sr = s_recv + 1;
		uint64_t *fh = h_read + 1, *fs = s_read + (it & 1);

		for (int t = 0; t < 4; t++)
			for (long i = 0; i < n; i++)
				send[t][i] = word(it, rank, t, i);
		/* Nonblocking: tag 0 travels right, tag 1 left. */
		MPI_Irecv(ri, n, MPI_UINT64_T, left, 0, MPI_COMM_WORLD, &req[0]);
		MPI_Irecv(hi, n, MPI_UINT64_T, right, 1, MPI_COMM_WORLD, &req[1]);
		MPI_Isend(send[0], n, MPI_UINT64_T, right, 0, MPI_COMM_WORLD, &req[2]);
		MPI_Isend(send[1], n, MPI_UINT64_T, left, 1, MPI_COMM_WORLD, &req[3]);
		MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
		/* Blocking receives: tags 2 (right) and 3 (left). */
		MPI_Isend(send[2], n, MPI_UINT64_T, right, 2, MPI_COMM_WORLD, &req[4]);
		MPI_Isend(send[3], n, MPI_UINT64_T, left, 3, MPI_COMM_WORLD, &req[5]);
		MPI_Recv(hr, n, MPI_UINT64_T, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Recv(sr, n, MPI_UINT64_T, right, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Waitall(2, req + 4, MPI_STATUSES_IGNORE);
		read_slice(fh, off, n);
		read_slice(fs, (off * 3 + 17) % (FILE_WORDS - n), n);

		check(ri, n, it, left, 0);
		check(hi, n, it, right, 1);
		check(hr, n, it, left, 2);
		check(sr, n, it, right, 3);
		vfold = vcollectives(it, n, h_alltoallv, h_gatherv, h_rscatter, vsend);
		sum = vfold >> 8;
		for (long i = 0; i < n; i++) {
			state[i] = mix(state[i] ^ ri[i]) + hi[i] + (hr[i] ^ sr[i]) + mix(fh[i] + fs[i]) +
				   lut[(i + it) % LUT_WORDS];
			sum += state[i] >> 8;
		}
		MPI_Allreduce(&sum, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
		state[it % n] ^= total;
	}

	h = 0xcbf29ce484222325ULL;
	for (long i = 0; i < n; i++)
		h = mix(h ^ state[i]);
	MPI_Reduce(&h, &total, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("protected_io: n=%ld iters=%ld checksum=%016llx\n", n, iters,
		       (unsigned long long)total);
	unlink(path);
	MPI_Finalize();
	return 0;
}
