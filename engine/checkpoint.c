#define LOG_PREFIX ""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "runtime.h"
#include "checkpoint.h"
#include "codec.h"
#include "fault.h"
#include "flush.h"
#include "image.h"
#include "agree.h"
#include "log.h"
#include "parts.h"
#include "redundancy.h"
#include "regions.h"
#include "retention.h"
#include "trigger.h"
#include "session.h"
#include "diskspace.h"
#include "tracking.h"

#define MAX_REGIONS 512

/* Runtime globals (never restored): the state captured for the image, and
 * the flag a restore sets in the new process before jumping back here. */
static struct saved_state captured;
static volatile int resuming;
static volatile uint64_t resumed_id;
/* The newest complete checkpoint's time (CLOCK_REALTIME ns), and whether a
 * full disk was said: once until a checkpoint is complete again (space),
 * once per run that older checkpoints went early to make room (room). */
static uint64_t last_commit_ns;
static bool space_warned, room_warned;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static uint64_t realtime_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000u + t.tv_nsec;
}

/* When checkpoint id was taken: its image header says (now if unreadable). */
static uint64_t created_ns(struct session *s, uint64_t id)
{
	char path[4200];
	struct image *img;
	uint64_t ns = realtime_ns();

	store_path(&s->store, id, STORE_IMAGE, path, sizeof(path));
	if (!image_open(path, &img, NULL)) {
		ns = image_header(img)->created_ns;
		image_close(img);
	}
	return ns;
}

static uint64_t read_canary(void)
{
	uint64_t v;
	__asm__ volatile("mov %%fs:0x28, %0" : "=r"(v));
	return v;
}

void checkpoint_prepare_resume(uint64_t id)
{
	resumed_id = id;
	resuming = 1;
}

/* Test aid (STASIS_SHADOW_FULL=1): beside an incremental image, a full
 * image of the same memory in <dir>/shadow/, so that a test can check that
 * the chain restores exactly what a full checkpoint would have. */
static void write_shadow(struct session *s, struct image_header *hdr,
			 const struct image_region *whole_regions, int n)
{
	struct why why = WHY_INIT;
	char path[4300];
	struct image_header full = *hdr;

	snprintf(path, sizeof(path), "%s/shadow", s->store.dir);
	if (mkdir(path, 0700) && errno != EEXIST)
		return;
	snprintf(path, sizeof(path), "%s/shadow/ckpt-%llu.r%d.img", s->store.dir,
		 (unsigned long long)hdr->ckpt_id, s->rank);
	full.kind = IMAGE_FULL;
	full.parent_id = 0;
	if (image_write(path, &full, whole_regions, n, NULL, &why))
		pr_warn("shadow image: %s", why.msg);
}

/* The image being written: the memory regions collected (with the dirty
 * bitmaps of an incremental image), then the parts' sections; and the same
 * regions saved whole. Runtime globals, as `captured`: a retry after making
 * room reuses them. */
static struct region regions[MAX_REGIONS];
#define MAX_SECTIONS 16
static struct image_region out[MAX_REGIONS + MAX_SECTIONS], whole[MAX_REGIONS + MAX_SECTIONS];
static int nout;
/* The STOP stage's result for this checkpoint (parts.h), reported with the
 * vote of prepare_image. */
static int stop_ret;
static struct why stop_why;

/* Collect the application's memory and the parts' sections, and agree
 * whether an incremental image is possible on every rank. Collective even
 * for a rank that fails here (it votes "full" and returns its error). The
 * stack is saved from just below the captured stack pointer (the red zone
 * included). */
