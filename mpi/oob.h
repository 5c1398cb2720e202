/* stasis's own network between ranks, beside MPI: the coordinator threads
 * (coord.h) talk over it while the program's threads are anywhere, even
 * inside a blocking MPI call, and without calling MPI from a second thread.
 * Rank 0 listens on a TCP port of every address of its host; the others
 * connect to it at MPI_Init. Messages are small fixed records. */
#ifndef STASIS_MPI_OOB_H
#define STASIS_MPI_OOB_H

#include <mpi.h>
#include <stdint.h>

#include "why.h"

struct oob_msg {
	uint32_t type;
	uint32_t from; /* sending rank */
	uint64_t a, b, c;
};

/* Collective over comm (rank 0 leads): listen / connect. On rank 0,
 * fds[r] is the socket of rank r (fds[0] = -1); elsewhere fds[0] is the
 * socket to rank 0. 0, or -errno after one rank said why (*why). */
int oob_start(MPI_Comm comm, int rank, int size, int **fds, struct why *why);

/* Send or receive one message whole; 0 or -errno (-EPIPE: the peer is
 * gone). */
int oob_send(int fd, const struct oob_msg *m);
int oob_recv(int fd, struct oob_msg *m);

#endif
