/* Protections and kinds of the application's mappings (DESIGN.md section
 * 10, "the rest of a process"), and what a restart checks of the address
 * space before it writes the image into it.
 *
 * Recorded as the program makes them, for the memory a checkpoint saves
 * (the arena, the application's data, the main stack): the program's own
 * mprotect()s and the protection of its mmap()s, its anonymous MAP_SHARED
 * mappings (served as private memory from the arena: one process cannot
 * tell them apart until it forks), and the madvise() flags the kernel keeps
 * per mapping (MADV_DONTFORK, MADV_WIPEONFORK, MADV_DONTDUMP). The record
 * is the truth, not /proc/self/maps: the mprotect tracking backend changes
 * protections itself (dirty.h).
 *
 * A checkpoint carries the record in SECTION_MAPPINGS with the application
 * libraries the image expects (path, load address, crc64 of the file) and
 * the top of the stack. A restart checks, before it writes anything, that
 * every mapping the image expects is in place, and gives the memory its
 * protections back once the image is in.
 *
 * Every function may run on any thread and inside a signal handler (the
 * program's SIGSEGV handler calls mprotect()): one lock, held with every
 * signal blocked. Functions return 0 or -errno unless said otherwise. */
#ifndef STASIS_MAPS_H
#define STASIS_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image.h"
#include "part.h"
#include "regions.h"

/* The program's mprotect(): done and recorded, with its refusals (code or
 * RELRO of an application object made writable). Returns as mprotect(). */
int maps_mprotect(void *addr, size_t len, int prot);
/* The program got [addr, addr + len) from the arena for an mmap(): give it
 * prot and record it with kind: 0 (private anonymous memory), MAPS_SHARED
 * (MAP_SHARED | MAP_ANONYMOUS) or MAPS_FILE_COPY (a private file mapping
 * whose bytes were copied in, preload/mappings.c). */
int maps_new_mapping(void *addr, size_t len, int prot, uint32_t kind);
/* The program's madvise() of saved memory, done as the kernel would for
 * the kind of mapping recorded: MADV_DONTNEED and MADV_FREE drop private
 * pages (dirty tracking hears of it) and keep a shared mapping's contents,
 * MADV_REMOVE drops a shared mapping's. Advice that would change saved
 * memory behind stasis's back (MADV_GUARD_INSTALL, the static data's pages
 * dropped, an unknown kind) switches checkpoints off. Returns as madvise(). */
int maps_madvise(void *addr, size_t len, int advice);
/* [addr, addr + len) of the arena stops being the program's (munmap):
 * forget it; memory fork() made truly shared becomes plain memory again. */
void maps_unmapping(void *addr, size_t len);
/* The program's mremap() of an arena mapping: it moves like a realloc of
 * whole pages (MREMAP_MAYMOVE needed, MREMAP_FIXED refused with ENOMEM),
 * its attributes with it; MREMAP_DONTUNMAP leaves the old pages zero.
 * Returns as mremap(). */
void *maps_arena_mremap(void *old, size_t old_len, size_t new_len, int flags);
/* fork(): the program's anonymous MAP_SHARED mappings, private memory until
 * now, become truly shared so that the child shares them, as without
 * stasis. Returns how many there are (stasis cannot checkpoint them any
 * more: the caller switches checkpoints off). */
int maps_before_fork(void);
/* Whether the program set a protection other than read-write on memory in
 * [start, end) (the mprotect tracking backend must leave it alone). */
bool maps_protected(uintptr_t start, uintptr_t end);
/* Whether any of [start, start + len) is memory a checkpoint saves outside
 * the arena: the application's static data, the main stack. */
bool maps_in_image(uintptr_t start, size_t len);
/* Whether any of [start, end) is recorded as an anonymous shared mapping. */
bool maps_shared(uintptr_t start, size_t len);

/* Checkpoint: make the pages the program made unreadable readable while
 * the image is written (begin), and give them their protection back (end).
 * Nothing else may change protections in between (signals are held). */
void maps_save_begin(void);
void maps_save_end(void);
/* The SECTION_MAPPINGS record of this checkpoint, in a buffer of stasis's
 * (reused by the next capture). -errno with err set when it cannot be made
 * (the checkpoint must not be taken without it). */
int maps_capture(struct image_region *out, struct why *why);

/* Restart, before the image is put back (collective agreement is the
 * caller's): give read-write back to what this run's program protected
 * before MPI_Init (the image is written there next), then check rec (the
 * SECTION_MAPPINGS of the image) against this process: the application
 * libraries are the same files at the same addresses, the data regions
 * are mapped writable, the stack fits where it was and in this run's stack
 * limit, the arena holds its regions. regions[0..n): every memory region
 * of the images to be applied. On failure why holds one line. */
int maps_verify(const struct region *regions, int n, const void *rec, size_t len, struct why *why);
/* After the image is back in memory (on the temporary stack): the record
 * of maps_verify becomes this process's, and the memory gets its
 * protections and madvise() flags. A failure here cannot be undone: one
 * line, and the process exits. */
void maps_apply(void);

/* The mappings part (session/part.h): saved as SECTION_MAPPINGS, checked
 * before a restart writes memory, applied on the temporary stack. */
extern const struct part_ops mappings_part;

#endif
