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

#define DAT_MAGIC "STFENIXD"
#define DONE_MAGIC "STFENIXC"

struct dat_hdr {
	char magic[8];
	uint32_t version, gid, ts, slot, size, nm;
	uint64_t crc; /* of this header with crc = 0 */
};

struct dat_sec {
	uint32_t mid, dtsize, count, nblocks;
	uint64_t bytes; /* data bytes after the blocks */
	uint64_t crc;	/* of this header (crc = 0), the blocks and the data */
};

struct done_rec {
	char magic[8];
	uint32_t gid, ts, slot, size, nm, reserved;
	uint64_t crc; /* of this record (crc = 0) and the member ids after it */
};

void fx_name(char *buf, size_t len, int gid, int ts, int slot, const char *ext)
{
	if (ts < 0)
		snprintf(buf, len, "%s/g%d.%s", fx.dir, gid, ext);
	else
		snprintf(buf, len, "%s/g%d-t%d.c%d.%s", fx.dir, gid, ts, slot, ext);
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		c += w;
		n -= (size_t)w;
	}
	return 0;
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
		ret = write_all(fd, parts[i].p, parts[i].n);
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

static int read_file(const char *path, unsigned char **out, size_t *len)
{
	int fd = fsutil_open_private(path, O_RDONLY, NULL);
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st)) {
		close(fd);
		return -errno;
	}
	unsigned char *b = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!b) {
		close(fd);
		return -ENOMEM;
	}
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t r = pread(fd, b + got, (size_t)st.st_size - got, (off_t)got);
		if (r <= 0) {
			free(b);
			close(fd);
			return r < 0 ? -errno : -EBADMSG;
		}
		got += (size_t)r;
	}
	close(fd);
	*out = b;
	*len = got;
	return 0;
}

