/* Split collective MPI-IO (MPI_File_write_all_begin / _end and the five
 * others). A checkpoint between a begin and its end would hold half an
 * operation. The standard lets an implementation do the whole collective
 * in either call (MPI-3.1 13.4.5), so stasis does it in the begin, through
 * its own wrapper of the blocking call (counted as a collective on the
 * file, its writes seen first like any other), and the end returns the
 * status kept with the file, which a checkpoint saves with it (mpiio.h).
 * A file stasis does not record goes to MPI's own split calls. */
#include <mpi.h>
#include <string.h>

#include "export.h"
#include "handles.h"
#include "mpiio.h"
#include "runtime.h"

#define REAL_FILE(v) VH_REAL(VH_FILE, MPI_File, v)
#define REAL_TYPE(v) VH_REAL(VH_TYPE, MPI_Datatype, v)

static int begun(int ret, MPI_File fh, const MPI_Status *st)
{
	if (ret == MPI_SUCCESS)
		mpiio_split_begun(fh, st);
	return ret;
}

/* A begin: the blocking collective through stasis's wrapper, its status
 * kept; MPI's own begin for a file not recorded. AT: with an offset. */
#define SPLIT_BEGIN(name, blocking, real_begin, CONST)                                            \
	EXPORT int name(MPI_File fh, CONST void *buf, int count, MPI_Datatype datatype)            \
	{                                                                                          \
		MPI_Status st;                                                                     \
                                                                                                   \
		if (!mpiio_split_ours(fh))                                                         \
			return real_begin(REAL_FILE(fh), buf, count, REAL_TYPE(datatype));         \
		return begun(blocking(fh, buf, count, datatype, &st), fh, &st);                    \
	}
#define SPLIT_BEGIN_AT(name, blocking, real_begin, CONST)                                         \
	EXPORT int name(MPI_File fh, MPI_Offset offset, CONST void *buf, int count,                \
			MPI_Datatype datatype)                                                     \
	{                                                                                          \
		MPI_Status st;                                                                     \
                                                                                                   \
		if (!mpiio_split_ours(fh))                                                         \
			return real_begin(REAL_FILE(fh), offset, buf, count, REAL_TYPE(datatype)); \
		return begun(blocking(fh, offset, buf, count, datatype, &st), fh, &st);            \
	}

SPLIT_BEGIN(MPI_File_read_all_begin, MPI_File_read_all, PMPI_File_read_all_begin, )
SPLIT_BEGIN_AT(MPI_File_read_at_all_begin, MPI_File_read_at_all, PMPI_File_read_at_all_begin, )
SPLIT_BEGIN(MPI_File_read_ordered_begin, MPI_File_read_ordered, PMPI_File_read_ordered_begin, )
SPLIT_BEGIN(MPI_File_write_all_begin, MPI_File_write_all, PMPI_File_write_all_begin, const)
SPLIT_BEGIN_AT(MPI_File_write_at_all_begin, MPI_File_write_at_all, PMPI_File_write_at_all_begin,
	       const)
SPLIT_BEGIN(MPI_File_write_ordered_begin, MPI_File_write_ordered, PMPI_File_write_ordered_begin,
	    const)

/* The ends: the kept status, or MPI's own end for a file not recorded. */
#define SPLIT_END(name, real_end, CONST)                                                           \
	EXPORT int name(MPI_File fh, CONST void *buf, MPI_Status *status)                          \
	{                                                                                          \
		if (!mpiio_split_ours(fh))                                                         \
			return real_end(REAL_FILE(fh), buf, status);                               \
		return mpiio_split_end(fh, status);                                                \
	}

SPLIT_END(MPI_File_read_all_end, PMPI_File_read_all_end, )
SPLIT_END(MPI_File_read_at_all_end, PMPI_File_read_at_all_end, )
SPLIT_END(MPI_File_read_ordered_end, PMPI_File_read_ordered_end, )
SPLIT_END(MPI_File_write_all_end, PMPI_File_write_all_end, const)
SPLIT_END(MPI_File_write_at_all_end, PMPI_File_write_at_all_end, const)
SPLIT_END(MPI_File_write_ordered_end, PMPI_File_write_ordered_end, const)

