/* Fenix snapshot files (fenix_int.h says the layout): written whole as a
 * tmp file, fsync'd and renamed, so a kill leaves the old file or the new
 * one; the commit record last, so a snapshot half written never counts. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fenix_int.h"
#include "fsutil.h"
#include "fx_file.h"

void fx_name(char *buf, size_t len, int gid, int ts, int slot, const char *ext)
{
	if (ts < 0)
		snprintf(buf, len, "%s/g%d.%s", fx.dir, gid, ext);
	else
		snprintf(buf, len, "%s/g%d-t%d.c%d.%s", fx.dir, gid, ts, slot, ext);
}

struct iovec_part {
	const void *p;
	size_t n;
};

/* Write path from parts through path.tmp: the old file stays until the new
 * one is whole on disk. */
static int write_file(const char *path, const struct iovec_part *parts, int n)
{
	char tmp[4400];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int ret = 0;
	for (int i = 0; i < n && !ret; i++)
		ret = fsutil_write_all(fd, parts[i].p, parts[i].n);
	if (!ret && fsync(fd))
		ret = -errno;
	close(fd);
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		unlink(tmp);
		return ret;
	}
	return fsutil_sync_parent(path);
}

/* The blocks of a mask (a byte per element, 0 or 1): runs of stored
 * elements, found with memchr, which scans many bytes at a time (a byte
 * loop cost 9% of a 64 MiB store). */
static int mask_blocks(const unsigned char *mask, int count, int32_t *blk)
{
	const unsigned char *end = mask + count, *p = mask;
	int n = 0;

	while (p < end && (p = memchr(p, 1, (size_t)(end - p)))) {
		const unsigned char *q = memchr(p, 0, (size_t)(end - p));

		q = q ? q : end;
		if (blk) {
			blk[2 * n] = (int32_t)(p - mask);
			blk[2 * n + 1] = (int32_t)(q - mask - 1);
		}
		n++;
		p = q;
	}
	return n;
}

int fx_write_dat(struct fx_group *g, int ts, struct why *why)
{
	char path[4400];
	fx_name(path, sizeof(path), g->gid, ts, g->rank, "dat");
	int nsec = 0, nparts = 1, k = 0, ret = 0;
	/* A member with nothing stored since the last commit has no section. */
	for (int i = 0; i < g->nm; i++) {
		int nb = g->m[i].stage ? mask_blocks(g->m[i].mask, g->m[i].stage_count, NULL) : 0;
		nsec += nb > 0;
		nparts += nb > 0 ? 2 + nb : 0;
	}
	/* The data goes to the file straight from the staging copy, block by
	 * block: no second copy of what may be most of memory. */
	struct iovec_part *parts = calloc((size_t)nparts, sizeof(*parts));
	struct fx_dat_sec *secs = calloc((size_t)nsec + 1, sizeof(*secs));
	int32_t **blks = calloc((size_t)nsec + 1, sizeof(*blks));
	struct fx_dat_hdr h = {.version = 1, .gid = (uint32_t)g->gid, .ts = (uint32_t)ts,
			    .slot = (uint32_t)g->rank, .size = (uint32_t)g->size,
			    .nm = (uint32_t)nsec};
	if (!parts || !secs || !blks) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(h.magic, FX_DAT_MAGIC, 8);
	h.crc = crc64_ecma_refl(0, (const unsigned char *)&h, sizeof(h));
	parts[k++] = (struct iovec_part){&h, sizeof(h)};
	for (int i = 0, s = 0; i < g->nm; i++) {
		struct fx_member *m = &g->m[i];
		int nb = m->stage ? mask_blocks(m->mask, m->stage_count, NULL) : 0;
		if (!nb)
			continue;
		blks[s] = malloc(sizeof(int32_t) * 2 * (size_t)(nb ? nb : 1));
		if (!blks[s]) {
			ret = -ENOMEM;
			goto out;
		}
		mask_blocks(m->mask, m->stage_count, blks[s]);
		size_t bytes = 0;
		for (int b = 0; b < nb; b++)
			bytes += (size_t)(blks[s][2 * b + 1] - blks[s][2 * b] + 1) * (size_t)m->dtsize;
		secs[s] = (struct fx_dat_sec){.mid = (uint32_t)m->mid, .dtsize = (uint32_t)m->dtsize,
					   .count = (uint32_t)m->stage_count, .nblocks = (uint32_t)nb,
					   .bytes = bytes};
		uint64_t c = crc64_ecma_refl(0, (const unsigned char *)&secs[s], sizeof(secs[s]));
		c = crc64_ecma_refl(c, (const unsigned char *)blks[s], sizeof(int32_t) * 2 * (size_t)nb);
		parts[k++] = (struct iovec_part){&secs[s], sizeof(secs[s])};
		parts[k++] = (struct iovec_part){blks[s], sizeof(int32_t) * 2 * (size_t)nb};
		for (int b = 0; b < nb; b++) {
			size_t len = (size_t)(blks[s][2 * b + 1] - blks[s][2 * b] + 1) * (size_t)m->dtsize;
			const unsigned char *p = m->stage + (size_t)blks[s][2 * b] * (size_t)m->dtsize;
			c = crc64_ecma_refl(c, p, len);
			parts[k++] = (struct iovec_part){p, len};
		}
		secs[s].crc = c;
		s++;
	}
	ret = write_file(path, parts, k);
	if (ret)
		why_set(why, ret, "fenix: cannot write %s: %s", path, strerror(-ret));
out:
	for (int s = 0; s < nsec; s++)
		if (blks)
			free(blks[s]);
	free(parts);
	free(secs);
	free(blks);
	if (ret == -ENOMEM)
		why_set(why, ret, "fenix: out of memory writing snapshot %d", ts);
	return ret;
}

