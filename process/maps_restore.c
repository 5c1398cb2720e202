/* What a restart checks of the address space before it writes the image
 * into it, and the protections the memory gets back once it has (maps.h). */
#define LOG_PREFIX "maps: "
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arena.h"
#include "image.h"
#include "log.h"
#include "maps.h"
#include "maps_int.h"

/* The kernel keeps this gap below a stack that grows down (stack_guard_gap,
 * 256 pages by default, mm/mmap.c). */
#define STACK_GUARD_GAP (256ull * STASIS_PAGE)
#define STACK_WINDOW (1ull << 30)

/* The image's ranges, installed by maps_apply(). */
static struct maps_range *pending;
static size_t npending;

/* This run's /proc/self/maps. */
struct mapping {
	uint64_t start, end;
	bool writable, stack;
	char path[64];
};
static struct mapping *maps;
static size_t nmaps, maps_cap;

static void *map_pages(size_t bytes)
{
	void *p = (void *)syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void add_mapping(uintptr_t start, uintptr_t end, const char *perms, const char *path,
			void *arg)
{
	bool *failed = arg;

	if (nmaps == maps_cap) {
		size_t cap = maps_cap ? 2 * maps_cap : 1024;
		struct mapping *m = map_pages(cap * sizeof(*m));

		if (!m) {
			*failed = true;
			return;
		}
		if (maps) {
			memcpy(m, maps, nmaps * sizeof(*m));
			syscall(SYS_munmap, maps, maps_cap * sizeof(*m));
		}
		maps = m;
		maps_cap = cap;
	}
	maps[nmaps] = (struct mapping){start, end, perms[1] == 'w', !strcmp(path, "[stack]"), ""};
	snprintf(maps[nmaps].path, sizeof(maps[nmaps].path), "%s", path);
	nmaps++;
}

static int read_maps(void)
{
	bool failed = false;
	int ret;

	nmaps = 0;
	ret = regions_walk_maps(add_mapping, &failed);
	return ret ? ret : failed ? -ENOMEM : 0;
}

/* What this run's program protected before MPI_Init gets read-write back:
 * the image is written there next, and brings its own record. */
static void forget_this_run(void)
{
	sigset_t old;

	maps_lock(&old);
	for (size_t i = 0; i < maps_table.n; i++) {
		const struct maps_range *r = &maps_table.r[i];

		if (r->flags & MAPS_FORKED)
			syscall(SYS_mmap, r->start, r->end - r->start, MAPS_RW,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		else if (r->prot != MAPS_RW)
			maps_raw_mprotect(r->start, r->end, MAPS_RW);
		if (r->flags & (MAPS_DONTFORK | MAPS_WIPEONFORK | MAPS_DONTDUMP))
			maps_advise_flags(r->start, r->end, 0);
	}
	maps_table.n = 0;
	maps_unlock(&old);
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* This run's application library loaded at base (or named like path, when
 * path is given), or NULL. */
static const char *library(uintptr_t *base, const char *path)
{
	const char *p;
	uintptr_t b;

	for (int k = 0; !regions_app_library(k, &p, &b); k++)
		if (path ? !strcmp(base_name(p), base_name(path)) : b == *base) {
			*base = b;
			return p;
		}
	return NULL;
}

/* The application libraries: the same files at the same addresses. */
static int check_objects(const struct maps_object *obj, size_t n, struct why *why)
{
	const char *path;
	uintptr_t base;

	for (size_t i = 0; i < n; i++) {
		const struct maps_object *o = &obj[i];
		uint64_t crc = 0;

		if (!memchr(o->path, 0, sizeof(o->path))) {
			return why_set(why, -EBADMSG,
				       "the record of the application's mappings is damaged");
		}
		base = o->base;
		if (!(path = library(&base, NULL))) {
			if ((path = library(&base, o->path)))
				return why_set(
				    why, -ENOENT,
				    "the application library %s is at %#lx in this run, at %#lx "
				    "in the checkpoint",
				    path, (unsigned long)base, (unsigned long)o->base);
			return why_set(why, -ENOENT,
				       "the application library %s (at %#lx in the checkpoint) is "
				       "not loaded in this run",
				       o->path, (unsigned long)o->base);
		}
		if (!o->file_crc || (!file_crc64(path, &crc) && crc == o->file_crc))
			continue;
		if (!strcmp(path, o->path))
			return why_set(
			    why, -ESTALE,
			    "the application library %s is not the file the checkpoint ran "
			    "(its contents changed)",
			    path);
		return why_set(why, -ESTALE,
			       "the application library at %#lx is another file in this run (%s) "
			       "than in the checkpoint (%s)",
			       (unsigned long)base, path, o->path);
	}
	for (int k = 0; !regions_app_library(k, &path, &base); k++) {
		size_t i = 0;

		while (i < n && obj[i].base != base)
			i++;
		if (i == n) {
			return why_set(
			    why, -ENOENT,
			    "this run loads the application library %s at %#lx, which the "
			    "checkpoint's process did not have",
			    path, (unsigned long)base);
		}
	}
	return 0;
}

/* [start, end) is mapped in this run, and writable. */
static int check_mapped(uint64_t start, uint64_t end, const char *what, struct why *why)
{
	uint64_t pos = start;

	for (size_t i = 0; i < nmaps && pos < end; i++) {
		if (maps[i].end <= pos)
			continue;
		if (maps[i].start > pos)
			break;
		if (!maps[i].writable) {
			return why_set(why, -EACCES,
				       "%s at %#lx-%#lx is not writable in this run (%#lx-%#lx %s)",
				       what, (unsigned long)start, (unsigned long)end,
				       (unsigned long)maps[i].start, (unsigned long)maps[i].end,
				       maps[i].path[0] ? maps[i].path : "anonymous");
		}
		pos = maps[i].end;
	}
	if (pos < end) {
		return why_set(why, -ENOENT,
			       "%s at %#lx-%#lx is not mapped in this run (from %#lx)", what,
			       (unsigned long)start, (unsigned long)end, (unsigned long)pos);
	}
	return 0;
}

/* The saved stack [low, top) fits where it was: the same top, within this
 * run's stack limit, no other mapping in the way of its growth. */
static int check_stack(uint64_t low, uint64_t top, struct why *why)
{
	const struct mapping *st = NULL;
	struct rlimit rl;

	for (size_t i = 0; i < nmaps && !st; i++)
		if (maps[i].stack)
			st = &maps[i];
	if (!st || st->end != top) {
		return why_set(why, -EFAULT,
			       "the main stack ends at %#lx in this run, at %#lx in the checkpoint "
			       "(address space randomisation on?)",
			       st ? (unsigned long)st->end : 0ul, (unsigned long)top);
	}
	if (!getrlimit(RLIMIT_STACK, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    top - low > rl.rlim_cur) {
		return why_set(
		    why, -E2BIG,
		    "the checkpoint's main stack (%llu KiB) does not fit in this run's stack "
		    "limit (ulimit -s %llu)",
		    (unsigned long long)(top - low) / 1024, (unsigned long long)rl.rlim_cur / 1024);
	}
	for (size_t i = 0; i < nmaps; i++)
		if (&maps[i] != st && maps[i].end + STACK_GUARD_GAP > low && maps[i].start < top) {
			return why_set(
			    why, -EEXIST,
			    "the checkpoint's main stack (down to %#lx) meets %s at %#lx-%#lx "
			    "in this run",
			    (unsigned long)low, maps[i].path[0] ? maps[i].path : "a mapping",
			    (unsigned long)maps[i].start, (unsigned long)maps[i].end);
		}
	return 0;
}

static int check_regions(const struct region *r, int n, uint64_t stack_top, struct why *why)
{
	char what[320];
	int ret = 0;

	for (int i = 0; !ret && i < n; i++) {
		const char *obj = regions_object_at(r[i].start);

		switch (r[i].kind) {
		case REGION_DATA:
			snprintf(what, sizeof(what), "the data of %s", obj ? obj : "an object");
			ret = check_mapped(r[i].start, r[i].end, what, why);
			break;
		case REGION_ARENA:
			if (!arena_ready() || r[i].start < STASIS_ARENA_BASE ||
			    r[i].end > STASIS_ARENA_BASE + STASIS_ARENA_SIZE) {
				ret = why_set(why, -ENOENT,
					      "the arena at %#lx-%#lx is not reserved in this run",
					      (unsigned long)r[i].start, (unsigned long)r[i].end);
			}
			break;
		case REGION_STACK:
			ret = check_stack(r[i].start, stack_top, why);
			break;
		}
	}
	return ret;
}

/* Every recorded range lies in memory the image restores. */
static int check_ranges(const struct maps_range *ranges, size_t n, const struct region *r, int nr,
			uint64_t stack_top, struct why *why)
{
	for (size_t i = 0; i < n; i++) {
		const struct maps_range *m = &ranges[i];
		bool inside = m->start >= STASIS_ARENA_BASE &&
			      m->end <= STASIS_ARENA_BASE + STASIS_ARENA_SIZE;

		inside |= m->start + STACK_WINDOW >= stack_top && m->end <= stack_top;
		for (int k = 0; k < nr && !inside; k++)
			inside = m->start >= r[k].start && m->end <= r[k].end;
		if (m->start >= m->end || (m->start | m->end) & (STASIS_PAGE - 1) ||
		    (i && m->start < ranges[i - 1].end) ||
		    m->prot & ~(unsigned)(PROT_READ | PROT_WRITE | PROT_EXEC) ||
		    (m->flags & ~MAPS_SAVED_FLAGS) || !inside) {
			return why_set(why, -EBADMSG,
				       "the record of the application's mappings is damaged "
				       "(a range outside the image)");
		}
	}
	return 0;
}

int maps_verify(const struct region *regions, int n, const void *data, size_t len, struct why *why)
{
	const struct maps_record *rec = data;
	const struct maps_object *obj;
	const struct maps_range *ranges;
	size_t need;
	int ret;

	forget_this_run();
	if (!rec || len < sizeof(*rec) || memcmp(rec->magic, STASIS_MAPS_MAGIC, 8) ||
	    rec->record_size != sizeof(*rec) || rec->object_size != sizeof(*obj) ||
	    rec->range_size != sizeof(*ranges)) {
		return why_set(why, -EBADMSG,
			       "the image has no valid record of the application's mappings");
	}
	need = sizeof(*rec) + (size_t)rec->nobjects * sizeof(*obj) +
	       (size_t)rec->nranges * sizeof(*ranges);
	if (need > len) {
		return why_set(why, -EBADMSG,
			       "the record of the application's mappings is truncated");
	}
	obj = (const struct maps_object *)(rec + 1);
	ranges = (const struct maps_range *)(obj + rec->nobjects);
	if ((ret = read_maps())) {
		return why_set(why, ret, "cannot read /proc/self/maps: %s", strerror(-ret));
	}
	if ((ret = check_objects(obj, rec->nobjects, why)) ||
	    (ret = check_regions(regions, n, rec->stack_top, why)) ||
	    (ret = check_ranges(ranges, rec->nranges, regions, n, rec->stack_top, why)))
		return ret;
	if (rec->nranges) {
		pending = map_pages(rec->nranges * sizeof(*pending));
		if (!pending) {
			return why_set(why, -ENOMEM, "no memory for %u protected ranges",
				       rec->nranges);
		}
		memcpy(pending, ranges, rec->nranges * sizeof(*pending));
	}
	npending = rec->nranges;
	return 0;
}

/* Past the point of no return: the image is in memory. */
static void __attribute__((noreturn)) fail(const struct maps_range *r, const char *what, int err)
{
	pr_err("restart: cannot give %#lx-%#lx its %s: %s", (unsigned long)r->start,
	       (unsigned long)r->end, what, strerror(-err));
	_exit(1);
}

void maps_apply(void)
{
	sigset_t old;
	int ret;

	maps_lock(&old);
	if (maps_reserve(npending)) {
		pr_err("restart: no memory for the record of %zu protected ranges", npending);
		_exit(1);
	}
	memcpy(maps_table.r, pending, npending * sizeof(*pending));
	maps_table.n = npending;
	for (size_t i = 0; i < npending; i++) {
		const struct maps_range *r = &pending[i];

		if (r->prot != MAPS_RW && (ret = maps_raw_mprotect(r->start, r->end, r->prot)))
			fail(r, "protection", ret);
		if ((r->flags & (MAPS_DONTFORK | MAPS_WIPEONFORK | MAPS_DONTDUMP)) &&
		    (ret = maps_advise_flags(r->start, r->end, r->flags)))
			fail(r, "madvise() flags", ret);
	}
	maps_unlock(&old);
}

/* --- the mappings part (session/part.h) ----------------------------------------------- */

static int mappings_part_quiesce(struct why *why)
{
	(void)why;
	maps_save_begin();
	return 0;
}

static int mappings_part_save(uint64_t id, struct section_list *out, struct why *why)
{
	struct image_region r;
	int ret = maps_capture(&r, why);

	(void)id;
	if (ret)
		return ret;
	return section_add(out, r.kind, (const void *)r.addr, r.length, why);
}

static int mappings_part_verify(const struct restart_input *in, struct why *why)
{
	const struct section *sec = restart_section(in, SECTION_MAPPINGS);
	return maps_verify(in->memory, in->nmemory, sec->data, sec->len, why);
}

const struct part_ops mappings_part = {
    .name = "mappings",
    .quiesce = mappings_part_quiesce,
    .save = mappings_part_save,
    .thaw = maps_save_end,
    .verify = mappings_part_verify,
    .on_temp_stack = maps_apply,
};
