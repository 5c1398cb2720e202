#define LOG_PREFIX ""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include "runtime.h"
#include "arena.h"
#include "checkpoint.h"
#include "fault.h"
#include "flush.h"
#include "interval_auto.h"
#include "image.h"
#include "log.h"
#include "parts.h"
#include "redundancy.h"
#include "regions.h"
#include "restore.h"
#include "restore_read.h"
#include "session.h"

#define MAX_IDS 4096
#define TEMP_STACK_SIZE (1 << 20)

enum verdict { USABLE = 0, UNUSABLE = 1, FATAL = 2 };

#define MAX_CHAIN 256

/* The chosen checkpoint's chain of images (newest first, back to a full
 * one), opened and verified (restore_read.h); runtime globals because the
 * jump runs on another stack. */
static struct restore_image chain[MAX_CHAIN];
static int nchain;
static struct saved_state target;
static uint64_t target_id;
static ucontext_t trampoline;
static char temp_stack[TEMP_STACK_SIZE] __attribute__((aligned(64)));

static uint64_t newest_committed_below(struct session *s, uint64_t below)
{
	static uint64_t ids[MAX_IDS];
	int n = store_list(&s->store, ids, MAX_IDS);
	struct commit_record rec;

	for (int i = n - 1; i >= 0; i--)
		if (ids[i] < below && store_read_commit(&s->store, ids[i], &rec, NULL) == 0)
			return ids[i];
	return 0;
}

static uint64_t allreduce_max(struct session *s, uint64_t v)
{
	uint64_t out;
	PMPI_Allreduce(&v, &out, 1, MPI_UINT64_T, MPI_MAX, s->comm);
	return out;
}

static void unload(void)
{
	for (int c = 0; c < nchain; c++)
		restore_read_release(&chain[c]);
	nchain = 0;
}

/* Open image id of this rank and check that it belongs to this run. */
static enum verdict load_image(struct session *s, uint64_t id, struct restore_image *l,
			       struct why *why)
{
	char path[4200];
	const struct image_header *h;

	store_path(&s->store, id, STORE_IMAGE, path, sizeof(path));
	if (fault_hit_at(FAULT_FAIL_RESTORE_OPEN, id)) {
		why_set(why, -errno, "%s: %s", path, strerror(errno));
		return UNUSABLE;
	}
	if (image_open(path, &l->img, why))
		return UNUSABLE;
	h = image_header(l->img);
	if (h->nranks != (uint32_t)s->size) {
		why_set(why, -EBADMSG, "checkpoint %llu was taken with %u ranks, this run has %d",
			(unsigned long long)id, h->nranks, s->size);
		return FATAL;
	}
	if (h->exe_hash != s->exe_hash) {
		why_set(why, -EBADMSG,
			"checkpoint %llu was taken by a different executable than /proc/self/exe "
			"(%s)",
			(unsigned long long)id, s->job);
		return FATAL;
	}
	if (h->stasis_hash != s->stasis_hash) {
		/* The saved stack returns into stasis's code: another build's
		 * code at those addresses would run the program on wrong state. */
		why_set(why, -EBADMSG,
			"checkpoint %llu was taken by another build of stasis (libstasis.so "
			"differs): restart with the stasis that took it",
			(unsigned long long)id);
		return FATAL;
	}
	if (h->args_hash != s->args_hash) {
		why_set(why, -EBADMSG,
			"checkpoint %llu was taken with other program arguments: restart with "
			"the command line of the run it continues",
			(unsigned long long)id);
		return FATAL;
	}
	if (h->rank != (uint32_t)s->rank || h->ckpt_id != id ||
	    h->state_size != sizeof(struct saved_state)) {
		why_set(why, -EBADMSG, "%s: header does not describe rank %d, checkpoint %llu",
			path, s->rank, (unsigned long long)id);
		return UNUSABLE;
	}
	return USABLE;
}

/* Load checkpoint id: open its image and its parents' back to a full one
 * (headers and tables checked), then read and verify every region of
 * each while the memory they go to is populated (restore_read.h). */
