#define LOG_PREFIX "libraries: "
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime.h"
#include "format.h"
#include "log.h"
#include "closure.h"
#include "libraries.h"
#include "libraries_int.h"
#include "regions.h"
#include "session.h"

#define ZONE_TOP (STASIS_LIBRARIES_BASE + STASIS_LIBRARIES_SIZE)
#define MAX_GROUPS 256
#define MAX_ENTRIES 1024
#define MAX_LOADED 2048

/* Runtime state: a restart rebuilds it, from its own start's calls and
 * then from the image. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool zone_ready;
static uintptr_t cursor = ZONE_TOP;
static struct libraries_group groups[MAX_GROUPS];
static struct libraries_entry entries[MAX_ENTRIES];
static int ngroups, nentries;
/* ld.so's link map of each entry: the real handle behind the program's. */
static struct link_map *maps_of[MAX_ENTRIES];

int libraries_init(void)
{
	void *p = mmap((void *)STASIS_LIBRARIES_BASE, STASIS_LIBRARIES_SIZE, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	if (p != (void *)STASIS_LIBRARIES_BASE) {
		munmap(p, STASIS_LIBRARIES_SIZE);
		return -EEXIST;
	}
	zone_ready = true;
	return 0;
}

/* --- the objects a call loaded --------------------------------------------- */

struct loaded {
	uintptr_t base, lo, hi; /* load base, and the pages its segments span */
	const char *name;
};

static struct loaded before[MAX_LOADED], after[MAX_LOADED];
static int nbefore, nafter;

struct list_ctx {
	struct loaded *out;
	int *n;
};

static int list_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
	struct list_ctx *c = data;
	struct loaded *l;

	(void)size;
	if (*c->n == MAX_LOADED)
		return 1;
	l = &c->out[(*c->n)++];
	*l = (struct loaded){info->dlpi_addr, UINTPTR_MAX, 0, info->dlpi_name ?: ""};
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD)
			continue;
		if (PAGE_DOWN(lo) < l->lo)
			l->lo = PAGE_DOWN(lo);
		if (PAGE_UP(lo + ph->p_memsz) > l->hi)
			l->hi = PAGE_UP(lo + ph->p_memsz);
	}
	return 0;
}

static int list(struct loaded *out, int *n)
{
	struct list_ctx c = {out, n};

	*n = 0;
	return dl_iterate_phdr(list_loaded, &c) ? -ENOSPC : 0;
}

static bool was_loaded(const struct loaded *l)
{
	for (int i = 0; i < nbefore; i++)
		if (before[i].base == l->base && !strcmp(before[i].name, l->name))
			return true;
	return false;
}

/* The objects the call loaded, into new[] (by index into after[]); false
 * when one of them, or a mapping of someone else's, is out of place: in
 * the zone between its old cursor and the new one there must be nothing
 * else (a thread of the runtime's mapping memory meanwhile would have
 * moved them). */
/* What was out of place at the last placed() that failed: the line. */
static char stray[400];

static bool placed(uintptr_t top, int *fresh, int *nfresh, uintptr_t *low)
{
	static struct zone_span spans[MAX_LOADED];
	bool ok = true;

	*nfresh = 0;
	*low = top;
	for (int i = 0; i < nafter; i++) {
		if (was_loaded(&after[i]))
			continue;
		fresh[(*nfresh)++] = i;
		if (after[i].lo < zone_hole_low() || after[i].hi > top) {
			if (ok)
				snprintf(stray, sizeof(stray),
					 "%.300s was mapped at %#lx, outside [%#lx, %#lx)",
					 after[i].name, (unsigned long)after[i].lo,
					 (unsigned long)zone_hole_low(), (unsigned long)top);
			ok = false;
		} else if (after[i].lo < *low)
			*low = after[i].lo;
	}
	if (!ok)
		return false;
	for (int k = 0; k < *nfresh; k++)
		spans[k] = (struct zone_span){after[fresh[k]].lo, after[fresh[k]].hi};
	return zone_only(*low, top, spans, *nfresh, stray, sizeof(stray));
}

/* --- dlopen ---------------------------------------------------------------- */

__thread int libraries_loading;

