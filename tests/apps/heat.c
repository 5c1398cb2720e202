/* heat: a 2-D Jacobi heat solver used as a checkpoint/restart test subject.
 *
 * It is an ordinary MPI program that knows nothing of stasis. Its state is
 * spread over the places a checkpointer must capture: heap grids (malloc),
 * a heap linked list, static arrays and the stack of main. The final line
 * hashes the whole grid and the list, so a restart that loses or corrupts
 * any of them changes the output.
 *
 *   heat [N [ITERS]] [--thread] [--own-stack] [--multiple] [--mpi-thread] [--split]
 *        [--type] [--refused]
 *
 * N x N grid split in rows over the ranks, ITERS Jacobi sweeps. Each sweep
 * exchanges halos (MPI_Sendrecv on even sweeps, MPI_Isend/Irecv/Waitall on
 * odd ones) and ends with an MPI_Allreduce of the residual on
 * MPI_COMM_WORLD.
 *
 * The flags exercise MPI features stasis must warn about; none of them
 * changes the printed result, so their output equals the plain run's:
 *   --thread    a pthread computes the initial source term, then is joined
 *   --own-stack with --thread: the thread runs on a stack the program
 *               allocated itself (pthread_attr_setstack)
 *   --multiple  MPI_Init_thread(MPI_THREAD_MULTIPLE)
 *   --mpi-thread with --multiple: a second thread calls MPI (allreduces on a
 *               duplicate of MPI_COMM_WORLD) while the main thread computes
 *   --split     MPI_Comm_split once, plus an allreduce on it every sweep
 *   --type      halos travel as one MPI_Type_contiguous row
 *   --refused   calls a function stasis refuses (MPI_Open_port, then
 *               MPI_Close_port: a port of dynamic processes), right after
 *               MPI_Init
 *
 * Output (rank 0, stdout, only at the end):
 *   heat: n=<N> iters=<ITERS> checksum=<16 hex> residual=<%.17g>
 * The grid values do not depend on the number of ranks; the residual sum
 * may differ in its last bits between rank counts (reduction order), never
 * between runs with the same rank count.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HISTORY 64 /* residuals of the last sweeps, kept in a static ring */

/* Static state (.data/.bss): must survive a restart like the heap does. */
static double history[HISTORY];
static long sweeps_done;
static double split_max[HISTORY]; /* --split: per-sweep max over the sub-communicator */

/* A heap linked list, one node every LIST_EVERY sweeps, folded into the hash. */
#define LIST_EVERY 16
struct note {
	long iter;
	double residual;
	struct note *next;
};
static struct note *notes;

struct opts {
	int n, iters;
	int thread, own_stack, multiple, mpi_thread, split, type, refused;
};

static void die(const char *msg)
{
	fprintf(stderr, "heat: %s\n", msg);
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	int pos = 0;

	o->n = 512;
	o->iters = 1000;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--thread"))
			o->thread = 1;
		else if (!strcmp(argv[i], "--own-stack"))
			o->own_stack = 1;
		else if (!strcmp(argv[i], "--mpi-thread"))
			o->mpi_thread = 1;
		else if (!strcmp(argv[i], "--multiple"))
			o->multiple = 1;
		else if (!strcmp(argv[i], "--refused"))
			o->refused = 1;
		else if (!strcmp(argv[i], "--split"))
			o->split = 1;
		else if (!strcmp(argv[i], "--type"))
			o->type = 1;
		else if (pos == 0 && atoi(argv[i]) > 0)
			o->n = atoi(argv[i]), pos++;
		else if (pos == 1 && atoi(argv[i]) > 0)
			o->iters = atoi(argv[i]), pos++;
		else {
			fprintf(stderr,
				"usage: heat [N [ITERS]] [--thread] [--own-stack] [--multiple] "
				"[--mpi-thread] [--split] [--type] [--refused]\n");
			exit(2);
		}
	}
}