static enum verdict load(struct session *s, uint64_t id, struct why *why)
{
	uint64_t next = id;
	enum verdict v;

	while (next) {
		if (nchain == MAX_CHAIN) {
			why_set(why, -EBADMSG, "checkpoint %llu: chain of more than %d images",
				(unsigned long long)id, MAX_CHAIN);
			return UNUSABLE;
		}
		v = load_image(s, next, &chain[nchain++], why);
		if (v != USABLE)
			return v;
		next = image_header(chain[nchain - 1].img)->parent_id;
		if (next >= image_header(chain[nchain - 1].img)->ckpt_id) {
			why_set(why, -EBADMSG, "checkpoint %llu: parent %llu is not older",
				(unsigned long long)id, (unsigned long long)next);
			return UNUSABLE;
		}
	}
	if (restore_read_prepare(chain, nchain)) {
		why_set(why, -EBADMSG, "cannot map the application arena for checkpoint %llu",
			(unsigned long long)id);
		return UNUSABLE;
	}
	for (int c = 0; c < nchain; c++)
		if (restore_read_verify(&chain[c], image_header(chain[c].img)->ckpt_id, why))
			return UNUSABLE;
	memcpy(&target, image_header(chain[0].img)->state, sizeof(target));
	return USABLE;
}

/* Runs on temp_stack: the main stack is part of what it overwrites. */
static void jump_into_image(void)
{
	/* Everything but the stacks was written back by restore_read_apply:
	 * the stacks now, then the arena's own state, then the parts (parts.h,
	 * ON_TEMP_STACK: protections, streams, threads last). */
	restore_read_stacks(chain, nchain);
	arena_finish_restore();
	parts_run_void(STAGE_ON_TEMP_STACK, true);
	stasis_depth = target.depth;
	checkpoint_prepare_resume(target_id);
	/* Frames restored from the image carry the old process's stack canary;
	 * the main thread adopts it (threads keep their own copies). */
	__asm__ volatile("mov %0, %%fs:0x28" : : "r"(target.canary) : "memory");
	target.context.uc_mcontext.fpregs = &target.context.__fpregs_mem;
	setcontext(&target.context);
	abort(); /* setcontext returns only on error */
}

/* Before giving up on checkpoint id: rebuild, image by image down its
 * chain, the files that some ranks lost or hold damaged, from the
 * redundancy data of their sets. Collective; 0 when every image of the
 * chain is whole again on every rank, else -EUCLEAN with why set (by the
 * codec, naming the set, the lost ranks and the tolerance). */
static int rebuild_chain(struct session *s, uint64_t id, struct why *out)
{
	/* redset_rebuild still says why in a char buffer: its line is left
	 * to the conversion of redundancy/, the cause copied into out. */
	char why[sizeof(out->msg)] = "";
	size_t len = sizeof(why);

	while (id) {
		char path[4200], red[64];
		struct why rebuilt = WHY_INIT;
		struct image *img = NULL;
		int have = 0, all_have, ok;
		uint64_t parent = 0;

		fault_set_checkpoint(id);
		store_path(&s->store, id, STORE_IMAGE, path, sizeof(path));
		if (!image_open(path, &img, NULL)) {
			have = image_verify(img, NULL) == 0;
			parent = image_header(img)->parent_id;
			image_close(img);
		}
		PMPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_LAND, s->comm);
		if (!all_have) {
			store_name(s->rank, id, STORE_REDUNDANCY, red, sizeof(red));
			ok = redundancy_rebuild(s->redset, s->store.dir, red, have, &rebuilt) == 0;
			if (!ok)
				snprintf(why, len, "%s", rebuilt.msg);
			PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, s->comm);
			if (!ok)
				return why[0] ? why_set(out, -EUCLEAN, "%s", why) : -EUCLEAN;
			if (!have)
				s->images_rebuilt = true;
			if (!have && !image_open(path, &img, NULL)) {
				parent = image_header(img)->parent_id;
				image_close(img);
			}
			if (s->rank == 0)
				pr_warn("checkpoint %llu: rebuilt lost or damaged images from the "
					"%s redundancy of their sets",
					(unsigned long long)id, s->cfg.scheme);
		}
		id = allreduce_max(s, parent);
	}
	return 0;
}

