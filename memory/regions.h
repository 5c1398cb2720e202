/* The application image (DESIGN.md section 2): which memory a checkpoint
 * saves. Loaded objects are split at start into the application (the
 * executable and the libraries it brought that are not the runtime's) and
 * the runtime (ld.so, libc, libstasis, libmpi and the closure of its
 * dependencies, the MPI language bindings, and everything loaded later,
 * e.g. MCA components dlopen()ed by MPI_Init). */
#ifndef STASIS_REGIONS_H
#define STASIS_REGIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct region {
	uintptr_t start, end; /* page aligned */
	uint32_t kind;        /* enum region_kind (format.h) */
};

struct span {
	uintptr_t start, end; /* byte granular */
};

/* Classify the objects loaded now and read the executable's copy
 * relocations. Call once before MPI_Init. Returns 0 or -errno. */
int regions_init(void);
bool regions_ready(void);

/* Whether code at pc allocates for the application: the executable, an
 * application library, or libc (which serves the application too). */
bool regions_app_code(uintptr_t pc);

/* Whether pc is code of libc; of libstasis.so itself. */
bool regions_libc_code(uintptr_t pc);
bool regions_self_code(uintptr_t pc);

/* Whether the object loaded at base (its dl_iterate_phdr dlpi_addr) is the
 * executable or an application library: its data, TLS and keys are the
 * application's (libc serves the application but its state is the
 * runtime's). Objects stasis does not know are the runtime's. */
bool regions_app_object(uintptr_t base);

/* Whether pc is code of such an object (not libc's). */
bool regions_app_object_code(uintptr_t pc);

/* Libraries the program loaded with dlopen() (process/libraries.h), by
 * load base: application libraries from now on (unless their names are the MPI
 * library's), their writable data part of the image. 0 or -errno. */
int regions_add_objects(const uintptr_t *bases, int n);

/* The application image now: writable pages of the application objects,
 * the committed arena, and the main stack from stack_low (rounded down) to
 * its top. Returns the count, or -ENOSPC if max is too small. */
int regions_collect(struct region *out, int max, uintptr_t stack_low);

/* Runtime objects inside application data that a restore must leave as
 * they are: copy-relocated MPI (and libc) objects in the executable. */
size_t regions_exclusions(const struct span **out);

/* Whether pc is code of the executable or of an application library (libc
 * not included). */
bool regions_app_text(uintptr_t pc);
/* The i-th application library (0, 1, ...; the executable not included):
 * its path as the dynamic linker found it and its load address. 0, or
 * -ENOENT past the last. */
int regions_app_library(int i, const char **path, uintptr_t *base);
/* The path of the loaded object whose segments hold addr ("the
 * executable" for it), or NULL. */
const char *regions_object_at(uintptr_t addr);
/* Whether [start, end) touches a page of an application object that is not
 * its saved data (code, read-only data, RELRO). */
bool regions_app_readonly(uintptr_t start, uintptr_t end);
/* Whether [start, end) lies inside one span of the application's saved
 * data, and those spans (read once at start). */
bool regions_in_data(uintptr_t start, uintptr_t end);
size_t regions_data(const struct span **out);
/* The end of the main thread's stack mapping, read at start (0 unknown). */
uintptr_t regions_stack_top(void);

/* Calls fn(start, end, perms, path, arg) for each line of /proc/self/maps
 * (path "" for an anonymous mapping), without malloc; one walk at a time,
 * and fn must not start another. */
int regions_walk_maps(void (*fn)(uintptr_t, uintptr_t, const char *, const char *, void *),
		      void *arg);

/* Names of the application libraries, for STASIS_VERBOSE=2. */
void regions_print(void);

/* The zone where the libraries the program loads with dlopen() are placed
 * (process/libraries.h): below the runtime's libraries, above the arena. */
#define STASIS_LIBRARIES_BASE ((uintptr_t)0x7e0000000000ULL)
#define STASIS_LIBRARIES_SIZE ((size_t)64 << 30)

#endif
