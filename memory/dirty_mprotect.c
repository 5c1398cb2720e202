/* Dirty-page tracking with mprotect() + SIGSEGV (the libckpt design).
 *
 * track() makes a range PROT_READ. The first write to one of its pages
 * faults; the handler makes the page writable again, sets its bit in the
 * range's bitmap, and returns, so the write runs again and succeeds.
 * collect() takes the bits and protects those pages again.
 *
 * Invariant, which makes collect() safe against writers on other threads: a
 * tracked page is writable only if its bit is set, or a handler that has
 * just made it writable is about to set it. The handler therefore makes the
 * page writable BEFORE setting the bit, and collect() clears the bits BEFORE
 * protecting the pages again. Protecting any tracked page is always safe
 * (worst case the next write faults once more), which lets collect() cover
 * the clean gaps between written runs in one mprotect() call.
 *
 * The handler is async-signal-safe: it takes no lock and allocates nothing.
 * It finds the range in a fixed array of slots published with atomics; a
 * slot being retired is unpublished first and then drained of handlers that
 * already entered it (a per-slot counter), only then is its bitmap unmapped.
 * mprotect() and rt_sigaction() are plain system calls (glibc's wrappers
 * take no lock), so calling them from the handler is safe in practice
 * although POSIX does not list mprotect(). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define LOG_PREFIX "dirty: "

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include "dirty.h"
#include "log.h"

#define MP_MAX_RANGES 1024
/* collect() protects two written runs with one call when at most this many
 * clean pages separate them (see the invariant above): one mprotect() call
 * costs a few microseconds, re-protecting a page of the gap a few
 * nanoseconds. On this VM gaps of 16 and 1024 pages measured within the
 * noise of each other (bench/dirty_perf, collect at 1% written). */
#define MP_GAP_PAGES 128

struct slot {
	atomic_int published; /* the handler may use it */
	atomic_int users;     /* handlers inside it */
	_Atomic uintptr_t start, end;
	_Atomic(_Atomic uint64_t *) bitmap;
	/* Writer-only (under lock). */
	bool in_use;
	size_t map_len;
};

static struct slot slots[MP_MAX_RANGES];
static atomic_size_t nslots_hi; /* slots[0..hi) may be in use */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool active;
static size_t page = 4096;

/* Faults that needed a coarser unprotect because vm.max_map_count was
 * reached, and faults in a tracked range that could not be unprotected at
 * all (counted by the handler, logged by collect()). */
static atomic_ulong coarse_unprotects, failed_unprotects;
static unsigned long coarse_logged, failed_logged;

/* The SIGSEGV action to chain to. A small ring written lock-free, so that
 * dirty_sigaction_hook() may run from a signal handler (sigaction() is
 * async-signal-safe, and crash handlers reset SIGSEGV before re-raising): a
 * writer fills the next entry and publishes its index with one exchange. */
#define CHAIN_RING 8
static struct sigaction chain_ring[CHAIN_RING];
static atomic_uint chain_next = 1;
static atomic_uint chain_cur; /* index into chain_ring */

static void chain_publish(const struct sigaction *act, struct sigaction *old)
{
	unsigned int i = atomic_fetch_add(&chain_next, 1) % CHAIN_RING;
	unsigned int prev;

	chain_ring[i] = *act;
	prev = atomic_exchange(&chain_cur, i);
	if (old)
		*old = chain_ring[prev];
}

static inline uintptr_t align_down(uintptr_t x, uintptr_t a)
{
	return x & ~(a - 1);
}

static inline uintptr_t align_up(uintptr_t x, uintptr_t a)
{
	return (x + a - 1) & ~(a - 1);
}

static void mark_pages(_Atomic uint64_t *bm, size_t first, size_t n)
{
	size_t w, b;

	while (n) {
		w = first / 64;
		b = first & 63;
		if (!b && n >= 64) {
			atomic_fetch_or_explicit(&bm[w], ~0ULL, memory_order_relaxed);
			first += 64;
			n -= 64;
			continue;
		}
		atomic_fetch_or_explicit(&bm[w], 1ULL << b, memory_order_relaxed);
		first++;
		n--;
	}
}

