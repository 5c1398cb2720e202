/* The MPI-IO calls written by hand, in C and Fortran: open, close and
 * set_view, collectives on the file's communicator whose results
 * mpiio.c records (mpiio.h). */
#include <limits.h>
#include <string.h>

#include "coord.h"
#include "export.h"
#include "handles.h"
#include "mpiio.h"
#include "runtime.h"

/* A Fortran CHARACTER argument as a C string: blanks around it trimmed (as
 * Open MPI's bindings do). */
static void fortran_string(const char *s, size_t len, char *out, size_t outlen)
{
	while (len && *s == ' ') {
		s++;
		len--;
	}
	while (len && s[len - 1] == ' ')
		len--;
	if (len >= outlen)
		len = outlen - 1;
	memcpy(out, s, len);
	out[len] = 0;
}

EXPORT int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info,
			 MPI_File *fh)
{
	MPI_Comm r_comm;
	MPI_Info r_info;
	int ret;

	stasis_depth++;
	coord_entry();
	coord_collective(comm);
	r_comm = VH_REAL(VH_COMM, MPI_Comm, comm);
	r_info = VH_REAL(VH_INFO, MPI_Info, info);
	ret = PMPI_File_open(r_comm, filename, amode, r_info, fh);
	coord_collective_done(comm);
	if (ret == MPI_SUCCESS)
		*fh = mpiio_opened(r_comm, filename, amode, r_info, *fh, false);
	stasis_depth--;
	return ret;
}

EXPORT void mpi_file_open_(MPI_Fint *comm, char *filename, MPI_Fint *amode, MPI_Fint *info,
			   MPI_Fint *fh, MPI_Fint *ierr, size_t filename_len)
{
	static void (*real)(MPI_Fint *, char *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
			    size_t);
	MPI_Comm v_comm = (MPI_Comm)vh_f2c(VH_COMM, *comm);
	MPI_Fint rf_comm, rf_info, rf_fh = 0;
	char name[PATH_MAX];
	MPI_File v;

	stasis_depth++;
	coord_entry();
	coord_collective(v_comm);
	rf_comm = vh_real_f(VH_COMM, *comm);
	rf_info = vh_real_f(VH_INFO, *info);
	if (!real)
		real = stasis_next_symbol("mpi_file_open_");
	real(&rf_comm, filename, amode, &rf_info, &rf_fh, ierr, filename_len);
	coord_collective_done(v_comm);
	if (*ierr == MPI_SUCCESS) {
		fortran_string(filename, filename_len, name, sizeof(name));
		v = mpiio_opened(PMPI_Comm_f2c(rf_comm), name, *amode, PMPI_Info_f2c(rf_info),
			   PMPI_File_f2c(rf_fh), true);
		*fh = rf_fh;
		if (vh_is_virtual(VH_FILE, v)) {
			vh_entry(VH_FILE, v)->real_f = rf_fh;
			*fh = vh_c2f(VH_FILE, v);
		}
	}
	stasis_depth--;
}
FORTRAN_ALIASES(mpi_file_open, MPI_FILE_OPEN)

EXPORT int MPI_File_close(MPI_File *fh)
{
	MPI_File v = *fh, r = VH_REAL(VH_FILE, MPI_File, v);
	MPI_Comm comm = mpiio_comm(v);
	int ret;

	stasis_depth++;
	coord_entry();
	coord_collective(comm);
	ret = PMPI_File_close(&r);
	coord_collective_done(comm);
	if (ret == MPI_SUCCESS) {
		mpiio_closed(v);
		*fh = r;
	}
	stasis_depth--;
	return ret;
}

EXPORT void mpi_file_close_(MPI_Fint *fh, MPI_Fint *ierr)
{
	static void (*real)(MPI_Fint *, MPI_Fint *);
	MPI_File v = (MPI_File)vh_f2c(VH_FILE, *fh);
	MPI_Comm comm = mpiio_comm(v);
	MPI_Fint rf = vh_real_f(VH_FILE, *fh);

	stasis_depth++;
	coord_entry();
	coord_collective(comm);
	if (!real)
		real = stasis_next_symbol("mpi_file_close_");
	real(&rf, ierr);
	coord_collective_done(comm);
	if (*ierr == MPI_SUCCESS) {
		mpiio_closed(v);
		*fh = rf;
	}
	stasis_depth--;
}
FORTRAN_ALIASES(mpi_file_close, MPI_FILE_CLOSE)

EXPORT int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype,
			     MPI_Datatype filetype, const char *datarep, MPI_Info info)
{
	MPI_Comm comm = mpiio_comm(fh);
	int ret;

	stasis_depth++;
	coord_entry();
	coord_collective(comm);
	ret = PMPI_File_set_view(
	    VH_REAL(VH_FILE, MPI_File, fh), disp, VH_REAL(VH_TYPE, MPI_Datatype, etype),
	    VH_REAL(VH_TYPE, MPI_Datatype, filetype), datarep, VH_REAL(VH_INFO, MPI_Info, info));
	coord_collective_done(comm);
	if (ret == MPI_SUCCESS)
		mpiio_view_set(fh, disp, etype, filetype, datarep);
	stasis_depth--;
	return ret;
}

EXPORT void mpi_file_set_view_(MPI_Fint *fh, MPI_Offset *disp, MPI_Fint *etype, MPI_Fint *filetype,
			       char *datarep, MPI_Fint *info, MPI_Fint *ierr, size_t datarep_len)
{
	static void (*real)(MPI_Fint *, MPI_Offset *, MPI_Fint *, MPI_Fint *, char *, MPI_Fint *,
			    MPI_Fint *, size_t);
	MPI_File v = (MPI_File)vh_f2c(VH_FILE, *fh);
	MPI_Comm comm = mpiio_comm(v);
	MPI_Fint rf_fh = vh_real_f(VH_FILE, *fh), rf_etype = vh_real_f(VH_TYPE, *etype),
		 rf_filetype = vh_real_f(VH_TYPE, *filetype), rf_info = vh_real_f(VH_INFO, *info);
	char rep[MPI_MAX_DATAREP_STRING];

	stasis_depth++;
	coord_entry();
	coord_collective(comm);
	if (!real)
		real = stasis_next_symbol("mpi_file_set_view_");
	real(&rf_fh, disp, &rf_etype, &rf_filetype, datarep, &rf_info, ierr, datarep_len);
	coord_collective_done(comm);
	if (*ierr == MPI_SUCCESS) {
		fortran_string(datarep, datarep_len, rep, sizeof(rep));
		mpiio_view_set(v, *disp, (MPI_Datatype)vh_f2c(VH_TYPE, *etype),
			 (MPI_Datatype)vh_f2c(VH_TYPE, *filetype), rep);
	}
	stasis_depth--;
}
FORTRAN_ALIASES(mpi_file_set_view, MPI_FILE_SET_VIEW)
