/* mpiio: an MPI program that does its I/O with MPI-IO, keeping its files open
 * all run long, a checkpoint/restart test subject that knows nothing of
 * stasis. In its current directory:
 *   - files.data.all, shared by every rank: rank 0 writes a header, then
 *     every rank sets a view (a displacement past the header, MPI_DOUBLE,
 *     a filetype interleaving the ranks' blocks, freed right after) and
 *     each iteration writes its block with MPI_File_write_at_all and reads
 *     back, with MPI_File_read_at_all, the block of half as many iterations
 *     ago (every third iteration with the split collectives, _begin, an
 *     MPI_Barrier, _end; the iteration after with the non-blocking ones,
 *     MPI_File_iwrite_at_all or _iread_at_all, an MPI_Barrier, MPI_Wait);
 *   - files.in, read-only, opened by every rank: 16 bytes per iteration
 *     through the individual file pointer (MPI_File_read; on odd
 *     iterations MPI_File_iread and MPI_Wait), from the start again at its
 *     end;
 *   - files.log.<rank>, each rank's own (MPI_COMM_SELF): a line per
 *     iteration through its individual file pointer (MPI_File_write; on
 *     odd iterations MPI_File_iwrite, waited for after the iteration's
 *     MPI_Allreduce, so that it is in flight there);
 * an MPI_Allreduce ends each iteration. It tries MPI_Register_datarep first
 * (Open MPI refuses it) and goes on without.
 *
 *   mpiio [N [ITERS]] [--overwrite]
 *
 *   --overwrite  from the second iteration on, rewrite the first double of
 *                the view in place every iteration (rank 0), read back first;
 *                and every 16th iteration open files.tally.all again (all ranks),
 *                add to each rank's double in place, and close it (HDF5
 *                output closed and opened again every few steps)
 *
 * Output (rank 0, stdout):
 *   mpiio: n=<N> iters=<ITERS> checksum=<16 hex> size=<bytes of the shared file>
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

#define HEADER 64

/* A user data representation, which Open MPI's OMPIO refuses: the program
 * goes on in "native" (a stasis that took the attempt for state it cannot
 * restore would switch checkpoints off). */
static int datarep_conv(void *userbuf, MPI_Datatype type, int count, void *filebuf,
			MPI_Offset position, void *extra)
{
	(void)userbuf, (void)type, (void)count, (void)filebuf, (void)position, (void)extra;
	return MPI_SUCCESS;
}

static int datarep_extent(MPI_Datatype type, MPI_Aint *extent, void *extra)
{
	MPI_Aint lb;

	(void)extra;
	return MPI_Type_get_extent(type, &lb, extent);
}

