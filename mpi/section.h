/* The MPI state of a checkpoint: every record (record.h), the snapshot of
 * what the objects gathered since (snapshot.h) and the attached buffer,
 * written into the image as a region of kind SECTION_MPI and replayed by a
 * restart after the real MPI_Init, before memory is put back. */
#ifndef STASIS_MPI_SECTION_H
#define STASIS_MPI_SECTION_H

#include <stddef.h>

#include "part.h"

/* After the real MPI_Init (a first run and a restart alike). */
int mpi_section_init(void);

/* Serialise the MPI state into page-aligned runtime memory, valid until
 * the next call: *len is a page multiple. 0 or -errno with err set. */
int mpi_section_save(void **data, size_t *len, struct why *why);

/* Collective over MPI_COMM_WORLD: make every recorded object again and
 * bind the program's virtual handles to them. 0, or -errno with why set
 * on the ranks that know the cause (every rank returns the same). */
int mpi_section_replay(const void *data, size_t len, struct why *why);

/* How many objects the records describe (live or kept). */
size_t mpi_section_objects(void);

/* In the resumed program, once its memory is back. */
void mpi_section_resumed(void);

/* The MPI part of a checkpoint (session/part.h): saved as SECTION_MPI,
 * recreated before the memory comes back. */
extern const struct part_ops mpi_part;

#endif
