#define LOG_PREFIX "handles: "
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "handles.h"
#include "log.h"
#include "record.h"
#include "session.h"

struct vh_entry *vh_chunks[VH_NKINDS][VH_MAX_CHUNKS];

/* Per kind: the next never-used index and a stack of released ones. */
struct vh_table {
	uint32_t next;
	uint32_t *free_list;
	size_t nfree, free_cap;
	/* real -> index + 1 (0: empty), linear probing; a removal shifts the
	 * run after it back, so no tombstones pile up where MPI reuses one
	 * address for object after object (BLACS makes and frees a datatype
	 * per message: a run of tombstones made every lookup linear) */
	struct rev_slot {
		const void *real;
		uint32_t index;
	} *rev;
	size_t rev_cap, rev_used;
};

static struct vh_table tables[VH_NKINDS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool reserved;

void vh_lock(void)
{
	pthread_mutex_lock(&lock);
}

void vh_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

int vh_init(void)
{
	void *p;

	if (reserved)
		return 0;
	p = mmap((void *)VH_BASE, VH_SPAN, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	if (p != (void *)VH_BASE) {
		munmap(p, VH_SPAN);
		return -EEXIST;
	}
	reserved = true;
	return 0;
}

void *vh_null(enum vh_kind k)
{
	switch (k) {
	case VH_COMM:
		return MPI_COMM_NULL;
	case VH_GROUP:
		return MPI_GROUP_NULL;
	case VH_TYPE:
		return MPI_DATATYPE_NULL;
	case VH_OP:
		return MPI_OP_NULL;
	case VH_REQUEST:
		return MPI_REQUEST_NULL;
	case VH_ERRHANDLER:
		return MPI_ERRHANDLER_NULL;
	case VH_INFO:
		return MPI_INFO_NULL;
	case VH_FILE:
		return MPI_FILE_NULL;
	case VH_WIN:
		return MPI_WIN_NULL;
	default:
		return NULL;
	}
}

void *vh_real_f2c(enum vh_kind k, MPI_Fint f)
{
	switch (k) {
	case VH_COMM:
		return PMPI_Comm_f2c(f);
	case VH_GROUP:
		return PMPI_Group_f2c(f);
	case VH_TYPE:
		return PMPI_Type_f2c(f);
	case VH_OP:
		return PMPI_Op_f2c(f);
	case VH_REQUEST:
		return PMPI_Request_f2c(f);
	case VH_ERRHANDLER:
		return PMPI_Errhandler_f2c(f);
	case VH_INFO:
		return PMPI_Info_f2c(f);
	case VH_FILE:
		return PMPI_File_f2c(f);
	case VH_WIN:
		return PMPI_Win_f2c(f);
	default:
		return (void *)(intptr_t)f;
	}
}

MPI_Fint vh_real_c2f(enum vh_kind k, void *real)
{
	switch (k) {
	case VH_COMM:
		return PMPI_Comm_c2f(real);
	case VH_GROUP:
		return PMPI_Group_c2f(real);
	case VH_TYPE:
		return PMPI_Type_c2f(real);
	case VH_OP:
		return PMPI_Op_c2f(real);
	case VH_REQUEST:
		return PMPI_Request_c2f(real);
	case VH_ERRHANDLER:
		return PMPI_Errhandler_c2f(real);
	case VH_INFO:
		return PMPI_Info_c2f(real);
	case VH_FILE:
		return PMPI_File_c2f(real);
	case VH_WIN:
		return PMPI_Win_c2f(real);
	default:
		return (MPI_Fint)(intptr_t)real;
	}
}

void **vh_real_array(enum vh_kind k, void *const *v, int n, void **buf, int bufn)
{
	void **out = buf;

	if (!v)
		return NULL;
	if (n > bufn && !(out = malloc(sizeof(*out) * n)))
		return NULL;
	for (int i = 0; i < n; i++)
		out[i] = vh_real(k, v[i]);
	return out;
}

void **vh_f2c_array(enum vh_kind k, const MPI_Fint *f, int n, void **buf, int bufn)
{
	void **out = buf;

	if (!f)
		return NULL;
	if (n > bufn && !(out = malloc(sizeof(*out) * n)))
		return NULL;
	for (int i = 0; i < n; i++)
		out[i] = vh_f2c(k, f[i]);
	return out;
}

void vh_array_done(void *arr, const void *buf)
{
	if (arr && arr != buf)
		free(arr);
}

MPI_Fint vh_real_f(enum vh_kind k, MPI_Fint f)
{
	struct vh_entry *e;

	if (!vh_is_virtual_f(f))
		return f;
	e = vh_entry_at(k, (uint32_t)(f - VH_FBASE));
	if (!e)
		return vh_real_c2f(k, vh_null(k));
	if (k == VH_KEYVAL)
		return (MPI_Fint)(intptr_t)e->real;
	if (e->real_f == VH_NO_FINT)
		e->real_f = vh_real_c2f(k, e->real);
	return e->real_f;
}

MPI_Fint *vh_real_f_array(enum vh_kind k, const MPI_Fint *f, int n, MPI_Fint *buf, int bufn)
{
	MPI_Fint *out = buf;

	if (!f)
		return NULL;
	if (n > bufn && !(out = malloc(sizeof(*out) * n)))
		return NULL;
	for (int i = 0; i < n; i++)
		out[i] = vh_real_f(k, f[i]);
	return out;
}

void *vh_f2c(enum vh_kind k, MPI_Fint f)
{
	if (vh_is_virtual_f(f))
		return vh_value(k, (uint32_t)(f - VH_FBASE));
	return vh_real_f2c(k, f);
}

MPI_Fint vh_c2f(enum vh_kind k, void *v)
{
	if (vh_is_virtual(k, v))
		return VH_FBASE + (MPI_Fint)vh_index(k, v);
	return vh_real_c2f(k, v);
}

MPI_Fint vh_keep_real_f(enum vh_kind k, void *v, MPI_Fint real_f)
{
	struct vh_entry *e = vh_entry(k, v);

	if (!e)
		return real_f;
	e->real_f = real_f;
	return vh_c2f(k, v);
}

int vh_keyval_value(const void *v)
{
	return VH_FBASE + (int)vh_index(VH_KEYVAL, v);
}

/* --- real -> virtual ---------------------------------------------------- */

static size_t rev_hash(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	return (size_t)(x ^ (x >> 33));
}

static int rev_insert(struct vh_table *t, const void *real, uint32_t index);

/* Doubles the map when live entries pass half of it. */
static int rev_grow(struct vh_table *t)
{
	struct rev_slot *old = t->rev;
	size_t oldn = t->rev_cap, n = oldn ? oldn * 2 : 256;

	t->rev = calloc(n, sizeof(*t->rev));
	if (!t->rev) {
		t->rev = old;
		return -ENOMEM;
	}
	t->rev_cap = n;
	t->rev_used = 0;
	for (size_t i = 0; i < oldn; i++)
		if (old[i].index)
			rev_insert(t, old[i].real, old[i].index - 1);
	free(old);
	return 0;
}

static size_t rev_home(const struct vh_table *t, const void *real)
{
	return rev_hash(real) & (t->rev_cap - 1);
}

static int rev_insert(struct vh_table *t, const void *real, uint32_t index)
{
	size_t i;

	if ((t->rev_used + 1) * 2 > t->rev_cap && rev_grow(t))
		return -ENOMEM;
	for (i = rev_home(t, real); t->rev[i].index; i = (i + 1) & (t->rev_cap - 1))
		if (t->rev[i].real == real)
			return 0;
	t->rev[i] = (struct rev_slot){real, index + 1};
	t->rev_used++;
	return 0;
}

static struct rev_slot *rev_find(struct vh_table *t, const void *real)
{
	size_t i;

	if (!t->rev_cap)
		return NULL;
	for (i = rev_home(t, real); t->rev[i].index; i = (i + 1) & (t->rev_cap - 1))
		if (t->rev[i].real == real)
			return &t->rev[i];
	return NULL;
}

/* Empties slot s and moves back each later entry of its run that may sit
 * in the hole (its home is not cyclically within (hole, j]), so that every
 * entry stays reachable from its home without passing an empty slot. */
static void rev_remove(struct vh_table *t, struct rev_slot *s)
{
	size_t mask = t->rev_cap - 1, hole = (size_t)(s - t->rev), j = hole;

	for (;;) {
		j = (j + 1) & mask;
		if (!t->rev[j].index)
			break;
		if (((j - rev_home(t, t->rev[j].real)) & mask) >= ((j - hole) & mask)) {
			t->rev[hole] = t->rev[j];
			hole = j;
		}
	}
	t->rev[hole] = (struct rev_slot){NULL, 0};
	t->rev_used--;
}

/* A new object: its address now means it, whatever it meant before (MPI
 * reuses the addresses of freed objects). */
static void rev_bind(struct vh_table *t, const void *real, uint32_t index)
{
	struct rev_slot *s = rev_find(t, real);

	if (s)
		s->index = index + 1;
	else
		rev_insert(t, real, index);
}

/* Requests are many and short-lived, and nothing asks for them by their
 * real value: they stay out of the reverse map. */
static bool reversible(enum vh_kind k)
{
	return k != VH_REQUEST;
}

void *vh_lookup_real(enum vh_kind k, const void *real)
{
	struct rev_slot *s;
	void *v = NULL;

	vh_lock();
	s = rev_find(&tables[k], real);
	if (s)
		v = vh_value(k, s->index - 1);
	vh_unlock();
	return v;
}

size_t vh_reverse_capacity(enum vh_kind k)
{
	size_t n;

	vh_lock();
	n = tables[k].rev_cap;
	vh_unlock();
	return n;
}

/* --- minting and releasing ------------------------------------------------ */

static struct vh_entry *slot(enum vh_kind k, uint32_t index)
{
	struct vh_entry *chunk = vh_chunks[k][index / VH_CHUNK];

	if (!chunk) {
		chunk = calloc(VH_CHUNK, sizeof(*chunk));
		if (!chunk)
			return NULL;
		__atomic_store_n(&vh_chunks[k][index / VH_CHUNK], chunk, __ATOMIC_RELEASE);
	}
	return &chunk[index % VH_CHUNK];
}

static void fill(enum vh_kind k, struct vh_entry *e, uint32_t index, void *real, uint32_t flags,
		 struct mpi_record *rec)
{
	e->real = real;
	e->real_f = VH_NO_FINT;
	e->rec = rec;
	__atomic_store_n(&e->flags, flags | VH_LIVE, __ATOMIC_RELEASE);
	if (reversible(k) && !(flags & VH_REF))
		rev_bind(&tables[k], real, index);
}

static bool take_index(enum vh_kind k, uint32_t *index)
{
	struct vh_table *t = &tables[k];

	if (t->nfree) {
		*index = t->free_list[--t->nfree];
		return true;
	}
	if (t->next >= VH_MAX_INDEX)
		return false;
	*index = t->next++;
	return true;
}

/* Room for one more free index: false when the list is full and cannot
 * grow. */
static bool free_list_room(struct vh_table *t)
{
	if (t->nfree == t->free_cap) {
		size_t cap = t->free_cap ? t->free_cap * 2 : 64;
		uint32_t *p = realloc(t->free_list, cap * sizeof(*p));

		if (!p)
			return false;
		t->free_list = p;
		t->free_cap = cap;
	}
	return true;
}

void *vh_mint(enum vh_kind k, void *real, uint32_t flags, struct mpi_record *rec)
{
	struct vh_entry *e;
	uint32_t index;
	void *v = NULL;

	vh_lock();
	if (take_index(k, &index) && (e = slot(k, index))) {
		fill(k, e, index, real, flags, rec);
		v = vh_value(k, index);
	}
	vh_unlock();
	return v;
}

void *vh_adopt(enum vh_kind k, void *real, struct mpi_record *rec, uint32_t flags, const char *call)
{
	void *v;

	if (!rec) {
		session_unsupported(call);
		return real;
	}
	v = vh_mint(k, real, flags, rec);
	if (!v) {
		rec_discard(rec);
		session_unsupported("more MPI handles than stasis can number");
		return real;
	}
	rec_attach(rec, v);
	return v;
}

int vh_bind(enum vh_kind k, uint32_t index, void *real, uint32_t flags, struct mpi_record *rec)
{
	struct vh_table *t = &tables[k];
	struct vh_entry *e;
	int ret = 0;

	if (index >= VH_MAX_INDEX)
		return -EINVAL;
	vh_lock();
	e = slot(k, index);
	if (!e) {
		ret = -ENOMEM;
	} else if (e->flags & VH_LIVE) {
		ret = -EEXIST;
	} else {
		/* Indices skipped on the way become free ones. */
		for (; t->next <= index; t->next++) {
			if (t->next == index)
				continue;
			if (!free_list_room(t)) {
				ret = -ENOMEM;
				break;
			}
			t->free_list[t->nfree++] = t->next;
		}
		/* An index that was on the free list leaves it. */
		for (size_t i = 0; i < t->nfree; i++)
			if (t->free_list[i] == index)
				t->free_list[i] = t->free_list[--t->nfree];
		if (!ret)
			fill(k, e, index, real, flags, rec);
	}
	vh_unlock();
	return ret;
}

/* The entry at index, its real value no longer mapping back to it (what
 * vh_zombie and vh_release share); NULL if there is none. Under the lock. */
static struct vh_entry *unmap_entry(enum vh_kind k, uint32_t index)
{
	struct vh_entry *e = vh_entry_at(k, index);
	struct rev_slot *s;

	if (!e)
		return NULL;
	s = reversible(k) ? rev_find(&tables[k], e->real) : NULL;
	if (s && s->index == index + 1)
		rev_remove(&tables[k], s);
	return e;
}

void vh_zombie(enum vh_kind k, void *v)
{
	struct vh_entry *e;

	vh_lock();
	e = unmap_entry(k, vh_index(k, v));
	if (e) {
		e->real = vh_null(k);
		e->real_f = VH_NO_FINT;
	}
	vh_unlock();
}

void vh_release(enum vh_kind k, void *v)
{
	struct vh_table *t = &tables[k];
	struct vh_entry *e;
	uint32_t index = vh_index(k, v);

	vh_lock();
	e = unmap_entry(k, index);
	if (e) {
		__atomic_store_n(&e->flags, 0, __ATOMIC_RELEASE);
		e->real = NULL;
		e->rec = NULL;
		/* Without room the index is simply never reused. */
		if (free_list_room(t))
			t->free_list[t->nfree++] = index;
	}
	vh_unlock();
}

int vh_walk(enum vh_kind k, vh_walk_fn fn, void *arg)
{
	for (uint32_t i = 0; i < tables[k].next; i++) {
		struct vh_entry *e = vh_entry_at(k, i);
		int ret;

		if (e && (ret = fn(k, i, e, arg)))
			return ret;
	}
	return 0;
}
