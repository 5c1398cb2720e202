#define LOG_PREFIX "record: "
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "callbacks.h"
#include "log.h"
#include "record.h"

/* Runtime state: rebuilt from the image by a restart, never restored. */
static struct mpi_record *head, *tail;
static size_t count;
static uint64_t next_seq = 1;

/* --- building ------------------------------------------------------------- */

void recbuf_put(struct rec_builder *b, const void *p, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		uint8_t *d;

		while (cap < b->len + n)
			cap *= 2;
		d = realloc(b->data, cap);
		if (!d) {
			b->failed = true;
			return;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void recbuf_int(struct rec_builder *b, int v)
{
	recbuf_put(b, &v, sizeof(v));
}

void recbuf_u64(struct rec_builder *b, uint64_t v)
{
	recbuf_put(b, &v, sizeof(v));
}

void recbuf_ints(struct rec_builder *b, const int *v, int n)
{
	if (!v)
		n = -1; /* a NULL array (MPI_UNWEIGHTED and the like) */
	recbuf_int(b, n);
	if (n > 0)
		recbuf_put(b, v, sizeof(*v) * (size_t)n);
}

void recbuf_aints(struct rec_builder *b, const MPI_Aint *v, int n)
{
	if (!v)
		n = -1;
	recbuf_int(b, n);
	if (n > 0)
		recbuf_put(b, v, sizeof(*v) * (size_t)n);
}

void recbuf_str(struct rec_builder *b, const char *s)
{
	int n = s ? (int)strlen(s) : -1;

	recbuf_int(b, n);
	if (n > 0)
		recbuf_put(b, s, (size_t)n);
}

static void add_parent(struct rec_builder *b, struct mpi_record *p)
{
	if (b->failed)
		return;
	for (uint32_t i = 0; i < b->nparents; i++)
		if (b->parents[i] == p)
			return;
	if (b->nparents == b->pcap) {
		uint32_t cap = b->pcap ? b->pcap * 2 : 4;
		struct mpi_record **q = realloc(b->parents, cap * sizeof(*q));

		if (!q) {
			b->failed = true;
			return;
		}
		b->parents = q;
		b->pcap = cap;
	}
	b->parents[b->nparents++] = p;
}

/* A handle is stored as {1, index} for a virtual one, {0, value} for a
 * predefined one (its address is the same in every run). */
void recbuf_handle(struct rec_builder *b, enum vh_kind k, void *v)
{
	struct vh_entry *e = vh_entry(k, v);

	if (e && e->rec) {
		recbuf_int(b, 1);
		recbuf_u64(b, vh_index(k, v));
		add_parent(b, e->rec);
	} else if (vh_is_virtual(k, v)) {
		b->failed = b->orphan = true; /* a virtual handle without a record */
	} else {
		recbuf_int(b, 0);
		recbuf_u64(b, (uint64_t)(uintptr_t)v);
	}
}

void recbuf_handles(struct rec_builder *b, enum vh_kind k, void *const *v, int n)
{
	recbuf_int(b, v ? n : -1);
	for (int i = 0; v && i < n; i++)
		recbuf_handle(b, k, v[i]);
}

/* --- reading -------------------------------------------------------------- */

void recread_get(struct rec_reader *r, void *p, size_t n)
{
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		memset(p, 0, n);
		return;
	}
	memcpy(p, r->p, n);
	r->p += n;
}

int recread_int(struct rec_reader *r)
{
	int v;

	recread_get(r, &v, sizeof(v));
	return v;
}

uint64_t recread_u64(struct rec_reader *r)
{
	uint64_t v;

	recread_get(r, &v, sizeof(v));
	return v;
}

static void *scratch(struct rec_reader *r, size_t n)
{
	void *p;

	if (r->bad || r->nscratch == RR_SCRATCH || !(p = malloc(n ? n : 1))) {
		r->bad = true;
		return NULL;
	}
	r->scratch[r->nscratch++] = p;
	return p;
}

static void *array(struct rec_reader *r, size_t elem, int *n)
{
	void *p;

	*n = recread_int(r);
	if (*n < 0 || r->bad)
		return NULL;
	if ((size_t)(r->end - r->p) / elem < (size_t)*n) {
		r->bad = true;
		return NULL;
	}
	p = scratch(r, elem * (size_t)*n);
	recread_get(r, p, elem * (size_t)*n);
	return p;
}

const int *recread_ints(struct rec_reader *r, int *n)
{
	return array(r, sizeof(int), n);
}

const MPI_Aint *recread_aints(struct rec_reader *r, int *n)
{
	return array(r, sizeof(MPI_Aint), n);
}

const char *recread_str(struct rec_reader *r)
{
	int n = recread_int(r);
	char *s;

	if (n < 0 || r->bad)
		return NULL;
	if ((size_t)(r->end - r->p) < (size_t)n) {
		r->bad = true;
		return NULL;
	}
	s = scratch(r, (size_t)n + 1);
	recread_get(r, s, (size_t)n);
	if (s)
		s[n] = 0;
	return s;
}

void *recread_handle(struct rec_reader *r, enum vh_kind k)
{
	int is_virtual = recread_int(r);
	uint64_t v = recread_u64(r);
	struct vh_entry *e;

	if (r->bad)
		return vh_null(k);
	if (!is_virtual)
		return (void *)(uintptr_t)v;
	/* Parents are older: already made again by the replay. */
	e = v < VH_MAX_INDEX ? vh_entry_at(k, (uint32_t)v) : NULL;
	if (!e) {
		r->bad = true;
		return vh_null(k);
	}
	return e->real;
}

void **recread_handles(struct rec_reader *r, enum vh_kind k, int *n)
{
	void **out;

	*n = recread_int(r);
	if (*n < 0 || r->bad)
		return NULL;
	/* Each handle takes at least 12 bytes. */
	if ((size_t)(r->end - r->p) / 12 < (size_t)*n) {
		r->bad = true;
		return NULL;
	}
	out = scratch(r, sizeof(*out) * (size_t)*n);
	for (int i = 0; out && i < *n; i++)
		out[i] = recread_handle(r, k);
	return out;
}

void recread_done(struct rec_reader *r)
{
	while (r->nscratch)
		free(r->scratch[--r->nscratch]);
}

/* --- the list ---------------------------------------------------------------- */

struct mpi_record *rec_make(enum vh_kind k, struct rec_builder *b, uint32_t flags)
{
	struct mpi_record *rec;

	if (b->failed || !(rec = calloc(1, sizeof(*rec)))) {
		free(b->data);
		free(b->parents);
		return NULL;
	}
	rec->kind = k;
	rec->flags = flags;
	rec->data = b->data;
	rec->len = b->len;
	rec->parents = b->parents;
	rec->nparents = b->nparents;
	return rec;
}

int rec_replace_data(struct mpi_record *rec, struct rec_builder *b)
{
	free(b->parents);
	if (b->failed) {
		free(b->data);
		return -ENOMEM;
	}
	free(rec->data);
	rec->data = b->data;
	rec->len = b->len;
	return 0;
}

static void link_tail(struct mpi_record *rec)
{
	rec->prev = tail;
	rec->next = NULL;
	if (tail)
		tail->next = rec;
	else
		head = rec;
	tail = rec;
	count++;
}

static void unlink_rec(struct mpi_record *rec)
{
	if (rec->prev)
		rec->prev->next = rec->next;
	else
		head = rec->next;
	if (rec->next)
		rec->next->prev = rec->prev;
	else
		tail = rec->prev;
	count--;
}

void rec_attach(struct mpi_record *rec, void *v)
{
	vh_lock();
	rec->index = vh_index(rec->kind, v);
	rec->seq = next_seq++;
	for (uint32_t i = 0; i < rec->nparents; i++)
		rec->parents[i]->deps++;
	link_tail(rec);
	vh_unlock();
}

void rec_discard(struct mpi_record *rec)
{
	if (!rec)
		return;
	free(rec->data);
	free(rec->parents);
	free(rec->aux);
	free(rec);
}

/* Called with the lock held: drop rec, then any freed parent nobody needs
 * any more. */
static void destroy(struct mpi_record *rec, struct mpi_record ***gone, size_t *ngone)
{
	unlink_rec(rec);
	for (uint32_t i = 0; i < rec->nparents; i++) {
		struct mpi_record *p = rec->parents[i];

		if (--p->deps == 0 && (p->flags & REC_FREED))
			destroy(p, gone, ngone);
	}
	(*gone)[(*ngone)++] = rec;
}

/* Called with the lock held, which it releases: destroy rec (a freed
 * record nobody needs) and release the handles of every record that goes
 * with it. */
static void drop_locked(struct mpi_record *rec)
{
	struct mpi_record **gone, *small[8];
	size_t ngone = 0, cap = count + 1;

	gone = cap <= 8 ? small : malloc(cap * sizeof(*gone));
	if (!gone) {
		vh_unlock();
		return; /* kept as a freed record: harmless */
	}
	destroy(rec, &gone, &ngone);
	vh_unlock();
	for (size_t i = 0; i < ngone; i++) {
		vh_release(gone[i]->kind, vh_value(gone[i]->kind, gone[i]->index));
		rec_discard(gone[i]);
	}
	if (gone != small)
		free(gone);
}

void rec_object_freed(enum vh_kind k, void *v)
{
	struct vh_entry *e = vh_entry(k, v);
	struct mpi_record *rec;

	if (!e)
		return;
	rec = e->rec;
	if (!rec) {
		vh_release(k, v);
		return;
	}
	vh_lock();
	rec->flags |= REC_FREED;
	/* MPI keeps error handlers alive while objects use them (and
	 * snapshots name them): their records stay for the whole run. */
	if (k == VH_ERRHANDLER) {
		vh_unlock();
		return;
	}
	if (k == VH_KEYVAL) {
		/* MPI destroyed it: no attribute used it (keyvals.h) */
		vh_unlock();
		rec_keyval_gone(rec);
		return;
	}
	if (rec->deps) {
		/* Its dependants still name it: keep the handle, point it at
		 * nothing (MPI may give the address to a new object). */
		vh_unlock();
		vh_zombie(k, v);
		return;
	}
	drop_locked(rec);
}

void rec_keyval_gone(struct mpi_record *rec)
{
	vh_lock();
	if (rec->deps) {
		rec->flags |= REC_FREED;
		vh_unlock();
		return;
	}
	if (callbacks_keyval_which(rec) == KEYVAL_TYPE)
		rec->aux = NULL;
	drop_locked(rec);
}

void rec_pin(struct mpi_record *rec)
{
	vh_lock();
	rec->deps++;
	vh_unlock();
}

void rec_unpin(struct mpi_record *rec)
{
	vh_lock();
	if (--rec->deps || !(rec->flags & REC_FREED) || rec->kind == VH_ERRHANDLER ||
	    rec->kind == VH_KEYVAL) {
		vh_unlock();
		return;
	}
	drop_locked(rec);
}

struct mpi_record *rec_first(void)
{
	return head;
}

size_t rec_count(void)
{
	return count;
}

uint64_t rec_next_seq(void)
{
	return next_seq;
}

void rec_set_next_seq(uint64_t seq)
{
	next_seq = seq;
}

void rec_restore(struct mpi_record *rec)
{
	vh_lock();
	for (uint32_t i = 0; i < rec->nparents; i++)
		rec->parents[i]->deps++;
	link_tail(rec);
	vh_unlock();
}