static int prepare_image(struct session *s, bool *incremental, struct why *why)
{
	uintptr_t sp = (uintptr_t)captured.context.uc_mcontext.gregs[REG_RSP];
	int n =
	    fault_hit(FAULT_FAIL_COLLECT) ? -EIO : regions_collect(regions, MAX_REGIONS, sp - 256);
	bool mine = false;

	nout = 0;
	if (n >= 0 && stop_ret) {
		why_set(why, stop_ret, "%s", stop_why.msg);
		n = stop_ret;
	}
	if (n < 0) /* kept when STOP said why first */
		why_set(why, n, "cannot list the application's memory: %s", strerror(-n));
	if (n >= 0) {
		/* The early parts, then the memory's dirty pages, then the
		 * rest (session/part.h, save_early). */
		struct section sec[MAX_SECTIONS];
		struct section_list list = {sec, 0, MAX_SECTIONS};
		int ret = parts_save(captured.ckpt_id, true, &list, why);

		if (!ret) {
			mine = tracking_prepare(s, regions, n, out) && s->last_id;
			ret = parts_save(captured.ckpt_id, false, &list, why);
		}
		if (ret) {
			mine = false;
			n = ret;
		} else {
			for (int i = 0; i < list.n; i++)
				out[n++] = (struct image_region){(uintptr_t)sec[i].data, sec[i].len,
								 sec[i].kind, NULL};
			for (int i = 0; i < n; i++)
				whole[i] = (struct image_region){out[i].addr, out[i].length,
								 out[i].kind, NULL};
			nout = n;
		}
	}
	/* All ranks write the same kind, so that every chain, and the
	 * redundancy of every image in it, exists on every rank. */
	PMPI_Allreduce(&mine, incremental, 1, MPI_C_BOOL, MPI_LAND, s->comm);
	return n < 0 ? n : 0;
}

/* Write this rank's image of checkpoint id from what prepare_image
 * collected: incremental on top of the last committed one, or whole. */
static int write_image(struct session *s, uint64_t id, bool incremental, uint64_t *bytes,
		       struct why *why)
{
	struct image_region *r = incremental ? out : whole;
	struct image_header hdr;
	char path[4200];
	int ret;

	memset(&hdr, 0, sizeof(hdr));
	hdr.ckpt_id = id;
	hdr.parent_id = incremental ? s->last_id : 0;
	hdr.kind = incremental ? IMAGE_INCREMENTAL : IMAGE_FULL;
	hdr.rank = s->rank;
	hdr.nranks = s->size;
	hdr.exe_hash = s->exe_hash;
	hdr.args_hash = s->args_hash;
	hdr.stasis_hash = s->stasis_hash;
	hdr.codec = (uint32_t)codec_from_name(s->cfg.compress); /* checked by config_load */
	hdr.state_size = sizeof(captured);
	memcpy(hdr.state, &captured, sizeof(captured));
	store_path(&s->store, id, STORE_IMAGE, path, sizeof(path));
	ret = image_write(path, &hdr, r, nout, bytes, why);
	if (!ret && incremental && getenv("STASIS_SHADOW_FULL"))
		write_shadow(s, &hdr, whole, nout);
	return ret;
}

/* Collective over this rank's redundancy set. */
static int encode(struct session *s, uint64_t id, struct why *why)
{
	char image[64], red[64];
	const char *names[] = {image};

	store_name(s->rank, id, STORE_IMAGE, image, sizeof(image));
	store_name(s->rank, id, STORE_REDUNDANCY, red, sizeof(red));
	return redundancy_encode(s->redset, s->store.dir, names, 1, red, why);
}

static bool no_space(int ret)
{
	return ret == -ENOSPC || ret == -EDQUOT;
}

static int agree_ok(struct session *s, int ret)
{
	int ok = ret == 0, all_ok;

	PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, s->comm);
	return all_ok;
}

/* Phase 1 of checkpoint id: every rank writes and syncs its image, then
 * its set's redundancy data: a checkpoint is complete only with both.
 * Collective; *all_ok says whether it worked everywhere. A rank's own
 * error is printed here unless it is a full disk, which rank 0 reports
 * once for all (report_no_space). */
static int write_files(struct session *s, uint64_t id, int prep, bool incremental, uint64_t *bytes,
		       int *all_ok, struct why *why)
{
	int ret = prep ? prep : write_image(s, id, incremental, bytes, why);

	*all_ok = agree_ok(s, ret);
	if (*all_ok && s->redset) {
		ret = encode(s, id, why);
		*all_ok = agree_ok(s, ret);
	}
	if (ret && !no_space(ret))
		pr_err("checkpoint %llu: %s", (unsigned long long)id, why->msg);
	return ret;
}

