/* h5steps: an MPI program writing its output with parallel HDF5 through
 * MPI-IO, as simulation codes do: one file kept open, every step a new
 * dataset (each rank its slab, collective), a chunked dataset grown by one
 * row, an attribute rewritten, and a flush. HDF5 rewrites its superblock,
 * object headers and B-trees in place; every step also reads back the
 * previous step's dataset and the attribute, so a restart that did not put
 * the file back as it was at its checkpoint gives another answer.
 *
 *   h5steps [N [STEPS]]    N doubles per rank per step
 *
 * Output (rank 0, stdout):
 *   h5steps: n=<N> steps=<STEPS> checksum=<16 hex>
 */
#include <hdf5.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

static int dbg_del(MPI_Comm c, int k, void *v, void *x)
{
	(void)c;
	(void)k;
	(void)x;
	fprintf(stderr, "dbg delete callback %p\n", v);
	return MPI_SUCCESS;
}

static void die(const char *what)
{
	fprintf(stderr, "h5steps: %s failed\n", what);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 512, steps = argc > 2 ? atol(argv[2]) : 400;
	int rank, size;
	uint64_t h = HASH_START;
	double *x, *back;
	hid_t fapl, fcpl, file, dxpl, growing, attr, cparms, dcpl;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (getenv("H5DBG")) {
		int kv;
		MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, dbg_del, &kv, NULL);
		MPI_Comm_set_attr(MPI_COMM_SELF, kv, (void *)0x1234);
	}
	if (n < 1 || steps < 1)
		die("usage: h5steps [N [STEPS]]");
	x = malloc(sizeof(*x) * n);
	back = malloc(sizeof(*back) * n);
	if (!x || !back)
		die("malloc");
	for (long i = 0; i < n; i++)
		x[i] = (double)(i % 97) / 97.0 + rank;

	fapl = H5Pcreate(H5P_FILE_ACCESS);
	H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
	/* No creation times in the objects: the file is compared byte for
	 * byte with an uninterrupted run's. */
	fcpl = H5Pcreate(H5P_FILE_CREATE);
	H5Pset_obj_track_times(fcpl, 0);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	H5Pset_obj_track_times(dcpl, 0);
	file = H5Fcreate("h5steps.h5", H5F_ACC_TRUNC, fcpl, fapl);
	if (file < 0)
		die("H5Fcreate");
	dxpl = H5Pcreate(H5P_DATASET_XFER);
	H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);

	/* A chunked dataset of one row per step, grown every step. */
	{
		hsize_t dims[2] = {0, (hsize_t)n * size}, maxd[2] = {H5S_UNLIMITED, dims[1]},
			chunk[2] = {1, dims[1]};
		hid_t space = H5Screate_simple(2, dims, maxd);

		cparms = H5Pcreate(H5P_DATASET_CREATE);
		H5Pset_chunk(cparms, 2, chunk);
		H5Pset_obj_track_times(cparms, 0);
		growing = H5Dcreate2(file, "history", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, cparms,
				     H5P_DEFAULT);
		H5Sclose(space);
		if (growing < 0)
			die("H5Dcreate2 history");
	}
	{
		hid_t scalar = H5Screate(H5S_SCALAR);
		long zero = 0;

		attr = H5Acreate2(file, "steps", H5T_NATIVE_LONG, scalar, H5P_DEFAULT, H5P_DEFAULT);
		H5Awrite(attr, H5T_NATIVE_LONG, &zero);
		H5Sclose(scalar);
	}

	for (long s = 0; s < steps; s++) {
		char name[32];
		hsize_t dims[1] = {(hsize_t)n * size}, start[1] = {(hsize_t)n * rank},
			count[1] = {(hsize_t)n};
		hid_t fspace, mspace, dset;
		long done;

		for (long i = 0; i < n; i++)
			x[i] = 0.5 * x[i] + 0.25 * x[(i + 1) % n] + 1e-3 * (double)((s + i) % 7);

		if (getenv("H5DBG"))
			fprintf(stderr, "dbg step %ld native_double %lld H5open %d\n", s,
				(long long)H5T_NATIVE_DOUBLE_g, H5open());
		/* A new dataset for this step, this rank's slab. */
		snprintf(name, sizeof(name), "step%05ld", s);
		fspace = H5Screate_simple(1, dims, NULL);
		dset = H5Dcreate2(file, name, H5T_NATIVE_DOUBLE, fspace, H5P_DEFAULT, dcpl,
				  H5P_DEFAULT);
		if (dset < 0)
			die("H5Dcreate2");
		mspace = H5Screate_simple(1, count, NULL);
		H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
		if (H5Dwrite(dset, H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, x) < 0)
			die("H5Dwrite");
		H5Dclose(dset);
		H5Sclose(fspace);

		/* The history grows by a row. */
		{
			hsize_t gdims[2] = {(hsize_t)s + 1, (hsize_t)n * size},
				gstart[2] = {(hsize_t)s, (hsize_t)n * rank},
				gcount[2] = {1, (hsize_t)n};
			hid_t gspace;

			if (H5Dset_extent(growing, gdims) < 0)
				die("H5Dset_extent");
			gspace = H5Dget_space(growing);
			H5Sselect_hyperslab(gspace, H5S_SELECT_SET, gstart, NULL, gcount, NULL);
			if (H5Dwrite(growing, H5T_NATIVE_DOUBLE, mspace, gspace, dxpl, x) < 0)
				die("H5Dwrite history");
			H5Sclose(gspace);
		}

		/* The previous step's slab and the attribute, read back. */
		if (s > 0) {
			snprintf(name, sizeof(name), "step%05ld", s - 1);
			dset = H5Dopen2(file, name, H5P_DEFAULT);
			fspace = H5Dget_space(dset);
			H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
			if (H5Dread(dset, H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, back) < 0)
				die("H5Dread");
			h = hash_mix(h, back, sizeof(*back) * n);
			H5Sclose(fspace);
			H5Dclose(dset);
		}
		H5Sclose(mspace);
		if (H5Aread(attr, H5T_NATIVE_LONG, &done) < 0 || done != s)
			die("the steps attribute");
		done = s + 1;
		H5Awrite(attr, H5T_NATIVE_LONG, &done);
		/* On disk every step: HDF5 writes its metadata in place. */
		if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0)
			die("H5Fflush");
		MPI_Barrier(MPI_COMM_WORLD);
	}
	H5Aclose(attr);
	H5Dclose(growing);
	H5Pclose(cparms);
	H5Pclose(dcpl);
	H5Pclose(fcpl);
	H5Pclose(dxpl);
	H5Pclose(fapl);
	if (H5Fclose(file) < 0)
		die("H5Fclose");
	MPI_Allreduce(MPI_IN_PLACE, &h, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
	if (rank == 0)
		printf("h5steps: n=%ld steps=%ld checksum=%016llx\n", n, steps,
		       (unsigned long long)h);
	free(x);
	free(back);
	MPI_Finalize();
	return 0;
}
