#define LOG_PREFIX "libraries: "
/* The zone for the program's dlopen()s (libraries_int.h): the address
 * space read from /proc/self/maps (no malloc: a dlopen() may come from
 * anywhere), fillers over every free gap above the cursor, the hole below
 * it, and the parts of the zone stasis holds reserved. */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime.h"
#include "format.h"
#include "closure.h"
#include "libraries_int.h"
#include "regions.h"

#define MAX_MAPS 16384

static struct mapping {
	uintptr_t start, end;
	bool stack;
} maps[MAX_MAPS];
static int nmaps;
static bool maps_overflow;

static void add_map(uintptr_t start, uintptr_t end, const char *perms, const char *path, void *arg)
{
	(void)perms;
	(void)arg;
	if (nmaps == MAX_MAPS) {
		maps_overflow = true;
		return;
	}
	maps[nmaps++] = (struct mapping){start, end, !strcmp(path, "[stack]")};
}

static int read_maps(void)
{
	int ret;

	nmaps = 0;
	maps_overflow = false;
	ret = regions_walk_maps(add_map, NULL);
	return ret ? ret : maps_overflow ? -ENOSPC : 0;
}

static struct mapping fillers[MAX_MAPS];
static int nfillers;
/* The parts of the zone below the cursor that stasis holds reserved: only
 * these are ever unmapped to open the hole (another thread's mapping that
 * landed in the zone stays untouched). */
static struct mapping owned[MAX_MAPS] = {
    {STASIS_LIBRARIES_BASE, STASIS_LIBRARIES_BASE + STASIS_LIBRARIES_SIZE, false}};
static int nowned = 1;

void zone_remove_fillers(void)
{
	for (int i = 0; i < nfillers; i++)
		munmap((void *)fillers[i].start, fillers[i].end - fillers[i].start);
	nfillers = 0;
}

static int reserve(uintptr_t start, uintptr_t end)
{
	void *p = mmap((void *)start, end - start, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	if (p != (void *)start) {
		munmap(p, end - start);
		return -EEXIST;
	}
	return 0;
}

/* Fill every free gap above the cursor, up to the mmap base (the gap just
 * below the main stack is where it grows, and mmap(NULL) never looks
 * there): the kernel's top-down search can then only place a mapping in
 * the hole right below the cursor. */
static int fill_above(uintptr_t cursor)
{
	int ret = read_maps();

	for (int i = 0; !ret && i + 1 < nmaps && !maps[i + 1].stack; i++) {
		uintptr_t start = maps[i].end > cursor ? maps[i].end : cursor;
		uintptr_t end = maps[i + 1].start;

		if (start >= end)
			continue;
		if (nfillers == MAX_MAPS)
			return -ENOSPC;
		ret = reserve(start, end);
		if (!ret)
			fillers[nfillers++] = (struct mapping){start, end, false};
	}
	return ret;
}

/* How much room a dlopen() of path gets below the cursor. Less than the
 * 64 MiB glibc maps for a new malloc heap (128 MiB, or 64 where the last
 * heap ended): a thread of the runtime's that allocates for the first
 * time meanwhile would take the top of a larger hole, and the objects
 * would land below it. More for an object whose segments alone need it. */
#define HOLE_DEFAULT (((size_t)64 << 20) - STASIS_PAGE)

size_t zone_hole_size(const char *path)
{
	ElfW(Ehdr) eh;
	ElfW(Phdr) ph[64];
	uintptr_t lo = UINTPTR_MAX, hi = 0, align = STASIS_PAGE;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t size = HOLE_DEFAULT, need;

	if (fd < 0)
		return size;
	if (pread(fd, &eh, sizeof(eh), 0) == sizeof(eh) && eh.e_phentsize == sizeof(ph[0]) &&
	    eh.e_phnum <= 64 &&
	    pread(fd, ph, eh.e_phnum * sizeof(ph[0]), eh.e_phoff) ==
		(ssize_t)(eh.e_phnum * sizeof(ph[0]))) {
		for (int i = 0; i < eh.e_phnum; i++) {
			if (ph[i].p_type != PT_LOAD)
				continue;
			lo = ph[i].p_vaddr < lo ? ph[i].p_vaddr : lo;
			hi =
			    ph[i].p_vaddr + ph[i].p_memsz > hi ? ph[i].p_vaddr + ph[i].p_memsz : hi;
			align = ph[i].p_align > align ? ph[i].p_align : align;
		}
		/* glibc maps span + alignment and trims (glibc 2.35). */
		if (hi > lo && 2 * (hi - lo + align) > size)
			size = PAGE_UP(2 * (hi - lo + align));
	}
	close(fd);
	/* And the libraries it needs that are not loaded yet: the whole
	 * closure lands in the hole, or the call is refused. */
	need = 2 * closure_bytes(path);
	if (need > size)
		size = PAGE_UP(need);
	return size;
}

static uintptr_t hole_low; /* the hole is [hole_low, cursor) */

void zone_no_hole(uintptr_t top)
{
	hole_low = top;
}

uintptr_t zone_hole_low(void)
{
	return hole_low;
}

int zone_open_hole(uintptr_t cursor, size_t size)
{
	int ret = -EEXIST, kept = 0;

	/* Another thread (the MPI library's, stasis's coordinator) may map
	 * something meanwhile: fill again what is left. */
	for (int tries = 0; ret == -EEXIST && tries < 8; tries++)
		ret = fill_above(cursor);
	if (ret) {
		zone_remove_fillers();
		return ret;
	}
	hole_low = cursor - STASIS_LIBRARIES_BASE > size ? cursor - size : STASIS_LIBRARIES_BASE;
	for (int i = 0; i < nowned; i++) {
		uintptr_t from = owned[i].start > hole_low ? owned[i].start : hole_low;

		if (from < owned[i].end)
			munmap((void *)from, owned[i].end - from);
		if (owned[i].start < hole_low)
			owned[kept++] = (struct mapping){
			    owned[i].start, owned[i].end < hole_low ? owned[i].end : hole_low,
			    false};
	}
	nowned = kept;
	return 0;
}

/* Reserve [start, end) again; what lies below the cursor is owned. */
static void reserve_again(uintptr_t cursor, uintptr_t start, uintptr_t end)
{
	if (start >= end || reserve(start, end))
		return;
	if (start < cursor && nowned < MAX_MAPS)
		owned[nowned++] = (struct mapping){start, end < cursor ? end : cursor, false};
}

void zone_close_hole(uintptr_t cursor, uintptr_t top)
{
	uintptr_t from = hole_low;

	zone_remove_fillers();
	if (read_maps())
		return;
	for (int i = 0; i < nmaps && from < top; i++) {
		if (maps[i].end <= from)
			continue;
		reserve_again(cursor, from, maps[i].start < top ? maps[i].start : top);
		from = maps[i].end > from ? maps[i].end : from;
	}
	reserve_again(cursor, from, top);
}

bool zone_only(uintptr_t low, uintptr_t top, const struct zone_span *ours, int n, char *stray,
	       size_t len)
{
	if (read_maps())
		return false;
	for (int m = 0; m < nmaps; m++) {
		bool mine = false;

		if (maps[m].end <= low || maps[m].start >= top)
			continue;
		for (int k = 0; k < n && !mine; k++)
			mine = maps[m].start >= ours[k].lo && maps[m].end <= ours[k].hi;
		if (!mine) {
			snprintf(stray, len, "another mapping took [%#lx, %#lx) meanwhile",
				 (unsigned long)maps[m].start, (unsigned long)maps[m].end);
			return false;
		}
	}
	return true;
}
