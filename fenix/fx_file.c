/* Readers of the Fenix snapshot files (fx_file.h), shared by libfenix and
 * stasis-inspect; no MPI here (the library it is built into has none). */
#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "fx_file.h"

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

#define BAD(...)                                                                                   \
	do {                                                                                       \
		if (err)                                                                           \
			snprintf(err, errlen, __VA_ARGS__);                                        \
		goto bad;                                                                          \
	} while (0)

int fx_dat_load(const char *dir, int gid, int ts, int slot, struct fx_dat *d, char *err,
		size_t errlen)
{
	char path[4400];
	snprintf(path, sizeof(path), "%s/g%d-t%d.c%d.dat", dir, gid, ts, slot);
	*d = (struct fx_dat){0};
	int ret = read_file(path, &d->buf, &d->len);
	if (ret) {
		if (err)
			snprintf(err, errlen, "%s", strerror(-ret));
		return ret;
	}
	struct fx_dat_hdr h;
	if (d->len < sizeof(h))
		BAD("shorter than its header (%zu bytes)", d->len);
	memcpy(&h, d->buf, sizeof(h));
	uint64_t c = h.crc;
	h.crc = 0;
	if (memcmp(h.magic, FX_DAT_MAGIC, 8))
		BAD("not a Fenix snapshot file (magic)");
	if (crc64_ecma_refl(0, (void *)&h, sizeof(h)) != c)
		BAD("header crc64 mismatch");
	if (h.gid != (uint32_t)gid || h.ts != (uint32_t)ts || h.slot != (uint32_t)slot)
		BAD("header says group %u ts %u slot %u", h.gid, h.ts, h.slot);
	size_t at = sizeof(h);
	for (uint32_t i = 0; i < h.nm; i++) {
		struct fx_dat_sec s;
		if (d->len - at < sizeof(s))
			BAD("section %u truncated", i);
		memcpy(&s, d->buf + at, sizeof(s));
		uint64_t sc = s.crc;
		s.crc = 0;
		size_t bl = sizeof(int32_t) * 2 * (size_t)s.nblocks;
		if (d->len - at - sizeof(s) < bl || d->len - at - sizeof(s) - bl < s.bytes)
			BAD("section %u (member %u) truncated", i, s.mid);
		uint64_t cc = crc64_ecma_refl(0, (void *)&s, sizeof(s));
		cc = crc64_ecma_refl(cc, d->buf + at + sizeof(s), bl + s.bytes);
		if (cc != sc)
			BAD("section %u (member %u) crc64 mismatch", i, s.mid);
		at += sizeof(s) + bl + s.bytes;
	}
	if (at != d->len)
		BAD("%zu bytes after the last section", d->len - at);
	h.crc = c;
	d->h = h;
	return 0;
bad:
	fx_dat_free(d);
	return -EBADMSG;
}

void fx_dat_free(struct fx_dat *d)
{
	free(d->buf);
	d->buf = NULL;
}

void fx_dat_first(const struct fx_dat *d, struct fx_sec *s)
{
	(void)d;
	s->at = sizeof(struct fx_dat_hdr);
	s->i = 0;
}

/* The sections were bounds-checked by fx_dat_load. */
bool fx_dat_next(const struct fx_dat *d, struct fx_sec *s)
{
	if (s->i >= d->h.nm)
		return false;
	memcpy(&s->s, d->buf + s->at, sizeof(s->s));
	s->blocks = d->buf + s->at + sizeof(s->s);
	s->data = s->blocks + sizeof(int32_t) * 2 * (size_t)s->s.nblocks;
	s->at += sizeof(s->s) + sizeof(int32_t) * 2 * (size_t)s->s.nblocks + s->s.bytes;
	s->i++;
	return true;
}

int fx_done_load(const char *dir, int gid, int ts, int slot, struct fx_done_rec *r,
		 uint32_t **mids)
{
	char path[4400];
	snprintf(path, sizeof(path), "%s/g%d-t%d.c%d.done", dir, gid, ts, slot);
	unsigned char *b;
	size_t len;
	int ret = read_file(path, &b, &len);
	if (ret)
		return ret;
	ret = -EBADMSG;
	if (len >= sizeof(*r)) {
		memcpy(r, b, sizeof(*r));
		uint64_t c = r->crc;
		r->crc = 0;
		uint64_t cc = crc64_ecma_refl(0, (void *)r, sizeof(*r));
		cc = crc64_ecma_refl(cc, b + sizeof(*r), len - sizeof(*r));
		r->crc = c;
		if (!memcmp(r->magic, FX_DONE_MAGIC, 8) && cc == c &&
		    len == sizeof(*r) + 4 * (size_t)r->nm && r->gid == (uint32_t)gid &&
		    r->ts == (uint32_t)ts && r->slot == (uint32_t)slot)
			ret = 0;
	}
	if (!ret && mids) {
		*mids = NULL;
		if (r->nm && !(*mids = malloc(4 * (size_t)r->nm)))
			ret = -ENOMEM;
		else if (r->nm)
			memcpy(*mids, b + sizeof(*r), 4 * (size_t)r->nm);
	}
	free(b);
	return ret;
}

int fx_meta_load(const char *dir, int gid, struct fx_meta *m)
{
	char path[4400];
	snprintf(path, sizeof(path), "%s/g%d.meta", dir, gid);
	unsigned char *b;
	size_t len;
	int ret = read_file(path, &b, &len);
	if (ret)
		return ret;
	int32_t rec[6];
	ret = -EBADMSG;
	if (len == 4 * sizeof(int32_t) || len == 6 * sizeof(int32_t)) {
		memcpy(rec, b, len);
		if ((rec[0] == 1 && len == 4 * sizeof(int32_t)) ||
		    (rec[0] == 2 && len == 6 * sizeof(int32_t))) {
			*m = (struct fx_meta){.version = rec[0], .depth = -2, .start_ts = -2};
			memcpy(m->policy, rec + 1, sizeof(m->policy));
			if (rec[0] == 2)
				m->depth = rec[4], m->start_ts = rec[5];
			ret = 0;
		}
	}
	free(b);
	return ret;
}

bool fx_parse_name(const char *name, int *gid, int *ts, int *slot, char *ext, size_t extlen)
{
	int end = 0;
	char e[8];
	*ts = -1, *slot = -1;
	if (sscanf(name, "g%d.meta%n", gid, &end) == 1 && !name[end]) {
		snprintf(ext, extlen, "meta");
		return true;
	}
	end = 0;
	if (sscanf(name, "g%d-t%d.c%d.%7[a-z]%n", gid, ts, slot, e, &end) == 4 && !name[end] &&
	    (!strcmp(e, "dat") || !strcmp(e, "red") || !strcmp(e, "done"))) {
		snprintf(ext, extlen, "%s", e);
		return true;
	}
	return false;
}
