#define LOG_PREFIX "blocking: "
#include <string.h>

#include "arena.h"
#include "blocking.h"
#include "export.h"

/* stasis's own wrappers (generated): every turn of a loop goes through
 * them, so that completions are counted and the turn is a stop point.
 * The loops spin as MPI's own blocking calls do: each MPI_Test drives
 * Open MPI's progress once, which yields the processor when idle where
 * the launcher asked for that (an oversubscribed node) and spins
 * otherwise. A sched_yield of ours on every turn cost 10 us and more per
 * message on a busy node (bench/handles_perf.sh). */
void mpi_test_(void *, void *, void *, MPI_Fint *);
void mpi_testall_(void *, void *, void *, void *, MPI_Fint *);
void mpi_testany_(void *, void *, void *, void *, void *, MPI_Fint *);
void mpi_testsome_(void *, void *, void *, void *, void *, MPI_Fint *);
void mpi_iprobe_(void *, void *, void *, void *, void *, MPI_Fint *);
void mpi_improbe_(void *, void *, void *, void *, void *, void *, MPI_Fint *);
void mpi_isend_(void *, void *, void *, void *, void *, void *, void *, MPI_Fint *);
void mpi_irecv_(void *, void *, void *, void *, void *, void *, void *, MPI_Fint *);
void mpi_pack_size_(void *, void *, void *, void *, MPI_Fint *);
void mpi_pack_(void *, void *, void *, void *, void *, void *, void *, MPI_Fint *);

int blocking_wait(MPI_Request *req, MPI_Status *status)
{
	int flag = 0, ret;

	for (;;) {
		ret = MPI_Test(req, &flag, status);
		if (ret != MPI_SUCCESS || flag)
			return ret;
	}
}

void blocking_wait_f(MPI_Fint *req, MPI_Fint *status, MPI_Fint *ierr)
{
	MPI_Fint flag = 0;

	for (;;) {
		mpi_test_(req, &flag, status, ierr);
		if (*ierr != MPI_SUCCESS || flag)
			return;
	}
}

int mpi_conv_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
		      int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
		      int recvtag, MPI_Comm comm, MPI_Status *status)
{
	MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
	MPI_Status st[2];
	int ret = MPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &r[0]);

	if (ret == MPI_SUCCESS)
		ret = MPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &r[1]);
	if (ret == MPI_SUCCESS)
		ret = mpi_conv_Waitall(2, r, st);
	if (ret == MPI_SUCCESS && status != MPI_STATUS_IGNORE)
		*status = st[0];
	return ret;
}

/* The outgoing data is packed first, in the program's arena: a checkpoint
 * may come while it is sent, and the pointer must stay good after a
 * restart (the send itself completes before any checkpoint). */
int mpi_conv_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
			      int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
	int size = 0, pos = 0, ret = MPI_Pack_size(count, datatype, comm, &size);
	void *packed;

	if (ret != MPI_SUCCESS)
		return ret;
	packed = arena_malloc(size ? size : 1);
	if (!packed)
		return MPI_ERR_NO_MEM;
	ret = MPI_Pack(buf, count, datatype, packed, size, &pos, comm);
	if (ret == MPI_SUCCESS)
		ret = mpi_conv_Sendrecv(packed, pos, MPI_PACKED, dest, sendtag, buf, count,
					datatype, source, recvtag, comm, status);
	arena_free(packed);
	return ret;
}

int mpi_conv_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
	int flag = 0, ret;

	for (;;) {
		ret = MPI_Iprobe(source, tag, comm, &flag, status);
		if (ret != MPI_SUCCESS || flag)
			return ret;
	}
}

int mpi_conv_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
	int flag = 0, ret;

	for (;;) {
		ret = MPI_Improbe(source, tag, comm, &flag, message, status);
		if (ret != MPI_SUCCESS || flag)
			return ret;
	}
}

int mpi_conv_Wait(MPI_Request *request, MPI_Status *status)
{
	return blocking_wait(request, status);
}

int mpi_conv_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
	int flag = 0, ret;

	for (;;) {
		ret = MPI_Testall(count, requests, &flag, statuses);
		if (ret != MPI_SUCCESS || flag)
			return ret;
	}
}

