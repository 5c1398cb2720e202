/* types: an MPI program built on derived datatypes and user reduction ops, a
 * checkpoint test subject for virtual handles. Every datatype and op must
 * work the same after a restart; one datatype's old type is freed while the
 * type made from it lives on.
 *
 *   types [N [ITERS]]
 *
 * Each rank owns an N x N block of a grid and a small array of particles:
 *   - column halos travel as one MPI_Type_vector, rows as an
 *     MPI_Type_contiguous (MPI_Sendrecv on the ring of ranks);
 *   - particles are a struct (MPI_Type_create_struct, then
 *     MPI_Type_create_resized to the C struct's extent), gathered with
 *     MPI_Allgather and reduced with a user op keeping the most energetic
 *     (commutative);
 *   - a 2x2 matrix product is reduced with a user op declared
 *     non-commutative (the order of ranks matters);
 *   - a block of the grid goes to rank 0 as an MPI_Type_create_subarray;
 *   - pair: MPI_Type_contiguous(2) of an MPI_Type_indexed whose handle is
 *     freed right after;
 *   - a receive posted on a communicator duplicated for the step, with a
 *     datatype freed at once (MPI keeps both while the receive is
 *     pending), its message sent after the particles' collectives and the
 *     communicator freed before the receive is waited for.
 * Each step ends with an MPI_Allreduce on MPI_COMM_WORLD.
 *
 * Output (rank 0, stdout, at the end): one line hashing everything reduced.
 */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct particle {
	double pos[3];
	double energy;
	int id;
	char tag;
};

static uint64_t hash = 0xcbf29ce484222325ull;

static void mix(const void *buf, size_t len)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++) {
		hash ^= p[i];
		hash *= 0x100000001b3ull;
	}
}

static MPI_Datatype particle_type; /* compared in the op: a virtual handle */

/* The fields only: padding bytes are never sent. */
static void mix_particles(const struct particle *p, int n)
{
	for (int i = 0; i < n; i++) {
		mix(p[i].pos, sizeof(p[i].pos));
		mix(&p[i].energy, sizeof(p[i].energy));
		mix(&p[i].id, sizeof(p[i].id));
		mix(&p[i].tag, sizeof(p[i].tag));
	}
}

/* Keep the most energetic particle (the lowest id on a tie). */
static void most_energetic(void *in, void *inout, int *len, MPI_Datatype *type)
{
	struct particle *a = in, *b = inout;

	if (*type != particle_type) {
		fprintf(stderr, "types: the op got another datatype\n");
		exit(1);
	}
	for (int i = 0; i < *len; i++)
		if (a[i].energy > b[i].energy || (a[i].energy == b[i].energy && a[i].id < b[i].id))
			b[i] = a[i];
}

