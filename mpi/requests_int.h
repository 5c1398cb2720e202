/* Inside the requests module: what requests.c shares with requests_saved.c. */
#ifndef STASIS_MPI_REQUESTS_INT_H
#define STASIS_MPI_REQUESTS_INT_H

#include <mpi.h>
#include <stdint.h>

#include "requests.h"

struct req_info *req_info_new(MPI_Comm comm, int peer);
/* The peer, tag and communicator (the program's handle) a persistent
 * request was made with, from its record; -EBADMSG if it is damaged. */
int req_recorded(const struct mpi_record *rec, int *peer, int *tag, void **comm);
/* A request read back from a checkpoint with flags: counted as pending
 * and completed as it was, its posting order taken up. */
void req_count_loaded(uint32_t flags, uint64_t posted);

#endif