/* Make a block around [lo, hi) of the range [start, end) read-write and
 * mark it written. Every unprotect of a single page inside a protected range
 * splits the mapping, and past vm.max_map_count (65530 here) mprotect() fails
 * with ENOMEM (DESIGN.md section 4): unprotect a coarser aligned block then,
 * which merges with its already written neighbours instead of splitting.
 * Returns 0, 1 when a coarser block was needed, or -errno. Async-signal-safe. */
static int unprotect_block(_Atomic uint64_t *bm, uintptr_t start, uintptr_t end, uintptr_t lo,
			   uintptr_t hi)
{
	static const size_t granule[] = {0, 64 << 10, 2 << 20, 0};
	uintptr_t s = lo, e = hi;
	size_t k;

	for (k = 0; k < sizeof(granule) / sizeof(granule[0]); k++) {
		if (k == sizeof(granule) / sizeof(granule[0]) - 1) {
			s = start;
			e = end;
		} else if (granule[k]) {
			s = align_down(lo, granule[k]);
			e = align_up(hi, granule[k]);
			s = s < start ? start : s;
			e = e > end ? end : e;
		}
		if (!mprotect((void *)s, e - s, PROT_READ | PROT_WRITE)) {
			mark_pages(bm, (s - start) / page, (e - s) / page);
			return k > 0;
		}
		if (errno != ENOMEM)
			return -errno;
	}
	return -ENOMEM;
}

/* Whether addr is a tracked page; if so it is now writable and marked. */
static bool handle_write(uintptr_t addr)
{
	size_t i, hi = atomic_load_explicit(&nslots_hi, memory_order_acquire);
	uintptr_t start, end, pg;
	struct slot *s;
	int ret;

	for (i = 0; i < hi; i++) {
		s = &slots[i];
		if (!atomic_load_explicit(&s->published, memory_order_acquire))
			continue;
		start = atomic_load_explicit(&s->start, memory_order_relaxed);
		end = atomic_load_explicit(&s->end, memory_order_relaxed);
		if (addr < start || addr >= end)
			continue;
		/* Enter, then check the slot is still the one we saw: pairs with
		 * retire() (unpublish, then wait for users == 0). */
		atomic_fetch_add(&s->users, 1);
		if (!atomic_load(&s->published) || atomic_load(&s->start) != start ||
		    atomic_load(&s->end) != end) {
			atomic_fetch_sub(&s->users, 1);
			continue;
		}
		pg = align_down(addr, page);
		ret = unprotect_block(atomic_load(&s->bitmap), start, end, pg, pg + page);
		if (ret > 0)
			atomic_fetch_add_explicit(&coarse_unprotects, 1, memory_order_relaxed);
		else if (ret < 0)
			atomic_fetch_add_explicit(&failed_unprotects, 1, memory_order_relaxed);
		atomic_fetch_sub(&s->users, 1);
		return ret >= 0;
	}
	return false;
}

static bool is_write_fault(void *ctx)
{
#if defined(__x86_64__)
	/* Page-fault error code bit 1: the access was a write (X86_PF_WRITE). */
	return ((ucontext_t *)ctx)->uc_mcontext.gregs[REG_ERR] & 2;
#else
	/* A tracked page is readable, so an access fault there is a write. */
	(void)ctx;
	return true;
#endif
}

/* SIG_DFL for SIGSEGV through the raw system call: it bypasses the preload
 * layer's sigaction() (and its hook), and an all-zero kernel sigaction is
 * the same on every architecture whatever its field order. */
static void reset_default(void)
{
	unsigned long ksa[4] = {0, 0, 0, 0};

	syscall(SYS_rt_sigaction, SIGSEGV, ksa, NULL, 8);
}

