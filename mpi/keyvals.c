/* Held keyvals (keyvals.h). */
#define LOG_PREFIX "keyvals: "
#include <stdint.h>
#include <stdlib.h>

#include "keyvals.h"
#include "log.h"
#include "snapshot.h"

int keyval_get_attr(enum keyval_which which, void *real, int keyval, void **val, int *flag)
{
	switch (which) {
	case KEYVAL_COMM:
		return PMPI_Comm_get_attr(real, keyval, val, flag);
	case KEYVAL_TYPE:
		return PMPI_Type_get_attr(real, keyval, val, flag);
	default:
		return PMPI_Win_get_attr(real, keyval, val, flag);
	}
}

bool keyval_has_attr(enum keyval_which which, void *real, int keyval)
{
	void *val;
	int flag = 0;

	return keyval_get_attr(which, real, keyval, &val, &flag) == MPI_SUCCESS && flag;
}

static enum vh_kind object_kind(enum keyval_which which)
{
	return which == KEYVAL_COMM ? VH_COMM : which == KEYVAL_TYPE ? VH_TYPE : VH_WIN;
}

/* Whether an object the program has (its live communicators, datatypes or
 * windows, MPI_COMM_WORLD, MPI_COMM_SELF, the predefined datatypes) holds
 * an attribute of keyval real, which MPI still has. Under the handles'
 * lock (the records do not change meanwhile). */
static bool in_use_locked(enum keyval_which which, int real)
{
	enum vh_kind k = object_kind(which);

	if (which == KEYVAL_COMM &&
	    (keyval_has_attr(which, MPI_COMM_WORLD, real) || keyval_has_attr(which, MPI_COMM_SELF, real)))
		return true;
	for (size_t i = 0; which == KEYVAL_TYPE && i < snapshot_predefined_count(); i++)
		if (snapshot_predefined_type(i) != MPI_DATATYPE_NULL &&
		    keyval_has_attr(which, snapshot_predefined_type(i), real))
			return true;
	for (struct mpi_record *r = rec_first(); r; r = r->next) {
		struct vh_entry *e;

		if (r->kind != k || (r->flags & REC_FREED) || !(e = vh_entry_at(k, r->index)))
			continue;
		if (keyval_has_attr(which, e->real, real))
			return true;
	}
	return false;
}

static void free_real(enum keyval_which which, int real)
{
	switch (which) {
	case KEYVAL_COMM:
		PMPI_Comm_free_keyval(&real);
		break;
	case KEYVAL_TYPE:
		PMPI_Type_free_keyval(&real);
		break;
	default:
		PMPI_Win_free_keyval(&real);
	}
}

bool keyval_hold(int v, int *real)
{
	struct vh_entry *e = v >= VH_FBASE ? vh_entry_at(VH_KEYVAL, (uint32_t)(v - VH_FBASE)) : NULL;
	bool held = false;

	if (!e || !e->rec)
		return false;
	vh_lock();
	if (e->rec->flags & REC_FREED)
		*real = MPI_KEYVAL_INVALID;
	else if (in_use_locked(callbacks_keyval_which(e->rec), *real))
		held = true, e->rec->flags |= REC_FREED;
	vh_unlock();
	return held;
}

void keyvals_release_unused(void)
{
	struct mpi_record **gone = NULL;
	size_t n = 0, cap = 0;

	vh_lock();
	for (struct mpi_record *r = rec_first(); r; r = r->next) {
		struct vh_entry *e = vh_entry_at(VH_KEYVAL, r->index);
		int real;

		if (r->kind != VH_KEYVAL || !(r->flags & REC_FREED) || r->deps || !e)
			continue;
		real = (int)(intptr_t)e->real;
		if (in_use_locked(callbacks_keyval_which(r), real))
			continue;
		if (n == cap) {
			struct mpi_record **p = realloc(gone, (cap = cap ? 2 * cap : 16) * sizeof(*p));

			if (!p)
				break; /* held until the next checkpoint */
			gone = p;
		}
		free_real(callbacks_keyval_which(r), real);
		gone[n++] = r;
	}
	vh_unlock();
	for (size_t i = 0; i < n; i++)
		rec_keyval_gone(gone[i]);
	if (n)
		pr_debug("%zu freed keyvals no attribute uses any more released", n);
	free(gone);
}
