/* What the generated wrappers (gen_wrappers.py, from calls.def) call to
 * keep the program's handles virtual and its objects recorded, besides
 * comms.h and requests.h: the lifecycle of datatypes, info objects and
 * handles returned by inquiries, all in datatypes.c except
 * mpi_type_adopt (decode.c). Each _f twin takes and returns Fortran
 * handles. */
#ifndef STASIS_MPI_CALLS_H
#define STASIS_MPI_CALLS_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "handles.h"
#include "record.h"

/* A datatype MPI just made; b holds the call and its arguments (written by
 * the generated recorder). */
MPI_Datatype mpi_type_new(MPI_Datatype real, struct rec_builder *b, const char *call);
MPI_Fint mpi_type_new_f(MPI_Fint real_f, struct rec_builder *b, const char *call);
/* A second handle to a datatype the program has (b: a duplicate of it). */
MPI_Datatype mpi_type_new_ref(MPI_Datatype real, struct rec_builder *b, const char *call);
/* A datatype MPI returned (decode.c): known ones come back as a new handle
 * of their own, predefined ones as they are, others are decoded into the
 * constructor call that makes them again. */
MPI_Datatype mpi_type_adopt(MPI_Datatype real, const char *call);
/* An info object MPI just made (recorded by its contents at checkpoints). */
MPI_Info mpi_info_new(MPI_Info real, const char *call);
MPI_Fint mpi_info_new_f(MPI_Fint real_f, const char *call);

/* A handle an inquiry returned (MPI_Comm_get_errhandler, MPI_Type_match_size,
 * MPI_Type_get_contents, ...): the program's handle for it. A datatype the
 * program already has comes back as a new handle of its own (the program
 * frees it), recorded as a duplicate. */
void *mpi_adopt(enum vh_kind k, void *real, const char *call);
MPI_Fint mpi_adopt_f(enum vh_kind k, MPI_Fint real_f, const char *call);

/* The program's free of v succeeded (MPI freed the real object). */
void mpi_freed(enum vh_kind k, void *v);
void mpi_freed_f(enum vh_kind k, MPI_Fint v);
void mpi_keyval_freed(int v);
void mpi_type_committed(MPI_Datatype v);
void mpi_type_committed_f(MPI_Fint v);

/* An array of n null handles for MPI to fill (buf when it fits); NULL
 * when out of memory. Free with vh_array_done. */
void *mpi_out_array(void **buf, int bufn, int n, enum vh_kind k);
MPI_Fint *mpi_f_out_array(void *app, int n, MPI_Fint *buf, int bufn, enum vh_kind k);
/* Whether i is among the n indices (MPI_UNDEFINED n: none). */
bool mpi_index_in(const int *indices, int n, int i);

/* A call the table does not classify. */
void mpi_unknown(const char *call);

/* Sizes for the length annotations of calls.def (on real handles). */
int mpi_size(MPI_Comm comm);
int mpi_peers(MPI_Comm comm);
int mpi_indegree(MPI_Comm comm);
int mpi_outdegree(MPI_Comm comm);

/* Generated: make the object of a call record again (datatypes, persistent
 * requests). The recorders are in the generated recorders.h. */
int mpi_replay_call(struct mpi_record *rec, void **real, uint32_t *flags);

#endif
