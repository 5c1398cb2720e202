/* Dirty-page tracking with userfaultfd write-protect in async mode and the
 * PAGEMAP_SCAN ioctl (Linux 6.7+).
 *
 * track() registers the range with UFFDIO_REGISTER_MODE_WP and
 * write-protects it. With UFFD_FEATURE_WP_ASYNC the kernel resolves a write
 * to a protected page itself (no message, no signal: it just clears the
 * page table entry's uffd-wp bit), and PAGEMAP_SCAN with PM_SCAN_WP_MATCHING
 * reports the pages whose bit is clear (PAGE_IS_WRITTEN) and sets it again
 * in the same call. Kernel writes (read(), process_vm_writev() from another
 * rank) take the same path, so prepare_write() has nothing to do.
 *
 * The write-protect bit lives in the page table entry: mprotect() of a
 * tracked page keeps it (change_protection() never makes a uffd-wp entry
 * writable), which test_dirty checks. */
#define LOG_PREFIX "dirty: "

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dirty.h"
#include "log.h"

/* Debian 12's kernel headers (6.1) predate these; values from the uapi of
 * Linux 6.7+, include/uapi/linux/userfaultfd.h and include/uapi/linux/fs.h. */
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

#ifndef PAGEMAP_SCAN
#define PAGE_IS_WPALLOWED (1 << 0)
#define PAGE_IS_WRITTEN (1 << 1)
#define PAGE_IS_FILE (1 << 2)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_SWAPPED (1 << 4)
#define PAGE_IS_PFNZERO (1 << 5)
#define PAGE_IS_HUGE (1 << 6)
#define PAGE_IS_SOFT_DIRTY (1 << 7)

struct page_region {
	uint64_t start;
	uint64_t end; /* exclusive */
	uint64_t categories;
};

#define PM_SCAN_WP_MATCHING (1 << 0)   /* write-protect the pages matched */
#define PM_SCAN_CHECK_WPASYNC (1 << 1) /* fail (EPERM) on a page without async WP */

struct pm_scan_arg {
	uint64_t size;
	uint64_t flags;
	uint64_t start;
	uint64_t end;
	uint64_t walk_end; /* written by the kernel: where the walk stopped */
	uint64_t vec;
	uint64_t vec_len;
	uint64_t max_pages;
	uint64_t category_inverted;
	uint64_t category_mask;
	uint64_t category_anyof_mask;
	uint64_t return_mask;
};

#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif

_Static_assert(sizeof(struct pm_scan_arg) == 96, "pm_scan_arg is 12 u64 in the uapi");
_Static_assert(sizeof(struct page_region) == 24, "page_region is 3 u64 in the uapi");

#define UFFD_MAX_RANGES 4096
/* Regions per PAGEMAP_SCAN call. Adjacent written pages come back as one
 * region, so this bounds the calls by the number of written runs / 1024. */
#define SCAN_VEC_LEN 1024

struct range {
	uintptr_t start, end;
};

static struct {
	pthread_mutex_t lock;
	bool active;
	int uffd;
	int pagemap;
	size_t page;
	struct page_region *vec;
	size_t nranges;
	struct range ranges[UFFD_MAX_RANGES];
} st = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .uffd = -1,
    .pagemap = -1,
};

/* A userfaultfd, or -errno. The syscall needs privilege (or
 * vm.unprivileged_userfaultfd=1) unless UFFD_USER_MODE_ONLY is given; async
 * write-protect never delivers a fault to user space, so that flag loses
 * nothing and is tried next; /dev/userfaultfd (Linux 6.1) is the last resort,
 * for when the syscall is filtered (seccomp) but the device is allowed. */
static int uffd_open(void)
{
	int fd, dev, err;

	fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0)
		return fd;
	fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd >= 0)
		return fd;
	err = errno;
	dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return -err;
	fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		fd = -errno;
	close(dev);
	return fd;
}

