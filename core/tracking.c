#define LOG_PREFIX "tracking: "
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "arena.h"
#include "dirty.h"
#include "format.h"
#include "image.h"
#include "log.h"
#include "maps.h"
#include "session.h"
#include "tracking.h"

#define MAX_TRACKED 512

/* Runtime state, fresh in every process: after a restart the first image
 * is full and tracking starts from it. */
static struct region tracked[MAX_TRACKED];
static int ntracked;
static struct region pending[MAX_TRACKED]; /* regions of the image being written */
/* Regions whose protection the program changed itself: never tracked again
 * (saved whole in every image), so that its protection stays its own. */
static struct region released[MAX_TRACKED];
static int nreleased;
static int npending;
static bool need_full = true;
static int since_full;
static double collect_ms, collect_bytes; /* of the last tracking_prepare */

/* Arena pages dropped since the last image: one bit per page of the whole
 * reservation, mapped NORESERVE so that only the used part costs memory. */
static uint64_t *discarded;
static const struct dirty_backend *backend;

static void set_bits(uint64_t *bits, size_t first, size_t n, bool atomic)
{
	for (size_t p = first; p < first + n; p++) {
		if (atomic)
			__atomic_fetch_or(&bits[p / 64], 1ULL << (p % 64), __ATOMIC_RELAXED);
		else
			bits[p / 64] |= 1ULL << (p % 64);
	}
}

/* The arena's discard hook: runs under the arena lock, so it only sets bits
 * and lets the backend re-arm the range (arena_unmap made it writable). */
static void on_discard(uintptr_t addr, size_t len)
{
	if (!arena_contains((void *)addr) || !len)
		return;
	set_bits(discarded, (addr - STASIS_ARENA_BASE) / STASIS_PAGE,
		 (len + STASIS_PAGE - 1) / STASIS_PAGE, true);
	backend->prepare_write((void *)addr, len);
}

void tracking_start(struct session *s)
{
	void *p;

	if (!s->dirty)
		return;
	p = mmap(NULL, STASIS_ARENA_SIZE / STASIS_PAGE / 8, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		pr_warn("cannot map the discard bitmap: every image is full");
		s->dirty = NULL;
		return;
	}
	discarded = p;
	backend = s->dirty;
	arena_set_discard_hook(on_discard);
}

/* Move the discarded bits of the arena region r into its dirty bitmap. */
static void take_discarded(const struct region *r, uint64_t *bits)
{
	size_t first = (r->start - STASIS_ARENA_BASE) / STASIS_PAGE;
	size_t pages = (r->end - r->start) / STASIS_PAGE;

	for (size_t p = 0; p < pages; p++) {
		size_t q = first + p;

		if (__atomic_load_n(&discarded[q / 64], __ATOMIC_RELAXED) >> (q % 64) & 1) {
			if (bits)
				bits[p / 64] |= 1ULL << (p % 64);
			__atomic_fetch_and(&discarded[q / 64], ~(1ULL << (q % 64)),
					   __ATOMIC_RELAXED);
		}
	}
}

/* Bitmaps live in one mmap'ed pool, grown when needed: never in the
 * application heap, which is what they describe. */
static uint64_t *pool;
static size_t pool_words;

static uint64_t *bitmaps(size_t words)
{
	if (words > pool_words) {
		size_t want = words * 2;
		void *p = mmap(NULL, want * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);

		if (p == MAP_FAILED)
			return NULL;
		if (pool)
			munmap(pool, pool_words * 8);
		pool = p;
		pool_words = want;
	}
	memset(pool, 0, words * 8);
	return pool;
}

static const struct region *find_tracked(uintptr_t start)
{
	for (int i = 0; i < ntracked; i++)
		if (tracked[i].start == start)
			return &tracked[i];
	return NULL;
}

static size_t words_for(const struct region *r)
{
	return ((r->end - r->start) / STASIS_PAGE + 63) / 64;
}

/* A partial region stores its bitmap (a page at least) besides its dirty
 * pages: when that is not smaller than the region, it is saved whole (a
 * one-page data segment, a region written all over). */
static bool cheaper_whole(const struct region *r, const uint64_t *bits)
{
	uint64_t length = r->end - r->start, pages = 0;

	for (size_t w = 0; w < words_for(r); w++)
		pages += __builtin_popcountll(bits[w]);
	return image_bitmap_bytes(length) + pages * STASIS_PAGE >= length;
}

