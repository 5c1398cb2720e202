/* The table of ranges whose attributes are not the default (maps_int.h):
 * kept sorted and merged, in memory of stasis's own (mmap, never the
 * arena it describes), under one lock taken with every signal blocked. */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "maps_int.h"

struct maps_table maps_table;
static struct maps_range *scratch; /* the next table, maps_table.cap entries */
static atomic_flag locked = ATOMIC_FLAG_INIT;

void maps_lock(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
	while (atomic_flag_test_and_set_explicit(&locked, memory_order_acquire))
		sched_yield();
}

void maps_unlock(const sigset_t *old)
{
	atomic_flag_clear_explicit(&locked, memory_order_release);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* Raw system calls: the preload layer interposes the libc names. */
static void *raw_mmap(void *addr, size_t len, int prot, int flags)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, -1, 0);
}

static int raw_mprotect(uint64_t start, uint64_t end, int prot)
{
	return syscall(SYS_mprotect, start, end - start, prot) ? -errno : 0;
}

int maps_raw_mprotect(uint64_t start, uint64_t end, int prot)
{
	return raw_mprotect(start, end, prot);
}

int maps_reserve(size_t want)
{
	size_t cap = maps_table.cap ? maps_table.cap : 256;
	struct maps_range *t, *sc;

	if (want <= maps_table.cap)
		return 0;
	while (cap < want)
		cap *= 2;
	t = raw_mmap(NULL, cap * sizeof(*t), MAPS_RW, MAP_PRIVATE | MAP_ANONYMOUS);
	sc = raw_mmap(NULL, cap * sizeof(*sc), MAPS_RW, MAP_PRIVATE | MAP_ANONYMOUS);
	if (t == MAP_FAILED || sc == MAP_FAILED) {
		if (t != MAP_FAILED)
			syscall(SYS_munmap, t, cap * sizeof(*t));
		if (sc != MAP_FAILED)
			syscall(SYS_munmap, sc, cap * sizeof(*sc));
		return -ENOMEM;
	}
	if (maps_table.r) {
		memcpy(t, maps_table.r, maps_table.n * sizeof(*t));
		syscall(SYS_munmap, maps_table.r, maps_table.cap * sizeof(*t));
		syscall(SYS_munmap, scratch, maps_table.cap * sizeof(*sc));
	}
	maps_table.r = t;
	scratch = sc;
	maps_table.cap = cap;
	return 0;
}

/* Append [s, e) to out, merged with its neighbour when they are alike;
 * default attributes are not stored. */
static void emit(size_t *k, uint64_t s, uint64_t e, uint32_t prot, uint32_t flags)
{
	struct maps_range *last = *k ? &scratch[*k - 1] : NULL;

	if (s >= e || (prot == MAPS_RW && !flags))
		return;
	if (last && last->end == s && last->prot == prot && last->flags == flags) {
		last->end = e;
		return;
	}
	scratch[(*k)++] = (struct maps_range){s, e, prot, flags};
}

int maps_update(uint64_t start, uint64_t end, int prot, uint32_t set, uint32_t clear)
{
	size_t k = 0, n = maps_table.n;
	uint64_t pos = start;
	int ret;

	if (start >= end)
		return 0;
	/* Splits at start and end, and every gap inside, at most 2n + 3. */
	if ((ret = maps_reserve(2 * n + 3)))
		return ret;
#define CHANGED(s, e, p, f) emit(&k, s, e, prot < 0 ? (p) : (uint32_t)prot, ((f) & ~clear) | set)
	for (size_t i = 0; i < n; i++) {
		const struct maps_range r = maps_table.r[i];
		uint64_t s, e;

		if (r.end <= start) {
			emit(&k, r.start, r.end, r.prot, r.flags);
			continue;
		}
		if (r.start >= end) {
			if (pos < end)
				CHANGED(pos, end, MAPS_RW, 0);
			pos = end;
			emit(&k, r.start, r.end, r.prot, r.flags);
			continue;
		}
		if (r.start < start)
			emit(&k, r.start, start, r.prot, r.flags);
		s = r.start > start ? r.start : start;
		e = r.end < end ? r.end : end;
		if (pos < s)
			CHANGED(pos, s, MAPS_RW, 0);
		CHANGED(s, e, r.prot, r.flags);
		pos = e;
		if (r.end > end)
			emit(&k, end, r.end, r.prot, r.flags);
	}
	if (pos < end)
		CHANGED(pos, end, MAPS_RW, 0);
#undef CHANGED
	{
		struct maps_range *t = maps_table.r;

		maps_table.r = scratch;
		scratch = t;
		maps_table.n = k;
	}
	return 0;
}

size_t maps_pieces(uint64_t start, uint64_t end, struct maps_range *out, size_t max)
{
	size_t k = 0;

	for (size_t i = 0; i < maps_table.n && k < max; i++) {
		const struct maps_range *r = &maps_table.r[i];

		if (r->end <= start || r->start >= end)
			continue;
		out[k] = *r;
		out[k].start = r->start > start ? r->start : start;
		out[k].end = r->end < end ? r->end : end;
		k++;
	}
	return k;
}

int maps_advise_flags(uint64_t start, uint64_t end, uint32_t flags)
{
	static const struct {
		uint32_t flag;
		int on, off;
	} kinds[] = {{MAPS_DONTFORK, MADV_DONTFORK, MADV_DOFORK},
		     {MAPS_WIPEONFORK, MADV_WIPEONFORK, MADV_KEEPONFORK},
		     {MAPS_DONTDUMP, MADV_DONTDUMP, MADV_DODUMP}};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (syscall(SYS_madvise, start, end - start,
			    (flags & kinds[i].flag) ? kinds[i].on : kinds[i].off))
			return -errno;
	return 0;
}
