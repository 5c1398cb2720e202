/* MPI-IO files: a file handle is virtual like the other handles,
 * recorded by how it was opened (the communicator, the file's absolute
 * name, the access mode, the hints) and, at every checkpoint, by its
 * state: its size, inode and modification time, its view (displacement,
 * etype, filetype, data representation), the individual and shared file
 * pointers, atomicity and error handler. A restart checks the file as it
 * checks the program's other files (process/fds.h: read-only ones unchanged,
 * written ones no shorter, the same inode), opens it again collectively
 * on the same processes, cuts it back to its size, and puts view and
 * pointers back under the same handle.
 *
 * Each file gets a duplicate of its communicator (a communicator of
 * stasis's, recorded like the program's): its collectives are counted on
 * that communicator (collective_counts.h), so that the coordinator never stops a rank
 * while another is inside one of them (coord.h), whatever the program
 * does with the communicator it opened the file on. The datatypes of a
 * view stay recorded while the view uses them (rec_pin), even once the
 * program freed them. */
#ifndef STASIS_MPI_MPIIO_H
#define STASIS_MPI_MPIIO_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "record.h"
#include "why.h"

/* The communicator the collectives on file v are counted on (virtual), or
 * MPI_COMM_NULL for a handle stasis does not know. */
MPI_Comm mpiio_comm(MPI_File v);

/* For the calls written by hand (mpiio_calls.c): the program opened real
 * (collective over real_comm; its virtual handle is returned), set v's
 * view (its datatypes stay recorded while it lasts), closed v. */
MPI_File mpiio_opened(MPI_Comm real_comm, const char *given, int amode, MPI_Info info,
		      MPI_File real, bool fortran);
void mpiio_view_set(MPI_File v, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,
		    const char *datarep);
void mpiio_closed(MPI_File v);

/* Before a write to v (fwrite= of calls.def) of count items of the real
 * datatype type: at explicit offset (in etypes of the view), or at the
 * individual or shared file pointer; and before v's size is set. Bytes
 * below the file's size at the newest checkpoint are saved in its undo
 * record first (process/undo.h). */
void mpiio_will_write_at(MPI_File v, MPI_Offset offset, int count, MPI_Datatype type);
void mpiio_will_write(MPI_File v, bool shared, int count, MPI_Datatype type);
void mpiio_will_cut(MPI_File v, MPI_Offset size);

/* At a checkpoint, before the records are written: every open file's
 * record gets its current state. 0 or -errno. */
int mpiio_refresh(void);

/* Split collectives (mpiio_split.c): done whole in their begin, as the
 * standard allows, the status kept with the file (saved with it) for the
 * end. ours: v is a file stasis records. */
bool mpiio_split_ours(MPI_File v);
void mpiio_split_begun(MPI_File v, const MPI_Status *st);
int mpiio_split_end(MPI_File v, MPI_Status *st);

/* Replay of a file's record: check the file and open it again, collective
 * over its communicator (a rank whose check fails sets why; every member
 * then returns -ESTALE without opening). */
int mpiio_replay(struct mpi_record *rec, MPI_File *real, struct why *why);
/* Once every record is replayed: sizes, views, pointers, atomicity and
 * error handlers back, in record order (collective per file). */
int mpiio_apply(struct why *why);

#endif