static void format_age(double sec, char *buf, size_t len)
{
	if (sec < 120)
		snprintf(buf, len, "%.0f s", sec);
	else if (sec < 7200)
		snprintf(buf, len, "%.1f min", sec / 60);
	else
		snprintf(buf, len, "%.1f h", sec / 3600);
}

/* Checkpoint id could not be written for lack of space anywhere, room
 * made or not. Collective: the lowest rank that ran out of space tells
 * rank 0 why, and rank 0 says once (until a checkpoint is complete again)
 * how old the newest complete checkpoint is. */
static void report_no_space(struct session *s, uint64_t id, bool mine, const char *err, bool freed)
{
	struct why w = WHY_INIT;
	char age[32];

	if (mine)
		why_set(&w, -ENOSPC, "%s", err);
	why_agree(s->comm, "checkpoint:no-space", mine ? -ENOSPC : 0, &w);
	if (s->rank || space_warned)
		return;
	space_warned = true;
	if (!s->last_id) {
		pr_warn(
		    "checkpoint %llu could not be written, the disk is full (rank %d: %s); no "
		    "checkpoint is complete yet; the run goes on and stasis tries again at every "
		    "interval",
		    (unsigned long long)id, w.rank, w.msg);
		return;
	}
	format_age((realtime_ns() - last_commit_ns) / 1e9, age, sizeof(age));
	pr_warn("checkpoint %llu could not be written, the disk is full (rank %d: %s)%s; the "
		"newest complete checkpoint, %llu, is %s old; the run goes on and stasis tries "
		"again at every interval",
		(unsigned long long)id, w.rank, w.msg,
		freed ? "; removing the older checkpoints it does not need did not make room enough"
		      : "; it needs every older checkpoint left",
		(unsigned long long)s->last_id, age);
}

/* Out of space somewhere: remove, on every rank, the checkpoints the
 * newest complete one does not depend on. Collective: true when any rank
 * freed something (worth a retry). */
static bool make_room(struct session *s)
{
	int freed = retention_make_room(s) > 0;

	PMPI_Allreduce(MPI_IN_PLACE, &freed, 1, MPI_INT, MPI_LOR, s->comm);
	return freed;
}

static int write_and_commit(struct session *s, uint64_t id, double t0);

int checkpoint_take(struct session *s)
{
	uint64_t id = s->next_id++;
	double t0 = now();
	int ret;

	/* The program's other threads park first (parts.h, STOP); a failure
	 * is this checkpoint's, reported with the vote of prepare_image. Its
	 * output must not sit in a buffer of this process only. */
	why_clear(&stop_why);
	stop_ret = parts_run(STAGE_STOP, NULL, &stop_why);
	fflush(NULL);
	captured.canary = read_canary();
	captured.depth = stasis_depth;
	captured.ckpt_id = id;
	getcontext(&captured.context);
	if (resuming) {
		/* A restart jumped here: everything above is the image's state. */
		resuming = 0;
		s->last_id = resumed_id;
		last_commit_ns = created_ns(s, resumed_id);
		parts_run_void(STAGE_RESUMED, true);
		trigger_resumed();
		if (s->rank == 0 && s->cfg.verbose >= 1)
			fprintf(stderr, "stasis: resumed from checkpoint %llu\n",
				(unsigned long long)resumed_id);
		return CHECKPOINT_RESUMED;
	}
	/* One instant of the program (parts.h, QUIESCE): its signals wait and
	 * the pages it made unreadable are made readable while the image is
	 * written; THAW gives both back and lets its threads go. */
	ret = parts_run(STAGE_QUIESCE, NULL, &stop_why);
	if (!ret)
		ret = write_and_commit(s, id, t0);
	parts_run_void(STAGE_THAW, false);
	parts_run_void(STAGE_RESUMED, false);
	return ret;
}

