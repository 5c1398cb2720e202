/* The record of the program's protections and kinds of mappings (maps.h),
 * the program's calls that change them, and what a checkpoint saves of it. */
#define LOG_PREFIX "maps: "
#include <errno.h>
#include <isa-l.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arena.h"
#include "dirty.h"
#include "image.h"
#include "log.h"
#include "maps.h"
#include "maps_int.h"
#include "session.h"
#include "tracking.h"

/* Debian 12's headers (glibc 2.36) lack the newer kinds; values from the
 * kernel's include/uapi/asm-generic/mman-common.h. */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MADV_SOFT_OFFLINE
#define MADV_SOFT_OFFLINE 101
#endif
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#define MADV_GUARD_REMOVE 103
#endif

/* Raw system calls: the preload layer interposes the libc names. */
static void *raw_mmap(void *addr, size_t len, int prot, int flags)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, -1, 0);
}

#define raw_mprotect maps_raw_mprotect

#define PAGE_DOWN(x) ((x) & ~(uint64_t)(STASIS_PAGE - 1))
#define PAGE_UP(x) PAGE_DOWN((x) + STASIS_PAGE - 1)

/* --- which memory is recorded ------------------------------------------------------------ */

/* The lowest address the main stack may grow down to. */
static uint64_t stack_floor(void)
{
	static uint64_t floor;
	uint64_t top = regions_stack_top(), room = 1ull << 30;
	struct rlimit rl;

	if (!floor && top) {
		if (!getrlimit(RLIMIT_STACK, &rl) && rl.rlim_cur < room)
			room = rl.rlim_cur;
		floor = top - room;
	}
	return floor;
}

/* Calls fn on the parts of [start, end) that a checkpoint saves: the arena
 * reservation, the application's data, the main stack. */
static int for_each_saved(uint64_t start, uint64_t end, int (*fn)(uint64_t, uint64_t, void *),
			  void *arg)
{
	const struct span *d;
	size_t nd = regions_data(&d);
	uint64_t spans[2][2] = {{STASIS_ARENA_BASE, STASIS_ARENA_BASE + STASIS_ARENA_SIZE},
				{stack_floor(), regions_stack_top()}};
	int ret = 0;

	for (size_t i = 0; !ret && i < 2 + nd; i++) {
		uint64_t s = i < 2 ? spans[i][0] : d[i - 2].start;
		uint64_t e = i < 2 ? spans[i][1] : d[i - 2].end;

		s = s > start ? s : start;
		e = e < end ? e : end;
		if (s < e)
			ret = fn(s, e, arg);
	}
	return ret;
}

static int found(uint64_t s, uint64_t e, void *arg)
{
	(void)s;
	(void)e;
	(void)arg;
	return 1;
}

static bool saved(uint64_t start, uint64_t end)
{
	return regions_ready() && for_each_saved(start, end, found, NULL) == 1;
}

bool maps_in_image(uintptr_t start, size_t len)
{
	uint64_t s = PAGE_DOWN(start), e = PAGE_UP(start + len);
	const struct span *d;
	size_t nd = regions_data(&d);

	if (!len || e < s || !regions_ready())
		return false;
	for (size_t i = 0; i < nd; i++)
		if (d[i].start < e && s < d[i].end)
			return true;
	return s < regions_stack_top() && stack_floor() < e;
}

struct attrs {
	int prot;
	uint32_t set, clear;
};

static int update_part(uint64_t s, uint64_t e, void *arg)
{
	const struct attrs *a = arg;

	return maps_update(s, e, a->prot, a->set, a->clear);
}

/* Under the lock: record attributes for the saved parts of [start, end). */
static int record(uint64_t start, uint64_t end, int prot, uint32_t set, uint32_t clear)
{
	struct attrs a = {prot, set, clear};
	int ret = for_each_saved(start, end, update_part, &a);

	if (ret)
		pr_warn("cannot record the protection of %#lx-%#lx: %s", (unsigned long)start,
			(unsigned long)end, strerror(-ret));
	return ret;
}

/* --- the program's calls ----------------------------------------------------------------- */

/* The mprotect tracking backend owns the protection of what it tracks: the
 * program's protection of it ends its tracking (tracking.h). */
