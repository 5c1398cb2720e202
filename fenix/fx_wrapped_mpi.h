/* Included first (-include) in libfenix's own copy of the session and
 * redundancy layers. Inside libstasis.so those layers call the real MPI
 * (PMPI_*) on stasis's own communicators. libfenix calls them on the
 * program's: its groups' communicators, which under stasis-run are
 * virtual handles made by stasis's MPI_ wrappers, and whose collectives
 * stasis must see as the program's (to find where all ranks can stop, and
 * to make them again at a restart). So here every PMPI_ call is the MPI_
 * one: the wrappers under stasis-run, the MPI library itself without. */
#ifndef STASIS_FX_WRAPPED_MPI_H
#define STASIS_FX_WRAPPED_MPI_H

#define PMPI_Allgather MPI_Allgather
#define PMPI_Allgatherv MPI_Allgatherv
#define PMPI_Allreduce MPI_Allreduce
#define PMPI_Bcast MPI_Bcast
#define PMPI_Comm_free MPI_Comm_free
#define PMPI_Comm_rank MPI_Comm_rank
#define PMPI_Comm_size MPI_Comm_size
#define PMPI_Comm_split MPI_Comm_split
#define PMPI_Get_processor_name MPI_Get_processor_name
#define PMPI_Irecv MPI_Irecv
#define PMPI_Isend MPI_Isend
#define PMPI_Recv MPI_Recv
#define PMPI_Send MPI_Send
#define PMPI_Sendrecv MPI_Sendrecv
#define PMPI_Testsome MPI_Testsome
#define PMPI_Waitsome MPI_Waitsome

#endif
