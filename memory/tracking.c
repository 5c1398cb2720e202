/* Incremental checkpoints: see tracking.h. Which blocks are worth
 * write-protecting is track_blocks.c's and track_policy.c's. */
#define LOG_PREFIX "tracking: "
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "arena.h"
#include "dirty.h"
#include "format.h"
#include "image.h"
#include "log.h"
#include "session.h"
#include "track_blocks.h"
#include "tracking.h"

#define MAX_TRACKED 512
/* An incremental image at least this fraction of the full one is written
 * full instead: it costs the same to write, and starts a new chain that a
 * restart reads once instead of twice. */
#define NEARLY_FULL 0.9
/* Runtime state, fresh in every process: after a restart the first image
 * is full and tracking starts from it. */
static struct tracked_range tracked[MAX_TRACKED];
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
/* What decides which blocks are protected: the backend, its measured
 * fault cost, and the cost of a page in an image from the last checkpoint
 * (prepared_ns and prepared_bytes: when and how much tracking_prepare
 * said this rank's image would be). */
static struct block_env env;
static double prepared_ns;
static uint64_t prepared_bytes, prepared_full;
static struct block_tally last_tally;

/* Arena pages dropped since the last image: one bit per page of the whole
 * reservation, mapped NORESERVE so that only the used part costs memory. */
static uint64_t *discarded;
static const struct dirty_backend *backend;

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* The arena's discard hook: runs under the arena lock, so it only sets bits
 * and lets the backend re-arm the range (arena_unmap made it writable). */
static void on_discard(uintptr_t addr, size_t len)
{
	if (!arena_contains((void *)addr) || !len)
		return;
	for (size_t p = (addr - STASIS_ARENA_BASE) / STASIS_PAGE,
		    e = p + (len + STASIS_PAGE - 1) / STASIS_PAGE;
	     p < e; p++)
		__atomic_fetch_or(&discarded[p / 64], 1ULL << (p % 64), __ATOMIC_RELAXED);
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
	env.be = backend;
	/* Given by the user where timing it at start is noisy (a loaded or
	 * virtual machine): the policy then depends on the memory alone. */
	if (s->cfg.fault_us >= 0)
		env.costs.fault_ns = s->cfg.fault_us * 1e3;
	else
		env.costs.fault_ns = dirty_fault_cost_ns(backend);
	if (env.costs.fault_ns < 0) {
		pr_warn("cannot time a write fault under %s (%s): taken as 20 us", backend->name,
			strerror((int)-env.costs.fault_ns));
		env.costs.fault_ns = 20e3;
	}
	pr_debug("a first write to a protected page costs %.2f us (%s)", env.costs.fault_ns / 1e3,
		 backend->name);
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

static struct tracked_range *find_tracked(uintptr_t start)
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

/* Bytes the image of out[0..n) stores: bitmap and pages of partial
 * regions, the whole length of the others. */
static uint64_t image_bytes(const struct image_region *out, int n)
{
	uint64_t sum = 0;

	for (int i = 0; i < n; i++) {
		size_t pages = out[i].length / STASIS_PAGE;

		sum += out[i].dirty ? image_bitmap_bytes(out[i].length) +
					  bits_count(out[i].dirty, 0, pages) * STASIS_PAGE
				    : out[i].length;
	}
	return sum;
}

bool tracking_prepare(struct session *s, const struct region *regions, int n,
		      struct image_region *out)
{
	bool incremental = s->dirty && !need_full && since_full < s->cfg.full_every - 1;
	size_t total = 0, used = 0;
	uint64_t *words, full = 0, incr;
	double t0;
	int ret;

	collect_ms = collect_bytes = 0;
	memset(&last_tally, 0, sizeof(last_tally));
	prepared_ns = now_ns();
	for (int i = 0; i < n; i++) {
		out[i] = (struct image_region){regions[i].start, regions[i].end - regions[i].start,
					       regions[i].kind, NULL};
		total += words_for(&regions[i]);
		full += out[i].length;
	}
	prepared_bytes = prepared_full = full;
	npending = n < MAX_TRACKED ? n : MAX_TRACKED;
	memcpy(pending, regions, npending * sizeof(*pending));
	if (!s->dirty || ntracked == 0)
		return false;
	words = bitmaps(total);
	if (!words) {
		need_full = true;
		return false;
	}
	env.round++;
	/* Collect from every tracked region even for a full image: that
	 * re-arms them, so that the next interval starts clean, and decides
	 * which blocks stay protected. */
	for (int i = 0; i < n; i++) {
		const struct region *r = &regions[i];
		struct tracked_range *t = find_tracked(r->start);
		uint64_t *bits = words + used;
		uintptr_t end;

		used += words_for(r);
		if (r->kind == REGION_STACK || !t)
			continue; /* saved whole */
		end = t->end < r->end ? t->end : r->end;
		t0 = now_ns();
		ret = blocks_collect(t, end, r->start, bits, &env, &last_tally);
		collect_ms += (now_ns() - t0) / 1e6;
		collect_bytes += end - t->start;
		if (ret) {
			need_full = true;
			incremental = false;
			continue;
		}
		/* Pages the region grew by since it was tracked: all written. */
		bits_set(bits, (end - r->start) / STASIS_PAGE, (r->end - end) / STASIS_PAGE);
		if (r->kind == REGION_ARENA)
			take_discarded(r, bits);
		out[i].dirty = cheaper_whole(r, bits) ? NULL : bits;
	}
	incr = image_bytes(out, n);
	if (incremental && incr >= NEARLY_FULL * full) {
		pr_debug("an incremental image would store %.0f%% of a full one: full",
			 100.0 * incr / full);
		incremental = false;
	}
	if (!incremental)
		for (int i = 0; i < n; i++)
			out[i].dirty = NULL;
	else
		prepared_bytes = incr;
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
		struct tracked_range *t = &tracked[i];

		if (!(t->start < addr + len && addr < t->end))
			continue;
		s->dirty->untrack(t->start, t->end - t->start);
		if (nreleased < MAX_TRACKED)
			released[nreleased++] = (struct region){t->start, t->end, t->kind};
		pr_debug("the program changes the protection of %#lx-%#lx: saved whole from now on",
			 (unsigned long)t->start, (unsigned long)t->end);
		blocks_free(t);
		tracked[i--] = tracked[--ntracked];
	}
}