static void *real_dlopen(const char *file, int mode)
{
	static void *(*real)(const char *, int);
	void *handle;

	if (!real)
		real = (void *(*)(const char *, int))stasis_next_symbol("dlopen");
	if (!real)
		return NULL;
	libraries_loading++;
	handle = real(file, mode);
	libraries_loading--;
	return handle;
}

/* A bare name is searched for as ld.so would for the calling object (its
 * RPATH or RUNPATH, LD_LIBRARY_PATH, the system directories): dlopen()
 * called from here would search with stasis's own path. Names only the
 * ld.so cache knows are left to dlopen(). */
static const char *resolve(const char *file, uintptr_t caller, char *out, size_t len)
{
	static union {
		Dl_serinfo info;
		char bytes[1 << 15];
	} search;
	Dl_serinfo size;
	struct link_map *lm = NULL;
	Dl_info info;

	if (strchr(file, '/') || !dladdr1((void *)caller, &info, (void **)&lm, RTLD_DL_LINKMAP) ||
	    !lm || dlinfo(lm, RTLD_DI_SERINFOSIZE, &size) || size.dls_size > sizeof(search))
		return file;
	search.info.dls_size = size.dls_size;
	search.info.dls_cnt = size.dls_cnt;
	if (dlinfo(lm, RTLD_DI_SERINFO, &search.info))
		return file;
	for (unsigned i = 0; i < search.info.dls_cnt; i++) {
		if ((size_t)snprintf(out, len, "%s/%s", search.info.dls_serpath[i].dls_name, file) <
			len &&
		    access(out, F_OK) == 0)
			return out;
	}
	return file;
}

/* ld.so's link map of the object loaded at base (the program's libraries
 * are never unloaded: the pointer stays valid). */
static struct link_map *link_map_at(uintptr_t base)
{
	for (struct link_map *l = _r_debug.r_map; l; l = l->l_next)
		if (l->l_addr == base)
			return l;
	return NULL;
}

/* Record the call's objects as a group. Under lock. */
static int record(const char *path, int mode, uintptr_t top, const int *fresh, int nfresh)
{
	struct libraries_group *g;
	uintptr_t bases[MAX_LOADED];

	if (ngroups == MAX_GROUPS || nentries + nfresh > MAX_ENTRIES)
		return -ENOSPC;
	g = &groups[ngroups++];
	memset(g, 0, sizeof(*g));
	snprintf(g->path, sizeof(g->path), "%s", path);
	g->top = top;
	g->flags = mode;
	g->count = nfresh;
	for (int k = 0; k < nfresh; k++) {
		struct libraries_entry *e = &entries[nentries++];

		snprintf(e->name, sizeof(e->name), "%s", after[fresh[k]].name);
		e->base = after[fresh[k]].base;
		maps_of[nentries - 1] = link_map_at(e->base);
		bases[k] = after[fresh[k]].base;
	}
	return regions_add_objects(bases, nfresh);
}

static int real_dlclose(void *handle)
{
	static int (*real)(void *);

	if (!real)
		real = (int (*)(void *))stasis_next_symbol("dlclose");
	return real ? real(handle) : -1;
}

/* Whether any object the last call loaded is still loaded. */
static bool fresh_remain(const int *fresh, int nfresh)
{
	static struct loaded now[MAX_LOADED];
	int nnow;

	if (list(now, &nnow))
		return true;
	for (int k = 0; k < nfresh; k++)
		for (int i = 0; i < nnow; i++)
			if (now[i].base == after[fresh[k]].base &&
			    !strcmp(now[i].name, after[fresh[k]].name))
				return true;
	return false;
}

/* The room the objects a call loaded need (fresh[] into after[]), with
 * the same margin zone_hole_size gives one object: a dlopen() that pulls in a
 * deep dependency tree (a Python extension module linked to parallel
 * HDF5, its MPI, compression and network libraries) needs more than the
 * default hole, and ld.so maps what does not fit below the zone. */
static size_t closure_size(const int *fresh, int nfresh)
{
	size_t sum = 0;

	for (int k = 0; k < nfresh; k++)
		sum += after[fresh[k]].hi - after[fresh[k]].lo + STASIS_PAGE;
	return PAGE_UP(2 * sum);
}

