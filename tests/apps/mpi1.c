/* mpi1: MPI-1 calls MPI-3 removed, which mpi.h still declares and real
 * codes still call (mpi/calls.def): MPI_Attr_put/get/delete on a keyval
 * freed at the end with MPI_Keyval_free, MPI_Attr_get of a predefined
 * attribute (MPI_TAG_UB), MPI_Errhandler_set/get, MPI_Address and
 * MPI_Type_extent/lb/ub, every step of a loop whose sums run on the
 * communicator carrying the attribute; datatypes made by MPI_Type_hvector,
 * MPI_Type_hindexed and MPI_Type_struct carry part of every step's data.
 * After the loop, a keyval of MPI_Keyval_create (MPI_DUP_FN and a delete
 * function of the program's) is copied by MPI_Comm_dup and deleted by
 * MPI_Comm_free, and an error handler of MPI_Errhandler_create is called:
 * all made before the loop, so a restart must have made them again. The
 * attribute's value must still be there after a restart and its pointer
 * the same. The tool interface too, as a tool in the program uses it:
 * MPI_T_init_thread before MPI_Init and again after, the number of control
 * variables and of categories queried every step (a restart that did not
 * initialize it again makes them fail), MPI_T_finalize twice before
 * MPI_Finalize, the interface still initialized after the first only;
 * made before the loop and used every step: a control variable's handle,
 * written every 100 steps and read back, the enumeration of its values,
 * and a session with a performance variable's handle bound to the
 * communicator (tool_open, tool_step).
 *
 *   mpi1 [N [ITERS]]
 *
 * Output (rank 0, stdout, at the end): one line with every rank's hash.
 */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"

static int slots[2] = {3, 5};
static int deleted, handled, extra_state;

struct pair {
	int i;
	double d;
};

static int on_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
	(void)comm;
	(void)keyval;
	if (val == &slots[0] && extra == &extra_state)
		deleted++;
	return MPI_SUCCESS;
}

static void on_error(MPI_Comm *comm, int *code, ...)
{
	(void)comm;
	if (*code == MPI_ERR_OTHER)
		handled++;
}

/* The tool interface's objects of the loop (where this MPI has them). */
struct tool {
	MPI_T_cvar_handle cvar;
	MPI_T_enum values;
	MPI_T_pvar_session session;
	MPI_T_pvar_handle pvar;
};

static int tool_open(struct tool *t, MPI_Comm comm)
{
	int index, count, len = 0, verb, bind, scope, bad = 0;
	MPI_Datatype dt;

	*t = (struct tool){MPI_T_CVAR_HANDLE_NULL, MPI_T_ENUM_NULL, MPI_T_PVAR_SESSION_NULL,
			   MPI_T_PVAR_HANDLE_NULL};
	/* Open MPI's: the broadcast algorithm (a setting nothing uses unless
	 * its dynamic rules are on), an int with an enumeration of values. */
	if (MPI_T_cvar_get_index("coll_tuned_bcast_algorithm", &index) == MPI_SUCCESS) {
		bad += MPI_T_cvar_get_info(index, NULL, &len, &verb, &dt, &t->values, NULL, &len,
					   &bind, &scope) != MPI_SUCCESS;
		bad += MPI_T_cvar_handle_alloc(index, NULL, &t->cvar, &count) != MPI_SUCCESS;
	}
	bad += MPI_T_pvar_session_create(&t->session) != MPI_SUCCESS;
	if (MPI_T_pvar_get_index("pml_ob1_unexpected_msgq_length", MPI_T_PVAR_CLASS_SIZE,
				 &index) == MPI_SUCCESS)
		bad += MPI_T_pvar_handle_alloc(t->session, index, &comm, &t->pvar, &count) !=
		       MPI_SUCCESS;
	return bad;
}