int mpi_conv_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
	int flag = 0, ret;

	for (;;) {
		ret = MPI_Testany(count, requests, index, &flag, status);
		if (ret != MPI_SUCCESS || flag)
			return ret;
	}
}

int mpi_conv_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
		      MPI_Status statuses[])
{
	int ret;

	for (;;) {
		ret = MPI_Testsome(incount, requests, outcount, indices, statuses);
		if (ret != MPI_SUCCESS || *outcount != 0)
			return ret;
	}
}

/* --- Fortran ---------------------------------------------------------------------- */

void mpi_conv_sendrecv_f(void *sendbuf, void *sendcount, void *sendtype, void *dest, void *sendtag,
			 void *recvbuf, void *recvcount, void *recvtype, void *source,
			 void *recvtag, void *comm, void *status, MPI_Fint *ierr)
{
	MPI_Fint r[2], two = 2, st[2 * (sizeof(MPI_Status) / sizeof(MPI_Fint))], flag = 0;

	mpi_irecv_(recvbuf, recvcount, recvtype, source, recvtag, comm, &r[0], ierr);
	if (*ierr == MPI_SUCCESS)
		mpi_isend_(sendbuf, sendcount, sendtype, dest, sendtag, comm, &r[1], ierr);
	while (*ierr == MPI_SUCCESS) {
		mpi_testall_(&two, r, &flag, st, ierr);
		if (flag)
			break;
	}
	if (*ierr == MPI_SUCCESS && status != MPI_F_STATUS_IGNORE)
		memcpy(status, st, sizeof(MPI_Status));
}

void mpi_conv_sendrecv_replace_f(void *buf, void *count, void *datatype, void *dest, void *sendtag,
				 void *source, void *recvtag, void *comm, void *status,
				 MPI_Fint *ierr)
{
	MPI_Fint size = 0, pos = 0, packed_type = PMPI_Type_c2f(MPI_PACKED);
	void *packed;

	mpi_pack_size_(count, datatype, comm, &size, ierr);
	if (*ierr != MPI_SUCCESS)
		return;
	packed = arena_malloc(size ? size : 1);
	if (!packed) {
		*ierr = MPI_ERR_NO_MEM;
		return;
	}
	mpi_pack_(buf, count, datatype, packed, &size, &pos, comm, ierr);
	if (*ierr == MPI_SUCCESS)
		mpi_conv_sendrecv_f(packed, &pos, &packed_type, dest, sendtag, buf, count, datatype,
				    source, recvtag, comm, status, ierr);
	arena_free(packed);
}

void mpi_conv_probe_f(void *source, void *tag, void *comm, void *status, MPI_Fint *ierr)
{
	MPI_Fint flag = 0;

	for (;;) {
		mpi_iprobe_(source, tag, comm, &flag, status, ierr);
		if (*ierr != MPI_SUCCESS || flag)
			return;
	}
}

void mpi_conv_mprobe_f(void *source, void *tag, void *comm, void *message, void *status,
		       MPI_Fint *ierr)
{
	MPI_Fint flag = 0;

	for (;;) {
		mpi_improbe_(source, tag, comm, &flag, message, status, ierr);
		if (*ierr != MPI_SUCCESS || flag)
			return;
	}
}

void mpi_conv_wait_f(void *request, void *status, MPI_Fint *ierr)
{
	blocking_wait_f(request, status, ierr);
}

void mpi_conv_waitall_f(void *count, void *requests, void *statuses, MPI_Fint *ierr)
{
	MPI_Fint flag = 0;

	for (;;) {
		mpi_testall_(count, requests, &flag, statuses, ierr);
		if (*ierr != MPI_SUCCESS || flag)
			return;
	}
}

void mpi_conv_waitany_f(void *count, void *requests, void *index, void *status, MPI_Fint *ierr)
{
	MPI_Fint flag = 0;

	for (;;) {
		mpi_testany_(count, requests, index, &flag, status, ierr);
		if (*ierr != MPI_SUCCESS || flag)
			return;
	}
}

void mpi_conv_waitsome_f(void *incount, void *requests, void *outcount, void *indices,
			 void *statuses, MPI_Fint *ierr)
{
	for (;;) {
		mpi_testsome_(incount, requests, outcount, indices, statuses, ierr);
		if (*ierr != MPI_SUCCESS || *(MPI_Fint *)outcount != 0)
			return;
	}
}