/* The blocks of a mask: runs of stored elements. */
static int mask_blocks(const unsigned char *mask, int count, int32_t *blk)
{
	int n = 0;
	for (int i = 0; i < count;) {
		if (!mask[i]) {
			i++;
			continue;
		}
		int s = i;
		while (i < count && mask[i])
			i++;
		if (blk) {
			blk[2 * n] = s;
			blk[2 * n + 1] = i - 1;
		}
		n++;
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
	struct dat_sec *secs = calloc((size_t)nsec + 1, sizeof(*secs));
	int32_t **blks = calloc((size_t)nsec + 1, sizeof(*blks));
	struct dat_hdr h = {.version = 1, .gid = (uint32_t)g->gid, .ts = (uint32_t)ts,
			    .slot = (uint32_t)g->rank, .size = (uint32_t)g->size,
			    .nm = (uint32_t)nsec};
	if (!parts || !secs || !blks) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(h.magic, DAT_MAGIC, 8);
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
		secs[s] = (struct dat_sec){.mid = (uint32_t)m->mid, .dtsize = (uint32_t)m->dtsize,
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
	struct done_rec r = {.gid = (uint32_t)g->gid, .ts = (uint32_t)ts, .slot = (uint32_t)g->rank,
			     .size = (uint32_t)g->size, .nm = (uint32_t)nm};
	memcpy(r.magic, DONE_MAGIC, 8);
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
	while ((e = readdir(d))) {
		int g, t, s, end = 0;
		if (sscanf(e->d_name, "g%d-t%d.c%d.done%n", &g, &t, &s, &end) == 3 &&
		    !e->d_name[end] && g == gid && s == slot && n < max)
			ts[n++] = t;
	}
	closedir(d);
	qsort(ts, (size_t)n, sizeof(int), by_int);
	return n;
}

/* Parse a .dat; calls fn for each section whose crc is right; -EBADMSG on
 * any damage. */
static int dat_load(int gid, int ts, int slot, unsigned char **buf, size_t *len)
{
	char path[4400];
	fx_name(path, sizeof(path), gid, ts, slot, "dat");
	int ret = read_file(path, buf, len);
	if (ret)
		return ret;
	struct dat_hdr h;
	if (*len < sizeof(h))
		goto bad;
	memcpy(&h, *buf, sizeof(h));
	uint64_t c = h.crc;
	h.crc = 0;
	if (memcmp(h.magic, DAT_MAGIC, 8) || crc64_ecma_refl(0, (void *)&h, sizeof(h)) != c ||
	    h.gid != (uint32_t)gid || h.ts != (uint32_t)ts || h.slot != (uint32_t)slot)
		goto bad;
	size_t at = sizeof(h);
	for (uint32_t i = 0; i < h.nm; i++) {
		struct dat_sec s;
		if (*len - at < sizeof(s))
			goto bad;
		memcpy(&s, *buf + at, sizeof(s));
		uint64_t sc = s.crc;
		s.crc = 0;
		size_t bl = sizeof(int32_t) * 2 * (size_t)s.nblocks;
		if (*len - at - sizeof(s) < bl || *len - at - sizeof(s) - bl < s.bytes)
			goto bad;
		uint64_t cc = crc64_ecma_refl(0, (void *)&s, sizeof(s));
		cc = crc64_ecma_refl(cc, *buf + at + sizeof(s), bl + s.bytes);
		if (cc != sc)
			goto bad;
		at += sizeof(s) + bl + s.bytes;
	}
	if (at != *len)
		goto bad;
	return 0;
bad:
	free(*buf);
	*buf = NULL;
	return -EBADMSG;
}

bool fx_dat_ok(int gid, int ts, int slot)
{
	unsigned char *b;
	size_t len;
	if (dat_load(gid, ts, slot, &b, &len))
		return false;
	free(b);
	return true;
}

int fx_merge(int gid, int ts, int slot, int mid, unsigned char *out, unsigned char *filled,
	     int cap, int dtsize, int *count)
{
	unsigned char *b;
	size_t len;
	int ret = dat_load(gid, ts, slot, &b, &len);
	if (ret)
		return ret;
	struct dat_hdr h;
	memcpy(&h, b, sizeof(h));
	size_t at = sizeof(h);
	ret = -ENOENT;
	for (uint32_t i = 0; i < h.nm; i++) {
		struct dat_sec s;
		memcpy(&s, b + at, sizeof(s));
		const unsigned char *blk = b + at + sizeof(s);
		const unsigned char *data = blk + sizeof(int32_t) * 2 * (size_t)s.nblocks;
		at += sizeof(s) + sizeof(int32_t) * 2 * (size_t)s.nblocks + s.bytes;
		if (s.mid != (uint32_t)mid)
			continue;
		if ((int)s.dtsize != dtsize) {
			ret = -EBADMSG;
			break;
		}
		if ((int)s.count > *count)
			*count = (int)s.count;
		if (!out) { /* asked for the count only */
			ret = 0;
			break;
		}
		if ((int)s.count > cap) {
			ret = -ERANGE;
			break;
		}
		size_t off = 0;
		for (uint32_t k = 0; k < s.nblocks; k++) {
			int32_t be[2];
			memcpy(be, blk + 8 * k, 8);
			for (int e = be[0]; e <= be[1]; e++, off += (size_t)dtsize) {
				if (filled[e])
					continue;
				memcpy(out + (size_t)e * (size_t)dtsize, data + off, (size_t)dtsize);
				filled[e] = 1;
			}
		}
		ret = 0;
		break;
	}
	free(b);
	return ret;
}

int fx_members(int gid, int ts, int slot, int (*mi)[3], int max)
{
	unsigned char *b;
	size_t len;
	int ret = dat_load(gid, ts, slot, &b, &len);
	if (ret)
		return ret;
	struct dat_hdr h;
	memcpy(&h, b, sizeof(h));
	size_t at = sizeof(h);
	int n = 0;
	for (uint32_t i = 0; i < h.nm && n < max; i++) {
		struct dat_sec s;
		memcpy(&s, b + at, sizeof(s));
		at += sizeof(s) + sizeof(int32_t) * 2 * (size_t)s.nblocks + s.bytes;
		mi[n][0] = (int)s.mid, mi[n][1] = (int)s.dtsize, mi[n++][2] = (int)s.count;
	}
	free(b);
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

int fx_write_meta(struct fx_group *g)
{
	char path[4400];
	fx_name(path, sizeof(path), g->gid, -1, 0, "meta");
	int32_t rec[4] = {1, g->policy[0], g->policy[1], g->policy[2]};
	struct iovec_part p = {rec, sizeof(rec)};
	return write_file(path, &p, 1);
}

int fx_read_meta(int gid, int policy[3])
{
	char path[4400];
	fx_name(path, sizeof(path), gid, -1, 0, "meta");
	unsigned char *b;
	size_t len;
	int ret = read_file(path, &b, &len);
	if (ret)
		return ret;
	int32_t rec[4];
	if (len != sizeof(rec)) {
		free(b);
		return -EBADMSG;
	}
	memcpy(rec, b, sizeof(rec));
	free(b);
	if (rec[0] != 1)
		return -EBADMSG;
	memcpy(policy, rec + 1, 3 * sizeof(int));
	return 0;
}

int fx_read_done(int gid, int ts, int slot, int *size)
{
	char path[4400];
	fx_name(path, sizeof(path), gid, ts, slot, "done");
	unsigned char *b;
	size_t len;
	int ret = read_file(path, &b, &len);
	if (ret)
		return ret;
	struct done_rec r;
	ret = -EBADMSG;
	if (len >= sizeof(r)) {
		memcpy(&r, b, sizeof(r));
		uint64_t c = r.crc;
		r.crc = 0;
		uint64_t cc = crc64_ecma_refl(0, (void *)&r, sizeof(r));
		cc = crc64_ecma_refl(cc, b + sizeof(r), len - sizeof(r));
		if (!memcmp(r.magic, DONE_MAGIC, 8) && cc == c &&
		    len == sizeof(r) + 4 * (size_t)r.nm && r.ts == (uint32_t)ts) {
			*size = (int)r.size;
			ret = 0;
		}
	}
	free(b);
	return ret;
}