static void chain(int sig, siginfo_t *si, void *ctx)
{
	struct sigaction old = chain_ring[atomic_load(&chain_cur)];
	static const struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t mask, saved;

	if (old.sa_handler == SIG_DFL || old.sa_handler == SIG_IGN) {
		if (si->si_code > 0) {
			/* A real fault: return into the faulting instruction,
			 * which faults again and now kills the process with
			 * SIGSEGV, core dump included, as without stasis. */
			reset_default();
		} else if (old.sa_handler == SIG_DFL) {
			/* Sent with kill()/raise(): send it again. SA_NODEFER
			 * leaves SIGSEGV unblocked, so it is delivered now. */
			reset_default();
			syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
		}
		return;
	}

	mask = old.sa_mask;
	/* Not blocked even without SA_NODEFER: see dirty.h. */
	sigdelset(&mask, SIGSEGV);
	sigprocmask(SIG_BLOCK, &mask, &saved);
	if (old.sa_flags & SA_RESETHAND)
		chain_publish(&dfl, NULL);
	if (old.sa_flags & SA_SIGINFO)
		old.sa_sigaction(sig, si, ctx);
	else
		old.sa_handler(sig);
	sigprocmask(SIG_SETMASK, &saved, NULL);
}

static void segv_handler(int sig, siginfo_t *si, void *ctx)
{
	int saved_errno = errno;

	if (!(si->si_code == SEGV_ACCERR && is_write_fault(ctx) &&
	      handle_write((uintptr_t)si->si_addr)))
		chain(sig, si, ctx);
	errno = saved_errno;
}

int dirty_sigaction_hook(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (sig != SIGSEGV || !atomic_load(&active))
		return 0;
	/* stasis installing or restoring its own handler */
	if (act && (act->sa_flags & SA_SIGINFO) && act->sa_sigaction == segv_handler)
		return 0;
	if (act)
		chain_publish(act, old);
	else if (old)
		*old = chain_ring[atomic_load(&chain_cur)];
	return 1;
}

static int mp_init(void)
{
	struct sigaction sa, prev;
	int ret = 0;

	pthread_mutex_lock(&lock);
	if (atomic_load(&active))
		goto out;
	page = dirty_kerndat()->page_size;
	if (sigaction(SIGSEGV, NULL, &prev)) {
		ret = -errno;
		goto out;
	}
	chain_publish(&prev, NULL);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = segv_handler;
	/* SA_NODEFER: a chained application handler may write to its own
	 * tracked data, which must fault into us again. No SA_ONSTACK: not
	 * every thread has an alternate stack, and the faulting thread's stack
	 * is never tracked (dirty.h). */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL)) {
		ret = -errno;
		pr_perror("sigaction(SIGSEGV)");
		goto out;
	}
	atomic_store(&active, true);
out:
	pthread_mutex_unlock(&lock);
	return ret;
}

static bool aligned(uintptr_t addr, size_t len)
{
	return len && !(addr & (page - 1)) && !(len & (page - 1)) && addr + len > addr;
}

/* A free slot, published for [start, end) with a zeroed bitmap, or NULL.
 * Called with lock held. */
static struct slot *slot_new(uintptr_t start, uintptr_t end)
{
	size_t i, words = ((end - start) / page + 63) / 64;
	size_t map_len = align_up(words * sizeof(uint64_t), page);
	struct slot *s = NULL;
	void *bm;

	for (i = 0; i < MP_MAX_RANGES; i++)
		if (!slots[i].in_use && !atomic_load(&slots[i].users)) {
			s = &slots[i];
			break;
		}
	if (!s)
		return NULL;
	/* mmap, never malloc: the preload layer may serve malloc from the
	 * tracked arena, and the handler must not fault on the bitmap. */
	bm = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (bm == MAP_FAILED)
		return NULL;
	s->in_use = true;
	s->map_len = map_len;
	atomic_store_explicit(&s->start, start, memory_order_relaxed);
	atomic_store_explicit(&s->end, end, memory_order_relaxed);
	atomic_store_explicit(&s->bitmap, bm, memory_order_relaxed);
	atomic_store_explicit(&s->published, 1, memory_order_release);
	if (i + 1 > atomic_load(&nslots_hi))
		atomic_store_explicit(&nslots_hi, i + 1, memory_order_release);
	return s;
}

