/* Dirty-page tracking of the application image (DESIGN.md section 4).
 * One backend per file behind this table: dirty_mprotect.c (mprotect +
 * SIGSEGV, works everywhere), dirty_uffd.c (userfaultfd write-protect in
 * async mode + PAGEMAP_SCAN, Linux 6.7+). Ranges are page aligned. Callers
 * never track the main thread's stack (it is saved whole), nor any thread's
 * stack: the mprotect backend's SIGSEGV handler runs on the faulting thread's
 * stack, so a protected stack page could not take the signal.
 *
 * Rules for the caller (both backends unless said otherwise):
 *
 * - Tracked ranges never overlap: track() of a page already tracked fails
 *   with -EEXIST. Adjacent ranges are fine and are independent.
 * - Growing a tracked range (the arena commits its reservation in 2 MiB steps
 *   with mprotect): commit the new part first (make it PROT_READ|PROT_WRITE),
 *   then call track() on the new part only. Both backends then report writes
 *   to the old and the new part; collect() may span both.
 * - Track only what is committed. The uffd backend write-protects unpopulated
 *   pages too (UFFD_FEATURE_WP_UNPOPULATED), which allocates page tables for
 *   the whole tracked range (2 MiB of tables per GiB); tracking a 1 TiB
 *   PROT_NONE reservation would cost 2 GiB.
 * - Changing the protection of a tracked page: the uffd backend keeps
 *   tracking across mprotect() (the write-protect bit lives in the page table
 *   entry and survives; checked by test_dirty). The mprotect backend owns the
 *   protection of tracked pages: collect() the part, untrack() it, change its
 *   protection, and track() it again if it is read-write. An application
 *   mprotect(PROT_READ|PROT_WRITE) that bypasses this silently stops the
 *   tracking of those pages; one to PROT_READ makes the handler grant write
 *   access on the next write.
 * - Pages dropped with madvise(MADV_DONTNEED) or munmap() read back as zero
 *   without having been written: neither backend reports them. The caller
 *   that drops pages of a tracked range records that itself.
 * - collect() must not run while the kernel or another process writes into a
 *   buffer that prepare_write() made writable (an in-flight read() or MPI
 *   receive on another thread): the mprotect backend protects the collected
 *   pages again, so that write would fail with EFAULT. A checkpoint is
 *   taken only after the drain (mpi/drain.h) has cancelled every receive the
 *   program posted, so no MPI receive is writing then.
 * - Granularity: the reported set is exact for 4 KiB pages, and a superset
 *   when (mprotect) vm.max_map_count forced a coarser unprotect, or (uffd) a
 *   written page sat in a transparent huge page (the kernel reports all of
 *   it). Pages never written since the previous collect() are reported only
 *   in those two cases.
 *
 * Thread safety: track, untrack, collect and prepare_write may be called from
 * any thread; they serialise on one lock. Writes from any thread are tracked.
 * Nothing here may be called from a signal handler. Memory that stasis needs
 * for tracking (bitmaps, scan vectors) comes from mmap(), never from malloc(),
 * so that it never lands in the tracked application heap. */
#ifndef STASIS_DIRTY_H
#define STASIS_DIRTY_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "why.h"

struct dirty_backend {
	const char *name; /* "mprotect" or "uffd" */
	/* Probe the kernel and set up; -ENOTSUP when it lacks the feature.
	 * Calling it again while set up is a no-op returning 0. */
	int (*init)(void);
	/* Start tracking [addr, addr+len): every page counts clean from now.
	 * The range must be mapped and read-write. */
	int (*track)(uintptr_t addr, size_t len);
	/* Stop tracking [addr, addr+len) and leave it writable. Any part of a
	 * tracked range may be untracked (the rest stays tracked); pages of the
	 * span that are not tracked are ignored. Written-page information of the
	 * untracked part is dropped: collect() it first if it is wanted. */
	int (*untrack)(uintptr_t addr, size_t len);
	/* Set bit i of bitmap (1 bit per page, ceil(pages/64) words, zeroed by
	 * the caller) for every page of [addr, addr+len) written since track()
	 * or the previous collect(), and protect those pages again, so that
	 * the next interval starts clean. The span may cover several tracked
	 * ranges and untracked holes (never reported). A write that races with
	 * collect() is either reported now (and then in the copy taken after
	 * collect() returns) or in the next interval, never lost. */
	int (*collect)(uintptr_t addr, size_t len, uint64_t *bitmap);
	/* Leave [addr, addr+len), a part of tracked ranges, writable without
	 * faults: its writes are no longer seen until protect() arms it again.
	 * Written-page information of the part is dropped (collect() it first
	 * if it is wanted), and collect() must not be called on it meanwhile:
	 * uffd would report every page written since and protect it again.
	 * Parts of the span that are not tracked are ignored. For uffd this is
	 * the same registration, only the pages' write-protect bits change; for
	 * mprotect it may split the mapping at both ends. */
	int (*unprotect)(uintptr_t addr, size_t len);
	/* Arm [addr, addr+len) of tracked ranges again: every page counts clean
	 * from now. After unprotect(), or to re-arm pages collect() left alone. */
	int (*protect)(uintptr_t addr, size_t len);
	/* Before the kernel or another process writes [addr, addr+len) (read(),
	 * an MPI receive): make it writable and count it written. Any range
	 * (tracked or not, unaligned) is accepted. A no-op for uffd, whose
	 * write-protection the kernel resolves itself. */
	int (*prepare_write)(const void *addr, size_t len);
	/* Stop tracking everything, leave all ranges writable, release the
	 * backend (the mprotect backend puts the chained SIGSEGV action back). */
	void (*fini)(void);
};

