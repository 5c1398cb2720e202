#define LOG_PREFIX "traffic: "
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dirty.h"
#include "log.h"
#include "session.h"
#include "traffic.h"

/* Pending application requests: an open-addressing set keyed by handle
 * (Open MPI handles are pointers). Only the main thread calls MPI while
 * checkpoints are possible, so no lock. */
struct slot {
	MPI_Request req;
	int kind; /* enum traffic_kind + 1; 0 = empty */
};

static struct slot *slots;
static size_t nslots, nused;
static int64_t sent, received;

static size_t hash(MPI_Request r)
{
	uint64_t x = (uint64_t)(uintptr_t)r;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	return (size_t)(x ^ (x >> 33));
}

static int grow(void)
{
	size_t n = nslots ? nslots * 2 : 256;
	struct slot *old = slots, *fresh = calloc(n, sizeof(*fresh));

	if (!fresh)
		return -ENOMEM;
	slots = fresh;
	for (size_t i = 0, oldn = nslots; i < oldn; i++) {
		if (!old[i].kind)
			continue;
		size_t j = hash(old[i].req) & (n - 1);
		while (fresh[j].kind)
			j = (j + 1) & (n - 1);
		fresh[j] = old[i];
	}
	nslots = n;
	free(old);
	return 0;
}

void traffic_sent(int peer)
{
	if (peer != MPI_PROC_NULL)
		sent++;
}

void traffic_received(int peer)
{
	if (peer != MPI_PROC_NULL)
		received++;
}

void traffic_track(MPI_Request req, enum traffic_kind kind)
{
	size_t i;

	if (req == MPI_REQUEST_NULL)
		return;
	if ((nused + 1) * 2 > nslots && grow()) {
		session_unsupported("more pending requests than memory to track them");
		return;
	}
	i = hash(req) & (nslots - 1);
	while (slots[i].kind && slots[i].req != req)
		i = (i + 1) & (nslots - 1);
	if (!slots[i].kind)
		nused++;
	slots[i] = (struct slot){req, (int)kind + 1};
}

/* Remove req from the set (backward-shift deletion keeps probes intact). */
static void complete(MPI_Request req)
{
	size_t i, j;

	if (!nslots || req == MPI_REQUEST_NULL)
		return;
	i = hash(req) & (nslots - 1);
	while (slots[i].kind && slots[i].req != req)
		i = (i + 1) & (nslots - 1);
	if (!slots[i].kind)
		return; /* not an application request we track */
	if (slots[i].kind - 1 == TRAFFIC_RECV)
		received++;
	slots[i].kind = 0;
	nused--;
	for (j = (i + 1) & (nslots - 1); slots[j].kind; j = (j + 1) & (nslots - 1)) {
		size_t home = hash(slots[j].req) & (nslots - 1);
		/* Move j into the hole at i unless its home lies cyclically in (i, j]. */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			slots[i] = slots[j];
			slots[j].kind = 0;
			i = j;
		}
	}
}

static MPI_Request *snapshot_buffer(struct traffic_snapshot *s, int n)
{
	s->n = n > 0 ? n : 0;
	s->reqs = s->n <= 16 ? s->small : malloc(sizeof(MPI_Request) * s->n);
	if (!s->reqs)
		s->n = 0;
	return s->reqs;
}

static void snapshot_done(struct traffic_snapshot *s)
{
	if (s->reqs != s->small)
		free(s->reqs);
}

void traffic_snapshot(struct traffic_snapshot *s, const MPI_Request *reqs, int n)
{
	if (snapshot_buffer(s, n) && s->n)
		memcpy(s->reqs, reqs, sizeof(*reqs) * s->n);
}

void traffic_completed(struct traffic_snapshot *s, const MPI_Request *reqs, int n)
{
	for (int i = 0; i < s->n && i < n; i++)
		if (s->reqs[i] != MPI_REQUEST_NULL && reqs[i] == MPI_REQUEST_NULL)
			complete(s->reqs[i]);
	snapshot_done(s);
}

void traffic_snapshot_f(struct traffic_snapshot *s, const MPI_Fint *reqs, int n)
{
	if (snapshot_buffer(s, n))
		for (int i = 0; i < s->n; i++)
			s->reqs[i] = PMPI_Request_f2c(reqs[i]);
}

void traffic_completed_f(struct traffic_snapshot *s, const MPI_Fint *reqs, int n)
{
	MPI_Fint null = PMPI_Request_c2f(MPI_REQUEST_NULL);

	for (int i = 0; i < s->n && i < n; i++)
		if (s->reqs[i] != MPI_REQUEST_NULL && reqs[i] == null)
			complete(s->reqs[i]);
	snapshot_done(s);
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

void traffic_counts(int64_t *unmatched, int64_t *pending)
{
	*unmatched = sent - received;
	*pending = (int64_t)nused;
}