/* Unpublish a slot and wait until no handler is inside it. Lock held. */
static void slot_unpublish(struct slot *s)
{
	atomic_store(&s->published, 0);
	while (atomic_load(&s->users))
		sched_yield();
}

static void slot_free(struct slot *s)
{
	munmap((void *)atomic_load(&s->bitmap), s->map_len);
	atomic_store(&s->bitmap, NULL);
	s->in_use = false;
}

/* OR bits [src_first, src_first + n) of src into dst from dst_first. */
static void copy_bits(_Atomic uint64_t *dst, size_t dst_first, _Atomic uint64_t *src,
		      size_t src_first, size_t n)
{
	size_t i, b;
	uint64_t w;

	for (i = 0; i < n;) {
		b = src_first + i;
		w = atomic_load_explicit(&src[b / 64], memory_order_relaxed) >> (b & 63);
		if (!w) {
			i += 64 - (b & 63);
			continue;
		}
		if (w & 1)
			mark_pages(dst, dst_first + i, 1);
		i++;
	}
}

/* OR the bits of old over the pages of piece, a part of old's range. */
static void inherit_bits(struct slot *piece, struct slot *old)
{
	uintptr_t start = atomic_load(&piece->start), end = atomic_load(&piece->end);

	copy_bits(atomic_load(&piece->bitmap), 0, atomic_load(&old->bitmap),
		  (start - atomic_load(&old->start)) / page, (end - start) / page);
}

static int mp_track(uintptr_t addr, size_t len)
{
	uintptr_t end = addr + len;
	struct slot *s;
	int ret = 0;
	size_t i;

	pthread_mutex_lock(&lock);
	if (!atomic_load(&active) || !aligned(addr, len)) {
		ret = -EINVAL;
		goto out;
	}
	for (i = 0; i < MP_MAX_RANGES; i++)
		if (slots[i].in_use && atomic_load(&slots[i].start) < end &&
		    addr < atomic_load(&slots[i].end)) {
			ret = -EEXIST;
			goto out;
		}
	s = slot_new(addr, end);
	if (!s) {
		ret = -ENOSPC;
		goto out;
	}
	/* Published before protecting: a write after the mprotect() must find
	 * its slot. */
	if (mprotect((void *)addr, len, PROT_READ)) {
		ret = -errno;
		pr_perror("mprotect(PROT_READ) %#lx+%#zx", (unsigned long)addr, len);
		/* A failure may leave part of the range protected. */
		mprotect((void *)addr, len, PROT_READ | PROT_WRITE);
		slot_unpublish(s);
		slot_free(s);
	}
out:
	pthread_mutex_unlock(&lock);
	return ret;
}

static int mp_untrack(uintptr_t addr, size_t len)
{
	uintptr_t end = addr + len, start, send, a, b;
	struct slot *s, *piece[2];
	int ret = 0;
	size_t i, k, free_slots = 0;

	pthread_mutex_lock(&lock);
	if (!atomic_load(&active) || !aligned(addr, len)) {
		ret = -EINVAL;
		goto out;
	}
	for (i = 0; i < MP_MAX_RANGES; i++)
		free_slots += !slots[i].in_use;
	for (i = 0; i < MP_MAX_RANGES; i++) {
		s = &slots[i];
		if (!s->in_use)
			continue;
		start = atomic_load(&s->start);
		send = atomic_load(&s->end);
		a = start > addr ? start : addr;
		b = send < end ? send : end;
		if (a >= b)
			continue;
		if ((size_t)((a > start) + (b < send)) > free_slots) {
			ret = -ENOSPC;
			goto out;
		}
		if (mprotect((void *)a, b - a, PROT_READ | PROT_WRITE)) {
			ret = -errno;
			pr_perror("mprotect(PROT_READ|PROT_WRITE) %#lx-%#lx", (unsigned long)a,
				  (unsigned long)b);
			goto out;
		}
		/* The remaining pieces get slots of their own; the handler may
		 * find either the old or the new slot until the old one is
		 * unpublished, so its late bits are merged after draining. */
		piece[0] = a > start ? slot_new(start, a) : NULL;
		piece[1] = b < send ? slot_new(b, send) : NULL;
		if ((a > start && !piece[0]) || (b < send && !piece[1])) {
			ret = -ENOMEM;
			for (k = 0; k < 2; k++)
				if (piece[k]) {
					slot_unpublish(piece[k]);
					slot_free(piece[k]);
				}
			/* [a, b) stays tracked but writable: mark it. */
			mark_pages(atomic_load(&s->bitmap), (a - start) / page, (b - a) / page);
			goto out;
		}
		for (k = 0; k < 2; k++) {
			if (!piece[k])
				continue;
			free_slots--;
			inherit_bits(piece[k], s);
		}
		slot_unpublish(s);
		for (k = 0; k < 2; k++)
			if (piece[k])
				inherit_bits(piece[k], s);
		slot_free(s);
		free_slots++;
	}
out:
	pthread_mutex_unlock(&lock);
	return ret;
}