bool tracking_prepare(struct session *s, const struct region *regions, int n,
		      struct image_region *out)
{
	bool incremental = s->dirty && !need_full && since_full < s->cfg.full_every - 1;
	size_t total = 0, used = 0;
	uint64_t *words;
	struct timespec t0, t1;
	int ret;

	collect_ms = collect_bytes = 0;
	for (int i = 0; i < n; i++) {
		out[i] = (struct image_region){regions[i].start, regions[i].end - regions[i].start,
					       regions[i].kind, NULL};
		total += words_for(&regions[i]);
	}
	npending = n < MAX_TRACKED ? n : MAX_TRACKED;
	memcpy(pending, regions, npending * sizeof(*pending));
	if (!s->dirty || ntracked == 0)
		return false;
	words = bitmaps(total);
	if (!words) {
		need_full = true;
		return false;
	}
	/* Collect from every tracked region even for a full image: that
	 * re-arms them, so that the next interval starts clean. */
	for (int i = 0; i < n; i++) {
		const struct region *r = &regions[i], *t = find_tracked(r->start);
		uint64_t *bits = words + used;
		uintptr_t end;

		used += words_for(r);
		if (r->kind == REGION_STACK || !t)
			continue; /* saved whole */
		end = t->end < r->end ? t->end : r->end;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ret = s->dirty->collect(t->start, end - t->start, bits);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		collect_ms += (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
		collect_bytes += end - t->start;
		if (ret) {
			need_full = true;
			incremental = false;
			continue;
		}
		/* Pages the region grew by since it was tracked: all written. */
		set_bits(bits, (end - r->start) / STASIS_PAGE, (r->end - end) / STASIS_PAGE, false);
		if (r->kind == REGION_ARENA)
			take_discarded(r, bits);
		out[i].dirty = cheaper_whole(r, bits) ? NULL : bits;
	}
	if (!incremental)
		for (int i = 0; i < n; i++)
			out[i].dirty = NULL;
	return incremental;
}

static bool is_released(const struct region *r)
{
	for (int i = 0; i < nreleased; i++)
		if (released[i].start < r->end && r->start < released[i].end)
			return true;
	return false;
}

void tracking_forget(struct session *s, uintptr_t addr, size_t len)
{
	if (!s->dirty || s->dirty != &dirty_mprotect_backend)
		return; /* uffd keeps tracking across the program's mprotect() */
	for (int i = 0; i < ntracked; i++) {
		struct region *t = &tracked[i];

		if (!(t->start < addr + len && addr < t->end))
			continue;
		s->dirty->untrack(t->start, t->end - t->start);
		if (nreleased < MAX_TRACKED)
			released[nreleased++] = *t;
		pr_debug("the program changes the protection of %#lx-%#lx: saved whole from now on",
			 (unsigned long)t->start, (unsigned long)t->end);
		tracked[i--] = tracked[--ntracked];
	}
}

/* Start tracking the parts of the image's regions not tracked yet. */
static void track_new(struct session *s)
{
	for (int i = 0; i < npending; i++) {
		const struct region *r = &pending[i];
		struct region *t = (struct region *)find_tracked(r->start);
		uintptr_t from = t ? t->end : r->start;

		if (r->kind == REGION_STACK || from >= r->end || is_released(r))
			continue;
		/* The mprotect backend would take the program's own protections
		 * for its own: such memory is saved whole (maps.h). */
		if (s->dirty == &dirty_mprotect_backend && maps_protected(r->start, r->end))
			continue;
		if (!t && ntracked == MAX_TRACKED)
			continue;
		if (s->dirty->track(from, r->end - from)) {
			pr_warn("cannot track %#lx-%#lx: the next image is full",
				(unsigned long)from, (unsigned long)r->end);
			need_full = true;
			continue;
		}
		if (!t)
			tracked[ntracked++] = (struct region){r->start, r->end, r->kind};
		else
			t->end = r->end;
	}
}

void tracking_committed(struct session *s, bool committed, bool incremental)
{
	if (!s->dirty)
		return;
	if (!committed) {
		need_full = true;
		return;
	}
	need_full = false;
	since_full = incremental ? since_full + 1 : 0;
	track_new(s);
}

void tracking_last_collect(double *ms, double *bytes)
{
	*ms = collect_ms;
	*bytes = collect_bytes;
}
