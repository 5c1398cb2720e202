/* Message accounting for consistent checkpoints (DESIGN.md section 3): a
 * checkpoint is taken only when every message sent has been received and
 * no application request is pending (requests.h). Called from the
 * generated wrappers. */
#ifndef STASIS_TRAFFIC_H
#define STASIS_TRAFFIC_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

void traffic_sent(int peer);
void traffic_received(int peer);

/* Before MPI writes a receive buffer: let dirty tracking see the write. */
void traffic_recv_buffer(void *buf, int count, MPI_Datatype type);

/* Before a collective writes recvbuf: count elements of type, times the
 * size of comm when per_rank (gather-like calls). */
void traffic_recv_collective(void *buf, int count, MPI_Datatype type, MPI_Comm comm,
			     bool per_rank);

/* Before a v-collective writes recvbuf: counts[i] elements at displs[i]
 * (in extents of type) for each rank i of comm. */
void traffic_recv_blocks(void *buf, const int *counts, const int *displs, MPI_Datatype type,
			 MPI_Comm comm);

/* Before a collective writes this rank's block, counts[rank] elements. */
void traffic_recv_my_block(void *buf, const int *counts, MPI_Datatype type, MPI_Comm comm);

/* Receive buffers need preparing (mprotect backend) and this rank is the
 * root of a rooted collective, whose receive arguments mean something only
 * there. */
bool traffic_root_prepares(MPI_Comm comm, int root);

/* This rank's messages sent minus received, and its pending requests. */
void traffic_counts(int64_t *unmatched, int64_t *pending);

#endif
