/* objects: the MPI objects real codes make less often, each checked after
 * every step so that one a restart did not bring back exactly changes the
 * output: an intercommunicator and its merge, graph and distributed-graph
 * topologies with neighbour collectives, a shared-memory split, info objects,
 * a user error handler MPI calls, datatype attributes and names (on
 * predefined datatypes too), the contents of a derived type, Fortran 90
 * types, groups made by set operations, and MPI_Alloc_mem memory.
 *
 *   objects [N [ITERS]] [--core]     (4 ranks or more)
 *
 * --core also splits the world by the core each rank is bound to (Open
 * MPI's OMPI_COMM_TYPE_CORE): a grouping that depends on how the launcher
 * placed the ranks, which a restart cannot force to be the same.
 *
 * Output (rank 0, stdout, at the end): one line hashing every check.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash = 0xcbf29ce484222325ull;

static void mix(const void *buf, size_t len)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++) {
		hash ^= p[i];
		hash *= 0x100000001b3ull;
	}
}

static void mixi(int v)
{
	mix(&v, sizeof(v));
}

static void fail(const char *what)
{
	fprintf(stderr, "objects: %s\n", what);
	exit(1);
}

static int handled; /* errors the handler saw */
static MPI_Comm inter_seen;

static void on_error(MPI_Comm *comm, int *code, ...)
{
	inter_seen = *comm;
	handled += *code == MPI_ERR_OTHER;
}

static int type_copies;