/* What every restart stage is handed (session/part.h): the sections of
 * the newest image, and every memory region of the chain (each once). */
static void restart_input(uint64_t id, struct restart_input *in)
{
	static struct region mem[4096];
	int n = 0;

	memset(in, 0, sizeof(*in));
	in->id = id;
	for (uint32_t kind = SECTION_FIRST; kind <= SECTION_LAST; kind++) {
		in->sections[kind].kind = kind;
		in->sections[kind].data = restore_read_kept(&chain[0], kind, &in->sections[kind].len);
	}
	for (int c = 0; c < nchain; c++) {
		const struct region_record *cr = image_regions(chain[c].img);

		for (size_t i = 0; i < image_header(chain[c].img)->nregions; i++) {
			struct region m = {cr[i].addr, cr[i].addr + cr[i].length, cr[i].kind};
			int k = 0;

			while (k < n && (mem[k].start != m.start || mem[k].end != m.end))
				k++;
			if (cr[i].kind < SECTION_FIRST && k == n &&
			    n < (int)(sizeof(mem) / sizeof(mem[0])))
				mem[n++] = m;
		}
	}
	in->memory = mem;
	in->nmemory = n;
}

/* The chosen checkpoint is complete (some rank holds its record) and every
 * image of its chain verified on every rank: a rank without a record of
 * one of them (rebuilt, or killed before it wrote one) writes it now, so
 * that its retention keeps the chain like any other. */
static void complete_records(struct session *s)
{
	for (int c = 0; c < nchain; c++) {
		const struct image_header *h = image_header(chain[c].img);
		struct commit_record rec = {
		    .ckpt_id = h->ckpt_id, .parent_id = h->parent_id, .nranks = h->nranks};
		struct commit_record have;

		if (store_read_commit(&s->store, h->ckpt_id, &have, NULL))
			store_commit(&s->store, &rec, NULL);
	}
}


