#define LOG_PREFIX "retention: "
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
static uint64_t parent_of(const struct store *st, uint64_t id)
{
	struct commit_record rec;
	struct image *img;
	char path[4200];
	uint64_t parent = 0;

	if (!store_read_commit(st, id, &rec, NULL))
		return rec.parent_id;
	store_path(st, id, STORE_IMAGE, path, sizeof(path));
	if (!image_open(path, &img, NULL)) {
		parent = image_header(img)->parent_id;
		image_close(img);
	}
	return parent;
}

/* keep[] |= checkpoint ids[i] and every image it depends on. */
static void keep_chain(const struct store *st, const uint64_t *ids, int n, int i, bool *keep)
{
	while (i >= 0 && !keep[i]) {
		uint64_t parent;

		keep[i] = true;
		parent = parent_of(st, ids[i]);
		i = parent && parent < ids[i] ? find(ids, n, parent) : -1;
	}
}

static uint64_t bytes_of(const struct store *st, uint64_t id)
{
	static const enum store_file all[] = {STORE_IMAGE, STORE_REDUNDANCY, STORE_COMMIT,
					      STORE_UNDO};
	uint64_t bytes = 0;
	char path[4200];
	struct stat sb;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		store_path(st, id, all[i], path, sizeof(path));
		if (!lstat(path, &sb))
			bytes += (uint64_t)sb.st_blocks * 512;
	}
	return bytes;
}

/* One listing of a level's directory and what to keep of it. Allocated,
 * not static: the flush level's worker thread prunes too. */
struct listing {
	const struct store *st;
	uint64_t *ids;
	bool *keep;
	int n;
};

static int list(struct listing *l, const struct store *st)
{
	l->st = st;
	l->ids = malloc(MAX_IDS * sizeof(*l->ids));
	l->keep = calloc(MAX_IDS, sizeof(*l->keep));
	l->n = l->ids && l->keep ? store_list(st, l->ids, MAX_IDS) : -ENOMEM;
	return l->n;
}

static void unlist(struct listing *l)
{
	free(l->ids);
	free(l->keep);
}

/* Remove what keep[] does not hold, up to newest and from own_from (this
 * run's, or adopted by a restart): anything newer belongs to a checkpoint
 * still being written elsewhere, not ours to judge. fault_id: the
 * checkpoint STASIS_FAULT's fail-prune is matched against (0: none). */
/* Checkpoint ids[i] goes with its undo record: a checkpoint kept before it
 * (an incremental chain's parent) cannot be put back as it was any more.
 * The mark fds_image.c's restart reads says so. */
static void undo_gone(const struct listing *l, int i)
{
	char path[4200];
	struct stat sb;
	int fd;

	store_path(l->st, l->ids[i], STORE_UNDO, path, sizeof(path));
	if (lstat(path, &sb) || !sb.st_size)
		return;
	for (int j = 0; j < i; j++) {
		if (!l->keep[j])
			continue;
		snprintf(path, sizeof(path), "%s/overwritten.r%d", l->st->dir, l->st->rank);
		fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 ||
		    dprintf(fd, "%llu\ta file whose undo record went with checkpoint %llu\n",
			    (unsigned long long)l->ids[i], (unsigned long long)l->ids[i]) < 0 ||
		    fsync(fd))
			pr_perror("cannot write %s", path);
		if (fd >= 0)
			close(fd);
		return;
	}
}

static uint64_t remove_unkept(const struct listing *l, uint64_t newest, uint64_t own_from,
			      uint64_t fault_id, bool dry_run)
{
	uint64_t bytes = 0;

	for (int i = 0; i < l->n; i++) {
		uint64_t id = l->ids[i];
		int ret;

		if (l->keep[i] || id > newest || id < own_from)
			continue;
		bytes += bytes_of(l->st, id);
		if (dry_run)
			continue;
		pr_debug("removing checkpoint %llu from %s", (unsigned long long)id, l->st->dir);
		if (!fault_id || !fault_hit_at(FAULT_FAIL_PRUNE, fault_id))
			undo_gone(l, i);
		ret = fault_id && fault_hit_at(FAULT_FAIL_PRUNE, fault_id) ? -EIO
									: store_remove(l->st, id);
		if (ret)
			pr_warn("cannot remove checkpoint %llu from %s: %s; the next commit tries "
				"again",
				(unsigned long long)id, l->st->dir, strerror(-ret));
	}
	return bytes;
}

static int prune(const struct store *st, uint64_t newest, uint64_t own_from, int keep_n,
		 uint64_t fault_id)
{
	struct listing l;
	int n = list(&l, st), kept = 0;

	/* Newest first: keep the first keep_n complete checkpoints and every
	 * image of their chains back to a full one. */
	for (int i = n - 1; i >= 0 && kept < keep_n; i--) {
		struct commit_record rec;

		if (l.ids[i] > newest || store_read_commit(st, l.ids[i], &rec, NULL))
			continue;
		kept++;
		keep_chain(st, l.ids, n, i, l.keep);
	}
	if (n > 0)
		remove_unkept(&l, newest, own_from, fault_id, false);
	unlist(&l);
	return n < 0 ? n : 0;
}

int retention_prune_store(const struct store *st, uint64_t newest, uint64_t own_from, int keep_n)
{
	return prune(st, newest, own_from, keep_n, 0);
}

void retention_prune(struct session *s)
{
	int ret = prune(&s->store, s->last_id, s->own_from, s->cfg.keep, s->last_id);

	if (ret)
		pr_warn("cannot list %s: %s", s->store.dir, strerror(-ret));
}

/* Everything but the newest complete checkpoint and its chain. */
static uint64_t beyond_newest(struct session *s, bool dry_run)
{
	struct listing l;
	int n = list(&l, &s->store);
	uint64_t bytes = 0;

	if (n < 0)
		pr_warn("cannot list %s: %s", s->store.dir, strerror(-n));
	if (n > 0 && s->last_id) {
		keep_chain(&s->store, l.ids, n, find(l.ids, n, s->last_id), l.keep);
		bytes = remove_unkept(&l, s->last_id, s->own_from, s->last_id, dry_run);
	}
	unlist(&l);
	return bytes;
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
	return bytes_of(&s->store, id);
}

uint64_t retention_chain_bytes(struct session *s)
{
	uint64_t bytes = 0, id = s->last_id;

	for (int hops = 0; id && hops < MAX_IDS; hops++) {
		uint64_t parent = parent_of(&s->store, id);

		bytes += bytes_of(&s->store, id);
		id = parent < id ? parent : 0;
	}
	return bytes;
}
