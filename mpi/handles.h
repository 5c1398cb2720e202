/* Virtual MPI handles (DESIGN.md section 10). In Open MPI a handle is the
 * address of a runtime object, gone after a restart while the program's
 * restored memory still holds it. So the program only ever sees virtual
 * handles minted here, and every wrapper translates them to the real ones.
 *
 * A virtual C handle is an address inside a range stasis reserves (nothing
 * real can live there, and a program that dereferences one faults instead
 * of reading garbage): VH_BASE + kind * 4 GiB + index * 8. A virtual
 * Fortran handle (an INTEGER) is VH_FBASE + index, far above Open MPI's
 * small indices; keyvals, plain ints in both languages, use the same.
 * Predefined handles (MPI_COMM_WORLD, MPI_DOUBLE, MPI_SUM, the null
 * handles) are left as they are: their addresses do not move with
 * randomisation off.
 *
 * Entries live in chunks that never move, so a lookup takes no lock;
 * creating and freeing take one. After a restart the same virtual values
 * are bound (vh_bind) to the objects the replay made (mpi_section_replay,
 * state.h). */
#ifndef STASIS_MPI_HANDLES_H
#define STASIS_MPI_HANDLES_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"

enum vh_kind {
	VH_COMM,
	VH_GROUP,
	VH_TYPE,
	VH_OP,
	VH_REQUEST,
	VH_ERRHANDLER,
	VH_INFO,
	VH_KEYVAL,
	VH_FILE,
	VH_WIN,
	VH_TOOL, /* the tool interface's objects (tool_vars.h) */
	VH_NKINDS
};

/* Right above the arena's reservation; reserved by vh_init(). */
#define VH_BASE (STASIS_ARENA_BASE + STASIS_ARENA_SIZE)
#define VH_KIND_SPAN ((uintptr_t)1 << 32)
#define VH_SPAN (VH_KIND_SPAN * VH_NKINDS)
#define VH_FBASE ((MPI_Fint)1 << 30)
#define VH_CHUNK 1024
#define VH_MAX_CHUNKS 65536
#define VH_MAX_INDEX ((uint32_t)VH_CHUNK * VH_MAX_CHUNKS)

enum vh_flags {
	VH_LIVE = 1u << 0,	 /* the entry is in use */
	VH_FULL = 1u << 1,	 /* a communicator spanning every rank */
	VH_PERSISTENT = 1u << 2, /* a persistent request */
	VH_ACTIVE = 1u << 3,	 /* a request in progress */
	VH_RECV = 1u << 4,	 /* a receive request: counted when done */
	VH_SEND = 1u << 5,	 /* a send request: counted when started */
	VH_REF = 1u << 6,	 /* a second handle to an object: not mapped back */
	VH_NOPEER = 1u << 7,	 /* a request with MPI_PROC_NULL: nothing to count */
	VH_COLL = 1u << 8,	 /* a non-blocking collective's request */
	VH_DONE = 1u << 9,	 /* completed by stasis: its status waits */
	VH_REPOST = 1u << 10,	 /* a receive cancelled at a checkpoint */
	VH_FORTRAN = 1u << 11,	 /* posted through the Fortran bindings */
	VH_GREQ = 1u << 12,	 /* a generalized request: the program completes it */
	VH_SYNC = 1u << 13,	 /* a synchronous send (sync_sends.h) */
	VH_COUNTED = 1u << 14,	 /* ... numbered in its stream */
};

struct mpi_record;

struct vh_entry {
	void *real;          /* the real C handle (a keyval: its value) */
	MPI_Fint real_f;     /* the real Fortran handle, VH_NO_FINT if unknown */
	uint32_t flags;      /* enum vh_flags */
	struct mpi_record *rec; /* how it was made (NULL: not restorable) */
	void *aux;		/* the kind's runtime state (collective_counts.h, requests.h) */
};

#define VH_NO_FINT ((MPI_Fint)-1)

extern struct vh_entry *vh_chunks[VH_NKINDS][VH_MAX_CHUNKS];

/* Reserve the virtual range (once, before MPI_Init). 0 or -errno. */
int vh_init(void);

static inline bool vh_is_virtual(enum vh_kind k, const void *v)
{
	return (uintptr_t)v - (VH_BASE + k * VH_KIND_SPAN) < VH_KIND_SPAN;
}

static inline bool vh_is_virtual_f(MPI_Fint f)
{
	return f >= VH_FBASE;
}

static inline uint32_t vh_index(enum vh_kind k, const void *v)
{
	return (uint32_t)(((uintptr_t)v - (VH_BASE + k * VH_KIND_SPAN)) >> 3);
}

static inline void *vh_value(enum vh_kind k, uint32_t index)
{
	return (void *)(VH_BASE + k * VH_KIND_SPAN + ((uintptr_t)index << 3));
}

/* The live entry behind index, or NULL. */
static inline struct vh_entry *vh_entry_at(enum vh_kind k, uint32_t index)
{
	struct vh_entry *chunk;

	if (index >= VH_MAX_INDEX)
		return NULL;
	chunk = __atomic_load_n(&vh_chunks[k][index / VH_CHUNK], __ATOMIC_ACQUIRE);
	if (!chunk || !(chunk[index % VH_CHUNK].flags & VH_LIVE))
		return NULL;
	return &chunk[index % VH_CHUNK];
}

