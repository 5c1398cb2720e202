/* Internals shared by maps.c (the record and the program's calls) and
 * maps_restore.c (what a restart checks and puts back). Not installed. */
#ifndef STASIS_MAPS_INT_H
#define STASIS_MAPS_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#include "format.h"

#define MAPS_RW (PROT_READ | PROT_WRITE)
/* Not in images: a shared mapping fork() made truly shared (maps.h). */
#define MAPS_FORKED (1u << 31)
#define MAPS_SAVED_FLAGS                                                                           \
	(MAPS_SHARED | MAPS_DONTFORK | MAPS_WIPEONFORK | MAPS_DONTDUMP | MAPS_FILE_COPY)

/* Ranges whose attributes are not the default (read-write, no flags),
 * sorted, not overlapping, adjacent ones with equal attributes merged. */
struct maps_table {
	struct maps_range *r;
	size_t n, cap;
};
extern struct maps_table maps_table;

/* The lock, taken with every signal blocked (old receives the mask). */
void maps_lock(sigset_t *old);
void maps_unlock(const sigset_t *old);

/* Under the lock: room for want ranges in the table. */
int maps_reserve(size_t want);
/* mprotect() by the system call, not through the preload layer: 0 or -errno. */
int maps_raw_mprotect(uint64_t start, uint64_t end, int prot);
/* Under the lock: set prot (< 0: keep) and flags (&= ~clear, then |= set) of
 * [start, end). -ENOMEM when the table cannot grow (nothing changed). */
int maps_update(uint64_t start, uint64_t end, int prot, uint32_t set, uint32_t clear);
/* Under the lock: the ranges recorded over [start, end), clipped. */
size_t maps_pieces(uint64_t start, uint64_t end, struct maps_range *out, size_t max);
/* Under the lock: give [start, end) the madvise() flags of flags. */
int maps_advise_flags(uint64_t start, uint64_t end, uint32_t flags);

#endif