/* FNV-1a, 64 bit: a stable hash, the same on every run and machine. */
static uint64_t fnv(uint64_t h, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Rows [row0, row0 + rows) of the global grid belong to this rank. */
struct part {
	int row0, rows;
};

static struct part partition(int n, int rank, int size)
{
	struct part p;
	int base = n / size, extra = n % size;

	p.rows = base + (rank < extra);
	p.row0 = rank * base + (rank < extra ? rank : extra);
	return p;
}

/* Source term of global cell (i, j): a few hot spots, computed in integers so
 * it is exact. */
static double source_at(int n, int i, int j)
{
	unsigned h = (unsigned)(i * 7919 + j * 104729) % 1009u;

	if ((i == n / 3 && j > n / 4 && j < n / 2) || (j == 2 * n / 3 && i > n / 2))
		return 1.0;
	return h < 3 ? 0.25 : 0.0;
}

/* --mpi-thread: allreduces on a communicator of its own, as a thread of an
 * MPI_THREAD_MULTIPLE program may do; the result must be the rank count. */
struct mpi_job {
	MPI_Comm comm;
	int rounds;
};

static void *reduce_alongside(void *arg)
{
	struct mpi_job *job = arg;
	int one = 1, size, sum;

	MPI_Comm_size(job->comm, &size);
	for (int i = 0; i < job->rounds / 10 + 1; i++) {
		MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, job->comm);
		if (sum != size) {
			fprintf(stderr, "heat: the second thread's allreduce gave %d\n", sum);
			exit(2);
		}
	}
	return NULL;
}

struct source_job {
	int n;
	struct part p;
	double *src; /* rows x n */
};

static void *fill_source(void *arg)
{
	struct source_job *job = arg;

	for (int i = 0; i < job->p.rows; i++)
		for (int j = 0; j < job->n; j++)
			job->src[(size_t)i * job->n + j] = source_at(job->n, job->p.row0 + i, j);
	return NULL;
}

/* Swap halo rows with the neighbours. Even sweeps use MPI_Sendrecv, odd ones
 * non-blocking calls, so both paths are in flight around checkpoints. */
