/* Message accounting for consistent checkpoints (DESIGN.md sections 3 and
 * 10): messages sent are counted by the world rank of their destination,
 * messages received in one total, so that at a checkpoint each rank can
 * learn how many are still on their way to it and drain them (drain.h).
 * Called from the generated wrappers; the counts restart from zero after
 * every checkpoint (all balanced then). */
#ifndef STASIS_TRAFFIC_H
#define STASIS_TRAFFIC_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

/* A message went to rank dest of the program's communicator comm (its
 * remote group for an intercommunicator); MPI_PROC_NULL counts nothing. */
void traffic_sent(MPI_Comm comm, int dest);
/* A message from peer was received (MPI_PROC_NULL: none). */
void traffic_received(int peer);
/* After MPI_Init. */
int traffic_init(void);
/* Messages sent to each world rank since the last reset (size of the
 * world), and received in all. */
const uint64_t *traffic_sent_to(void);
uint64_t traffic_received_total(void);
void traffic_reset(void);

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

#endif
