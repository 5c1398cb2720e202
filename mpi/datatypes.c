/* The lifecycle of the program's MPI objects other than communicators,
 * groups and requests: datatypes (made, committed, freed), info objects,
 * and handles MPI returns from inquiries (MPI_Comm_get_errhandler, ...).
 * Each new object gets a virtual handle (handles.h) and a record
 * (record.h), so that a restart can make it again. Declared in calls.h. */
#define LOG_PREFIX "datatypes: "
#include <stdio.h>
#include <stdlib.h>

#include "calls.h"
#include "collective_counts.h"
#include "log.h"
#include "session.h"

MPI_Datatype mpi_type_new(MPI_Datatype real, struct rec_builder *b, const char *call)
{
	struct mpi_record *rec = rec_make(VH_TYPE, b, 0);

	if (real == MPI_DATATYPE_NULL) {
		rec_discard(rec);
		return real;
	}
	return vh_adopt(VH_TYPE, real, rec, 0, call);
}

MPI_Datatype mpi_type_new_ref(MPI_Datatype real, struct rec_builder *b, const char *call)
{
	return vh_adopt(VH_TYPE, real, rec_make(VH_TYPE, b, 0), VH_REF, call);
}

MPI_Fint mpi_type_new_f(MPI_Fint real_f, struct rec_builder *b, const char *call)
{
	return vh_keep_real_f(VH_TYPE, mpi_type_new(PMPI_Type_f2c(real_f), b, call), real_f);
}

MPI_Info mpi_info_new(MPI_Info real, const char *call)
{
	struct rec_builder b = {0};

	if (real == MPI_INFO_NULL || real == MPI_INFO_ENV)
		return real;
	recbuf_int(&b, 0); /* no keys yet: a checkpoint records the contents */
	return vh_adopt(VH_INFO, real, rec_make(VH_INFO, &b, 0), 0, call);
}

MPI_Fint mpi_info_new_f(MPI_Fint real_f, const char *call)
{
	return vh_keep_real_f(VH_INFO, mpi_info_new(PMPI_Info_f2c(real_f), call), real_f);
}

void *mpi_adopt(enum vh_kind k, void *real, const char *call)
{
	void *v;

	if (k == VH_TYPE)
		return mpi_type_adopt(real, call);
	if (real == vh_null(k))
		return real;
	v = vh_lookup_real(k, real);
	/* Else predefined (MPI_ERRORS_RETURN ...), or made behind stasis's
	 * back: a communicator from a spawn, a window from a binding stasis
	 * does not wrap. */
	if (!v && (k == VH_COMM || k == VH_WIN))
		session_unsupported(call);
	return v ? v : real;
}

MPI_Fint mpi_adopt_f(enum vh_kind k, MPI_Fint real_f, const char *call)
{
	void *real = vh_real_f2c(k, real_f), *v = mpi_adopt(k, real, call);

	return v == real ? real_f : vh_keep_real_f(k, v, real_f);
}

void mpi_freed(enum vh_kind k, void *v)
{
	struct vh_entry *e = vh_entry(k, v);

	if (!e)
		return;
	if (k == VH_COMM)
		collective_counts_detach(e);
	rec_object_freed(k, v);
}

void mpi_freed_f(enum vh_kind k, MPI_Fint v)
{
	if (vh_is_virtual_f(v))
		mpi_freed(k, vh_f2c(k, v));
}

void mpi_keyval_freed(int v)
{
	if (v >= VH_FBASE)
		rec_object_freed(VH_KEYVAL, vh_value(VH_KEYVAL, (uint32_t)(v - VH_FBASE)));
}

void mpi_type_committed(MPI_Datatype v)
{
	struct vh_entry *e = vh_entry(VH_TYPE, v);

	if (e && e->rec)
		e->rec->flags |= REC_COMMITTED;
}

void mpi_type_committed_f(MPI_Fint v)
{
	if (vh_is_virtual_f(v))
		mpi_type_committed(vh_f2c(VH_TYPE, v));
}

void *mpi_out_array(void **buf, int bufn, int n, enum vh_kind k)
{
	void **out = n > bufn ? malloc(sizeof(*out) * (size_t)n) : buf;

	for (int i = 0; out && i < n; i++)
		out[i] = vh_null(k);
	return out;
}

MPI_Fint *mpi_f_out_array(void *app, int n, MPI_Fint *buf, int bufn, enum vh_kind k)
{
	MPI_Fint *out = n > bufn ? malloc(sizeof(*out) * (size_t)n) : buf;
	MPI_Fint null = vh_real_c2f(k, vh_null(k));

	(void)app;
	for (int i = 0; out && i < n; i++)
		out[i] = null;
	return out;
}

bool mpi_index_in(const int *indices, int n, int i)
{
	for (int j = 0; n != MPI_UNDEFINED && j < n; j++)
		if (indices[j] == i)
			return true;
	return false;
}

void mpi_unknown(const char *call)
{
	static char line[256];

	if (session_get() && session_get()->blocked_by)
		return;
	snprintf(line, sizeof(line), "%s (an MPI call stasis does not know)", call);
	session_unsupported(line);
}

int mpi_size(MPI_Comm comm)
{
	int n = 0;

	PMPI_Comm_size(comm, &n);
	return n;
}

int mpi_peers(MPI_Comm comm)
{
	int inter = 0, n = 0;

	PMPI_Comm_test_inter(comm, &inter);
	if (inter)
		PMPI_Comm_remote_size(comm, &n);
	else
		PMPI_Comm_size(comm, &n);
	return n;
}

static void degrees(MPI_Comm comm, int *in, int *out)
{
	int topo = MPI_UNDEFINED, w, n;

	*in = *out = 0;
	PMPI_Topo_test(comm, &topo);
	if (topo == MPI_DIST_GRAPH) {
		PMPI_Dist_graph_neighbors_count(comm, in, out, &w);
	} else if (topo == MPI_GRAPH) {
		int rank;

		PMPI_Comm_rank(comm, &rank);
		PMPI_Graph_neighbors_count(comm, rank, &n);
		*in = *out = n;
	} else if (topo == MPI_CART) {
		PMPI_Cartdim_get(comm, &n);
		*in = *out = 2 * n;
	}
}

int mpi_indegree(MPI_Comm comm)
{
	int in, out;

	degrees(comm, &in, &out);
	return in;
}

int mpi_outdegree(MPI_Comm comm)
{
	int in, out;

	degrees(comm, &in, &out);
	return out;
}