/* The rest of checkpoint_take, out of the function that calls getcontext. */
static int write_and_commit(struct session *s, uint64_t id, double t0)
{
	struct why why = WHY_INIT;
	uint64_t bytes = 0, total_bytes = 0;
	double ms, max_ms;
	int all_ok, ret, prep, any_incremental, nospace;
	bool incremental, can_incremental, made_room = false, freed = false;
	struct commit_record rec;

	fault_set_checkpoint(id);
	prep = prepare_image(s, &can_incremental, &why);
	incremental = can_incremental && !diskspace_prefer_full(s, diskspace_image_bytes(whole, nout, true),
							    diskspace_image_bytes(out, nout, false));
	/* A full disk: make room the safe way, then try again; a full image
	 * that does not fit may still fit as the incremental one it replaced. */
	for (;;) {
		if (!prep) /* each attempt says its own why (prepare_image's stays) */
			why_clear(&why);
		ret = write_files(s, id, prep, incremental, &bytes, &all_ok, &why);
		if (all_ok)
			break;
		store_remove(&s->store, id); /* this attempt's files, before a retry */
		nospace = no_space(ret);
		PMPI_Allreduce(MPI_IN_PLACE, &nospace, 1, MPI_INT, MPI_LOR, s->comm);
		if (!nospace)
			break;
		if (!made_room) {
			made_room = true;
			freed = make_room(s);
			if (freed)
				continue;
		}
		if (incremental || !can_incremental)
			break;
		incremental = true;
	}
	tracking_committed(s, all_ok, incremental);
	if (!all_ok) {
		if (nospace)
			report_no_space(s, id, no_space(ret), why.msg, freed);
		else if (s->rank == 0)
			pr_warn("checkpoint %llu failed on some rank; the previous checkpoint "
				"stays the newest",
				(unsigned long long)id);
		return ret ? ret : -EIO;
	}
	if (freed && s->rank == 0 && !room_warned) {
		room_warned = true;
		pr_warn("checkpoint %llu: the disk was full; removed older checkpoints that "
			"checkpoint %llu does not need to make room (fewer than STASIS_KEEP=%d "
			"are kept while space is short)",
			(unsigned long long)id, (unsigned long long)s->last_id, s->cfg.keep);
	}
	space_warned = false;
	last_commit_ns = realtime_ns();

	/* Phase 2: every image is on disk; record it complete, then prune. */
	memset(&rec, 0, sizeof(rec));
	rec.ckpt_id = id;
	rec.parent_id = incremental ? s->last_id : 0;
	rec.nranks = s->size;
	rec.image_bytes = bytes;
	ret = store_commit(&s->store, &rec, &why);
	if (ret)
		pr_err("checkpoint %llu: %s", (unsigned long long)id, why.msg);
	s->last_id = id;
	if (!ret) /* without our own record, our newest would look incomplete */
		retention_prune(s);
	flush_committed(s);

	ms = (now() - t0) * 1e3;
	PMPI_Reduce(&bytes, &total_bytes, 1, MPI_UINT64_T, MPI_SUM, 0, s->comm);
	PMPI_Reduce(&ms, &max_ms, 1, MPI_DOUBLE, MPI_MAX, 0, s->comm);
	/* Each rank's chain is its own: "incremental" when any rank's was. */
	any_incremental = incremental;
	PMPI_Allreduce(MPI_IN_PLACE, &any_incremental, 1, MPI_INT, MPI_MAX, s->comm);
	if (s->rank == 0 && s->cfg.verbose >= 2) {
		double cms, cbytes;

		tracking_last_collect(&cms, &cbytes);
		fprintf(stderr, "stasis: checkpoint %llu: collected dirty pages of %.0f bytes in "
				"%.3f ms (rank 0)\n",
			(unsigned long long)id, cbytes, cms);
	}
	/* A line scripts read (README): keep its shape. */
	if (s->rank == 0 && s->cfg.verbose >= 1)
		fprintf(stderr, "stasis: checkpoint %llu committed: %s, %llu bytes, %.0f ms\n",
			(unsigned long long)id, any_incremental ? "incremental" : "full",
			(unsigned long long)total_bytes, max_ms);
	tracking_report(s, id);
	return 0;
}
