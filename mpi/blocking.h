/* Blocking point-to-point MPI calls (MPI_Recv, MPI_Wait, MPI_Probe, ...)
 * always run as their non-blocking forms plus a loop that tests them, so
 * that a rank waiting for a message can still stop for a checkpoint: every
 * turn of the loop is a place where it can (coord.h, step 3). The loop
 * holds only the program's virtual handles: a checkpoint may be taken in
 * it, and a restart resumes it in another process. The Fortran forms go
 * through the Fortran bindings (which turn MPI_IN_PLACE, MPI_BOTTOM and
 * statuses into their C forms). */
#ifndef STASIS_MPI_BLOCKING_H
#define STASIS_MPI_BLOCKING_H

#include <mpi.h>

/* Wait for the program's request *req (stasis's MPI_Test in a loop). */
int blocking_wait(MPI_Request *req, MPI_Status *status);
void blocking_wait_f(MPI_Fint *req, MPI_Fint *status, MPI_Fint *ierr);

/* Written by hand (calls.def "block=conv"), for the calls whose loop is
 * more than one non-blocking call and a wait: Sendrecv is an Irecv and an
 * Isend, a Probe loops on Iprobe, a Wait loops on Test. */
int mpi_conv_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
		      int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
		      int recvtag, MPI_Comm comm, MPI_Status *status);
int mpi_conv_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
			      int source, int recvtag, MPI_Comm comm, MPI_Status *status);
int mpi_conv_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int mpi_conv_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status);
int mpi_conv_Wait(MPI_Request *request, MPI_Status *status);
int mpi_conv_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]);
int mpi_conv_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status);
int mpi_conv_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
		      MPI_Status statuses[]);

/* The same through the Fortran bindings (every argument by reference). */
void mpi_conv_sendrecv_f(void *sendbuf, void *sendcount, void *sendtype, void *dest, void *sendtag,
			 void *recvbuf, void *recvcount, void *recvtype, void *source,
			 void *recvtag, void *comm, void *status, MPI_Fint *ierr);
void mpi_conv_sendrecv_replace_f(void *buf, void *count, void *datatype, void *dest, void *sendtag,
				 void *source, void *recvtag, void *comm, void *status,
				 MPI_Fint *ierr);
void mpi_conv_probe_f(void *source, void *tag, void *comm, void *status, MPI_Fint *ierr);
void mpi_conv_mprobe_f(void *source, void *tag, void *comm, void *message, void *status,
		       MPI_Fint *ierr);
void mpi_conv_wait_f(void *request, void *status, MPI_Fint *ierr);
void mpi_conv_waitall_f(void *count, void *requests, void *statuses, MPI_Fint *ierr);
void mpi_conv_waitany_f(void *count, void *requests, void *index, void *status, MPI_Fint *ierr);
void mpi_conv_waitsome_f(void *incount, void *requests, void *outcount, void *indices,
			 void *statuses, MPI_Fint *ierr);

#endif