/* Protect [s, e) of the tracked [start, end) again; on ENOMEM protect the
 * enclosing 2 MiB block, then the whole range: protecting more merges the
 * split mappings back (see the invariant at the top). */
static int reprotect(uintptr_t start, uintptr_t end, uintptr_t s, uintptr_t e)
{
	uintptr_t bs = align_down(s, 2 << 20), be = align_up(e, 2 << 20);

	if (!mprotect((void *)s, e - s, PROT_READ))
		return 0;
	if (errno != ENOMEM)
		return -errno;
	bs = bs < start ? start : bs;
	be = be > end ? end : be;
	if (!mprotect((void *)bs, be - bs, PROT_READ))
		return 0;
	if (errno != ENOMEM)
		return -errno;
	return mprotect((void *)start, end - start, PROT_READ) ? -errno : 0;
}

static void set_out(uint64_t *out, size_t bit, size_t n)
{
	while (n && (bit & 63)) {
		out[bit / 64] |= 1ULL << (bit & 63);
		bit++;
		n--;
	}
	for (; n >= 64; n -= 64, bit += 64)
		out[bit / 64] = ~0ULL;
	for (; n; n--, bit++)
		out[bit / 64] |= 1ULL << (bit & 63);
}

/* Protect the run of pages [rs, re) (slot-relative) again; if that fails,
 * give its bits back so that it is reported again next time, which keeps the
 * invariant (writable only if marked). */
static int flush_run(struct slot *sl, uintptr_t start, uintptr_t end, size_t rs, size_t re)
{
	int ret = reprotect(start, end, start + rs * page, start + re * page);

	if (ret) {
		errno = -ret;
		pr_perror("mprotect(PROT_READ) %#lx-%#lx", (unsigned long)(start + rs * page),
			  (unsigned long)(start + re * page));
		mark_pages(atomic_load(&sl->bitmap), rs, re - rs);
	}
	return ret;
}

