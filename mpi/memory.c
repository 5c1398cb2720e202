/* Memory the program gets from or gives to MPI. MPI_Alloc_mem is served
 * from the application arena (the standard lets MPI return any memory; a
 * block from the runtime's pool would not be saved), and the buffer of
 * buffered sends, application memory, is attached again after a restart. */
#define LOG_PREFIX "memory: "
#include <mpi.h>
#include <string.h>

#include "runtime.h"
#include "arena.h"
#include "log.h"
#include "memory.h"
#include "export.h"

/* Runtime state, carried across a restart in the MPI section (section.c). */
static void *bsend_buffer;
static int bsend_size;

static void *alloc_block(MPI_Aint size)
{
	/* A cache line: what MPI's own pools give. */
	return size < 0 ? NULL : arena_memalign(64, size ? (size_t)size : 1);
}

EXPORT int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr)
{
	void *p;

	(void)info;
	if (!stasis_active)
		return PMPI_Alloc_mem(size, info, baseptr);
	p = alloc_block(size);
	if (!p)
		return MPI_ERR_NO_MEM;
	memcpy(baseptr, &p, sizeof(p));
	return MPI_SUCCESS;
}

EXPORT int MPI_Free_mem(void *base)
{
	if (arena_contains(base)) {
		arena_free(base);
		return MPI_SUCCESS;
	}
	return PMPI_Free_mem(base);
}

/* Fortran: baseptr is an INTEGER(KIND=MPI_ADDRESS_KIND) or a TYPE(C_PTR),
 * both one address wide. */
static void alloc_f(const char *name, MPI_Aint *size, MPI_Fint *info, void *baseptr,
		    MPI_Fint *ierr)
{
	void *p;

	if (!stasis_active) {
		static void (*real[2])(MPI_Aint *, MPI_Fint *, void *, MPI_Fint *);
		int i = strcmp(name, "mpi_alloc_mem_") != 0;

		if (!real[i])
			real[i] = stasis_next_symbol(name);
		real[i](size, info, baseptr, ierr);
		return;
	}
	p = alloc_block(*size);
	*ierr = p ? MPI_SUCCESS : MPI_ERR_NO_MEM;
	if (p)
		memcpy(baseptr, &p, sizeof(p));
}

EXPORT void mpi_alloc_mem_(MPI_Aint *size, MPI_Fint *info, void *baseptr, MPI_Fint *ierr)
{
	alloc_f("mpi_alloc_mem_", size, info, baseptr, ierr);
}
FORTRAN_ALIASES(mpi_alloc_mem, MPI_ALLOC_MEM)

EXPORT void mpi_alloc_mem_cptr_(MPI_Aint *size, MPI_Fint *info, void *baseptr, MPI_Fint *ierr)
{
	alloc_f("mpi_alloc_mem_cptr_", size, info, baseptr, ierr);
}
FORTRAN_ALIASES(mpi_alloc_mem_cptr, MPI_ALLOC_MEM_CPTR)

EXPORT void mpi_free_mem_(void *base, MPI_Fint *ierr)
{
	static void (*real)(void *, MPI_Fint *);

	if (arena_contains(base)) {
		arena_free(base);
		*ierr = MPI_SUCCESS;
		return;
	}
	if (!real)
		real = stasis_next_symbol("mpi_free_mem_");
	real(base, ierr);
}
FORTRAN_ALIASES(mpi_free_mem, MPI_FREE_MEM)

void mpi_buffer_attached(void *buffer, int size)
{
	bsend_buffer = buffer;
	bsend_size = size;
}

void mpi_buffer_detached(void)
{
	bsend_buffer = NULL;
	bsend_size = 0;
}

void mpi_buffer_get(void **buffer, int *size)
{
	*buffer = bsend_buffer;
	*size = bsend_size;
}

void mpi_buffer_set(void *buffer, int size)
{
	bsend_buffer = buffer;
	bsend_size = size;
}

int mpi_buffer_reattach(void)
{
	if (!bsend_buffer)
		return 0;
	return PMPI_Buffer_attach(bsend_buffer, bsend_size) == MPI_SUCCESS ? 0 : -EINVAL;
}