static void release_tracking(uint64_t start, uint64_t end)
{
	struct session *s = session_get();

	if (s)
		tracking_forget(s, start, end - start);
}

int maps_mprotect(void *addr, size_t len, int prot)
{
	uint64_t start = (uintptr_t)addr, end = PAGE_UP(start + len);
	sigset_t old;
	int ret;

	if ((start & (STASIS_PAGE - 1)) || !len || end < start)
		return syscall(SYS_mprotect, addr, len, prot);
	/* Code or RELRO made writable and then written would not be saved: the
	 * restart would run the object's original bytes. */
	if ((prot & PROT_WRITE) && regions_app_readonly(start, end))
		session_unsupported("mprotect() making code or read-only data of the program "
				    "writable");
	if (!saved(start, end))
		return syscall(SYS_mprotect, addr, len, prot);
	release_tracking(start, end);
	maps_lock(&old);
	ret = syscall(SYS_mprotect, addr, len, prot);
	if (!ret && record(start, end, prot & (PROT_READ | PROT_WRITE | PROT_EXEC), 0, 0))
		session_unsupported("more protected ranges than stasis can record");
	maps_unlock(&old);
	return ret;
}

int maps_new_mapping(void *addr, size_t len, int prot, uint32_t kind)
{
	uint64_t start = (uintptr_t)addr, end = PAGE_UP(start + len);
	sigset_t old;
	int ret = 0;

	prot &= PROT_READ | PROT_WRITE | PROT_EXEC;
	if (prot != MAPS_RW)
		release_tracking(start, end);
	maps_lock(&old);
	if (prot != MAPS_RW)
		ret = raw_mprotect(start, end, prot);
	if (!ret)
		ret = record(start, end, prot, kind, ~0u);
	maps_unlock(&old);
	return ret;
}

static int any_flag(uint64_t start, uint64_t end, uint32_t flag, bool *all)
{
	uint64_t covered = 0;
	bool any = false;

	for (size_t i = 0; i < maps_table.n; i++) {
		const struct maps_range *r = &maps_table.r[i];
		uint64_t s = r->start > start ? r->start : start, e = r->end < end ? r->end : end;

		if (s < e && (r->flags & flag)) {
			any = true;
			covered += e - s;
		}
	}
	if (all)
		*all = covered == end - start;
	return any;
}

bool maps_shared(uintptr_t start, size_t len)
{
	sigset_t old;
	bool any;

	maps_lock(&old);
	any = any_flag(start, PAGE_UP(start + len), MAPS_SHARED, NULL);
	maps_unlock(&old);
	return any;
}

bool maps_protected(uintptr_t start, uintptr_t end)
{
	sigset_t old;
	bool any = false;

	maps_lock(&old);
	for (size_t i = 0; i < maps_table.n && !any; i++)
		any = maps_table.r[i].start < end && start < maps_table.r[i].end &&
		      maps_table.r[i].prot != MAPS_RW;
	maps_unlock(&old);
	return any;
}

/* MADV_DONTNEED, MADV_FREE, MADV_REMOVE of arena memory, as the kernel
 * would do them for the kind of mapping recorded: a private mapping's pages
 * read back as zero (MADV_FREE may do that too, so it is done so) and the
 * dirty tracking hears of it; a shared mapping keeps its contents except
 * under MADV_REMOVE, which a private mapping refuses with EINVAL. */
/* Pages of a file copy are kept: the kernel would read the file's bytes in
 * again, and stasis holds no descriptor of the file; its copy is those bytes
 * unless the program wrote there (then it keeps what it wrote, said once). */
static void dropping_file_copy(void)
{
	static bool said;

	if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		pr_warn("madvise() dropping pages of a private file mapping: stasis keeps its "
			"copy of the file's bytes (pages the program wrote keep what it wrote)");
}

