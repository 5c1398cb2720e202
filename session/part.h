/* A part of the process that a checkpoint saves besides plain memory, and
 * that a restart puts back: the libraries the program loaded, its threads,
 * its MPI objects, its open files, its signals, its mappings, its call
 * stack. Each part is one `struct part_ops`, defined in the layer that
 * knows that state (process/, mpi/); the engine (engine/parts.c) holds the
 * one ordered table of them and runs every stage below over it. Adding a
 * part is one ops struct and one line in that table.
 *
 * Every hook is optional (NULL: nothing to do at that stage), returns 0 or
 * -errno and says why in *why (util/why.h). After each stage that can fail
 * the engine agrees on the result across the ranks (session/agree.h), so
 * every rank takes the same branch and the lowest failing rank's why is
 * the one the user reads.
 *
 * The stages, in the order a checkpoint and a restart run them:
 *
 * Checkpoint (program thread, every rank stopped by the coordinator):
 *   STOP      table order, before the registers are captured: the program's
 *             other threads park (threads). A failure skips this checkpoint.
 *   QUIESCE   table order, after the capture: the program's signals wait,
 *             then what it made unreadable is made readable (signals before
 *             mappings: nothing may change protections once they are read),
 *             so that the save sees one instant.
 *   SAVE      table order: each part adds its sections to the image, the
 *             parts marked save_early before the engine collects the
 *             memory's dirty pages, the others after.
 *   THAW      reverse order, once the image is written (never after a
 *             restart): undoes QUIESCE and STOP, threads last.
 *   RESUMED   table order, back in the program after every checkpoint
 *             (restarted = false) and after a restart (restarted = true).
 *
 * Restart (a fresh process after a real MPI_Init, the checkpoint chosen and
 * every image of its chain verified; parts see the sections of the newest):
 *   CHECK     table order, before anything in this process changes: every
 *             file the program had open is still there and the same (files).
 *   RECREATE  table order, before the memory comes back, because the memory
 *             refers to what is made here: MPI objects by virtual handle
 *             (mpi), libraries at the addresses their code and data had
 *             (libraries), then threads, whose code and TLS may be in those
 *             libraries (threads).
 *   VERIFY    table order, after RECREATE (the libraries are among the
 *             mappings), before memory is written: the signal record is
 *             sound and every mapping the images expect is in place. A
 *             failure up to here leaves the process as MPI_Init made it.
 *   -         the engine writes the memory back (engine/restore_read.h);
 *             from here a failure stops the process.
 *   REATTACH  table order, on the main stack: files are made the program's
 *             descriptors again, then the program's signals are held until
 *             the jump (signals).
 *   ON_TEMP_STACK  reverse order, on the engine's temporary stack after the
 *             main stack came back: mappings get the program's protections
 *             before threads may run again, streams are linked back into
 *             libc's list, threads are released last. No failure possible.
 *   RESUMED   (above), with restarted = true.
 */
#ifndef STASIS_PART_H
#define STASIS_PART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "why.h"

struct region;

/* One section of an image: data a part carries, never memory. */
struct section {
	uint32_t kind; /* enum section_kind (format/format.h) */
	const void *data;
	size_t len;
};

/* What SAVE fills: the part adds its sections; their data stays valid (the
 * part's own kept buffers) until THAW. */
struct section_list {
	struct section *v;
	int n, max;
};

/* Append a section; -ENOSPC (with why) when the list is full. */
int section_add(struct section_list *l, uint32_t kind, const void *data, size_t len,
		struct why *why);

/* A section's copy kept by its part from one checkpoint to the next:
 * page-rounded (the image writes whole pages), mmap()ed (never the
 * program's heap), grown twice over when too small. */
struct section_buf {
	void *data;
	size_t cap;
};

/* Copy len bytes into b, zero its tail to the page; *rounded the length
 * the section then has. 0, or -ENOMEM with b unchanged. */
int section_buf_fill(struct section_buf *b, const void *data, size_t len, size_t *rounded);

/* What a restart hands every hook. */
struct restart_input {
	uint64_t id;			/* the checkpoint being restored */
	struct section sections[SECTION_LAST + 1]; /* by kind; data NULL: absent */
	const struct region *memory;	/* every memory region of the chain */
	int nmemory;
};

static inline const struct section *restart_section(const struct restart_input *in,
						    uint32_t kind)
{
	return kind <= SECTION_LAST ? &in->sections[kind] : NULL;
}

struct part_ops {
	const char *name; /* "files": the stage's step name in logs ("restart:check:files") */

	/* checkpoint */
	int (*stop)(struct why *why);
	int (*quiesce)(struct why *why);
	int (*save)(uint64_t id, struct section_list *out, struct why *why);
	/* SAVE before the memory's dirty pages are collected (the MPI and
	 * files parts, whose saving may touch the program's memory); the
	 * others save after, when what they read of the process (its
	 * libraries and mappings) is what the collection left. */
	bool save_early;
	void (*thaw)(void);

	/* restart */
	int (*check)(const struct restart_input *in, struct why *why);
	int (*recreate)(const struct restart_input *in, struct why *why);
	int (*verify)(const struct restart_input *in, struct why *why);
	int (*reattach)(const struct restart_input *in, struct why *why);
	void (*on_temp_stack)(void);

	/* both */
	void (*resumed)(bool restarted);
};

#endif