static double monotonic(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Load checkpoint id on every rank: from the node-local level when it is
 * committed there, rebuilding lost or damaged files through the redundancy
 * sets if some rank cannot load its own, else from the flush level when it
 * is complete there. Collective; the worst verdict of any rank, *v this
 * rank's, why its reason (empty on a rank that has none of its own). */
static int try_load(struct session *s, uint64_t id, bool local, bool flushed, enum verdict *v,
		    struct why *why, bool *heavy)
{
	int worst = UNUSABLE;

	why_clear(why);
	*v = UNUSABLE;
	if (local) {
		*v = load(s, id, why);
		PMPI_Allreduce(v, &worst, 1, MPI_INT, MPI_MAX, s->comm);
	}
	if (local && worst == UNUSABLE && redundancy_tolerance(s->redset)) {
		unload();
		/* From here why is the rebuild's: a rank whose own set was
		 * whole has none, and must not pass on a stale one. */
		why_clear(why);
		*v = UNUSABLE;
		if (rebuild_chain(s, id, why) == 0) {
			*heavy = true;
			*v = load(s, id, why);
			PMPI_Allreduce(v, &worst, 1, MPI_INT, MPI_MAX, s->comm);
		}
	}
	if (worst == UNUSABLE && flushed) {
		unload();
		if (local && *v == UNUSABLE && why_said(why))
			pr_warn("checkpoint %llu cannot be used from %s: %s",
				(unsigned long long)id, s->store.dir, why->msg);
		why_clear(why);
		*v = UNUSABLE;
		if (flush_fetch(s, id, why) == 0) {
			*heavy = true;
			*v = load(s, id, why);
			PMPI_Allreduce(v, &worst, 1, MPI_INT, MPI_MAX, s->comm);
		}
	}
	return worst;
}

/* The chain is loaded and verified on every rank: run the restart stages
 * (session/part.h), write the memory back and jump into the image. Returns
 * only on failure (-errno, cause printed). */
static int resume_from(struct session *s, uint64_t id, double t0, bool heavy)
{
	static struct restart_input in;
	struct why why = WHY_INIT;
	double t1;

	target_id = id;
	complete_records(s);
	/* Each stage agreed by every rank: nothing of this process changes
	 * before CHECK passed, nothing of its memory before VERIFY did. */
	restart_input(id, &in);
	if (parts_restart_stage(s, STAGE_CHECK, &in) || parts_restart_stage(s, STAGE_RECREATE, &in) ||
	    parts_restart_stage(s, STAGE_VERIFY, &in))
		return -EINVAL;
	/* From here memory is overwritten: a failure stops the process. */
	t1 = monotonic();
	if (restore_read_apply(chain, nchain, &why)) {
		pr_err("checkpoint %llu: cannot put the program's memory back: %s",
		       (unsigned long long)id, why.msg);
		return -EIO;
	}
	if (parts_restart_stage(s, STAGE_REATTACH, &in))
		return -EIO;
	pr_debug("checkpoint %llu: chain of %d image(s) verified and MPI objects made in %.0f ms, "
		 "memory put back in %.0f ms",
		 (unsigned long long)id, nchain, (t1 - t0) * 1e3, (monotonic() - t1) * 1e3);
	interval_auto_restarted(s, monotonic() - t0, heavy);
	getcontext(&trampoline);
	trampoline.uc_stack.ss_sp = temp_stack;
	trampoline.uc_stack.ss_size = sizeof(temp_stack);
	trampoline.uc_link = NULL;
	makecontext(&trampoline, jump_into_image, 0);
	setcontext(&trampoline);
	return -EFAULT;
}

/* Candidates come from both levels, newest first: a checkpoint committed on
 * the node-local level is loaded from there (rebuilding lost files through
 * the redundancy sets if need be); one the node-local level cannot give
 * back is fetched from the flush level when it is complete there. */
int restore_latest(struct session *s)
{
	struct why why = WHY_INIT, newest = WHY_INIT;
	uint64_t cand, flushed, id = 0, why_at = 0;
	double t0 = monotonic();
	bool heavy = false, local;
	enum verdict v;
	int worst;

	cand = allreduce_max(s, newest_committed_below(s, UINT64_MAX));
	flushed = flush_complete_below(s, UINT64_MAX);
	if (!cand && !flushed) {
		if (s->rank == 0)
			pr_err("no complete checkpoint of '%s' in %s (STASIS_DIR)%s%s to restart from",
			       s->job, s->cfg.dir, s->cfg.flush_dir[0] ? " nor in " : "",
			       s->cfg.flush_dir[0] ? s->cfg.flush_dir : "");
		return -ENOENT;
	}
	while (cand || flushed) {
		id = cand > flushed ? cand : flushed;
		local = cand == id;
		worst = try_load(s, id, local, flushed == id, &v, &why, &heavy);
		if (worst == USABLE)
			return resume_from(s, id, t0, heavy);
		unload();
		/* Ranks without a reason of their own (their set was whole, the
		 * checkpoint failed elsewhere) neither warn nor report. */
		if (!why_said(&newest) && v != USABLE && why_said(&why)) {
			newest = why;
			why_prefix(&newest, "checkpoint %llu", (unsigned long long)id);
			why_at = id;
		}
		if (worst == FATAL) {
			session_report(s, v == FATAL, why.msg);
			return -EINVAL;
		}
		if (v == UNUSABLE && why_said(&why))
			pr_warn("checkpoint %llu cannot be used: %s", (unsigned long long)id,
				why.msg);
		if (local)
			cand = allreduce_max(s, newest_committed_below(s, id));
		if (flushed == id)
			flushed = flush_complete_below(s, id);
	}
	/* None usable: the newest checkpoint's reason, from the lowest rank
	 * that has one (rank 0 alone if none has). */
	{
		char line[sizeof(newest.msg) + 64];
		uint64_t at = allreduce_max(s, why_at);

		snprintf(line, sizeof(line), "no usable checkpoint to restart from%s%s",
			 why_said(&newest) ? ": " : "", newest.msg);
		session_report(s, at ? why_said(&newest) && why_at == at : s->rank == 0, line);
	}
	return -EBADMSG;
}