static int collect_slot(struct slot *sl, uintptr_t addr, uintptr_t a, uintptr_t b, uint64_t *out)
{
	uintptr_t start = atomic_load(&sl->start), end = atomic_load(&sl->end);
	_Atomic uint64_t *bm = atomic_load(&sl->bitmap);
	size_t i0 = (a - start) / page, i1 = (b - start) / page;
	size_t off = (start >= addr ? (start - addr) / page : 0);
	size_t sub = (start >= addr ? 0 : (addr - start) / page);
	size_t w, p, rs = 0, re = 0;
	uint64_t mask, bits;
	int ret = 0, r;
	bool run = false;

	/* Slot page p is output bit p + off - sub (p >= i0 >= sub). */
	for (w = i0 / 64; w * 64 < i1; w++) {
		mask = ~0ULL;
		if (w * 64 < i0)
			mask &= ~0ULL << (i0 - w * 64);
		if ((w + 1) * 64 > i1)
			mask &= ~0ULL >> ((w + 1) * 64 - i1);
		if (!atomic_load_explicit(&bm[w], memory_order_relaxed))
			continue;
		bits = atomic_fetch_and(&bm[w], ~mask) & mask;
		if (bits == ~0ULL) {
			p = w * 64;
			set_out(out, p + off - sub, 64);
			if (run && p <= re + MP_GAP_PAGES) {
				re = p + 64;
				continue;
			}
			if (run && (r = flush_run(sl, start, end, rs, re)) && !ret)
				ret = r;
			rs = p;
			re = p + 64;
			run = true;
			continue;
		}
		while (bits) {
			p = w * 64 + __builtin_ctzll(bits);
			bits &= bits - 1;
			set_out(out, p + off - sub, 1);
			if (run && p <= re + MP_GAP_PAGES) {
				re = p + 1;
				continue;
			}
			if (run && (r = flush_run(sl, start, end, rs, re)) && !ret)
				ret = r;
			rs = p;
			re = p + 1;
			run = true;
		}
	}
	if (run && (r = flush_run(sl, start, end, rs, re)) && !ret)
		ret = r;
	return ret;
}

static void log_counters(void)
{
	unsigned long c = atomic_load(&coarse_unprotects), f = atomic_load(&failed_unprotects);

	if (c != coarse_logged) {
		pr_warn("%lu write faults unprotected a coarser block than their page: the "
			"mappings reached vm.max_map_count (%ld); those blocks count as written",
			c - coarse_logged, dirty_kerndat()->max_map_count);
		coarse_logged = c;
	}
	if (f != failed_logged) {
		pr_err("%lu write faults to tracked pages could not be unprotected",
		       f - failed_logged);
		failed_logged = f;
	}
}

/* The tracked ranges, for range_set_for_each (under lock). */
static bool slot_bounds(size_t i, uintptr_t *start, uintptr_t *end)
{
	if (!slots[i].in_use)
		return false;
	*start = atomic_load(&slots[i].start);
	*end = atomic_load(&slots[i].end);
	return true;
}

struct collect_arg {
	uintptr_t addr;
	uint64_t *bitmap;
};

static int collect_part(const struct range_part *p, void *arg)
{
	const struct collect_arg *c = arg;

	return collect_slot(&slots[p->i], c->addr, p->a, p->b, c->bitmap);
}

static int mp_collect(uintptr_t addr, size_t len, uint64_t *bitmap)
{
	struct collect_arg c = {addr, bitmap};
	int ret;

	pthread_mutex_lock(&lock);
	if (!atomic_load(&active) || !aligned(addr, len)) {
		ret = -EINVAL;
		goto out;
	}
	ret = range_set_for_each(MP_MAX_RANGES, slot_bounds, addr, addr + len, collect_part, &c,
				 NULL);
	log_counters();
out:
	pthread_mutex_unlock(&lock);
	return ret;
}

static void clear_pages(_Atomic uint64_t *bm, size_t first, size_t n)
{
	for (size_t i = first; i < first + n; i++)
		atomic_fetch_and_explicit(&bm[i / 64], ~(1ULL << (i & 63)), memory_order_relaxed);
}

/* unprotect(): the part becomes writable with its bits clear, so that
 * collect() never protects it again (the caller does not collect it).
 * protect(): bits cleared BEFORE the pages are protected (the invariant at
 * the top); a part that cannot be protected keeps its bits set instead. */
static int protect_part(const struct range_part *p, void *arg)
{
	_Atomic uint64_t *bm = atomic_load(&slots[p->i].bitmap);
	size_t first = (p->a - p->start) / page, n = (p->b - p->a) / page;
	int r;

	if (*(const bool *)arg) {
		clear_pages(bm, first, n);
		r = reprotect(p->start, p->end, p->a, p->b);
		if (r)
			mark_pages(bm, first, n);
	} else {
		r = mprotect((void *)p->a, p->b - p->a, PROT_READ | PROT_WRITE) ? -errno : 0;
		if (!r)
			clear_pages(bm, first, n);
	}
	return r;
}