/* dlopen(path) into the hole below the cursor. A thread of the runtime's
 * that maps or unmaps memory meanwhile can send ld.so elsewhere: the
 * objects are then unloaded and loaded again (their constructors run
 * again), a few times, before *why gets the cause (they are loaded
 * anyway). Objects placed are made RTLD_NODELETE. Under lock. */
static void *place(const char *path, int mode, int *fresh, int *nfresh, struct why *why)
{
	uintptr_t top = cursor, low;
	size_t size = zone_hole_size(path);
	void *handle = NULL;
	int ret;

	for (int tries = 0;; tries++) {
		*nfresh = 0;
		zone_no_hole(top);
		ret = list(before, &nbefore);
		if (!ret)
			ret = zone_open_hole(cursor, size);
		if (ret) {
			why_set(why, ret, "cannot reserve its place: %s", strerror(-ret));
			zone_close_hole(cursor, top);
			return real_dlopen(path, mode);
		}
		handle = real_dlopen(path, mode);
		zone_remove_fillers();
		if (!handle || list(after, &nafter)) {
			zone_close_hole(cursor, top);
			if (handle)
				why_set(why, -ENOSPC, "too many objects loaded");
			return handle;
		}
		if (placed(top, fresh, nfresh, &low)) {
			void *again = real_dlopen(path, mode | RTLD_NOLOAD | RTLD_NODELETE);

			if (again)
				real_dlclose(again);
			cursor = low;
			zone_close_hole(cursor, top);
			return handle;
		}
		zone_close_hole(cursor, top);
		if (tries == 3)
			break;
		if (closure_size(fresh, *nfresh) > size) {
			/* Its dependencies did not fit: again with room for all. */
			size = closure_size(fresh, *nfresh);
			if (size > top - STASIS_LIBRARIES_BASE) {
				why_set(why, -ENOSPC,
					"it and the %d libraries it needs take %zu MiB, more than "
					"the %zu MiB left in stasis's zone for them",
					*nfresh - 1, size >> 20,
					(size_t)(top - STASIS_LIBRARIES_BASE) >> 20);
				return handle;
			}
		}
		if (real_dlclose(handle) == 0 && !fresh_remain(fresh, *nfresh)) {
			pr_debug("%s was not mapped where it was placed (another thread mapped "
				 "memory meanwhile, or its dependencies needed more room): "
				 "loading it again in %zu MiB",
				 path, size >> 20);
			continue;
		}
		/* It cannot be unloaded (a unique symbol, another user). */
		handle = real_dlopen(path, mode);
		break;
	}
	/* A note, not a failure: the handle is returned all the same. */
	why_set(why, -EINVAL,
		"it or a library it needs was not mapped where stasis placed it (%.400s)", stray);
	return handle;
}

/* What ld.so calls the object handle is: the path to load it by again. */
static const char *handle_name(void *handle, const char *fallback)
{
	struct link_map *lm = NULL;

	if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) || !lm || !lm->l_name || !lm->l_name[0])
		return fallback;
	return lm->l_name;
}

void *libraries_dlopen(const char *file, int mode, uintptr_t caller)
{
	static char resolved[4096];
	static int fresh[MAX_LOADED];
	char feature[900];
	struct why why = WHY_INIT;
	const char *path;
	uintptr_t top;
	void *handle;
	int nfresh;

	pthread_mutex_lock(&lock);
	path = resolve(file, caller, resolved, sizeof(resolved));
	top = cursor;
	if (zone_ready) {
		handle = place(path, mode, fresh, &nfresh, &why);
	} else {
		/* Loaded where ld.so likes: fine only if it loads nothing. */
		list(before, &nbefore);
		handle = real_dlopen(path, mode);
		nfresh = 0;
		if (handle && list(after, &nafter) == 0)
			for (int i = 0; i < nafter; i++)
				nfresh += !was_loaded(&after[i]);
		if (nfresh)
			why_set(&why, -EINVAL, "no place reserved for it");
		nfresh = 0;
	}
	if (handle && nfresh && !why_said(&why) &&
	    record(handle_name(handle, path), mode, top, fresh, nfresh))
		why_set(&why, -ENOSPC, "too many libraries loaded with dlopen()");
	/* A placement that failed may have left a mapping of someone else's
	 * in the zone: never free the zone again. */
	if (why_said(&why))
		zone_ready = false;
	pthread_mutex_unlock(&lock);
	if (why_said(&why)) {
		/* The string stays: session_unsupported keeps the pointer. */
		static char kept[MAX_GROUPS][900];
		static int nkept;

		/* %.600s: the note names the object out of place. */
		snprintf(feature, sizeof(feature),
			 "a library loaded with dlopen() (%.250s): %.600s", file, why.msg);
		if (nkept < MAX_GROUPS) {
			snprintf(kept[nkept], sizeof(kept[nkept]), "%s", feature);
			session_unsupported(kept[nkept++]);
		}
	}
	return handle;
}