static void die(const char *what)
{
	fprintf(stderr, "mpiio: %s\n", what);
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

int main(int argc, char **argv)
{
	long n = 512, iters = 2000, pos = 0;
	int rank, size, overwrite = 0, got;
	MPI_File data, in, log, tally;
	MPI_Datatype block;
	MPI_Offset fsize;
	MPI_Status st;
	char name[64], line[128], bytes[16], header[HEADER];
	double *x, *old, sum, total = 0;
	uint64_t h = HASH_START;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--overwrite"))
			overwrite = 1;
		else if (pos == 0 && ++pos)
			n = atol(argv[i]);
		else if (pos == 1 && ++pos)
			iters = atol(argv[i]);
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Register_datarep("mpiio-test", datarep_conv, datarep_conv, datarep_extent, NULL);
	if (n < 1 || iters < 1)
		die("usage: mpiio [N [ITERS]] [--overwrite]");
	x = malloc(sizeof(*x) * n);
	old = malloc(sizeof(*old) * n);
	if (!x || !old)
		die("out of memory");
	for (long i = 0; i < n; i++)
		x[i] = (double)(i % 89) / 89.0 + rank;

	if (MPI_File_open(MPI_COMM_WORLD, "files.data.all", MPI_MODE_CREATE | MPI_MODE_RDWR,
			  MPI_INFO_NULL, &data) ||
	    MPI_File_open(MPI_COMM_WORLD, "files.in", MPI_MODE_RDONLY, MPI_INFO_NULL, &in))
		die("cannot open files.data.all or files.in");
	snprintf(name, sizeof(name), "files.log.%d", rank);
	if (MPI_File_open(MPI_COMM_SELF, name, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
			  &log))
		die("cannot open the log");
	MPI_File_set_size(data, 0);
	MPI_File_set_size(log, 0);
	memset(header, 0, sizeof(header));
	snprintf(header, sizeof(header), "mpiio n=%ld ranks=%d", n, size);
	if (rank == 0)
		MPI_File_write_at(data, 0, header, HEADER, MPI_CHAR, &st);
	/* Each rank's n doubles of an iteration side by side. */
	MPI_Type_vector(1, (int)n, (int)n * size, MPI_DOUBLE, &block);
	MPI_Type_create_resized(block, 0, (MPI_Aint)(sizeof(double) * n * size), &block);
	MPI_Type_commit(&block);
	MPI_File_set_view(data, HEADER + (MPI_Offset)(sizeof(double) * n * rank), MPI_DOUBLE, block,
			  "native", MPI_INFO_NULL);
	MPI_Type_free(&block);
	if (overwrite) {
		double zero = 0;

		if (MPI_File_open(MPI_COMM_WORLD, "files.tally.all",
				  MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &tally))
			die("cannot make files.tally.all");
		MPI_File_set_size(tally, 0);
		MPI_File_write_at_all(tally, rank, &zero, 1, MPI_DOUBLE, &st);
		MPI_File_close(&tally);
	}

	for (long it = 0; it < iters; it++) {
		MPI_Request rq, lrq = MPI_REQUEST_NULL;

		if (it % 2) {
			MPI_File_iread(in, bytes, sizeof(bytes), MPI_CHAR, &rq);
			MPI_Wait(&rq, &st);
		} else {
			MPI_File_read(in, bytes, sizeof(bytes), MPI_CHAR, &st);
		}
		MPI_Get_count(&st, MPI_CHAR, &got);
		if (got < (int)sizeof(bytes)) {
			MPI_File_seek(in, 0, MPI_SEEK_SET);
			MPI_File_read(in, bytes, sizeof(bytes), MPI_CHAR, &st);
		}
		h = hash_mix(h, bytes, sizeof(bytes));
		for (long i = 0; i < n; i++)
			x[i] = 0.5 * x[i] + 0.25 * x[(i + 1) % n] + 1e-3 * (bytes[i % 16] & 15);
		if (it % 3 == 1) {
			/* Split collectives (one at a time on a file), a barrier
			 * between begin and end (where a checkpoint may land). */
			if (MPI_File_write_at_all_begin(data, it * n, x, (int)n, MPI_DOUBLE))
				die("split write of the shared file");
			MPI_Barrier(MPI_COMM_WORLD);
			if (MPI_File_write_at_all_end(data, x, &st) ||
			    MPI_File_read_at_all_begin(data, (it / 2) * n, old, (int)n, MPI_DOUBLE))
				die("split read of the shared file");
			MPI_Barrier(MPI_COMM_WORLD);
			if (MPI_File_read_at_all_end(data, old, &st))
				die("end of a split read of the shared file");
			MPI_Get_count(&st, MPI_DOUBLE, &got);
			if (got != (int)n)
				die("a split read's status counts another size");
		} else if (it % 3 == 2) {
			/* Non-blocking collectives, in flight at a barrier. */
			MPI_Request rq;

			if (MPI_File_iwrite_at_all(data, it * n, x, (int)n, MPI_DOUBLE, &rq))
				die("non-blocking write of the shared file");
			MPI_Barrier(MPI_COMM_WORLD);
			if (MPI_Wait(&rq, &st) ||
			    MPI_File_iread_at_all(data, (it / 2) * n, old, (int)n, MPI_DOUBLE, &rq))
				die("non-blocking read of the shared file");
			MPI_Barrier(MPI_COMM_WORLD);
			if (MPI_Wait(&rq, &st))
				die("wait for a non-blocking read of the shared file");
			MPI_Get_count(&st, MPI_DOUBLE, &got);
			if (got != (int)n)
				die("a non-blocking read's status counts another size");
		} else if (MPI_File_write_at_all(data, it * n, x, (int)n, MPI_DOUBLE, &st) ||
			   MPI_File_read_at_all(data, (it / 2) * n, old, (int)n, MPI_DOUBLE, &st)) {
			die("write or read of the shared file");
		}
		h = hash_mix(h, old, sizeof(*old) * n);
		sum = 0;
		for (long i = 0; i < n; i++)
			sum += x[i];
		snprintf(line, sizeof(line), "it %ld sum %.17g\n", it, sum);
		if (it % 2)
			MPI_File_iwrite(log, line, (int)strlen(line), MPI_CHAR, &lrq);
		else
			MPI_File_write(log, line, (int)strlen(line), MPI_CHAR, &st);
		if (overwrite && rank == 0 && it >= 1) {
			double prev = 0;

			/* The first double of the view as it was goes into the
			 * answer (a restart that did not put it back reads
			 * another), then this iteration's sum over it. */
			MPI_File_read_at(data, 0, &prev, 1, MPI_DOUBLE, &st);
			h = hash_mix(h, &prev, sizeof(prev));
			MPI_File_write_at(data, 0, &sum, 1, MPI_DOUBLE, &st);
		}
		if (overwrite && it % 16 == 0) { /* an open costs milliseconds */
			double mine = 0;

			/* Closed at most checkpoints: a restart that did not put
			 * its bytes back adds to what it already holds. */
			if (MPI_File_open(MPI_COMM_WORLD, "files.tally.all", MPI_MODE_RDWR,
					  MPI_INFO_NULL, &tally) ||
			    MPI_File_read_at_all(tally, rank, &mine, 1, MPI_DOUBLE, &st))
				die("cannot read files.tally.all");
			h = hash_mix(h, &mine, sizeof(mine));
			mine += sum * 1e-3;
			if (MPI_File_write_at_all(tally, rank, &mine, 1, MPI_DOUBLE, &st) ||
			    MPI_File_close(&tally))
				die("cannot write files.tally.all");
		}
		MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		MPI_Wait(&lrq, &st);
		total += sum;
	}
	MPI_File_get_size(data, &fsize);
	MPI_File_close(&log);
	MPI_File_close(&in);
	MPI_File_close(&data);
	h = hash_mix(h, &total, sizeof(total));
	MPI_Allreduce(MPI_IN_PLACE, &h, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpiio: n=%ld iters=%ld checksum=%016llx size=%lld\n", n, iters,
		       (unsigned long long)h, (long long)fsize);
	free(x);
	free(old);
	MPI_Finalize();
	return 0;
}
