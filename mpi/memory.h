/* Memory shared between the program and MPI: MPI_Alloc_mem blocks (served
 * from the application arena) and the buffer of buffered sends. */
#ifndef STASIS_MPI_MEMORY_H
#define STASIS_MPI_MEMORY_H

/* MPI_Buffer_attach / MPI_Buffer_detach succeeded. */
void mpi_buffer_attached(void *buffer, int size);
void mpi_buffer_detached(void);

/* The attached buffer, for the MPI state of a checkpoint, and back. */
void mpi_buffer_get(void **buffer, int *size);
void mpi_buffer_set(void *buffer, int size);
/* After a restart has put memory back: attach the buffer again. */
int mpi_buffer_reattach(void);

#endif