static int drop(uint64_t start, uint64_t end, int advice)
{
	/* DONTNEED and FREE keep a shared mapping's contents; REMOVE frees them. */
	uint32_t keep = advice == MADV_REMOVE ? MAPS_SHARED : MAPS_SHARED | MAPS_FILE_COPY;
	bool all_kept, file_copy, all_copy;
	sigset_t old;
	int ret = 0;

	maps_lock(&old);
	file_copy = any_flag(start, end, MAPS_FILE_COPY, &all_copy);
	if (!any_flag(start, end, keep, &all_kept)) {
		ret = advice == MADV_REMOVE ? -EINVAL : arena_zero((void *)start, end - start);
	} else if (advice == MADV_REMOVE) {
		ret = all_kept && !file_copy ? arena_zero((void *)start, end - start) : -EINVAL;
	} else if (!all_kept) {
		/* Mixed: drop the private anonymous parts only. */
		uint64_t pos = start;

		for (size_t i = 0; i < maps_table.n && !ret; i++) {
			const struct maps_range *r = &maps_table.r[i];

			if (!(r->flags & keep) || r->end <= pos || r->start >= end)
				continue;
			if (r->start > pos)
				ret = arena_zero((void *)pos, r->start - pos);
			pos = r->end;
		}
		if (!ret && pos < end)
			ret = arena_zero((void *)pos, end - pos);
	}
	maps_unlock(&old);
	if (file_copy && advice != MADV_REMOVE)
		dropping_file_copy();
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

int maps_madvise(void *addr, size_t len, int advice)
{
	uint64_t start = (uintptr_t)addr, end = PAGE_UP(start + len);
	uint32_t set = 0, clear = 0;
	struct session *s;
	sigset_t old;
	int ret;

	if ((start & (STASIS_PAGE - 1)) || !len || end < start || !saved(start, end))
		return syscall(SYS_madvise, addr, len, advice);
	switch (advice) {
	case MADV_DONTNEED:
	case MADV_DONTNEED_LOCKED:
	case MADV_FREE:
	case MADV_REMOVE:
		if (arena_contains(addr) && arena_contains((void *)(end - 1)))
			return drop(start, end, advice);
		/* Static data would revert to the file's bytes or zero, unseen
		 * by the dirty tracking. */
		session_unsupported("madvise() dropping pages of the program's static data or "
				    "stack");
		return syscall(SYS_madvise, addr, len, advice);
	case MADV_DONTFORK:
		set = MAPS_DONTFORK;
		break;
	case MADV_DOFORK:
		clear = MAPS_DONTFORK;
		break;
	case MADV_WIPEONFORK:
		set = MAPS_WIPEONFORK;
		break;
	case MADV_KEEPONFORK:
		clear = MAPS_WIPEONFORK;
		break;
	case MADV_DONTDUMP:
		set = MAPS_DONTDUMP;
		break;
	case MADV_DODUMP:
		clear = MAPS_DONTDUMP;
		break;
	case MADV_POPULATE_WRITE:
		/* Written by the kernel: the mprotect backend's protection would
		 * fail it (dirty.h, prepare_write). */
		s = session_get();
		if (s && s->dirty)
			s->dirty->prepare_write(addr, len);
		return syscall(SYS_madvise, addr, len, advice);
	case MADV_GUARD_INSTALL:
		/* Guard pages fault when the checkpoint reads them, and no
		 * restart would put them back. */
		session_unsupported("madvise(MADV_GUARD_INSTALL)");
		return syscall(SYS_madvise, addr, len, advice);
	case MADV_NORMAL:
	case MADV_RANDOM:
	case MADV_SEQUENTIAL:
	case MADV_WILLNEED:
	case MADV_MERGEABLE:
	case MADV_UNMERGEABLE:
	case MADV_HUGEPAGE:
	case MADV_NOHUGEPAGE:
	case MADV_COLD:
	case MADV_PAGEOUT:
	case MADV_POPULATE_READ:
	case MADV_COLLAPSE:
	case MADV_HWPOISON:
	case MADV_SOFT_OFFLINE:
	case MADV_GUARD_REMOVE:
		/* Hints and what only performance sees. */
		return syscall(SYS_madvise, addr, len, advice);
	default:
		session_unsupported("madvise() of a kind stasis does not know");
		return syscall(SYS_madvise, addr, len, advice);
	}
	maps_lock(&old);
	ret = syscall(SYS_madvise, addr, len, advice);
	if (!ret)
		record(start, end, -1, set, clear);
	maps_unlock(&old);
	return ret;
}

/* Under the lock: turn what fork() made truly shared in [start, end) back
 * into plain private memory (zero, read-write), as the arena expects of
 * the pages it gets back. */
static void make_private(uint64_t start, uint64_t end)
{
	struct maps_range p[64];
	size_t n = maps_pieces(start, end, p, 64);

	for (size_t i = 0; i < n; i++)
		if (p[i].flags & MAPS_FORKED)
			raw_mmap((void *)p[i].start, p[i].end - p[i].start, MAPS_RW,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE);
}

void maps_unmapping(void *addr, size_t len)
{
	uint64_t start = PAGE_DOWN((uintptr_t)addr), end = PAGE_UP((uintptr_t)addr + len);
	sigset_t old;

	maps_lock(&old);
	make_private(start, end);
	record(start, end, MAPS_RW, 0, ~0u);
	maps_unlock(&old);
}

void *maps_arena_mremap(void *old, size_t old_len, size_t new_len, int flags)
{
	uint64_t from = (uintptr_t)old, keep = PAGE_UP(old_len < new_len ? old_len : new_len);
	struct maps_range p[64];
	size_t n;
	sigset_t mask;
	void *to;

	if ((flags & MREMAP_FIXED) || !(flags & MREMAP_MAYMOVE)) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	to = arena_map(new_len);
	if (!to)
		return MAP_FAILED;
	maps_lock(&mask);
	n = maps_pieces(from, from + PAGE_UP(old_len), p, 64);
	/* The old pages are going: readable for the copy whatever they were. */
	if (n)
		raw_mprotect(from, from + PAGE_UP(old_len), MAPS_RW);
	memcpy(to, old, keep);
	for (size_t i = 0; i < n; i++) {
		uint64_t s = p[i].start - from + (uintptr_t)to, e = p[i].end - from + (uintptr_t)to;

		if (p[i].start >= from + keep)
			continue;
		e = e < (uintptr_t)to + keep ? e : (uintptr_t)to + keep;
		if (p[i].prot != MAPS_RW)
			raw_mprotect(s, e, p[i].prot);
		if (p[i].flags & (MAPS_DONTFORK | MAPS_WIPEONFORK | MAPS_DONTDUMP))
			maps_advise_flags(s, e, p[i].flags);
		maps_update(s, e, p[i].prot, p[i].flags & MAPS_SAVED_FLAGS, ~0u);
	}
	maps_unlock(&mask);
	if (n)
		release_tracking((uintptr_t)to, (uintptr_t)to + keep);
	if (flags & MREMAP_DONTUNMAP) {
		/* The old range stays mapped, its pages moved away: zero. */
		maps_lock(&mask);
		maps_update(from, from + PAGE_UP(old_len), MAPS_RW, 0, MAPS_SAVED_FLAGS);
		arena_zero(old, PAGE_UP(old_len));
		maps_unlock(&mask);
		return to;
	}
	maps_unmapping(old, old_len);
	arena_unmap(old, old_len);
	return to;
}

int maps_before_fork(void)
{
	sigset_t old;
	int count = 0;

	maps_lock(&old);
	for (size_t i = 0; i < maps_table.n; i++) {
		struct maps_range *r = &maps_table.r[i];
		size_t len = r->end - r->start;
		void *tmp;

		if (!(r->flags & MAPS_SHARED))
			continue;
		count++;
		if (r->flags & MAPS_FORKED)
			continue;
		/* A shared copy of the pages, moved over them in one step. */
		tmp = raw_mmap(NULL, len, MAPS_RW, MAP_SHARED | MAP_ANONYMOUS);
		if (tmp == MAP_FAILED) {
			pr_perror("fork(): cannot share %#lx-%#lx with the child",
				  (unsigned long)r->start, (unsigned long)r->end);
			continue;
		}
		if (!(r->prot & PROT_READ))
			raw_mprotect(r->start, r->end, PROT_READ);
		memcpy(tmp, (void *)r->start, len);
		if ((void *)syscall(SYS_mremap, tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
				    r->start) == MAP_FAILED) {
			pr_perror("fork(): cannot share %#lx-%#lx with the child",
				  (unsigned long)r->start, (unsigned long)r->end);
			syscall(SYS_munmap, tmp, len);
			if (!(r->prot & PROT_READ))
				raw_mprotect(r->start, r->end, r->prot);
			continue;
		}
		raw_mprotect(r->start, r->end, r->prot);
		maps_advise_flags(r->start, r->end, r->flags);
		r->flags |= MAPS_FORKED;
	}
	maps_unlock(&old);
	return count;
}

/* --- the checkpoint ---------------------------------------------------------------------- */

/* Pages without PROT_READ get it while the image is written. */
static void save_protect(bool open)
{
	sigset_t old;

	maps_lock(&old);
	for (size_t i = 0; i < maps_table.n; i++) {
		const struct maps_range *r = &maps_table.r[i];

		if (!(r->prot & PROT_READ) &&
		    raw_mprotect(r->start, r->end, open ? r->prot | PROT_READ : r->prot))
			pr_perror("mprotect %#lx-%#lx", (unsigned long)r->start,
				  (unsigned long)r->end);
	}
	maps_unlock(&old);
}

void maps_save_begin(void)
{
	save_protect(true);
}

void maps_save_end(void)
{
	save_protect(false);
}

/* The files of the application libraries, each identified once (its
 * crc64 tells a restart whether it loaded the same file), by the first
 * checkpoint that sees it: a library the program loads with dlopen() after
 * a checkpoint belongs in the next one's record (the restart loads it
 * again, libraries.h, and refuses a library this run has that the record
 * lacks). The program's libraries are never unloaded (RTLD_NODELETE) and
 * regions_app_library numbers them in the order they were loaded, so the
 * libraries not seen yet are the ones past the last seen. As many as
 * regions.c can hold. */
#define MAX_OBJECTS 512
static struct maps_object objects[MAX_OBJECTS];
static size_t nobjects;

static int read_new_objects(struct why *why)
{
	const char *path;
	uintptr_t base;
	struct stat st;

	for (int i = (int)nobjects; !regions_app_library(i, &path, &base); i++) {
		struct maps_object *o;

		if (nobjects == MAX_OBJECTS)
			return why_set(why, -ENOSPC,
				       "more than %d application libraries loaded (%s)",
				       MAX_OBJECTS, path);
		o = &objects[nobjects++];
		memset(o, 0, sizeof(*o));
		o->base = base;
		snprintf(o->path, sizeof(o->path), "%s", path);
		if (stat(path, &st) || file_crc64(path, &o->file_crc))
			pr_warn("cannot read %s: a restart will check its address only", path);
		else
			o->file_size = st.st_size;
	}
	return 0;
}

static void *buf;
static size_t buf_len;

int maps_capture(struct image_region *out, struct why *why)
{
	struct maps_record *rec;
	size_t need, nranges;
	struct maps_range *ranges;
	sigset_t old;
	int ret = read_new_objects(why);

	if (ret)
		return ret;
	maps_lock(&old);
	nranges = maps_table.n;
	need = PAGE_UP(sizeof(*rec) + nobjects * sizeof(struct maps_object) +
		       nranges * sizeof(struct maps_range));
	if (need > buf_len) {
		void *p = raw_mmap(NULL, need, MAPS_RW, MAP_PRIVATE | MAP_ANONYMOUS);

		if (p == MAP_FAILED) {
			maps_unlock(&old);
			return why_set(why, -ENOMEM, "no memory for the record of %zu mappings",
				       nranges);
		}
		if (buf)
			syscall(SYS_munmap, buf, buf_len);
		buf = p;
		buf_len = need;
	}
	memset(buf, 0, need);
	rec = buf;
	memcpy(rec->magic, STASIS_MAPS_MAGIC, sizeof(rec->magic));
	rec->record_size = sizeof(*rec);
	rec->object_size = sizeof(struct maps_object);
	rec->range_size = sizeof(struct maps_range);
	rec->nobjects = nobjects;
	rec->nranges = nranges;
	rec->stack_top = regions_stack_top();
	memcpy(rec + 1, objects, nobjects * sizeof(struct maps_object));
	ranges = (struct maps_range *)((struct maps_object *)(rec + 1) + nobjects);
	for (size_t i = 0; i < nranges; i++) {
		ranges[i] = maps_table.r[i];
		ranges[i].flags &= MAPS_SAVED_FLAGS;
	}
	maps_unlock(&old);
	*out = (struct image_region){(uintptr_t)buf, need, SECTION_MAPPINGS, NULL};
	return 0;
}