int fx_write_done(struct fx_group *g, int ts, struct why *why)
{
	char path[4400];
	fx_name(path, sizeof(path), g->gid, ts, g->rank, "done");
	uint32_t mids[g->nm + 1];
	int nm = 0;
	for (int i = 0; i < g->nm; i++)
		mids[nm++] = (uint32_t)g->m[i].mid;
	struct fx_done_rec r = {.gid = (uint32_t)g->gid, .ts = (uint32_t)ts, .slot = (uint32_t)g->rank,
			     .size = (uint32_t)g->size, .nm = (uint32_t)nm};
	memcpy(r.magic, FX_DONE_MAGIC, 8);
	uint64_t c = crc64_ecma_refl(0, (const unsigned char *)&r, sizeof(r));
	r.crc = crc64_ecma_refl(c, (const unsigned char *)mids, sizeof(uint32_t) * (size_t)nm);
	struct iovec_part parts[2] = {{&r, sizeof(r)}, {mids, sizeof(uint32_t) * (size_t)nm}};
	int ret = write_file(path, parts, 2);
	if (ret)
		why_set(why, ret, "fenix: cannot write %s: %s", path, strerror(-ret));
	return ret;
}

static int by_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

int fx_list_done(int gid, int slot, int *ts, int max)
{
	DIR *d = opendir(fx.dir);
	if (!d)
		return -errno;
	int n = 0;
	struct dirent *e;
	/* A snapshot at or past the group's next ts was committed by a run
	 * that stasis-restart rolled back (the program's memory is from an
	 * earlier checkpoint): not this run's, and replaced as this run
	 * commits those ts again. */
	const struct fx_group *grp = fx_group_find(gid);
	while ((e = readdir(d))) {
		int g, t, s, end = 0;
		if (sscanf(e->d_name, "g%d-t%d.c%d.done%n", &g, &t, &s, &end) == 3 &&
		    !e->d_name[end] && g == gid && s == slot && n < max &&
		    (!grp || t < grp->next_ts))
			ts[n++] = t;
	}
	closedir(d);
	qsort(ts, (size_t)n, sizeof(int), by_int);
	return n;
}