/* inout = in x inout for 2x2 matrices (row-major, one per element of
 * a 4-double type): not commutative. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *type)
{
	double *a = in, *b = inout;

	(void)type;
	for (int i = 0; i < *len; i++, a += 4, b += 4) {
		double c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
			       a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};

		memcpy(b, c, sizeof(c));
	}
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 256, iters = argc > 2 ? atoi(argv[2]) : 1000;
	int rank, size, left, right;
	MPI_Datatype column, row, raw, sub, indexed, pair, mat4;
	MPI_Op op_max, op_mat;
	double *grid, *gathered;
	struct particle mine[4], all_best[4], *everyone;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	left = (rank + size - 1) % size;
	right = (rank + 1) % size;

	MPI_Type_vector(n, 1, n, MPI_DOUBLE, &column);
	MPI_Type_commit(&column);
	MPI_Type_contiguous(n, MPI_DOUBLE, &row);
	MPI_Type_commit(&row);
	{
		int lens[4] = {3, 1, 1, 1};
		MPI_Aint disp[4] = {offsetof(struct particle, pos), offsetof(struct particle, energy),
				    offsetof(struct particle, id), offsetof(struct particle, tag)};
		MPI_Datatype types[4] = {MPI_DOUBLE, MPI_DOUBLE, MPI_INT, MPI_CHAR};

		MPI_Type_create_struct(4, lens, disp, types, &raw);
		MPI_Type_create_resized(raw, 0, sizeof(struct particle), &particle_type);
		MPI_Type_commit(&particle_type);
		MPI_Type_free(&raw);
	}
	{
		int sizes[2] = {n, n}, subs[2] = {n / 2, n / 2}, starts[2] = {n / 4, n / 4};

		MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_DOUBLE, &sub);
		MPI_Type_commit(&sub);
	}
	{
		int lens[2] = {1, 2}, displs[2] = {0, 3};

		MPI_Type_indexed(2, lens, displs, MPI_DOUBLE, &indexed);
		MPI_Type_contiguous(2, indexed, &pair);
		MPI_Type_free(&indexed); /* pair lives on without its old type's handle */
		MPI_Type_commit(&pair);
	}
	MPI_Type_contiguous(4, MPI_DOUBLE, &mat4);
	MPI_Type_commit(&mat4);
	MPI_Op_create(most_energetic, 1, &op_max);
	MPI_Op_create(matmul, 0, &op_mat);

	grid = malloc(sizeof(double) * n * n);
	gathered = malloc(sizeof(double) * (n / 2) * (n / 2) * size);
	everyone = malloc(sizeof(struct particle) * 4 * size);
	for (int i = 0; i < n * n; i++)
		grid[i] = (double)((rank * 7919 + i) % 1009) / 1009.0;
	for (int p = 0; p < 4; p++)
		mine[p] = (struct particle){{rank, p, 0}, 0, rank * 4 + p, (char)('a' + p)};

	for (int it = 0; it < iters; it++) {
		double lcol[1024], rcol[1024], mat[4], total, ten[10], got[3], sent[3];
		MPI_Datatype once;
		MPI_Request pending;
		MPI_Comm twin;
		int m = n < 1024 ? n : 1024;

		/* column halos as a vector; row halos as a contiguous row */
		MPI_Sendrecv(grid + n - 1, 1, column, right, 1, lcol, m, MPI_DOUBLE, left, 1,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Sendrecv(grid, 1, column, left, 2, rcol, m, MPI_DOUBLE, right, 2, MPI_COMM_WORLD,
			     MPI_STATUS_IGNORE);
		MPI_Sendrecv_replace(grid + (it % n) * n, 1, row, right, 3, left, 3, MPI_COMM_WORLD,
				     MPI_STATUS_IGNORE);
		for (int i = 0; i < m; i++) {
			grid[i * n] = 0.5 * (grid[i * n] + lcol[i]);
			grid[i * n + n - 1] = 0.5 * (grid[i * n + n - 1] + rcol[i]);
		}

		MPI_Comm_dup(MPI_COMM_WORLD, &twin);
		MPI_Type_contiguous(3, MPI_DOUBLE, &once);
		MPI_Type_commit(&once);
		MPI_Irecv(got, 1, once, left, 7, twin, &pending);
		MPI_Type_free(&once);

		for (int p = 0; p < 4; p++) {
			mine[p].pos[0] += 0.01 * (p + 1);
			mine[p].energy = grid[(p * 31 + it) % (n * n)] * (rank + 1);
		}
		MPI_Allgather(mine, 4, particle_type, everyone, 4, particle_type, MPI_COMM_WORLD);
		mix_particles(everyone, 4 * size);
		MPI_Allreduce(mine, all_best, 4, particle_type, op_max, MPI_COMM_WORLD);
		mix_particles(all_best, 4);

		for (int i = 0; i < 3; i++)
			sent[i] = grid[(it * 3 + i) % (n * n)];
		MPI_Send(sent, 3, MPI_DOUBLE, right, 7, twin);
		MPI_Comm_free(&twin);
		MPI_Wait(&pending, MPI_STATUS_IGNORE);
		mix(got, sizeof(got));

		mat[0] = 1;
		mat[1] = 0.001 * (rank + 1);
		mat[2] = 0.002 * (it % 5);
		mat[3] = 1;
		MPI_Allreduce(MPI_IN_PLACE, mat, 1, mat4, op_mat, MPI_COMM_WORLD);
		mix(mat, sizeof(mat));

		if (it % 16 == 0) {
			MPI_Gather(grid, 1, sub, gathered, (n / 2) * (n / 2), MPI_DOUBLE, 0,
				   MPI_COMM_WORLD);
			if (rank == 0)
				mix(gathered, sizeof(double) * (n / 2) * (n / 2) * size);
			memcpy(ten, grid, sizeof(ten)); /* pair spans 2 x 5 doubles */
			MPI_Bcast(ten, 1, pair, it % size, MPI_COMM_WORLD);
			mix(ten, sizeof(ten));
		}
		total = grid[it % (n * n)];
		MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		mix(&total, sizeof(total));
	}

	MPI_Op_free(&op_max);
	MPI_Op_free(&op_mat);
	MPI_Type_free(&mat4);
	MPI_Type_free(&pair);
	MPI_Type_free(&sub);
	MPI_Type_free(&particle_type);
	MPI_Type_free(&row);
	MPI_Type_free(&column);
	if (rank == 0)
		printf("types: n=%d iters=%d ranks=%d hash=%016llx\n", n, iters, size,
		       (unsigned long long)hash);
	MPI_Finalize();
	return 0;
}