/* --- the record ------------------------------------------------------------ */

static uint8_t *record_buf;
static size_t record_cap;

int libraries_save(struct image_region *out)
{
	size_t need = sizeof(struct libraries_record) + ngroups * sizeof(struct libraries_group) +
		      nentries * sizeof(struct libraries_entry);
	size_t cap = PAGE_UP(need);
	struct libraries_record *h;
	uint8_t *p;
	int e = 0;

	if (cap > record_cap) {
		void *m =
		    mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			return -ENOMEM;
		if (record_buf)
			munmap(record_buf, record_cap);
		record_buf = m;
		record_cap = cap;
	}
	memset(record_buf, 0, cap);
	h = (struct libraries_record *)record_buf;
	memcpy(h->magic, STASIS_OBJECTS_MAGIC, sizeof(h->magic));
	h->ngroups = ngroups;
	h->cursor = cursor;
	h->bytes = need;
	p = record_buf + sizeof(*h);
	for (int g = 0; g < ngroups; g++) {
		memcpy(p, &groups[g], sizeof(groups[g]));
		p += sizeof(groups[g]);
		memcpy(p, &entries[e], groups[g].count * sizeof(*entries));
		p += groups[g].count * sizeof(*entries);
		e += groups[g].count;
	}
	*out = (struct image_region){(uintptr_t)record_buf, cap, SECTION_LIBRARIES, NULL};
	return 0;
}

/* The objects a replayed group loaded against the saved ones: one line
 * naming the first that differs. */
static int compare_group(const struct libraries_group *g, const struct libraries_entry *want,
			 const struct libraries_entry *have, int nhave, struct why *why)
{
	for (uint32_t i = 0; i < g->count; i++) {
		if ((int)i >= nhave) {
			return why_set(why, -ENOENT,
				       "%.300s, loaded with dlopen() by the program, did not load "
				       "%.300s again",
				       g->path, want[i].name);
		}
		if (have[i].base != want[i].base ||
		    strncmp(have[i].name, want[i].name, sizeof(want[i].name))) {
			return why_set(why, -EINVAL,
				       "library %.300s (loaded with dlopen() by the program) is at "
				       "%#llx in this run, was %.300s at %#llx",
				       have[i].name, (unsigned long long)have[i].base, want[i].name,
				       (unsigned long long)want[i].base);
		}
	}
	if ((int)g->count != nhave) {
		return why_set(why, -EINVAL, "%.300s loaded other libraries in this run", g->path);
	}
	return 0;
}

/* Load group g again (restart): under lock. */
static int replay(const struct libraries_group *g, const struct libraries_entry *want,
		  struct why *why)
{
	static int fresh[MAX_LOADED];
	struct why cause = WHY_INIT;
	int nfresh, first = nentries, ret;
	void *handle;

	if (g->top != cursor) {
		return why_set(why, -EINVAL,
			       "%.300s was loaded with dlopen() at a point this run does not reach "
			       "the same way (place %#llx, this run %#lx)",
			       g->path, (unsigned long long)g->top, (unsigned long)cursor);
	}
	handle = place(g->path, g->flags, fresh, &nfresh, &cause);
	if (!handle) {
		return why_set(why, -ENOENT, "cannot load %.300s again: %.300s", g->path,
			       dlerror());
	}
	ret = record(g->path, g->flags, g->top, fresh, nfresh);
	if (ret) {
		return why_set(why, ret, "cannot record %.300s: %s", g->path, strerror(-ret));
	}
	ret = compare_group(g, want, &entries[first], nfresh, why);
	if (!ret && why_said(&cause)) {
		ret = why_set(why, -EINVAL, "%.300s: %.300s", g->path, cause.msg);
	}
	return ret;
}

