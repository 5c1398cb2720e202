#define LOG_PREFIX "retention: "
#include <stdlib.h>
#include <string.h>

#include "fault.h"
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

void retention_prune(struct session *s)
{
	static uint64_t ids[MAX_IDS];
	static bool keep[MAX_IDS];
	int n = store_list(&s->store, ids, MAX_IDS);
	int kept = 0;

	if (n < 0) {
		pr_warn("cannot list %s: %s", s->store.dir, strerror(-n));
		return;
	}
	memset(keep, 0, n * sizeof(*keep));
	/* Newest first: keep the first STASIS_KEEP complete checkpoints and
	 * every image of their chains back to a full one. */
	for (int i = n - 1; i >= 0 && kept < s->cfg.keep; i--) {
		struct commit_record rec;

		if (ids[i] > s->last_id || store_read_commit(&s->store, ids[i], &rec, NULL, 0))
			continue;
		kept++;
		for (int j = i; j >= 0 && !keep[j];) {
			keep[j] = true;
			if (store_read_commit(&s->store, ids[j], &rec, NULL, 0) || !rec.parent_id)
				break;
			j = find(ids, n, rec.parent_id);
		}
	}
	/* Anything newer than the last commit belongs to a checkpoint still
	 * being written elsewhere: not ours to judge. */
	for (int i = 0; i < n; i++) {
		int ret;

		if (keep[i] || ids[i] > s->last_id || ids[i] < s->own_from)
			continue;
		pr_debug("removing checkpoint %llu", (unsigned long long)ids[i]);
		ret = fault_hit_at(FAULT_FAIL_PRUNE, s->last_id) ? -EIO
								: store_remove(&s->store, ids[i]);
		if (ret)
			pr_warn("cannot remove checkpoint %llu from %s: %s; the next commit tries "
				"again",
				(unsigned long long)ids[i], s->store.dir, strerror(-ret));
	}
}
