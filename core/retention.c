#define LOG_PREFIX "retention: "
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fault.h"
#include "image.h"
#include "log.h"
#include "retention.h"
#include "session.h"

#define MAX_IDS 4096

static int find(const uint64_t *ids, int n, uint64_t id)
{
	int lo = 0, hi = n - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (ids[mid] == id)
			return mid;
		if (ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* The parent of this rank's image id: from its commit record, or, where a
 * rank lacks one (a restart rebuilt the image, or was killed before it
 * wrote the record), from the image's verified header. 0 for a full image
 * or when neither can be read. */
static uint64_t parent_of(struct session *s, uint64_t id)
{
	struct commit_record rec;
	struct image *img;
	char path[4200];
	uint64_t parent = 0;

	if (!store_read_commit(&s->store, id, &rec, NULL, 0))
		return rec.parent_id;
	store_path(&s->store, id, STORE_IMAGE, path, sizeof(path));
	if (!image_open(path, &img, NULL, 0)) {
		parent = image_header(img)->parent_id;
		image_close(img);
	}
	return parent;
}

/* keep[] |= checkpoint ids[i] and every image it depends on. */
static void keep_chain(struct session *s, const uint64_t *ids, int n, int i, bool *keep)
{
	while (i >= 0 && !keep[i]) {
		uint64_t parent;

		keep[i] = true;
		parent = parent_of(s, ids[i]);
		i = parent && parent < ids[i] ? find(ids, n, parent) : -1;
	}
}

static int list(struct session *s, uint64_t *ids, bool *keep)
{
	int n = store_list(&s->store, ids, MAX_IDS);

	if (n < 0)
		pr_warn("cannot list %s: %s", s->store.dir, strerror(-n));
	else
		memset(keep, 0, n * sizeof(*keep));
	return n;
}

/* Remove what keep[] does not hold, older than the newest commit and of
 * this run (or adopted by a restart): anything newer belongs to a
 * checkpoint still being written elsewhere, not ours to judge. */
static uint64_t remove_unkept(struct session *s, const uint64_t *ids, int n, const bool *keep,
			      bool dry_run)
{
	uint64_t bytes = 0;

	for (int i = 0; i < n; i++) {
		int ret;

		if (keep[i] || ids[i] > s->last_id || ids[i] < s->own_from)
			continue;
		bytes += retention_bytes(s, ids[i]);
		if (dry_run)
			continue;
		pr_debug("removing checkpoint %llu", (unsigned long long)ids[i]);
		ret = fault_hit_at(FAULT_FAIL_PRUNE, s->last_id) ? -EIO
								 : store_remove(&s->store, ids[i]);
		if (ret)
			pr_warn("cannot remove checkpoint %llu from %s: %s; the next commit tries "
				"again",
				(unsigned long long)ids[i], s->store.dir, strerror(-ret));
	}
	return bytes;
}

void retention_prune(struct session *s)
{
	static uint64_t ids[MAX_IDS];
	static bool keep[MAX_IDS];
	int n = list(s, ids, keep), kept = 0;

	/* Newest first: keep the first STASIS_KEEP complete checkpoints and
	 * every image of their chains back to a full one. */
	for (int i = n - 1; i >= 0 && kept < s->cfg.keep; i--) {
		struct commit_record rec;

		if (ids[i] > s->last_id || store_read_commit(&s->store, ids[i], &rec, NULL, 0))
			continue;
		kept++;
		keep_chain(s, ids, n, i, keep);
	}
	remove_unkept(s, ids, n, keep, false);
}

/* Everything but the newest complete checkpoint and its chain. */
static uint64_t beyond_newest(struct session *s, bool dry_run)
{
	static uint64_t ids[MAX_IDS];
	static bool keep[MAX_IDS];
	int n = list(s, ids, keep);

	if (n <= 0 || !s->last_id)
		return 0;
	keep_chain(s, ids, n, find(ids, n, s->last_id), keep);
	return remove_unkept(s, ids, n, keep, dry_run);
}

uint64_t retention_make_room(struct session *s)
{
	return beyond_newest(s, false);
}

uint64_t retention_spare_bytes(struct session *s)
{
	return beyond_newest(s, true);
}

uint64_t retention_bytes(struct session *s, uint64_t id)
{
	static const enum store_file all[] = {STORE_IMAGE, STORE_REDUNDANCY, STORE_COMMIT};
	uint64_t bytes = 0;
	char path[4200];
	struct stat sb;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		store_path(&s->store, id, all[i], path, sizeof(path));
		if (!lstat(path, &sb))
			bytes += (uint64_t)sb.st_blocks * 512;
	}
	return bytes;
}

uint64_t retention_chain_bytes(struct session *s)
{
	uint64_t bytes = 0, id = s->last_id;

	for (int hops = 0; id && hops < MAX_IDS; hops++) {
		uint64_t parent = parent_of(s, id);

		bytes += retention_bytes(s, id);
		id = parent < id ? parent : 0;
	}
	return bytes;
}