static bool (*program_protected)(uintptr_t start, uintptr_t end);

void tracking_set_program_protected(bool (*test)(uintptr_t start, uintptr_t end))
{
	program_protected = test;
}

/* Start tracking the parts of the image's regions not tracked yet. */
static void track_new(struct session *s)
{
	for (int i = 0; i < npending; i++) {
		const struct region *r = &pending[i];
		struct tracked_range *t = find_tracked(r->start);
		uintptr_t from = t ? t->end : r->start;

		if (r->kind == REGION_STACK || from >= r->end || is_released(r))
			continue;
		/* The mprotect backend would take the program's own protections
		 * for its own: such memory is saved whole (maps.h). */
		if (s->dirty == &dirty_mprotect_backend && program_protected && program_protected(r->start, r->end))
			continue;
		if (!t && ntracked == MAX_TRACKED)
			continue;
		if (s->dirty->track(from, r->end - from)) {
			pr_warn("cannot track %#lx-%#lx: the next image is full",
				(unsigned long)from, (unsigned long)r->end);
			need_full = true;
			continue;
		}
		if (!t) {
			t = &tracked[ntracked++];
			*t = (struct tracked_range){
			    .start = r->start, .end = r->start, .kind = r->kind};
		}
		if (blocks_grow(t, r->end, &env)) {
			pr_warn("cannot track %#lx-%#lx: out of memory; the next image is full",
				(unsigned long)from, (unsigned long)r->end);
			s->dirty->untrack(from, r->end - from);
			if (t->end == t->start)
				tracked[t - tracked] = tracked[--ntracked];
			need_full = true;
		}
	}
}

void tracking_committed(struct session *s, bool committed, bool incremental)
{
	double ns = now_ns() - prepared_ns;

	if (!s->dirty)
		return;
	if (!committed) {
		need_full = true;
		return;
	}
	/* What a page in an image cost this checkpoint: its share of the time
	 * the program was blocked, averaged with the last figure. Only from
	 * images of at least half the full size (every full one): a small
	 * image's fixed costs (sync, agreement) would make pages look dear. */
	if (prepared_bytes && prepared_bytes >= prepared_full / 2) {
		double page_ns = ns / prepared_bytes * STASIS_PAGE;

		env.costs.page_ns =
		    env.costs.page_ns > 0 ? (env.costs.page_ns + page_ns) / 2 : page_ns;
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

void tracking_report(struct session *s, uint64_t id)
{
	struct block_tally t = last_tally;
	uint64_t in[4], sum[4];

	if (s->cfg.verbose < 1)
		return;
	for (int i = 0; i < ntracked; i++)
		blocks_tally(&tracked[i], &t);
	in[0] = t.protected_bytes;
	in[1] = t.whole_bytes;
	in[2] = s->dirty != NULL;
	in[3] = t.to_whole + t.to_protected;
	PMPI_Reduce(in, sum, 4, MPI_UINT64_T, MPI_SUM, 0, s->comm);
	if (s->rank || !sum[2])
		return;
	/* A line scripts read (README): keep its shape. */
	fprintf(stderr,
		"stasis: checkpoint %llu tracking: %llu bytes write-protected, %llu bytes saved "
		"whole, %llu blocks changed, fault %.2f us, image %.2f us per page (rank 0)\n",
		(unsigned long long)id, (unsigned long long)sum[0], (unsigned long long)sum[1],
		(unsigned long long)sum[3], env.costs.fault_ns / 1e3, env.costs.page_ns / 1e3);
	pr_debug("blocks: %u to whole (%u made huge pages again), %u to write-protected",
		 t.to_whole, t.collapsed, t.to_protected);
}
