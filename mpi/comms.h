/* Communicators and groups, recorded by what they are rather than by the
 * call that made them: the world ranks of their group (and of the remote
 * group of an intercommunicator), their topology, and for a
 * MPI_Comm_split_type result the split type. A restart makes each again
 * from MPI_COMM_WORLD with MPI_Comm_create_group, collective over its
 * members only, then puts the topology back without reordering. So the
 * program finds the same rank order in every communicator whatever made
 * it, whether or not its parents still exist; what cannot be forced the
 * same (ranks that shared a node no longer do) stops the restart. */
#ifndef STASIS_MPI_COMMS_H
#define STASIS_MPI_COMMS_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "handles.h"
#include "record.h"
#include "why.h"

/* After the real MPI_Init: the world group and size. */
int comms_init(void);

/* A communicator MPI just made (real): record it and return its virtual
 * handle. Null handles pass unchanged. split_type is the
 * MPI_Comm_split_type argument, or MPI_UNDEFINED. When it cannot be
 * recorded the real handle is returned and checkpoints stop, naming call. */
MPI_Comm mpi_comm_new(MPI_Comm real, int split_type, const char *call);
MPI_Fint mpi_comm_new_f(MPI_Fint real_f, int split_type, const char *call);
MPI_Group mpi_group_new(MPI_Group real, const char *call);
MPI_Fint mpi_group_new_f(MPI_Fint real_f, const char *call);

/* Replay: make the object of rec again. Collective over the members of a
 * communicator. A communicator whose members no longer share a node as
 * they did sets *why (and still returns 0, so that every member goes on
 * with the replay). */
int comms_replay_comm(const struct mpi_record *rec, MPI_Comm *out, uint32_t *flags,
		      struct why *why);
int comms_replay_group(const struct mpi_record *rec, MPI_Group *out);
/* After a replayed communicator is bound to v: hang its collective counts
 * on v under the recorded global id. */
int comms_counts_replayed(struct mpi_record *rec, MPI_Comm v, MPI_Comm real);

#endif
