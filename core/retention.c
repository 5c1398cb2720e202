#define LOG_PREFIX "retention: "
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

int retention_prune_store(const struct store *st, uint64_t newest, uint64_t own_from, int keep_n)
{
	/* Not static: the flush level's worker thread prunes too. */
	uint64_t *ids = malloc(MAX_IDS * sizeof(*ids));
	bool *keep = calloc(MAX_IDS, sizeof(*keep));
	int n = ids && keep ? store_list(st, ids, MAX_IDS) : -ENOMEM;
	int kept = 0;

	if (n < 0)
		goto out;
	/* Newest first: keep the first keep_n complete checkpoints and every
	 * image of their chains back to a full one. */
	for (int i = n - 1; i >= 0 && kept < keep_n; i--) {
		struct commit_record rec;

		if (ids[i] > newest || store_read_commit(st, ids[i], &rec, NULL, 0))
			continue;
		kept++;
		for (int j = i; j >= 0 && !keep[j];) {
			keep[j] = true;
			if (store_read_commit(st, ids[j], &rec, NULL, 0) || !rec.parent_id)
				break;
			j = find(ids, n, rec.parent_id);
		}
	}
	/* Anything newer than the newest complete one belongs to a checkpoint
	 * still being written elsewhere: not ours to judge. */
	for (int i = 0; i < n; i++) {
		if (keep[i] || ids[i] > newest || ids[i] < own_from)
			continue;
		pr_debug("removing checkpoint %llu from %s", (unsigned long long)ids[i], st->dir);
		store_remove(st, ids[i]);
	}
out:
	free(ids);
	free(keep);
	return n < 0 ? n : 0;
}

void retention_prune(struct session *s)
{
	int ret = retention_prune_store(&s->store, s->last_id, s->own_from, s->cfg.keep);

	if (ret)
		pr_warn("cannot list %s: %s", s->store.dir, strerror(-ret));
}