static inline struct vh_entry *vh_entry(enum vh_kind k, const void *v)
{
	return vh_is_virtual(k, v) ? vh_entry_at(k, vh_index(k, v)) : NULL;
}

/* The null handle of each kind: what a dead virtual handle translates to,
 * so that MPI reports the error the program would have got. */
void *vh_null(enum vh_kind k);

/* Virtual C handle -> real one; anything else is passed on unchanged. */
static inline void *vh_real(enum vh_kind k, void *v)
{
	struct vh_entry *e;

	if (__builtin_expect(!vh_is_virtual(k, v), 1))
		return v;
	e = vh_entry_at(k, vh_index(k, v));
	return e ? e->real : vh_null(k);
}

#define VH_REAL(kind, type, v) ((type)vh_real(kind, (void *)(v)))

static inline int vh_real_keyval(int v)
{
	struct vh_entry *e;

	if (v < VH_FBASE)
		return v;
	e = vh_entry_at(VH_KEYVAL, (uint32_t)(v - VH_FBASE));
	return e ? (int)(intptr_t)e->real : MPI_KEYVAL_INVALID;
}

/* Translate n handles into buf (of bufn), or into memory allocated when n
 * is larger; NULL in, or no memory, gives NULL out. Free the result with
 * vh_array_done. */
void **vh_real_array(enum vh_kind k, void *const *v, int n, void **buf, int bufn);
/* The same from Fortran handles to the program's C handles. */
void **vh_f2c_array(enum vh_kind k, const MPI_Fint *f, int n, void **buf, int bufn);
void vh_array_done(void *arr, const void *buf);

/* Fortran: virtual INTEGER handle -> real INTEGER handle. */
MPI_Fint vh_real_f(enum vh_kind k, MPI_Fint f);
MPI_Fint *vh_real_f_array(enum vh_kind k, const MPI_Fint *f, int n, MPI_Fint *buf, int bufn);
/* A Fortran handle as the C handle the program would see: virtual for a
 * virtual one, MPI's own conversion for a predefined one. */
void *vh_f2c(enum vh_kind k, MPI_Fint f);
/* A C handle the program sees as its Fortran handle. */
MPI_Fint vh_c2f(enum vh_kind k, void *v);
/* For an object made through the Fortran bindings, which return real
 * INTEGER handles: keep real_f as v's (Open MPI numbers them itself, for
 * the way back) and return the handle the program sees; real_f when v is
 * not virtual. */
MPI_Fint vh_keep_real_f(enum vh_kind k, void *v, MPI_Fint real_f);
/* MPI's own conversions for the real handles of each kind. */
void *vh_real_f2c(enum vh_kind k, MPI_Fint f);
MPI_Fint vh_real_c2f(enum vh_kind k, void *real);

/* Mint a virtual handle for real (never a null or predefined one: the
 * caller passes those on). rec may be NULL. Returns the virtual value, or
 * NULL when out of entries (the caller then passes real on and switches
 * checkpoints off). */
void *vh_mint(enum vh_kind k, void *real, uint32_t flags, struct mpi_record *rec);
/* The same for a new object of the program's, recorded by rec (which the
 * handle then owns): on any failure (no record, no handle left) the
 * program keeps the real handle and checkpoints are switched off, naming
 * call. */
void *vh_adopt(enum vh_kind k, void *real, struct mpi_record *rec, uint32_t flags,
	       const char *call);
/* The same at a given index (replay): -EEXIST when taken. */
int vh_bind(enum vh_kind k, uint32_t index, void *real, uint32_t flags, struct mpi_record *rec);
/* Release a virtual handle (its record is the caller's business). */
void vh_release(enum vh_kind k, void *v);
/* Keep v bound but to nothing: the object is gone, its record still
 * needed. Its old address no longer maps back to it. */
void vh_zombie(enum vh_kind k, void *v);

/* Real -> virtual, for handles MPI hands back (callbacks, inquiries):
 * the first live virtual bound to real, or NULL. */
void *vh_lookup_real(enum vh_kind k, const void *real);
/* Slots of kind k's real -> virtual map (its size tracks the live objects,
 * however many came and went: tests/unit/test_handles.c). */
size_t vh_reverse_capacity(enum vh_kind k);

/* Keyvals are ints: the same for them. */
static inline void *vh_keyval_ptr(int v)
{
	return vh_value(VH_KEYVAL, (uint32_t)(v - VH_FBASE));
}
int vh_keyval_value(const void *v);

/* Walk the live entries of kind k (in index order). */
typedef int (*vh_walk_fn)(enum vh_kind k, uint32_t index, struct vh_entry *e, void *arg);
int vh_walk(enum vh_kind k, vh_walk_fn fn, void *arg);

/* Serialises every creation and release (the table and the records). */
void vh_lock(void);
void vh_unlock(void);

#endif
