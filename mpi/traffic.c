#define LOG_PREFIX "traffic: "
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dirty.h"
#include "collective_counts.h"
#include "log.h"
#include "session.h"
#include "traffic.h"

static uint64_t *sent_to, received;
static int world_size;

int traffic_init(void)
{
	PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
	sent_to = calloc(world_size, sizeof(*sent_to));
	return sent_to ? 0 : -ENOMEM;
}

void traffic_sent(MPI_Comm comm, int dest)
{
	struct comm_info *ci;

	if (dest == MPI_PROC_NULL || !sent_to)
		return;
	ci = collective_counts_of(comm);
	if (ci && dest >= 0 && dest < ci->size)
		__atomic_add_fetch(&sent_to[ci->world[dest]], 1, __ATOMIC_RELAXED);
}

void traffic_received(int peer)
{
	if (peer != MPI_PROC_NULL)
		__atomic_add_fetch(&received, 1, __ATOMIC_RELAXED);
}

const uint64_t *traffic_sent_to(void)
{
	return sent_to;
}

uint64_t traffic_received_total(void)
{
	return __atomic_load_n(&received, __ATOMIC_RELAXED);
}

void traffic_reset(void)
{
	memset(sent_to, 0, sizeof(*sent_to) * world_size);
	received = 0;
}

/* Receive buffers need preparing: only the mprotect backend does, since
 * uffd sees the kernel's writes. */
static bool preparing(void)
{
	struct session *s = session_get();

	return s && s->dirty == &dirty_mprotect_backend;
}

void traffic_recv_buffer(void *buf, int count, MPI_Datatype type)
{
	struct session *s = session_get();
	MPI_Aint lb, extent, true_lb, true_extent;

	if (!preparing() || !buf || buf == MPI_IN_PLACE || count <= 0)
		return;
	if (PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
	    PMPI_Type_get_true_extent(type, &true_lb, &true_extent) != MPI_SUCCESS)
		return;
	/* The bytes count elements of type can touch, gaps included. */
	s->dirty->prepare_write((char *)buf + true_lb,
				(size_t)true_extent + (size_t)extent * (count - 1));
}

void traffic_recv_collective(void *buf, int count, MPI_Datatype type, MPI_Comm comm,
			     bool per_rank)
{
	int size = 1;

	if (!preparing() || (per_rank && PMPI_Comm_size(comm, &size) != MPI_SUCCESS))
		return;
	traffic_recv_buffer(buf, count * size, type);
}

void traffic_recv_blocks(void *buf, const int *counts, const int *displs, MPI_Datatype type,
			 MPI_Comm comm)
{
	int size;
	long end = 0;

	if (!preparing() || !counts || !displs || PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
		return;
	/* One range from the buffer to the end of the farthest block: the
	 * gaps between blocks cost a few extra dirty pages, not correctness. */
	for (int i = 0; i < size; i++)
		if (counts[i] > 0 && displs[i] >= 0 && (long)displs[i] + counts[i] > end)
			end = (long)displs[i] + counts[i];
	if (end > 0 && end <= INT_MAX)
		traffic_recv_buffer(buf, (int)end, type);
}

void traffic_recv_my_block(void *buf, const int *counts, MPI_Datatype type, MPI_Comm comm)
{
	int rank;

	if (!preparing() || !counts || PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
		return;
	traffic_recv_buffer(buf, counts[rank], type);
}

bool traffic_root_prepares(MPI_Comm comm, int root)
{
	int rank;

	if (!preparing())
		return false;
	if (root == MPI_ROOT)
		return true;
	return PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS && rank == root;
}