int libraries_restore(const void *rec, size_t len, struct why *why)
{
	const struct libraries_record *h = rec;
	const uint8_t *p = rec, *end = p + len;
	int ret = 0, e = 0;

	if (!h || len < sizeof(*h) || memcmp(h->magic, STASIS_OBJECTS_MAGIC, sizeof(h->magic)) ||
	    h->bytes > len) {
		return why_set(why, -EBADMSG,
			       "the record of the libraries loaded with dlopen() is "
			       "malformed");
	}
	end = p + h->bytes;
	p += sizeof(*h);
	pthread_mutex_lock(&lock);
	if (!zone_ready && h->ngroups > (uint32_t)ngroups) {
		ret = why_set(why, -ENOMEM,
			      "the zone for libraries loaded with dlopen() is not "
			      "reserved in this run");
	}
	for (uint32_t n = 0; n < h->ngroups && !ret; n++) {
		const struct libraries_group *g = (const struct libraries_group *)p;
		const struct libraries_entry *want;

		if ((size_t)(end - p) < sizeof(*g) ||
		    (size_t)(end - p - sizeof(*g)) / sizeof(*want) < g->count) {
			ret = why_set(why, -EBADMSG,
				      "the record of the libraries loaded with "
				      "dlopen() is malformed");
			break;
		}
		want = (const struct libraries_entry *)(p + sizeof(*g));
		p += sizeof(*g) + g->count * sizeof(*want);
		if ((int)n < ngroups) {
			/* Loaded again by this run's start, before MPI_Init. */
			ret = compare_group(g, want, &entries[e], groups[n].count, why);
			e += groups[n].count;
			continue;
		}
		ret = replay(g, want, why);
	}
	if (!ret && (int)h->ngroups < ngroups) {
		ret = why_set(
		    why, -EINVAL,
		    "this run loaded %.300s with dlopen() before MPI_Init, the checkpointed "
		    "run had not",
		    groups[h->ngroups].path);
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

/* --- handles ----------------------------------------------------------------
 * A dlopen() handle is ld.so's link map, allocated from the runtime's heap:
 * after a restart the program's memory would hold the old process's. The
 * program gets, for a library of the zone, its load base + 1 instead (odd:
 * never a link map; the same in every run), translated back here. */

static bool is_program_handle(const void *handle)
{
	uintptr_t h = (uintptr_t)handle;

	return (h & 1) && h - 1 >= STASIS_LIBRARIES_BASE && h - 1 < ZONE_TOP;
}

void *libraries_handle(void *real)
{
	struct link_map *l = real;

	if (!l || is_program_handle(l))
		return real;
	for (int i = 0; i < nentries; i++)
		if (maps_of[i] == l)
			return (void *)(entries[i].base + 1);
	return real;
}

void *libraries_real(void *handle)
{
	if (!is_program_handle(handle))
		return handle;
	for (int i = 0; i < nentries; i++)
		if (entries[i].base + 1 == (uintptr_t)handle)
			return maps_of[i];
	return NULL;
}

bool libraries_is_program_handle(const void *handle)
{
	return is_program_handle(handle);
}

/* --- the libraries part (session/part.h) --------------------------------------------- */

static int libraries_part_save(uint64_t id, struct section_list *out, struct why *why)
{
	struct image_region r;
	int ret = libraries_save(&r);

	(void)id;
	if (ret)
		return why_set(why, ret, "cannot list the libraries loaded with dlopen(): %s",
			       strerror(-ret));
	return section_add(out, r.kind, (const void *)r.addr, r.length, why);
}

static int libraries_part_recreate(const struct restart_input *in, struct why *why)
{
	const struct section *sec = restart_section(in, SECTION_LIBRARIES);
	return libraries_restore(sec->data, sec->len, why);
}

const struct part_ops libraries_part = {
    .name = "libraries",
    .save = libraries_part_save,
    .recreate = libraries_part_recreate,
};