static int type_copy(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag)
{
	(void)t;
	(void)key;
	(void)extra;
	type_copies++;
	*(void **)out = in;
	*flag = 1;
	return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 64, iters = argc > 2 ? atoi(argv[2]) : 2000;
	int rank, size, color, flag, len, core_size = 0;
	MPI_Comm half, inter, merged, graph, dist, node, core = MPI_COMM_NULL;
	MPI_Group wg, lo, hi, uni, inter_g;
	MPI_Info info;
	MPI_Errhandler eh;
	MPI_Datatype vec, dup, f90, contents_types[1];
	static int type_attr = 77;
	int predef_kv;
	double *mem;
	char value[64], name[MPI_MAX_OBJECT_NAME];

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 4)
		fail("needs 4 ranks or more");

	/* Two halves joined by an intercommunicator, and merged back. */
	color = rank < size / 2;
	MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
	MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color ? size / 2 : 0, 7, &inter);
	MPI_Intercomm_merge(inter, !color, &merged);

	/* A ring as a graph, and as a distributed graph with weights. */
	{
		int *index = malloc(sizeof(int) * size), *edges = malloc(sizeof(int) * 2 * size);
		int src[2] = {(rank + size - 1) % size, (rank + 1) % size}, w[2] = {1, 2};

		for (int r = 0; r < size; r++) {
			index[r] = 2 * (r + 1);
			edges[2 * r] = (r + size - 1) % size;
			edges[2 * r + 1] = (r + 1) % size;
		}
		MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &graph);
		MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, src, w, 2, src, w, MPI_INFO_NULL,
					       0, &dist);
		free(index);
		free(edges);
	}
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
	if (argc > 3 && !strcmp(argv[3], "--core")) {
		MPI_Comm_split_type(MPI_COMM_WORLD, OMPI_COMM_TYPE_CORE, rank, MPI_INFO_NULL, &core);
		MPI_Comm_size(core, &core_size);
	}

	/* Groups by set operations. */
	MPI_Comm_group(MPI_COMM_WORLD, &wg);
	{
		int r0[2] = {0, 1}, r1[2] = {1, 2};

		MPI_Group_incl(wg, 2, r0, &lo);
		MPI_Group_incl(wg, 2, r1, &hi);
		MPI_Group_union(lo, hi, &uni);
	}
	MPI_Comm_remote_group(inter, &inter_g);

	MPI_Info_create(&info);
	MPI_Info_set(info, "stasis_test_key", "hello");
	MPI_Comm_create_errhandler(on_error, &eh);
	MPI_Comm_set_errhandler(merged, eh);
	MPI_Errhandler_free(&eh); /* the communicator keeps it */

	MPI_Type_vector(2, 1, 3, MPI_INT, &vec);
	MPI_Type_dup(vec, &dup);
	MPI_Type_commit(&dup);
	MPI_Type_set_name(dup, "objects-dup");
	{
		int kv;

		MPI_Type_create_keyval(type_copy, MPI_TYPE_NULL_DELETE_FN, &kv, NULL);
		MPI_Type_set_attr(dup, kv, &type_attr);
		MPI_Type_free_keyval(&kv); /* the attribute stays on dup */
	}
	/* Predefined datatypes take names and attributes too. */
	MPI_Type_set_name(MPI_INT, "objects-int");
	MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &predef_kv, NULL);
	MPI_Type_set_attr(MPI_DOUBLE, predef_kv, &type_attr);
	MPI_Type_create_f90_real(15, 300, &f90);
	MPI_Alloc_mem(sizeof(double) * n, MPI_INFO_NULL, &mem);
	for (int i = 0; i < n; i++)
		mem[i] = rank + i;

	for (int it = 0; it < iters; it++) {
		int a, b, res, sbuf[2] = {rank, it}, rbuf[2], nb[2], nsz;
		double d;

		/* intercommunicator: each side's leader sees the other's */
		MPI_Comm_remote_size(inter, &a);
		mixi(a);
		b = rank;
		MPI_Allreduce(MPI_IN_PLACE, &b, 1, MPI_INT, MPI_SUM, merged);
		MPI_Comm_rank(merged, &a);
		mixi(a);
		mixi(b);
		/* topologies and neighbour collectives */
		MPI_Graph_neighbors(graph, rank, 2, nb);
		mix(nb, sizeof(nb));
		MPI_Neighbor_allgather(sbuf, 1, MPI_INT, rbuf, 1, MPI_INT, dist);
		mix(rbuf, sizeof(rbuf));
		MPI_Comm_size(node, &nsz);
		mixi(nsz);
		if (core != MPI_COMM_NULL) {
			a = 1;
			MPI_Allreduce(MPI_IN_PLACE, &a, 1, MPI_INT, MPI_SUM, core);
			if (a != core_size)
				fail("the core communicator changed");
		}
		/* groups */
		MPI_Group_size(uni, &a);
		MPI_Group_compare(lo, hi, &res);
		mixi(a);
		mixi(res);
		MPI_Group_size(inter_g, &a);
		mixi(a);
		/* info, error handler, datatype attribute, name, contents */
		MPI_Info_get(info, "stasis_test_key", sizeof(value) - 1, value, &flag);
		if (!flag || strcmp(value, "hello"))
			fail("the info object lost its key");
		if (it % 100 == 0) {
			MPI_Comm_call_errhandler(merged, MPI_ERR_OTHER);
			if (inter_seen != merged)
				fail("the error handler saw another communicator");
		}
		MPI_Type_get_name(dup, name, &len);
		if (strcmp(name, "objects-dup"))
			fail("the datatype lost its name");
		MPI_Type_get_name(MPI_INT, name, &len);
		if (strcmp(name, "objects-int"))
			fail("MPI_INT lost its name");
		{
			void *v;

			MPI_Type_get_attr(MPI_DOUBLE, predef_kv, &v, &flag);
			if (!flag || v != &type_attr)
				fail("MPI_DOUBLE lost its attribute");
		}
		if (it % 50 == 0) {
			int ni, na, nd, comb, ints[4];
			MPI_Aint addrs[1];
			MPI_Datatype copy;

			MPI_Type_get_envelope(dup, &ni, &na, &nd, &comb);
			if (comb != MPI_COMBINER_DUP || nd != 1)
				fail("the datatype lost its envelope");
			MPI_Type_get_contents(dup, 4, 1, 1, ints, addrs, contents_types);
			{
				int s1, s2;
				MPI_Aint lb1, e1, lb2, e2;

				MPI_Type_size(contents_types[0], &s1);
				MPI_Type_size(vec, &s2);
				MPI_Type_get_extent(contents_types[0], &lb1, &e1);
				MPI_Type_get_extent(vec, &lb2, &e2);
				if (s1 != s2 || lb1 != lb2 || e1 != e2)
					fail("the datatype's contents are another type");
			}
			MPI_Type_free(&contents_types[0]);
			MPI_Type_dup(dup, &copy); /* copies the attribute (callback) */
			MPI_Type_free(&copy);
		}
		d = mem[it % n];
		MPI_Allreduce(MPI_IN_PLACE, &d, 1, f90, MPI_SUM, MPI_COMM_WORLD);
		mix(&d, sizeof(d));
		mem[it % n] += 1;
	}
	mixi(handled);
	mixi(type_copies);

	MPI_Free_mem(mem);
	MPI_Type_free(&dup);
	MPI_Type_free(&vec);
	MPI_Info_free(&info);
	MPI_Group_free(&inter_g);
	MPI_Group_free(&uni);
	MPI_Group_free(&hi);
	MPI_Group_free(&lo);
	MPI_Group_free(&wg);
	MPI_Comm_free(&node);
	if (core != MPI_COMM_NULL)
		MPI_Comm_free(&core);
	MPI_Comm_free(&dist);
	MPI_Comm_free(&graph);
	MPI_Comm_free(&merged);
	MPI_Comm_free(&inter);
	MPI_Comm_free(&half);
	if (rank == 0)
		printf("objects: n=%d iters=%d ranks=%d hash=%016llx handled=%d copies=%d\n", n, iters,
		       size, (unsigned long long)hash, handled, type_copies);
	MPI_Finalize();
	return 0;
}
