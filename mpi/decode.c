/* Datatypes MPI hands the program without the program making them
 * (MPI_Type_get_contents returns new handles for the types inside a
 * derived type; Open MPI's are copies). stasis did not see them made, so it
 * asks MPI what they are (MPI_Type_get_envelope and MPI_Type_get_contents,
 * the standard's decoding interface) and records the constructor call
 * that makes them again, as if the program had called it. */
#define LOG_PREFIX "decode: "
#include <stdlib.h>

#include "calls.h"
#include "log.h"
#include "recorders.h"
#include "session.h"

#define MAX_DECODE_DEPTH 32

static MPI_Datatype adopt(MPI_Datatype real, int depth, const char *call);

/* Record the constructor that made real, from what MPI says of it, into
 * b. Inner derived types are adopted (recorded) first; their handles are
 * stasis's own, returned in *inner (*ninner of them) for the caller to
 * free once the new record holds them as parents. */
static int describe(MPI_Datatype real, struct rec_builder *b, int depth, const char *call,
		    MPI_Datatype **inner, int *ninner)
{
	int ni, na, nd, comb, *ints = NULL, ret = -EINVAL;
	MPI_Aint *addrs = NULL;
	MPI_Datatype *reals = NULL, *types = NULL;

	*inner = NULL;
	*ninner = 0;

	if (PMPI_Type_get_envelope(real, &ni, &na, &nd, &comb) != MPI_SUCCESS)
		return -EINVAL;
	ints = malloc(sizeof(int) * (ni + 1));
	addrs = malloc(sizeof(MPI_Aint) * (na + 1));
	reals = malloc(sizeof(MPI_Datatype) * (nd + 1));
	types = malloc(sizeof(MPI_Datatype) * (nd + 1));
	if (!ints || !addrs || !reals || !types) {
		ret = -ENOMEM;
		goto out;
	}
	if (PMPI_Type_get_contents(real, ni, na, nd, ints, addrs, reals) != MPI_SUCCESS)
		goto out;
	for (int i = 0; i < nd; i++)
		types[i] = adopt(reals[i], depth + 1, call);
	ret = 0;
	switch (comb) {
	case MPI_COMBINER_DUP:
		mpi_record_Type_dup(b, types[0]);
		break;
	case MPI_COMBINER_CONTIGUOUS:
		mpi_record_Type_contiguous(b, ints[0], types[0]);
		break;
	case MPI_COMBINER_VECTOR:
		mpi_record_Type_vector(b, ints[0], ints[1], ints[2], types[0]);
		break;
	case MPI_COMBINER_HVECTOR:
		mpi_record_Type_create_hvector(b, ints[0], ints[1], addrs[0], types[0]);
		break;
	case MPI_COMBINER_INDEXED:
		mpi_record_Type_indexed(b, ints[0], ints + 1, ints + 1 + ints[0], types[0]);
		break;
	case MPI_COMBINER_HINDEXED:
		mpi_record_Type_create_hindexed(b, ints[0], ints + 1, addrs, types[0]);
		break;
	case MPI_COMBINER_INDEXED_BLOCK:
		mpi_record_Type_create_indexed_block(b, ints[0], ints[1], ints + 2, types[0]);
		break;
	case MPI_COMBINER_HINDEXED_BLOCK:
		mpi_record_Type_create_hindexed_block(b, ints[0], ints[1], addrs, types[0]);
		break;
	case MPI_COMBINER_STRUCT:
		mpi_record_Type_create_struct(b, ints[0], ints + 1, addrs, types);
		break;
	case MPI_COMBINER_SUBARRAY:
		mpi_record_Type_create_subarray(b, ints[0], ints + 1, ints + 1 + ints[0],
						ints + 1 + 2 * ints[0], ints[1 + 3 * ints[0]], types[0]);
		break;
	case MPI_COMBINER_DARRAY:
		mpi_record_Type_create_darray(b, ints[0], ints[1], ints[2], ints + 3, ints + 3 + ints[2],
					      ints + 3 + 2 * ints[2], ints + 3 + 3 * ints[2],
					      ints[3 + 4 * ints[2]], types[0]);
		break;
	case MPI_COMBINER_F90_REAL:
		mpi_record_Type_create_f90_real(b, ints[0], ints[1]);
		break;
	case MPI_COMBINER_F90_COMPLEX:
		mpi_record_Type_create_f90_complex(b, ints[0], ints[1]);
		break;
	case MPI_COMBINER_F90_INTEGER:
		mpi_record_Type_create_f90_integer(b, ints[0]);
		break;
	case MPI_COMBINER_RESIZED:
		mpi_record_Type_create_resized(b, types[0], addrs[0], addrs[1]);
		break;
	default:
		ret = -ENOTSUP; /* the *_INTEGER combiners of MPI-1 Fortran */
	}
	/* MPI's inner handles were for the record only; stasis's go to the
	 * caller. */
	for (int i = 0; i < nd; i++)
		if (types[i] != reals[i]) {
			PMPI_Type_free(&reals[i]);
			types[(*ninner)++] = types[i];
		}
	*inner = types;
	types = NULL;
out:
	free(ints);
	free(addrs);
	free(reals);
	free(types);
	return ret;
}

static MPI_Datatype adopt(MPI_Datatype real, int depth, const char *call)
{
	struct rec_builder b = {0};
	int ni, na, nd, comb, ninner;
	MPI_Datatype v, *inner;

	if (real == MPI_DATATYPE_NULL)
		return real;
	v = vh_lookup_real(VH_TYPE, real);
	if (v) {
		/* One the program has: a handle of its own, made as a duplicate. */
		mpi_record_Type_dup(&b, v);
		return mpi_type_new_ref(real, &b, call);
	}
	if (PMPI_Type_get_envelope(real, &ni, &na, &nd, &comb) != MPI_SUCCESS ||
	    comb == MPI_COMBINER_NAMED)
		return real; /* predefined: its address does not move */
	inner = NULL;
	ninner = 0;
	if (depth > MAX_DECODE_DEPTH || describe(real, &b, depth, call, &inner, &ninner)) {
		free(b.data);
		free(b.parents);
		session_unsupported(call);
		v = real;
	} else {
		v = mpi_type_new(real, &b, call);
	}
	/* Kept as freed parents of the new record, made and freed again by
	 * a replay. */
	for (int i = 0; i < ninner; i++)
		rec_object_freed(VH_TYPE, inner[i]);
	free(inner);
	return v;
}

MPI_Datatype mpi_type_adopt(MPI_Datatype real, const char *call)
{
	return adopt(real, 0, call);
}
