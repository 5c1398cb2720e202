/* The state MPI objects gather after they are made (names, error
 * handlers, attributes, info contents), read at a checkpoint and put back
 * after a replay. */
#ifndef STASIS_MPI_SNAPSHOT_H
#define STASIS_MPI_SNAPSHOT_H

#include <mpi.h>
#include <stddef.h>

#include "record.h"

/* Append the state of every live object to b (count: entries written);
 * info records take their current contents. 0 or -errno (-ENOENT: an
 * object uses an error handler stasis did not see made). */
int snapshot_write(struct rec_builder *b, int *count);
/* Put count entries read from r back onto the replayed objects. */
int snapshot_apply(struct rec_reader *r, int count);
/* The names MPI gives the predefined datatypes, noted right after
 * MPI_Init: a checkpoint keeps the state of those the program renamed or
 * cached attributes on. */
void snapshot_note_names(void);
/* The predefined datatypes: how many, and the i-th (MPI_DATATYPE_NULL for
 * one this MPI does not have). */
size_t snapshot_predefined_count(void);
MPI_Datatype snapshot_predefined_type(size_t i);
/* Make an info object again from its record. */
int snapshot_replay_info(const struct mpi_record *rec, MPI_Info *out);

#endif
