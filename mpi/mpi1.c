/* MPI-1's datatype constructors MPI-3 removed (calls.def), still called by
 * real codes: each is its MPI-2 twin, whose wrapper records it and whose
 * replay makes it again. In C the arguments are the same; in Fortran the
 * displacements and the stride are INTEGERs, widened here to the
 * MPI_Aint the twin takes. */
/* mpi.h declares them only when asked (as Open MPI's own build does). */
#define OMPI_OMIT_MPI1_COMPAT_DECLS 0
#include <mpi.h>
#include <stdlib.h>

#include "runtime.h"
#include "export.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

EXPORT int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
			    MPI_Datatype *newtype)
{
	return MPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype);
}

EXPORT int MPI_Type_hindexed(int count, int blocklengths[], MPI_Aint displacements[],
			     MPI_Datatype oldtype, MPI_Datatype *newtype)
{
	return MPI_Type_create_hindexed(count, blocklengths, displacements, oldtype, newtype);
}

EXPORT int MPI_Type_struct(int count, int blocklengths[], MPI_Aint displacements[],
			   MPI_Datatype types[], MPI_Datatype *newtype)
{
	return MPI_Type_create_struct(count, blocklengths, displacements, types, newtype);
}

/* The Fortran wrappers of the twins (generated, mpi_wrappers.c). */
void mpi_type_create_hvector_(void *, void *, void *, void *, void *, MPI_Fint *);
void mpi_type_create_hindexed_(void *, void *, void *, void *, void *, MPI_Fint *);
void mpi_type_create_struct_(void *, void *, void *, void *, void *, MPI_Fint *);

EXPORT void mpi_type_hvector_(MPI_Fint *count, MPI_Fint *blocklength, MPI_Fint *stride,
			      MPI_Fint *oldtype, MPI_Fint *newtype, MPI_Fint *ierr)
{
	MPI_Aint s = *stride;

	mpi_type_create_hvector_(count, blocklength, &s, oldtype, newtype, ierr);
}
FORTRAN_ALIASES(mpi_type_hvector, MPI_TYPE_HVECTOR)

/* n INTEGER displacements as MPI_Aint, in buf when they fit; NULL when
 * memory is short. */
static MPI_Aint *widen(const MPI_Fint *d, int n, MPI_Aint *buf, int bufn)
{
	MPI_Aint *w = buf;

	if (n > bufn) {
		stasis_depth++;
		w = malloc(sizeof(*w) * (size_t)n);
		stasis_depth--;
		if (!w)
			return NULL;
	}
	for (int i = 0; i < n; i++)
		w[i] = d[i];
	return w;
}

static void widened_done(MPI_Aint *w, const MPI_Aint *buf)
{
	if (w != buf) {
		stasis_depth++;
		free(w);
		stasis_depth--;
	}
}

EXPORT void mpi_type_hindexed_(MPI_Fint *count, MPI_Fint *blocklengths, MPI_Fint *displacements,
			       MPI_Fint *oldtype, MPI_Fint *newtype, MPI_Fint *ierr)
{
	MPI_Aint buf[16], *d = widen(displacements, *count, buf, 16);

	if (!d) {
		*ierr = MPI_ERR_NO_MEM;
		return;
	}
	mpi_type_create_hindexed_(count, blocklengths, d, oldtype, newtype, ierr);
	widened_done(d, buf);
}
FORTRAN_ALIASES(mpi_type_hindexed, MPI_TYPE_HINDEXED)

EXPORT void mpi_type_struct_(MPI_Fint *count, MPI_Fint *blocklengths, MPI_Fint *displacements,
			     MPI_Fint *types, MPI_Fint *newtype, MPI_Fint *ierr)
{
	MPI_Aint buf[16], *d = widen(displacements, *count, buf, 16);

	if (!d) {
		*ierr = MPI_ERR_NO_MEM;
		return;
	}
	mpi_type_create_struct_(count, blocklengths, d, types, newtype, ierr);
	widened_done(d, buf);
}
FORTRAN_ALIASES(mpi_type_struct, MPI_TYPE_STRUCT)