bool fx_dat_present(const struct fx_group *g, int ts)
{
	char path[4400];
	struct stat st;

	fx_name(path, sizeof(path), g->gid, ts, g->rank, "dat");
	return !stat(path, &st);
}

bool fx_dat_ok(int gid, int ts, int slot)
{
	struct fx_dat d;
	if (fx_dat_load(fx.dir, gid, ts, slot, &d, NULL, 0))
		return false;
	fx_dat_free(&d);
	return true;
}

int fx_merge(int gid, int ts, int slot, int mid, unsigned char *out, unsigned char *filled,
	     int cap, int dtsize, int *count)
{
	struct fx_dat d;
	struct fx_sec s;
	int ret = fx_dat_load(fx.dir, gid, ts, slot, &d, NULL, 0);
	if (ret)
		return ret;
	ret = -ENOENT;
	for (fx_dat_first(&d, &s); fx_dat_next(&d, &s);) {
		if (s.s.mid != (uint32_t)mid)
			continue;
		if ((int)s.s.dtsize != dtsize) {
			ret = -EBADMSG;
			break;
		}
		if ((int)s.s.count > *count)
			*count = (int)s.s.count;
		if (!out) { /* asked for the count only */
			ret = 0;
			break;
		}
		if ((int)s.s.count > cap) {
			ret = -ERANGE;
			break;
		}
		size_t off = 0;
		for (uint32_t k = 0; k < s.s.nblocks; k++) {
			int32_t be[2];
			memcpy(be, s.blocks + 8 * k, 8);
			for (int e = be[0]; e <= be[1]; e++, off += (size_t)dtsize) {
				if (filled[e])
					continue;
				memcpy(out + (size_t)e * (size_t)dtsize, s.data + off, (size_t)dtsize);
				filled[e] = 1;
			}
		}
		ret = 0;
		break;
	}
	fx_dat_free(&d);
	return ret;
}

int fx_members(int gid, int ts, int slot, int (*mi)[3], int max)
{
	struct fx_dat d;
	struct fx_sec s;
	int ret = fx_dat_load(fx.dir, gid, ts, slot, &d, NULL, 0);
	if (ret)
		return ret;
	int n = 0;
	for (fx_dat_first(&d, &s); n < max && fx_dat_next(&d, &s); n++)
		mi[n][0] = (int)s.s.mid, mi[n][1] = (int)s.s.dtsize, mi[n][2] = (int)s.s.count;
	fx_dat_free(&d);
	return n;
}

int fx_remove_snapshot(int gid, int ts, int slot)
{
	/* The commit record first: a half-removed snapshot is never complete. */
	static const char *const ext[] = {"done", "dat", "red"};
	char path[4400];
	for (int i = 0; i < 3; i++) {
		fx_name(path, sizeof(path), gid, ts, slot, ext[i]);
		if (unlink(path) && errno != ENOENT)
			return -errno;
	}
	return fsutil_sync_dir(fx.dir);
}

/* Version 2: the policy, depth and start_ts, for stasis-inspect. */
int fx_write_meta(struct fx_group *g)
{
	char path[4400];
	fx_name(path, sizeof(path), g->gid, -1, 0, "meta");
	int32_t rec[6] = {2, g->policy[0], g->policy[1], g->policy[2], g->depth, g->start_ts};
	struct iovec_part p = {rec, sizeof(rec)};
	return write_file(path, &p, 1);
}

int fx_read_meta(int gid, int policy[3])
{
	struct fx_meta m;
	int ret = fx_meta_load(fx.dir, gid, &m);
	if (!ret)
		memcpy(policy, m.policy, 3 * sizeof(int));
	return ret;
}

int fx_read_done(int gid, int ts, int slot, int *size)
{
	struct fx_done_rec r;
	int ret = fx_done_load(fx.dir, gid, ts, slot, &r, NULL);
	if (!ret)
		*size = (int)r.size;
	return ret;
}
