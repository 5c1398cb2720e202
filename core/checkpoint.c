#define LOG_PREFIX ""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "checkpoint.h"
#include "fault.h"
#include "image.h"
#include "log.h"
#include "redset.h"
#include "regions.h"
#include "retention.h"
#include "safepoint.h"
#include "session.h"
#include "state.h"
#include "tracking.h"

#define MAX_REGIONS 512

/* Runtime globals (never restored): the state captured for the image, and
 * the flag a restore sets in the new process before jumping back here. */
static struct saved_state captured;
static volatile int resuming;
static volatile uint64_t resumed_id;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
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
			 struct image_region *regions, int n)
{
	char path[4300], err[512];
	struct image_header full = *hdr;

	snprintf(path, sizeof(path), "%s/shadow", s->store.dir);
	if (mkdir(path, 0700) && errno != EEXIST)
		return;
	snprintf(path, sizeof(path), "%s/shadow/ckpt-%llu.r%d.img", s->store.dir,
		 (unsigned long long)hdr->ckpt_id, s->rank);
	for (int i = 0; i < n; i++)
		regions[i].dirty = NULL;
	full.kind = IMAGE_FULL;
	full.parent_id = 0;
	if (image_write(path, &full, regions, n, NULL, err, sizeof(err)))
		pr_warn("shadow image: %s", err);
}

/* Write this rank's image of checkpoint id, incremental on top of the last
 * committed one when tracking allows. The stack is saved from just below
 * the captured stack pointer (the red zone included). */
static int write_image(struct session *s, uint64_t id, bool *incremental, uint64_t *bytes,
		       char *err, size_t errlen)
{
	static struct region regions[MAX_REGIONS];
	static struct image_region out[MAX_REGIONS + 1];
	struct image_header hdr;
	char path[4200];
	uintptr_t sp = (uintptr_t)captured.context.uc_mcontext.gregs[REG_RSP];
	int n = fault_hit(FAULT_FAIL_COLLECT) ? -EIO : regions_collect(regions, MAX_REGIONS, sp - 256);
	int ret;
	void *mpi_state;
	size_t mpi_len;

	*incremental = false;
	if (n < 0) {
		snprintf(err, errlen, "cannot list the application's memory: %s", strerror(-n));
		return n;
	}
	/* The program's MPI objects: made again by a restart before its
	 * memory is put back (mpi/state.h). */
	ret = mpi_state_save(&mpi_state, &mpi_len, err, errlen);
	if (ret)
		return ret;
	*incremental = tracking_prepare(s, regions, n, out) && s->last_id;
	/* All ranks write the same kind, so that every chain, and the
	 * redundancy of every image in it, exists on every rank. */
	PMPI_Allreduce(MPI_IN_PLACE, incremental, 1, MPI_C_BOOL, MPI_LAND, s->comm);
	if (!*incremental)
		for (int i = 0; i < n; i++)
			out[i].dirty = NULL;
	out[n++] = (struct image_region){(uintptr_t)mpi_state, mpi_len, REGION_MPI, NULL};
	memset(&hdr, 0, sizeof(hdr));
	hdr.ckpt_id = id;
	hdr.parent_id = *incremental ? s->last_id : 0;
	hdr.kind = *incremental ? IMAGE_INCREMENTAL : IMAGE_FULL;
	hdr.rank = s->rank;
	hdr.nranks = s->size;
	hdr.exe_hash = s->exe_hash;
	hdr.args_hash = s->args_hash;
	hdr.state_size = sizeof(captured);
	memcpy(hdr.state, &captured, sizeof(captured));
	store_path(&s->store, id, STORE_IMAGE, path, sizeof(path));
	ret = image_write(path, &hdr, out, n, bytes, err, errlen);
	if (!ret && *incremental && getenv("STASIS_SHADOW_FULL"))
		write_shadow(s, &hdr, out, n);
	return ret;
}

/* Collective over this rank's redundancy set. */
static int encode(struct session *s, uint64_t id, char *err, size_t errlen)
{
	char image[64], red[64];
	const char *names[] = {image};

	store_name(s->rank, id, STORE_IMAGE, image, sizeof(image));
	store_name(s->rank, id, STORE_REDUNDANCY, red, sizeof(red));
	return redset_encode(s->redset, s->store.dir, names, 1, red, err, errlen);
}

int checkpoint_take(struct session *s)
{
	char err[512] = "";
	uint64_t id = s->next_id++, bytes = 0, total_bytes = 0;
	double t0 = now(), ms, max_ms;
	int ok, all_ok, ret, any_incremental;
	bool incremental;
	struct commit_record rec;

	/* Output the program wrote before the checkpoint must not sit in a
	 * buffer of this process only. */
	fflush(NULL);
	captured.canary = read_canary();
	captured.depth = stasis_depth;
	captured.safepoint_index = safepoint_index();
	captured.ckpt_id = id;
	getcontext(&captured.context);
	if (resuming) {
		/* A restart jumped here: everything above is the image's state. */
		resuming = 0;
		s->last_id = resumed_id;
		mpi_state_resumed();
		safepoint_resumed(captured.safepoint_index);
		if (s->rank == 0 && s->cfg.verbose >= 1)
			fprintf(stderr, "stasis: resumed from checkpoint %llu\n",
				(unsigned long long)resumed_id);
		return CHECKPOINT_RESUMED;
	}

	fault_set_checkpoint(id);
	/* Phase 1: every rank writes and syncs its image, then its set's
	 * redundancy data: a checkpoint is complete only with both. */
	ret = write_image(s, id, &incremental, &bytes, err, sizeof(err));
	ok = ret == 0;
	if (!ok)
		pr_err("checkpoint %llu: %s", (unsigned long long)id, err);
	PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, s->comm);
	if (all_ok && s->redset) {
		ret = encode(s, id, err, sizeof(err));
		ok = ret == 0;
		if (!ok)
			pr_err("checkpoint %llu: %s", (unsigned long long)id, err);
		PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, s->comm);
	}
	tracking_committed(s, all_ok, incremental);
	if (!all_ok) {
		store_remove(&s->store, id);
		if (s->rank == 0)
			pr_warn("checkpoint %llu failed on some rank; the previous checkpoint "
				"stays the newest",
				(unsigned long long)id);
		return ret ? ret : -EIO;
	}

	/* Phase 2: every image is on disk; record it complete, then prune. */
	memset(&rec, 0, sizeof(rec));
	rec.ckpt_id = id;
	rec.parent_id = incremental ? s->last_id : 0;
	rec.nranks = s->size;
	rec.image_bytes = bytes;
	ret = store_commit(&s->store, &rec, err, sizeof(err));
	if (ret)
		pr_err("checkpoint %llu: %s", (unsigned long long)id, err);
	s->last_id = id;
	if (!ret) /* without our own record, our newest would look incomplete */
		retention_prune(s);

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
	return 0;
}