static void exchange(double *u, int n, int rows, int up, int down, long iter, MPI_Datatype row_t,
		     int row_count)
{
	double *first = u + n, *last = u + (size_t)rows * n;
	double *halo_up = u, *halo_down = u + (size_t)(rows + 1) * n;

	if (iter % 2 == 0) {
		MPI_Sendrecv(first, row_count, row_t, up, 0, halo_down, row_count, row_t, down, 0,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Sendrecv(last, row_count, row_t, down, 1, halo_up, row_count, row_t, up, 1,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	} else {
		MPI_Request req[4];

		MPI_Irecv(halo_up, row_count, row_t, up, 2, MPI_COMM_WORLD, &req[0]);
		MPI_Irecv(halo_down, row_count, row_t, down, 3, MPI_COMM_WORLD, &req[1]);
		MPI_Isend(first, row_count, row_t, up, 3, MPI_COMM_WORLD, &req[2]);
		MPI_Isend(last, row_count, row_t, down, 2, MPI_COMM_WORLD, &req[3]);
		MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
	}
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	int rank, size, provided;
	MPI_Comm sub = MPI_COMM_NULL;
	MPI_Datatype row_t = MPI_DOUBLE;
	double residual = 0.0;

	parse(argc, argv, &o);
	if (o.multiple) {
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
		if (provided < MPI_THREAD_MULTIPLE)
			fprintf(stderr, "heat: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
	} else {
		MPI_Init(&argc, &argv);
	}
	if (o.refused) {
		char port[MPI_MAX_PORT_NAME];

		if (MPI_Open_port(MPI_INFO_NULL, port) == MPI_SUCCESS)
			MPI_Close_port(port);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (o.n < size)
		die("N must be at least the number of ranks");

	int n = o.n;
	struct part p = partition(n, rank, size);
	int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
	int down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
	size_t cells = (size_t)(p.rows + 2) * n;
	double *u = calloc(cells, sizeof(*u));
	double *v = calloc(cells, sizeof(*v));
	double *src = malloc((size_t)p.rows * n * sizeof(*src));

	if (!u || !v || !src)
		die("out of memory");

	struct source_job job = {n, p, src};
	if (o.thread) {
		pthread_attr_t attr;
		pthread_t t;
		size_t stack_size = 1 << 20;
		void *stack = o.own_stack ? malloc(stack_size) : NULL;

		pthread_attr_init(&attr);
		if (stack)
			pthread_attr_setstack(&attr, stack, stack_size);
		if (pthread_create(&t, &attr, fill_source, &job) || pthread_join(t, NULL))
			die("pthread_create/join failed");
		pthread_attr_destroy(&attr);
		free(stack);
	} else {
		fill_source(&job);
	}
	pthread_t mpi_thread;
	struct mpi_job mjob = {MPI_COMM_NULL, o.iters};
	if (o.mpi_thread) {
		MPI_Comm_dup(MPI_COMM_WORLD, &mjob.comm);
		if (pthread_create(&mpi_thread, NULL, reduce_alongside, &mjob))
			die("pthread_create failed");
	}

	int row_count = n;
	if (o.type) {
		MPI_Type_contiguous(n, MPI_DOUBLE, &row_t);
		MPI_Type_commit(&row_t);
		row_count = 1;
	}
	if (o.split)
		MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &sub);

	/* Fixed boundary: the left column is hot (1.0), the rest of the border
	 * cold; global rows 0 and n-1 are the top/bottom border. */
	for (int i = 1; i <= p.rows; i++) {
		u[(size_t)i * n] = v[(size_t)i * n] = 1.0;
	}

	for (long it = 0; it < o.iters; it++) {
		double local = 0.0;

		exchange(u, n, p.rows, up, down, it, row_t, row_count);
		for (int i = 1; i <= p.rows; i++) {
			int g = p.row0 + i - 1;

			if (g == 0 || g == n - 1)
				continue;
			for (int j = 1; j < n - 1; j++) {
				size_t k = (size_t)i * n + j;
				double x = 0.25 * (u[k - n] + u[k + n] + u[k - 1] + u[k + 1]) +
					   0.01 * src[k - n];
				double d = x - u[k];

				v[k] = x;
				local += d * d;
			}
		}
		double *t = u;
		u = v;
		v = t;

		MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		if (o.split) {
			double m;

			MPI_Allreduce(&local, &m, 1, MPI_DOUBLE, MPI_MAX, sub);
			if (!(m >= 0.0 && m <= residual))
				die("split allreduce disagrees with the world residual");
			split_max[it % HISTORY] = m;
		}
		history[it % HISTORY] = residual;
		sweeps_done++;
		if (it % LIST_EVERY == 0) {
			struct note *nt = malloc(sizeof(*nt));

			if (!nt)
				die("out of memory");
			nt->iter = it;
			nt->residual = residual;
			nt->next = notes;
			notes = nt;
		}
	}

	if (o.mpi_thread) {
		pthread_join(mpi_thread, NULL);
		MPI_Comm_free(&mjob.comm);
	}

	/* Gather the interior rows on rank 0 in global order and hash them with
	 * the static history and the list. */
	int *counts = NULL, *displs = NULL;
	double *all = NULL;
	if (rank == 0) {
		counts = malloc(size * sizeof(*counts));
		displs = malloc(size * sizeof(*displs));
		all = malloc((size_t)n * n * sizeof(*all));
		if (!counts || !displs || !all)
			die("out of memory");
		for (int r = 0; r < size; r++) {
			struct part q = partition(n, r, size);

			counts[r] = q.rows * n;
			displs[r] = q.row0 * n;
		}
	}
	MPI_Gatherv(u + n, p.rows * n, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0,
		    MPI_COMM_WORLD);

	if (rank == 0) {
		uint64_t h = 0xcbf29ce484222325ull;

		h = fnv(h, all, (size_t)n * n * sizeof(*all));
		h = fnv(h, history, sizeof(history));
		h = fnv(h, &sweeps_done, sizeof(sweeps_done));
		for (struct note *nt = notes; nt; nt = nt->next) {
			h = fnv(h, &nt->iter, sizeof(nt->iter));
			h = fnv(h, &nt->residual, sizeof(nt->residual));
		}
		printf("heat: n=%d iters=%d checksum=%016llx residual=%.17g\n", n, o.iters,
		       (unsigned long long)h, residual);
		fflush(stdout);
	}

	if (o.type)
		MPI_Type_free(&row_t);
	if (sub != MPI_COMM_NULL)
		MPI_Comm_free(&sub);
	while (notes) {
		struct note *nt = notes;

		notes = nt->next;
		free(nt);
	}
	free(all);
	free(displs);
	free(counts);
	free(src);
	free(v);
	free(u);
	MPI_Finalize();
	return 0;
}