static int tool_step(struct tool *t, int it, uint64_t *h)
{
	int bad = 0, value = -1, num = -1, len = 0;
	unsigned queued;

	if (t->cvar != MPI_T_CVAR_HANDLE_NULL) {
		if (it % 100 == 0) {
			value = 1 + (it / 100) % 6;
			bad += MPI_T_cvar_write(t->cvar, &value) != MPI_SUCCESS;
		}
		bad += MPI_T_cvar_read(t->cvar, &value) != MPI_SUCCESS;
		*h = hash_mix(*h, &value, sizeof(value));
	}
	if (t->values != MPI_T_ENUM_NULL) {
		bad += MPI_T_enum_get_info(t->values, &num, NULL, &len) != MPI_SUCCESS;
		*h = hash_mix(*h, &num, sizeof(num));
	}
	if (t->pvar != MPI_T_PVAR_HANDLE_NULL)
		bad += MPI_T_pvar_read(t->session, t->pvar, &queued) != MPI_SUCCESS;
	return bad;
}

static int tool_close(struct tool *t)
{
	int bad = 0;

	if (t->cvar != MPI_T_CVAR_HANDLE_NULL)
		bad += MPI_T_cvar_handle_free(&t->cvar) != MPI_SUCCESS;
	if (t->pvar != MPI_T_PVAR_HANDLE_NULL)
		bad += MPI_T_pvar_handle_free(t->session, &t->pvar) != MPI_SUCCESS;
	bad += MPI_T_pvar_session_free(&t->session) != MPI_SUCCESS;
	return bad;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096, iters = argc > 2 ? atoi(argv[2]) : 4000;
	int rank, size, kv, kv1, flag, *tag_ub, *val, bad = 0;
	int hi_len[2] = {1, 3}, st_len[2] = {1, 1};
	MPI_Aint hi_disp[2] = {0, 3 * sizeof(double)},
		 st_disp[2] = {offsetof(struct pair, i), offsetof(struct pair, d)};
	MPI_Datatype st_types[2] = {MPI_INT, MPI_DOUBLE}, hv, hi, st;
	struct pair pr;
	double in[8];
	MPI_Comm dup, dup2;
	MPI_Errhandler eh, eh1;
	uint64_t h = HASH_START, all;
	double *u;

	int provided, ncvars = -1, ncats = -1;
	struct tool tool;

	/* Twice, as two tools would: once before MPI_Init (a restart runs it
	 * again), once after (a restart must make it again). */
	if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
		bad++;
	MPI_Init(&argc, &argv);
	if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
		bad++;
	/* After MPI_Init: its components add variables as they load. */
	if (MPI_T_cvar_get_num(&ncvars) != MPI_SUCCESS ||
	    MPI_T_category_get_num(&ncats) != MPI_SUCCESS)
		bad++;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Keyval_create(MPI_DUP_FN, on_delete, &kv1, &extra_state);
	MPI_Errhandler_create(on_error, &eh1);
	/* Every other double, four; one double, then three from the fourth;
	 * a struct of an int and a double. */
	MPI_Type_hvector(4, 1, 2 * sizeof(double), MPI_DOUBLE, &hv);
	MPI_Type_hindexed(2, hi_len, hi_disp, MPI_DOUBLE, &hi);
	MPI_Type_struct(2, st_len, st_disp, st_types, &st);
	MPI_Type_commit(&hv);
	MPI_Type_commit(&hi);
	MPI_Type_commit(&st);
	MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &kv, NULL);
	MPI_Attr_put(dup, kv, &slots[0]);
	MPI_Errhandler_set(dup, MPI_ERRORS_RETURN);
	bad += tool_open(&tool, dup);
	u = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++)
		u[i] = (double)((rank * 3 + i) % 13);
	for (int it = 0; it < iters; it++) {
		MPI_Aint a0, a1, ext, lb, ub;
		double s;

		for (int i = 1; i < n - 1; i++)
			u[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
		MPI_Attr_get(dup, kv, &val, &flag);
		if (!flag || (val != &slots[0] && val != &slots[1]))
			bad++;
		MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
		if (!flag || *tag_ub < 32767)
			bad++;
		MPI_Errhandler_get(dup, &eh);
		if (eh != MPI_ERRORS_RETURN)
			bad++;
		MPI_Errhandler_free(&eh);
		{
			int nv = -2, nc = -2;

			if (MPI_T_cvar_get_num(&nv) != MPI_SUCCESS || nv != ncvars ||
			    MPI_T_category_get_num(&nc) != MPI_SUCCESS || nc != ncats)
				bad++;
		}
		bad += tool_step(&tool, it, &h);
		MPI_Address(&u[0], &a0);
		MPI_Address(&u[it % n], &a1);
		MPI_Type_extent(MPI_DOUBLE, &ext);
		MPI_Type_lb(MPI_DOUBLE, &lb);
		MPI_Type_ub(MPI_DOUBLE, &ub);
		if ((a1 - a0) != (MPI_Aint)(it % n) * ext || ub - lb != ext)
			bad++;
		s = u[it % n] * *val;
		MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, dup);
		u[0] = 1e-3 * s;
		h = hash_mix(h, &s, sizeof(s));
		/* From the left neighbour: 4 strided doubles into one and three
		 * more from the fourth; the root's pair to all. */
		if (MPI_Sendrecv(&u[8], 1, hv, (rank + 1) % size, 7, in, 1, hi,
				 (rank + size - 1) % size, 7, dup, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			bad++;
		u[1] += 1e-3 * (in[0] + in[3] + in[4] + in[5]);
		pr.i = it + rank;
		pr.d = u[1];
		MPI_Bcast(&pr, 1, st, it % size, dup);
		h = hash_mix(h, &pr.i, sizeof(pr.i));
		h = hash_mix(h, &pr.d, sizeof(pr.d));
		if (it % 100 == 99) {
			/* Another value for the attribute. */
			MPI_Attr_delete(dup, kv);
			MPI_Attr_put(dup, kv, &slots[(it / 100) % 2]);
		}
	}
	/* The MPI-1 keyval and error handler made before the loop. */
	MPI_Attr_put(dup, kv1, &slots[0]);
	MPI_Comm_dup(dup, &dup2);
	MPI_Attr_get(dup2, kv1, &val, &flag);
	if (!flag || val != &slots[0])
		bad++;
	MPI_Comm_free(&dup2);
	MPI_Attr_delete(dup, kv1);
	if (deleted != 2)
		bad++;
	MPI_Errhandler_set(dup, eh1);
	MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER);
	if (handled != 1)
		bad++;
	MPI_Errhandler_set(dup, MPI_ERRORS_RETURN);
	MPI_Errhandler_free(&eh1);
	MPI_Keyval_free(&kv1);
	MPI_Type_free(&hv);
	MPI_Type_free(&hi);
	MPI_Type_free(&st);
	bad += tool_close(&tool);
	h = hash_mix(h, &bad, sizeof(bad));
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(rank ? &bad : MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (!rank)
		printf("mpi1 n=%d iters=%d hash %016llx, %d wrong answers\n", n, iters,
		       (unsigned long long)all, bad);
	MPI_Comm_free(&dup);
	MPI_Keyval_free(&kv);
	free(u);
	/* The first finalize leaves it initialized: the second ends it (a
	 * restart that initialized it once too often would not). */
	MPI_T_finalize();
	if (MPI_T_cvar_get_num(&ncvars) != MPI_SUCCESS)
		fprintf(stderr, "mpi1: the tool interface ended at the first MPI_T_finalize\n"), exit(1);
	MPI_T_finalize();
	if (MPI_T_cvar_get_num(&ncvars) == MPI_SUCCESS)
		fprintf(stderr, "mpi1: the tool interface outlived its last MPI_T_finalize\n"), exit(1);
	MPI_Finalize();
	return 0;
}