/* Fortran (mpif.h, use mpi; mpi_f08 through gen_f08.py's trampolines):
 * the C calls above with the handles translated; a Fortran status is the
 * C struct seen as INTEGERs. */
#define F_FILE(f) vh_f2c(VH_FILE, *(f))
#define F_TYPE(f) vh_f2c(VH_TYPE, *(f))

#define F_SPLIT_BEGIN(sym, upper, c_begin)                                                         \
	EXPORT void sym##_(MPI_Fint *fh, void *buf, MPI_Fint *count, MPI_Fint *datatype,           \
			   MPI_Fint *ierr)                                                         \
	{                                                                                          \
		*ierr = c_begin(F_FILE(fh), buf, *count, F_TYPE(datatype));                        \
	}                                                                                          \
	FORTRAN_ALIASES(sym, upper)
#define F_SPLIT_BEGIN_AT(sym, upper, c_begin)                                                      \
	EXPORT void sym##_(MPI_Fint *fh, MPI_Offset *offset, void *buf, MPI_Fint *count,           \
			   MPI_Fint *datatype, MPI_Fint *ierr)                                     \
	{                                                                                          \
		*ierr = c_begin(F_FILE(fh), *offset, buf, *count, F_TYPE(datatype));               \
	}                                                                                          \
	FORTRAN_ALIASES(sym, upper)

F_SPLIT_BEGIN(mpi_file_read_all_begin, MPI_FILE_READ_ALL_BEGIN, MPI_File_read_all_begin)
F_SPLIT_BEGIN_AT(mpi_file_read_at_all_begin, MPI_FILE_READ_AT_ALL_BEGIN,
		 MPI_File_read_at_all_begin)
F_SPLIT_BEGIN(mpi_file_read_ordered_begin, MPI_FILE_READ_ORDERED_BEGIN, MPI_File_read_ordered_begin)
F_SPLIT_BEGIN(mpi_file_write_all_begin, MPI_FILE_WRITE_ALL_BEGIN, MPI_File_write_all_begin)
F_SPLIT_BEGIN_AT(mpi_file_write_at_all_begin, MPI_FILE_WRITE_AT_ALL_BEGIN,
		 MPI_File_write_at_all_begin)
F_SPLIT_BEGIN(mpi_file_write_ordered_begin, MPI_FILE_WRITE_ORDERED_BEGIN,
	      MPI_File_write_ordered_begin)

#define F_SPLIT_END(sym, upper, c_end)                                                             \
	EXPORT void sym##_(MPI_Fint *fh, void *buf, MPI_Fint *status, MPI_Fint *ierr)              \
	{                                                                                          \
		MPI_Status st;                                                                     \
                                                                                                   \
		*ierr = c_end(F_FILE(fh), buf, &st);                                               \
		if (*ierr == MPI_SUCCESS && status != MPI_F_STATUS_IGNORE)                         \
			memcpy(status, &st, sizeof(st));                                           \
	}                                                                                          \
	FORTRAN_ALIASES(sym, upper)

F_SPLIT_END(mpi_file_read_all_end, MPI_FILE_READ_ALL_END, MPI_File_read_all_end)
F_SPLIT_END(mpi_file_read_at_all_end, MPI_FILE_READ_AT_ALL_END, MPI_File_read_at_all_end)
F_SPLIT_END(mpi_file_read_ordered_end, MPI_FILE_READ_ORDERED_END, MPI_File_read_ordered_end)
F_SPLIT_END(mpi_file_write_all_end, MPI_FILE_WRITE_ALL_END, MPI_File_write_all_end)
F_SPLIT_END(mpi_file_write_at_all_end, MPI_FILE_WRITE_AT_ALL_END, MPI_File_write_at_all_end)
F_SPLIT_END(mpi_file_write_ordered_end, MPI_FILE_WRITE_ORDERED_END, MPI_File_write_ordered_end)