extern const struct dirty_backend dirty_mprotect_backend;
extern const struct dirty_backend dirty_uffd_backend;

/* For the backends: the part of the i-th tracked range [start, end) that
 * lies in the span asked for, [a, b). */
struct range_part {
	size_t i;
	uintptr_t start, end;
	uintptr_t a, b;
};

/* Call fn for each range i < n that bounds() finds in use and that meets
 * [lo, hi). Every part is visited whatever fn returns (one failure must
 * not leave the rest as it was); the result is fn's first nonzero one,
 * and *failed (if not NULL) its part, for the one line the backends log.
 * Inline, so that bounds() and fn are too: prepare_write runs at every
 * receive. */
static inline int range_set_for_each(size_t n,
				     bool (*bounds)(size_t i, uintptr_t *start, uintptr_t *end),
				     uintptr_t lo, uintptr_t hi,
				     int (*fn)(const struct range_part *p, void *arg), void *arg,
				     struct range_part *failed)
{
	struct range_part p;
	int ret = 0, r;

	for (p.i = 0; p.i < n; p.i++) {
		if (!bounds(p.i, &p.start, &p.end))
			continue;
		p.a = p.start > lo ? p.start : lo;
		p.b = p.end < hi ? p.end : hi;
		if (p.a >= p.b)
			continue;
		r = fn(&p, arg);
		if (r && !ret) {
			ret = r;
			if (failed)
				*failed = p;
		}
	}
	return ret;
}

/* Kernel features, probed once per process (CRIU's kerndat idea) by the
 * first dirty_kerndat() call; later calls return the same struct. */
struct dirty_kerndat {
	size_t page_size;
	int uffd_errno;		  /* 0, or why no userfaultfd could be opened */
	uint64_t uffd_features;	  /* UFFDIO_API features the kernel offers */
	bool uffd_wp_async;	  /* UFFD_FEATURE_WP_ASYNC (Linux 6.7) */
	bool uffd_wp_unpopulated; /* UFFD_FEATURE_WP_UNPOPULATED (Linux 6.4) */
	bool pagemap_scan;	  /* PAGEMAP_SCAN ioctl on /proc/self/pagemap */
	long max_map_count;	  /* vm.max_map_count, -1 if unreadable */
};
const struct dirty_kerndat *dirty_kerndat(void);
/* Internal: dirty_kerndat() lets dirty_uffd.c, which owns the uapi
 * definitions, fill in the userfaultfd and PAGEMAP_SCAN fields. */
void dirty_uffd_probe(struct dirty_kerndat *kd);

/* Set in bits (1 per page, zeroed by the caller) the pages of [addr,
 * addr+len) mapped as transparent huge pages now (PAGEMAP_SCAN's
 * PAGE_IS_HUGE, with or without a backend). -ENOTSUP before Linux 6.7. */
int dirty_huge_pages(uintptr_t addr, size_t len, uint64_t *bits);

/* mode: "auto" (uffd if the kernel has it, else mprotect), "uffd",
 * "mprotect", or "off" (returns NULL, why left empty). NULL means "auto". A
 * backend that cannot be had returns NULL with one line in why, e.g.
 *   STASIS_DIRTY=uffd: the kernel lacks userfaultfd write-protect (UFFD_FEATURE_WP_ASYNC)
 * The returned backend is init()ed. */
const struct dirty_backend *dirty_select(const char *mode, struct why *why);

/* What a first write to a page that b protects costs this process, in
 * nanoseconds (the fault and its resolution, minus the write itself): a
 * few dozen pages of fresh memory tracked, written once each, timed, the
 * best of three rounds. Between machines it varies 20x (DESIGN.md
 * section 11), so it is measured, once per process, in about a millisecond
 * (1 us per fault) to ten (16 us). Negative (-errno) when b cannot track. */
double dirty_fault_cost_ns(const struct dirty_backend *b);

/* For the preload layer's sigaction()/signal() interposition: while the
 * mprotect backend is active, a SIGSEGV handler the application or the MPI
 * library installs is recorded as the handler to chain to, and stasis's stays
 * first. Returns 1 when it handled the call (old filled in with the recorded
 * action), 0 when the caller must pass it to the real sigaction.
 *
 * Chaining (faults that are not a write to a tracked page): to SIG_DFL or
 * SIG_IGN, the handler restores SIG_DFL and returns, so that the faulting
 * instruction runs again and the process dies of SIGSEGV as it would have
 * (a SIGSEGV sent with kill() is re-sent under SIG_DFL, or dropped under
 * SIG_IGN). To a handler, it is called with the same (sig, info, ctx) or
 * (sig) per its SA_SIGINFO, with its sa_mask blocked, SA_RESETHAND honoured,
 * on the current stack (SA_ONSTACK cannot be honoured), and with SIGSEGV NOT
 * blocked even without SA_NODEFER: an application handler that sets a flag
 * in its own (tracked) data must be able to take stasis's fault. */
int dirty_sigaction_hook(int sig, const struct sigaction *act, struct sigaction *old);

#endif
