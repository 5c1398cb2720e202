/* Backend choice (STASIS_DIRTY) and the one-time kernel feature probe. */
#define LOG_PREFIX "dirty: "

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "dirty.h"
#include "log.h"

static struct dirty_kerndat kerndat;
static pthread_once_t kerndat_once = PTHREAD_ONCE_INIT;

static long read_max_map_count(void)
{
	char buf[32];
	ssize_t n;
	long v = -1;
	FILE *f = fopen("/proc/sys/vm/max_map_count", "re");

	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	if (n > 0) {
		buf[n] = '\0';
		v = strtol(buf, NULL, 10);
	}
	fclose(f);
	return v;
}

static void kerndat_probe(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	kerndat.page_size = ps > 0 ? (size_t)ps : 4096;
	kerndat.max_map_count = read_max_map_count();
	dirty_uffd_probe(&kerndat);
	pr_debug("page %zu, max_map_count %ld, userfaultfd %s (features %#llx), WP_ASYNC %d, "
		 "WP_UNPOPULATED %d, PAGEMAP_SCAN %d",
		 kerndat.page_size, kerndat.max_map_count,
		 kerndat.uffd_errno ? strerror(kerndat.uffd_errno) : "ok",
		 (unsigned long long)kerndat.uffd_features, kerndat.uffd_wp_async,
		 kerndat.uffd_wp_unpopulated, kerndat.pagemap_scan);
}

const struct dirty_kerndat *dirty_kerndat(void)
{
	pthread_once(&kerndat_once, kerndat_probe);
	return &kerndat;
}

/* Why the uffd backend cannot be had, as the end of a one-line message, or
 * NULL when the kernel has everything it needs. */
static const char *uffd_missing(const struct dirty_kerndat *kd, char *buf, size_t len)
{
	if (kd->uffd_errno) {
		snprintf(buf, len, "userfaultfd is not available (%s)", strerror(kd->uffd_errno));
		return buf;
	}
	if (!kd->uffd_wp_async)
		return "the kernel lacks userfaultfd write-protect (UFFD_FEATURE_WP_ASYNC)";
	if (!kd->uffd_wp_unpopulated)
		return "the kernel lacks userfaultfd write-protect of unpopulated pages "
		       "(UFFD_FEATURE_WP_UNPOPULATED)";
	if (!kd->pagemap_scan)
		return "the kernel lacks the PAGEMAP_SCAN ioctl (Linux 6.7+)";
	return NULL;
}

static const struct dirty_backend *start(const struct dirty_backend *b, const char *mode,
					 struct why *why)
{
	int ret = b->init();

	if (ret) {
		why_set(why, ret, "STASIS_DIRTY=%s: the %s backend failed to start (%s)", mode,
			b->name, strerror(-ret));
		return NULL;
	}
	pr_debug("tracking dirty pages with %s", b->name);
	return b;
}

const struct dirty_backend *dirty_select(const char *mode, struct why *why)
{
	const struct dirty_kerndat *kd = dirty_kerndat();
	const struct dirty_backend *b;
	const char *missing;
	char buf[160];

	if (!mode || !*mode)
		mode = "auto";

	if (!strcmp(mode, "off"))
		return NULL;
	if (!strcmp(mode, "mprotect"))
		return start(&dirty_mprotect_backend, mode, why);
	if (!strcmp(mode, "uffd")) {
		missing = uffd_missing(kd, buf, sizeof(buf));
		if (missing) {
			why_set(why, -ENOTSUP, "STASIS_DIRTY=uffd: %s", missing);
			return NULL;
		}
		return start(&dirty_uffd_backend, mode, why);
	}
	if (!strcmp(mode, "auto")) {
		missing = uffd_missing(kd, buf, sizeof(buf));
		if (!missing) {
			/* A failure here is only a warning: keep it out of why. */
			struct why uffd = WHY_INIT;

			b = start(&dirty_uffd_backend, mode, &uffd);
			if (b)
				return b;
			pr_warn("%s; falling back to mprotect", uffd.msg);
		} else {
			pr_info("not using uffd: %s", missing);
		}
		return start(&dirty_mprotect_backend, mode, why);
	}
	why_set(why, -EINVAL,
		"STASIS_DIRTY=%s: unknown value (accepted: auto, uffd, mprotect, off)", mode);
	return NULL;
}

#define PROBE_PAGES 32
#define PROBE_ROUNDS 3

static double probe_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* One byte per page of p, timed; volatile so that every write happens. */
static double probe_writes(volatile char *p, size_t page, char v)
{
	double t0 = probe_now_ns();

	for (size_t i = 0; i < PROBE_PAGES; i++)
		p[i * page] = v;
	return probe_now_ns() - t0;
}

double dirty_fault_cost_ns(const struct dirty_backend *b)
{
	size_t page = dirty_kerndat()->page_size, len = PROBE_PAGES * page;
	uint64_t bits[(PROBE_PAGES + 63) / 64];
	double best = -1, plain, tracked;
	char *p;
	int ret = 0;

	/* mmap, never malloc (the arena is what gets tracked); 4 KiB pages,
	 * populated first: the figure is the fault, not the first touch. */
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	madvise(p, len, MADV_NOHUGEPAGE);
	memset(p, 1, len);
	for (int round = 0; round < PROBE_ROUNDS && !ret; round++) {
		plain = probe_writes(p, page, 2);
		ret = b->track((uintptr_t)p, len);
		if (ret)
			break;
		tracked = probe_writes(p, page, 3);
		ret = b->collect((uintptr_t)p, len, memset(bits, 0, sizeof(bits)));
		b->untrack((uintptr_t)p, len);
		tracked = (tracked - plain) / PROBE_PAGES;
		if (!ret && (best < 0 || tracked < best))
			best = tracked > 0 ? tracked : 0;
	}
	munmap(p, len);
	return ret ? ret : best;
}