void dirty_uffd_probe(struct dirty_kerndat *kd)
{
	struct uffdio_api api = {.api = UFFD_API, .features = 0};
	struct pm_scan_arg arg;
	int fd, pm;

	fd = uffd_open();
	if (fd < 0) {
		kd->uffd_errno = -fd;
	} else {
		/* features = 0 asks what the kernel offers. UFFDIO_API works once
		 * per descriptor, so init() opens a fresh one to enable them. */
		if (ioctl(fd, UFFDIO_API, &api))
			kd->uffd_errno = errno;
		else
			kd->uffd_features = api.features;
		close(fd);
	}
	kd->uffd_wp_async = kd->uffd_features & UFFD_FEATURE_WP_ASYNC;
	kd->uffd_wp_unpopulated = kd->uffd_features & UFFD_FEATURE_WP_UNPOPULATED;

	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0)
		return;
	/* An empty walk: 0 where the ioctl exists, ENOTTY where it does not. */
	memset(&arg, 0, sizeof(arg));
	arg.size = sizeof(arg);
	arg.start = arg.end = kd->page_size;
	arg.return_mask = PAGE_IS_WRITTEN;
	kd->pagemap_scan = ioctl(pm, PAGEMAP_SCAN, &arg) >= 0;
	close(pm);
}

static bool aligned(uintptr_t addr, size_t len)
{
	return len && !(addr & (st.page - 1)) && !(len & (st.page - 1)) && addr + len > addr;
}