static int mp_set_protected(uintptr_t addr, size_t len, bool protect)
{
	struct range_part failed = {0};
	int ret;

	pthread_mutex_lock(&lock);
	if (!atomic_load(&active) || !aligned(addr, len)) {
		ret = -EINVAL;
		goto out;
	}
	ret = range_set_for_each(MP_MAX_RANGES, slot_bounds, addr, addr + len, protect_part,
				 &protect, &failed);
	/* ENOMEM (vm.max_map_count): the caller copes, quietly. */
	if (ret && ret != -ENOMEM) {
		errno = -ret;
		pr_perror("mprotect(%s) %#lx-%#lx", protect ? "PROT_READ" : "PROT_READ|PROT_WRITE",
			  (unsigned long)failed.a, (unsigned long)failed.b);
	}
out:
	pthread_mutex_unlock(&lock);
	return ret;
}

static int mp_unprotect(uintptr_t addr, size_t len)
{
	return mp_set_protected(addr, len, false);
}

static int mp_protect(uintptr_t addr, size_t len)
{
	return mp_set_protected(addr, len, true);
}

static bool all_marked(_Atomic uint64_t *bm, size_t first, size_t n)
{
	size_t i;

	for (i = first; i < first + n; i++)
		if (!(atomic_load_explicit(&bm[i / 64], memory_order_relaxed) & (1ULL << (i & 63))))
			return false;
	return true;
}

static int prepare_part(const struct range_part *p, void *arg)
{
	_Atomic uint64_t *bm = atomic_load(&slots[p->i].bitmap);
	int r;

	(void)arg;
	/* Marked pages are writable already (the invariant): receives into
	 * the same buffer cost no system call after the first. */
	if (all_marked(bm, (p->a - p->start) / page, (p->b - p->a) / page))
		return 0;
	r = unprotect_block(bm, p->start, p->end, p->a, p->b);
	if (r > 0)
		atomic_fetch_add(&coarse_unprotects, 1);
	return r < 0 ? r : 0;
}

static int mp_prepare_write(const void *p, size_t len)
{
	struct range_part failed = {0};
	int ret;

	if (!len || !atomic_load(&active))
		return 0;
	pthread_mutex_lock(&lock);
	ret = range_set_for_each(MP_MAX_RANGES, slot_bounds, align_down((uintptr_t)p, page),
				 align_up((uintptr_t)p + len, page), prepare_part, NULL, &failed);
	if (ret) {
		errno = -ret;
		pr_perror("mprotect(PROT_READ|PROT_WRITE) %#lx-%#lx", (unsigned long)failed.a,
			  (unsigned long)failed.b);
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

static void mp_fini(void)
{
	struct sigaction cur;
	size_t i;

	pthread_mutex_lock(&lock);
	if (!atomic_load(&active))
		goto out;
	for (i = 0; i < MP_MAX_RANGES; i++) {
		if (!slots[i].in_use)
			continue;
		mprotect((void *)atomic_load(&slots[i].start),
			 atomic_load(&slots[i].end) - atomic_load(&slots[i].start),
			 PROT_READ | PROT_WRITE);
		slot_unpublish(&slots[i]);
		slot_free(&slots[i]);
	}
	atomic_store(&nslots_hi, 0);
	atomic_store(&active, false);
	/* Give SIGSEGV back to whoever the application last asked for, unless
	 * something bypassed the hook and replaced ours meanwhile. */
	if (!sigaction(SIGSEGV, NULL, &cur) && (cur.sa_flags & SA_SIGINFO) &&
	    cur.sa_sigaction == segv_handler)
		sigaction(SIGSEGV, &chain_ring[atomic_load(&chain_cur)], NULL);
out:
	pthread_mutex_unlock(&lock);
}

const struct dirty_backend dirty_mprotect_backend = {
    .name = "mprotect",
    .init = mp_init,
    .track = mp_track,
    .untrack = mp_untrack,
    .collect = mp_collect,
    .unprotect = mp_unprotect,
    .protect = mp_protect,
    .prepare_write = mp_prepare_write,
    .fini = mp_fini,
};
