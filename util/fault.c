/* The fault points (fault.h), listed in one place. */
#define LOG_PREFIX ""
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "log.h"

/* The name a test writes, and whether a hit is said (a fault that only
 * changes the way a step is done, and a stall, which says it itself, stay
 * quiet). The comment names the failure site. */
static const struct {
	const char *name;
	bool quiet;
} points[FAULT_POINTS] = {
	/* checkpoint.c: listing the application's memory (/proc/self/maps) */
	[FAULT_FAIL_COLLECT] = {"fail-collect", false},
	/* image_write.c: the writer stalls / fails with EIO after about half
	 * of the region data, or writes without O_DIRECT */
	[FAULT_STALL_WRITE] = {"stall-write", true},
	[FAULT_FAIL_WRITE] = {"fail-write", false},
	[FAULT_BUFFERED_WRITE] = {"buffered-write", true},
	/* image_write.c: fdatasync of the image, its rename into place */
	[FAULT_FAIL_IMAGE_SYNC] = {"fail-image-sync", false},
	[FAULT_FAIL_IMAGE_INSTALL] = {"fail-image-install", false},
	/* redundancy/encode.c: reading the files to protect, creating
	 * the redundancy file, the scheme's exchange, writing its header and
	 * meta, renaming it into place; a file to protect truncated by
	 * "someone else" to half its size once the encode has its size */
	[FAULT_FAIL_ENCODE_READ] = {"fail-encode-read", false},
	[FAULT_FAIL_ENCODE_CREATE] = {"fail-encode-create", false},
	[FAULT_FAIL_ENCODE_RUN] = {"fail-encode-run", false},
	[FAULT_FAIL_ENCODE_FINISH] = {"fail-encode-finish", false},
	[FAULT_FAIL_ENCODE_INSTALL] = {"fail-encode-install", false},
	[FAULT_TRUNCATE_ENCODE] = {"truncate-encode", false},
	/* store.c: writing the commit record; retention.c: removing an older
	 * checkpoint after a commit */
	[FAULT_FAIL_COMMIT] = {"fail-commit", false},
	[FAULT_FAIL_PRUNE] = {"fail-prune", false},
	/* redundancy/rebuild.c: creating the files rebuilt into, the
	 * scheme's exchange, one flipped byte in a rebuilt file before its
	 * checksum is checked, renaming the rebuilt files into place */
	[FAULT_FAIL_REBUILD_CREATE] = {"fail-rebuild-create", false},
	[FAULT_FAIL_REBUILD_RUN] = {"fail-rebuild-run", false},
	[FAULT_CORRUPT_REBUILD] = {"corrupt-rebuild", false},
	[FAULT_FAIL_REBUILD_INSTALL] = {"fail-rebuild-install", false},
	/* restore.c: opening an image of the chain, reading a region of it */
	[FAULT_FAIL_RESTORE_OPEN] = {"fail-restore-open", false},
	[FAULT_FAIL_RESTORE_READ] = {"fail-restore-read", false},
};

#define MAX_FAULTS 64

static struct fault {
	enum fault_point point;
	uint64_t id;
	int rank; /* -1: every rank */
} faults[MAX_FAULTS];
static int nfaults;
static uint64_t current_id;

const char *fault_name(enum fault_point p)
{
	return p < FAULT_POINTS ? points[p].name : "?";
}

static int parse_u64(const char *s, const char *end, uint64_t *out)
{
	uint64_t v = 0;

	if (s == end)
		return -EINVAL;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (*s - '0');
	}
	*out = v;
	return 0;
}

/* One "<point>:<id>[@<rank>]" of len bytes at s. */
static int parse_one(const char *s, size_t len, struct fault *f)
{
	const char *end = s + len, *colon = memchr(s, ':', len), *at;
	uint64_t v;
	int p;

	if (!colon)
		return -EINVAL;
	for (p = 0; p < FAULT_POINTS; p++)
		if (strlen(points[p].name) == (size_t)(colon - s) &&
		    !strncmp(points[p].name, s, colon - s))
			break;
	if (p == FAULT_POINTS)
		return -EINVAL;
	f->point = p;
	at = memchr(colon, '@', end - colon);
	if (parse_u64(colon + 1, at ? at : end, &f->id) || !f->id)
		return -EINVAL;
	f->rank = -1;
	if (at) {
		if (parse_u64(at + 1, end, &v) || v > INT32_MAX)
			return -EINVAL;
		f->rank = (int)v;
	}
	return 0;
}

int fault_configure(const char *spec, struct why *why)
{
	struct fault parsed[MAX_FAULTS];
	char names[1024];
	size_t used = 0;
	int n = 0;

	for (const char *s = spec; s && *s;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);

		if (n == MAX_FAULTS || parse_one(s, len, &parsed[n]))
			goto bad;
		n++;
		s = comma ? comma + 1 : s + len;
		if (comma && !*s)
			goto bad; /* a trailing comma: something was cut off */
	}
	memcpy(faults, parsed, n * sizeof(*faults));
	nfaults = n;
	return 0;
bad:
	for (int p = 0; p < FAULT_POINTS && used < sizeof(names); p++)
		used += snprintf(names + used, sizeof(names) - used, "%s%s", p ? ", " : "",
				 points[p].name);
	return why_set(why, -EINVAL,
		       "STASIS_FAULT: '%s' is not a list of <point>:<checkpoint id>[@<rank>] "
		       "(at most %d, ids from 1) with points %s",
		       spec, MAX_FAULTS, names);
}

void fault_set_checkpoint(uint64_t id)
{
	current_id = id;
}

bool fault_hit_at(enum fault_point p, uint64_t id)
{
	for (int i = 0; i < nfaults; i++) {
		const struct fault *f = &faults[i];

		if (f->point != p || f->id != id || (f->rank >= 0 && f->rank != stasis_log_rank))
			continue;
		if (!points[p].quiet)
			pr_warn("fault %s injected in checkpoint %llu", points[p].name,
				(unsigned long long)id);
		errno = EIO;
		return true;
	}
	return false;
}

bool fault_hit(enum fault_point p)
{
	return fault_hit_at(p, current_id);
}

void fault_stall(enum fault_point p, uint64_t id)
{
	pr_err("fault %s hit in checkpoint %llu", fault_name(p), (unsigned long long)id);
	for (;;)
		pause();
}
