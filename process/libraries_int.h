/* The zone where the program's dlopen()s land (libraries_zone.c): how
 * libraries.c makes a hole right below its cursor, so that the kernel's
 * top-down search can place the objects nowhere else, and checks where
 * they landed. Called under libraries.c's lock. */
#ifndef STASIS_PROCESS_LIBRARIES_INT_H
#define STASIS_PROCESS_LIBRARIES_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PAGE_DOWN(x) ((x) & ~(uintptr_t)(STASIS_PAGE - 1))
#define PAGE_UP(x) PAGE_DOWN((x) + STASIS_PAGE - 1)

struct zone_span {
	uintptr_t lo, hi;
};

/* How much room a dlopen() of path gets below the cursor. */
size_t zone_hole_size(const char *path);
/* No hole: [top, top). */
void zone_no_hole(uintptr_t top);
/* Fill every free gap above cursor, then free [cursor - size, cursor) of
 * the zone. 0 or -errno (the fillers are removed then). */
int zone_open_hole(uintptr_t cursor, size_t size);
/* The hole's low end. */
uintptr_t zone_hole_low(void);
/* Unmap the fillers above the cursor. */
void zone_remove_fillers(void);
/* Reserve again whatever is free in the hole up to top (the fillers
 * removed); what lies below cursor is the zone's own. */
void zone_close_hole(uintptr_t cursor, uintptr_t top);
/* Whether every mapping in [low, top) lies inside one of ours[n]; if not,
 * a line in stray names the first other one. */
bool zone_only(uintptr_t low, uintptr_t top, const struct zone_span *ours, int n, char *stray,
	       size_t len);

#endif