static int uffd_init(void)
{
	const struct dirty_kerndat *kd = dirty_kerndat();
	struct uffdio_api api = {.api = UFFD_API};
	int ret = 0;

	pthread_mutex_lock(&st.lock);
	if (st.active)
		goto out;
	if (kd->uffd_errno || !kd->uffd_wp_async || !kd->uffd_wp_unpopulated || !kd->pagemap_scan) {
		ret = -ENOTSUP;
		goto out;
	}
	st.page = kd->page_size;
	st.uffd = uffd_open();
	if (st.uffd < 0) {
		ret = st.uffd;
		errno = -ret;
		pr_perror("userfaultfd");
		goto err;
	}
	/* WP_UNPOPULATED: without it a never-touched anonymous page has no page
	 * table entry to carry the uffd-wp bit, and its first write would go
	 * unreported. */
	api.features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
	if (ioctl(st.uffd, UFFDIO_API, &api)) {
		ret = -errno;
		pr_perror("UFFDIO_API(WP_ASYNC|WP_UNPOPULATED)");
		goto err;
	}
	st.pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (st.pagemap < 0) {
		ret = -errno;
		pr_perror("open /proc/self/pagemap");
		goto err;
	}
	st.vec = mmap(NULL, SCAN_VEC_LEN * sizeof(*st.vec), PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (st.vec == MAP_FAILED) {
		ret = -errno;
		st.vec = NULL;
		goto err;
	}
	st.nranges = 0;
	st.active = true;
	goto out;
err:
	if (st.pagemap >= 0)
		close(st.pagemap);
	if (st.uffd >= 0)
		close(st.uffd);
	st.pagemap = st.uffd = -1;
out:
	pthread_mutex_unlock(&st.lock);
	return ret;
}

static int wp_range(uintptr_t start, uintptr_t end, bool protect)
{
	struct uffdio_writeprotect wp = {
	    .range = {.start = start, .len = end - start},
	    .mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	return ioctl(st.uffd, UFFDIO_WRITEPROTECT, &wp) ? -errno : 0;
}

static int uffd_track(uintptr_t addr, size_t len)
{
	struct uffdio_register reg = {
	    .range = {.start = addr, .len = len},
	    .mode = UFFDIO_REGISTER_MODE_WP,
	};
	struct uffdio_range ur = {.start = addr, .len = len};
	uintptr_t end = addr + len;
	int ret = 0;
	size_t i;

	pthread_mutex_lock(&st.lock);
	if (!st.active) {
		ret = -EINVAL;
		goto out;
	}
	if (!aligned(addr, len)) {
		ret = -EINVAL;
		goto out;
	}
	for (i = 0; i < st.nranges; i++)
		if (st.ranges[i].start < end && addr < st.ranges[i].end) {
			ret = -EEXIST;
			goto out;
		}
	if (st.nranges == UFFD_MAX_RANGES) {
		ret = -ENOSPC;
		goto out;
	}
	if (ioctl(st.uffd, UFFDIO_REGISTER, &reg)) {
		ret = -errno;
		pr_perror("UFFDIO_REGISTER %#lx+%#zx", (unsigned long)addr, len);
		goto out;
	}
	ret = wp_range(addr, end, true);
	if (ret) {
		errno = -ret;
		pr_perror("UFFDIO_WRITEPROTECT %#lx+%#zx", (unsigned long)addr, len);
		ioctl(st.uffd, UFFDIO_UNREGISTER, &ur);
		goto out;
	}
	st.ranges[st.nranges++] = (struct range){addr, end};
out:
	pthread_mutex_unlock(&st.lock);
	return ret;
}

static int uffd_untrack(uintptr_t addr, size_t len)
{
	uintptr_t end = addr + len, s, e;
	struct uffdio_range ur;
	int ret = 0;
	size_t i, splits = 0;

	pthread_mutex_lock(&st.lock);
	if (!st.active || !aligned(addr, len)) {
		ret = -EINVAL;
		goto out;
	}
	for (i = 0; i < st.nranges; i++)
		if (st.ranges[i].start < addr && end < st.ranges[i].end)
			splits++;
	if (st.nranges + splits > UFFD_MAX_RANGES) {
		ret = -ENOSPC;
		goto out;
	}
	for (i = 0; i < st.nranges;) {
		struct range *r = &st.ranges[i];

		s = r->start > addr ? r->start : addr;
		e = r->end < end ? r->end : end;
		if (s >= e) {
			i++;
			continue;
		}
		/* Unregistering clears the uffd-wp bits too on current kernels;
		 * clearing them first keeps the range writable on any. */
		if (wp_range(s, e, false))
			pr_perror("UFFDIO_WRITEPROTECT(0) %#lx-%#lx", (unsigned long)s,
				  (unsigned long)e);
		ur = (struct uffdio_range){.start = s, .len = e - s};
		if (ioctl(st.uffd, UFFDIO_UNREGISTER, &ur)) {
			ret = -errno;
			pr_perror("UFFDIO_UNREGISTER %#lx-%#lx", (unsigned long)s,
				  (unsigned long)e);
		}
		if (s > r->start && e < r->end) {
			st.ranges[st.nranges++] = (struct range){e, r->end};
			r->end = s;
			i++;
		} else if (s > r->start) {
			r->end = s;
			i++;
		} else if (e < r->end) {
			r->start = e;
			i++;
		} else {
			*r = st.ranges[--st.nranges];
		}
	}
out:
	pthread_mutex_unlock(&st.lock);
	return ret;
}

/* Set bits [first, first + n) of bitmap. */
static void set_bits(uint64_t *bitmap, size_t first, size_t n)
{
	while (n && (first & 63)) {
		bitmap[first / 64] |= 1ULL << (first & 63);
		first++;
		n--;
	}
	while (n >= 64) {
		bitmap[first / 64] = ~0ULL;
		first += 64;
		n -= 64;
	}
	while (n) {
		bitmap[first / 64] |= 1ULL << (first & 63);
		first++;
		n--;
	}
}

/* Report and write-protect again the written pages of the tracked
 * [start, end), as bits relative to base. */
static int scan(uintptr_t start, uintptr_t end, uintptr_t base, uint64_t *bitmap)
{
	struct pm_scan_arg arg;
	uintptr_t cur = start, s, e;
	long i, n;

	for (;;) {
		memset(&arg, 0, sizeof(arg));
		arg.size = sizeof(arg);
		arg.flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC;
		arg.start = cur;
		arg.end = end;
		arg.vec = (uintptr_t)st.vec;
		arg.vec_len = SCAN_VEC_LEN;
		arg.category_mask = PAGE_IS_WRITTEN;
		arg.return_mask = PAGE_IS_WRITTEN;
		n = ioctl(st.pagemap, PAGEMAP_SCAN, &arg);
		if (n < 0) {
			pr_perror("PAGEMAP_SCAN %#lx-%#lx", (unsigned long)cur, (unsigned long)end);
			return -errno;
		}
		for (i = 0; i < n; i++) {
			s = st.vec[i].start < start ? start : st.vec[i].start;
			e = st.vec[i].end > end ? end : st.vec[i].end;
			if (s < e)
				set_bits(bitmap, (s - base) / st.page, (e - s) / st.page);
		}
		/* DESIGN.md section 4: when the vector fills, walk_end stops
		 * short of the end even if the walk had covered the range, and
		 * when it does not fill, walk_end is not to be trusted either:
		 * only a full vector means there may be more. */
		if ((size_t)n < SCAN_VEC_LEN)
			return 0;
		if (arg.walk_end >= end)
			return 0;
		if (arg.walk_end <= cur) {
			pr_err("PAGEMAP_SCAN made no progress at %#lx", (unsigned long)cur);
			return -EIO;
		}
		cur = arg.walk_end;
	}
}

/* The registered ranges, for range_set_for_each (under st.lock). */
static bool range_bounds(size_t i, uintptr_t *start, uintptr_t *end)
{
	*start = st.ranges[i].start;
	*end = st.ranges[i].end;
	return true;
}

struct collect_arg {
	uintptr_t addr;
	uint64_t *bitmap;
};

static int scan_part(const struct range_part *p, void *arg)
{
	const struct collect_arg *c = arg;

	return scan(p->a, p->b, c->addr, c->bitmap);
}

static int uffd_collect(uintptr_t addr, size_t len, uint64_t *bitmap)
{
	struct collect_arg c = {addr, bitmap};
	int ret;

	pthread_mutex_lock(&st.lock);
	if (!st.active || !aligned(addr, len)) {
		ret = -EINVAL;
		goto out;
	}
	ret = range_set_for_each(st.nranges, range_bounds, addr, addr + len, scan_part, &c, NULL);
out:
	pthread_mutex_unlock(&st.lock);
	return ret;
}

static int wp_part(const struct range_part *p, void *arg)
{
	return wp_range(p->a, p->b, *(const bool *)arg);
}

/* Set or clear the write-protect bits of the registered parts of
 * [addr, addr + len); the registration stays as it is. */
static int uffd_set_protected(uintptr_t addr, size_t len, bool protect)
{
	struct range_part failed = {0};
	int ret;

	pthread_mutex_lock(&st.lock);
	if (!st.active || !aligned(addr, len)) {
		ret = -EINVAL;
		goto out;
	}
	ret = range_set_for_each(st.nranges, range_bounds, addr, addr + len, wp_part, &protect,
				 &failed);
	if (ret) {
		errno = -ret;
		pr_perror("UFFDIO_WRITEPROTECT(%d) %#lx-%#lx", protect, (unsigned long)failed.a,
			  (unsigned long)failed.b);
	}
out:
	pthread_mutex_unlock(&st.lock);
	return ret;
}

static int uffd_unprotect(uintptr_t addr, size_t len)
{
	return uffd_set_protected(addr, len, false);
}

static int uffd_protect(uintptr_t addr, size_t len)
{
	return uffd_set_protected(addr, len, true);
}

int dirty_huge_pages(uintptr_t addr, size_t len, uint64_t *bits)
{
	const struct dirty_kerndat *kd = dirty_kerndat();
	struct page_region vec[64];
	struct pm_scan_arg arg;
	uintptr_t cur = addr, end = addr + len, s, e;
	int pm, ret = 0;
	long n;

	if (!kd->pagemap_scan)
		return -ENOTSUP;
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0)
		return -errno;
	for (;;) {
		memset(&arg, 0, sizeof(arg));
		arg.size = sizeof(arg);
		arg.start = cur;
		arg.end = end;
		arg.vec = (uintptr_t)vec;
		arg.vec_len = 64;
		arg.category_mask = PAGE_IS_HUGE;
		arg.return_mask = PAGE_IS_HUGE;
		n = ioctl(pm, PAGEMAP_SCAN, &arg);
		if (n < 0) {
			ret = -errno;
			break;
		}
		for (long i = 0; i < n; i++) {
			s = vec[i].start < addr ? addr : vec[i].start;
			e = vec[i].end > end ? end : vec[i].end;
			if (s < e)
				set_bits(bits, (s - addr) / kd->page_size, (e - s) / kd->page_size);
		}
		/* As scan(): only a full vector means there may be more. */
		if (n < 64 || arg.walk_end >= end || arg.walk_end <= cur)
			break;
		cur = arg.walk_end;
	}
	close(pm);
	return ret;
}

static int uffd_prepare_write(const void *addr, size_t len)
{
	(void)addr;
	(void)len;
	return 0;
}

static void uffd_fini(void)
{
	pthread_mutex_lock(&st.lock);
	if (st.active) {
		/* Closing the last reference unregisters every range and drops
		 * its write-protection (userfaultfd_release()). */
		close(st.uffd);
		close(st.pagemap);
		munmap(st.vec, SCAN_VEC_LEN * sizeof(*st.vec));
		st.uffd = st.pagemap = -1;
		st.vec = NULL;
		st.nranges = 0;
		st.active = false;
	}
	pthread_mutex_unlock(&st.lock);
}

const struct dirty_backend dirty_uffd_backend = {
    .name = "uffd",
    .init = uffd_init,
    .track = uffd_track,
    .untrack = uffd_untrack,
    .collect = uffd_collect,
    .unprotect = uffd_unprotect,
    .protect = uffd_protect,
    .prepare_write = uffd_prepare_write,
    .fini = uffd_fini,
};
