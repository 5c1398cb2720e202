/* Libraries the program loads with dlopen(). DESIGN.md section 2 counted
 * them as runtime (not saved); they are the application's, their writable
 * data saved and put back like the executable's, because a Python
 * extension module keeps its type objects and caches in its static data,
 * which must come back with the heap that refers to them.
 *
 * Where they are loaded: a restart loads them again before the memory
 * comes back, and their data and code must then be at the addresses of the
 * checkpointed run. ld.so picks an address with mmap(NULL): the kernel's
 * top-down search takes the highest free gap below the mmap base that
 * fits, so what the runtime happened to map before (MCA components during
 * MPI_Init, buffers, the restart's own staging) would decide. Instead each
 * dlopen() of the program is steered into a zone stasis reserves at start
 * (like the arena): the part of the zone below a cursor is freed, every
 * free gap above the cursor is filled with a PROT_NONE placeholder for the
 * duration of the call, so the objects ld.so maps land right below the
 * cursor, in the same places in every run that makes the same calls from
 * the same cursor. Then the placeholders go, the unused part of the zone
 * is reserved again and the cursor moves below the new objects.
 *
 * The program's libraries stay loaded until it exits (they are opened
 * RTLD_NODELETE: dlclose() does not unload them), so their places never
 * free up and the zone's layout is the list of calls. */
#ifndef STASIS_LIBRARIES_H
#define STASIS_LIBRARIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image.h"
#include "part.h"
#include "regions.h"


/* Reserve the zone (MAP_FIXED_NOREPLACE, PROT_NONE). 0 or -errno. */
int libraries_init(void);

/* dlopen(file, mode) for the program, placed in the zone (file is not NULL,
 * mode has no RTLD_NOLOAD); caller is the code that called dlopen (its
 * search path finds a bare name). A library that cannot be placed is
 * loaded anyway and switches checkpoints off, naming it. */
void *libraries_dlopen(const char *file, int mode, uintptr_t caller);

/* Non-zero on a thread inside the program's dlopen() (its libraries'
 * constructors run then, and run again when a restart loads them). */
extern __thread int libraries_loading;

/* dlopen() handles: the program sees, for its libraries, a value that is
 * the same in every run (ld.so's handle is a pointer into the runtime's
 * heap). libraries_handle turns a real handle into the program's,
 * libraries_real back (NULL for a handle of no library loaded). */
void *libraries_handle(void *real);
void *libraries_real(void *handle);
bool libraries_is_program_handle(const void *handle);

/* SECTION_LIBRARIES for the image (0 or -errno). */
int libraries_save(struct image_region *out);

/* Restart, before the memory comes back: load the checkpoint's libraries
 * that this run's start has not loaded again, at their addresses, and check
 * the ones it has. 0, or -errno with why set to one line naming the
 * library. */
int libraries_restore(const void *rec, size_t len, struct why *why);

/* The libraries part (session/part.h): saved as SECTION_LIBRARIES, loaded
 * again at their addresses before a restart's threads and memory. */
extern const struct part_ops libraries_part;

#endif
