/* Incremental checkpoints (DESIGN.md section 4): which pages of the
 * application image changed since the last committed checkpoint. Built on a
 * dirty-tracking backend (dirty.h); the main thread's stack is always saved
 * whole, and regions that appeared or grew are saved whole. Tracking pays
 * for itself (DESIGN.md section 11): blocks mostly rewritten in an interval
 * are left writable and saved whole (track_blocks.h, track_policy.h), and an
 * incremental image nearly as large as a full one is written full. */
#ifndef STASIS_TRACKING_H
#define STASIS_TRACKING_H

#include <stdbool.h>
#include <stdint.h>

#include "image.h"
#include "regions.h"

struct session;

/* Start: pages the arena drops with madvise read back as zero without a
 * write the backend could see; they are counted dirty from now on. */
void tracking_start(struct session *s);
/* Memory the program protected itself: the mprotect backend would take its
 * protection for its own, so such memory is never tracked but saved whole.
 * The process layer knows it (maps_protected, process/maps.h); the engine
 * hands the test down before tracking_start. */
void tracking_set_program_protected(bool (*test)(uintptr_t start, uintptr_t end));

/* For the image about to be written: fill out[0..n) from regions[0..n) and
 * decide whether it can be incremental (a backend is on, tracking has been
 * armed since a committed checkpoint, and fewer than STASIS_FULL_EVERY - 1
 * incremental images follow the last full one). Collecting re-arms the
 * tracked pages, so the next interval starts clean. Returns true for an
 * incremental image. */
bool tracking_prepare(struct session *s, const struct region *regions, int n,
		      struct image_region *out);

/* After the commit decision: on success start tracking what is not tracked
 * yet; on failure forget what was collected (the next image is full). */
void tracking_committed(struct session *s, bool committed, bool incremental);

/* The program is about to change the protection of [addr, addr+len): under
 * the mprotect backend, stop tracking the regions it touches for good (they
 * are saved whole from now on), so that its protection and its own SIGSEGV
 * handler work as without stasis. */
void tracking_forget(struct session *s, uintptr_t addr, size_t len);

/* STASIS_VERBOSE=1, after checkpoint id committed: rank 0 says how many
 * bytes tracking write-protects and how many it leaves writable and saves
 * whole in the interval that starts (README). Collective over s->comm. */
void tracking_report(struct session *s, uint64_t id);

/* Time spent collecting dirty pages in the last tracking_prepare, and the
 * bytes of tracked memory it covered (STASIS_VERBOSE=2, benchmarks). */
void tracking_last_collect(double *ms, double *bytes);

#endif
