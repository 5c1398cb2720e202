/* Records of the MPI objects a program made (DESIGN.md section 10, "record
 * and replay"): each live object remembers how to make it again after a
 * restart. Communicators and groups are recorded by what they are (their
 * world ranks, topology, kind: comms.c), datatypes and persistent requests
 * by the call that made them and its arguments (generated from the table),
 * ops, keyvals and error handlers by their functions (callbacks.c), info
 * objects by their contents when a checkpoint is taken.
 *
 * An object the program freed while another record still needs it (the
 * old type of a derived type, the communicator of a persistent request)
 * stays as a "freed" record: the replay makes it, makes what needs it, and
 * frees it again. Records live in stasis's runtime memory, in the order
 * they were made; a checkpoint writes them out (state.h), a restart
 * reads them back before anything else. */
#ifndef STASIS_MPI_RECORD_H
#define STASIS_MPI_RECORD_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handles.h"

enum rec_flags {
	REC_FREED = 1u << 0,     /* the program freed it; kept for dependants */
	REC_COMMITTED = 1u << 1, /* a datatype the program committed */
	REC_FORTRAN = 1u << 2,   /* made through the Fortran bindings */
};

struct mpi_record {
	enum vh_kind kind;
	uint32_t index; /* of its virtual handle */
	uint64_t seq;   /* order of creation */
	uint32_t flags; /* enum rec_flags */
	uint32_t deps;  /* records that need this one */
	uint32_t nparents;
	struct mpi_record **parents;
	uint8_t *data; /* what the kind's replay reads */
	size_t len;
	void *aux; /* kind-specific runtime state (callbacks), not saved */
	struct mpi_record *prev, *next;
};

/* Building a record's data. A failed allocation marks the builder; the
 * record is then not made and the program runs on unprotected. */
struct rec_builder {
	uint8_t *data;
	size_t len, cap;
	struct mpi_record **parents;
	uint32_t nparents, pcap;
	bool failed;
	bool orphan; /* (and failed) a handle named an object without a record */
};

void recbuf_put(struct rec_builder *b, const void *p, size_t n);
void recbuf_int(struct rec_builder *b, int v);
void recbuf_u64(struct rec_builder *b, uint64_t v);
void recbuf_ints(struct rec_builder *b, const int *v, int n);
void recbuf_aints(struct rec_builder *b, const MPI_Aint *v, int n);
void recbuf_str(struct rec_builder *b, const char *s);
/* A handle argument: a virtual one is a dependency on its record; a
 * predefined one is kept as its value (it does not move). */
void recbuf_handle(struct rec_builder *b, enum vh_kind k, void *v);
void recbuf_handles(struct rec_builder *b, enum vh_kind k, void *const *v, int n);

/* Reading a record's data back; every read is bounds checked (the data
 * came from a file: its crc was checked, its sense was not). */
#define RR_SCRATCH 16
struct rec_reader {
	const uint8_t *p, *end;
	bool bad;
	void *scratch[RR_SCRATCH];
	int nscratch;
};

static inline struct rec_reader recread_open(const void *data, size_t len)
{
	return (struct rec_reader){.p = data, .end = (const uint8_t *)data + len};
}

void recread_get(struct rec_reader *r, void *p, size_t n);
int recread_int(struct rec_reader *r);
uint64_t recread_u64(struct rec_reader *r);
/* Arrays are copied into memory the reader keeps until recread_done. */
const int *recread_ints(struct rec_reader *r, int *n);
const MPI_Aint *recread_aints(struct rec_reader *r, int *n);
const char *recread_str(struct rec_reader *r);
/* A handle written by recbuf_handle, as the real handle of this process. */
void *recread_handle(struct rec_reader *r, enum vh_kind k);
void **recread_handles(struct rec_reader *r, enum vh_kind k, int *n);
void recread_done(struct rec_reader *r);

/* Turn a builder into a record of kind k (not yet bound to a handle);
 * NULL when the builder failed. */
struct mpi_record *rec_make(enum vh_kind k, struct rec_builder *b, uint32_t flags);
/* Bind a new object's record to its virtual handle and append it. */
void rec_attach(struct mpi_record *rec, void *v);
/* The program freed the object behind v (already freed in MPI): drop its
 * record, or keep it as a freed one while others need it; the virtual
 * handle goes with the record. */
void rec_object_freed(enum vh_kind k, void *v);
/* A keyval MPI has destroyed (keyvals.h): its record goes and its handle
 * is released, with the state its trampolines get (aux), except a
 * datatype keyval's: an attribute on a datatype the program freed, which
 * MPI keeps while a type made from it lives, may keep the keyval alive in
 * MPI and its callbacks called. */
void rec_keyval_gone(struct mpi_record *rec);
/* Keep rec (and the records it needs) while something that is not a record
 * uses its object: a file's view uses its datatypes after the program may
 * have freed them. rec_unpin lets it go, with its handle once freed. */
void rec_pin(struct mpi_record *rec);
void rec_unpin(struct mpi_record *rec);
/* Drop a record that was made but never attached. */
void rec_discard(struct mpi_record *rec);
/* A record described again (what an object holds now, at a checkpoint):
 * rec's data becomes b's, which is consumed either way; the record keeps
 * the parents it was made with. -ENOMEM when b failed (rec unchanged). */
int rec_replace_data(struct mpi_record *rec, struct rec_builder *b);

/* Every record, oldest first. */
struct mpi_record *rec_first(void);
size_t rec_count(void);
uint64_t rec_next_seq(void);
/* Replay: put a record read from an image back in the list. */
void rec_restore(struct mpi_record *rec);
void rec_set_next_seq(uint64_t seq);

#endif
