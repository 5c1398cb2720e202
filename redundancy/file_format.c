/* The redundancy file of a set member (format in internal.h): plain I/O
 * over a member's files, the member records (built, parsed, freed), and the
 * file itself (layout, creation, header and meta written last, loading with
 * every check). No MPI here: the collective steps are rebuild.c's. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l.h>

#include "internal.h"

#define META_MAX (64u << 20) /* sanity bound on a stored records blob */

/* ---- plain I/O ---- */

int full_pread(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA; /* shorter than its record says */
		p += n;
		off += n;
		len -= n;
	}
	return 0;
}

int full_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		off += n;
		len -= n;
	}
	return 0;
}

/* Logical offset -> (file, offset) over the member's files in order; the
 * part past the last file is the logical zero padding (read as zeros,
 * never written). */
static int lfile_io(const struct lfile *lf, uint64_t off, unsigned char *p, size_t len, bool write)
{
	uint64_t start = 0;
	int ret;

	for (int i = 0; i < lf->n && len; start += lf->size[i], i++) {
		uint64_t end = start + lf->size[i];
		size_t n;

		if (off >= end)
			continue;
		n = end - off < len ? end - off : len;
		ret = write ? full_pwrite(lf->fd[i], p, n, off - start)
			    : full_pread(lf->fd[i], p, n, off - start);
		if (ret)
			return ret;
		p += n;
		off += n;
		len -= n;
	}
	if (!write)
		memset(p, 0, len);
	return 0;
}

int lfile_read(const struct lfile *lf, uint64_t off, void *buf, size_t len)
{
	return lfile_io(lf, off, buf, len, false);
}

int lfile_write(const struct lfile *lf, uint64_t off, const void *buf, size_t len)
{
	return lfile_io(lf, off, (unsigned char *)buf, len, true);
}

void lfile_close(struct lfile *lf)
{
	for (int i = 0; i < lf->n; i++)
		if (lf->fd && lf->fd[i] >= 0)
			close(lf->fd[i]);
	free(lf->fd);
	free(lf->size);
	memset(lf, 0, sizeof(*lf));
}

int lfile_alloc(struct lfile *lf, int n)
{
	lf->n = n;
	lf->fd = malloc(sizeof(int) * (n ? n : 1));
	lf->size = calloc(n ? n : 1, sizeof(uint64_t));
	if (!lf->fd || !lf->size)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		lf->fd[i] = -1;
	return 0;
}

/* ---- member records ---- */

static size_t record_bytes(int n, const char *const *names)
{
	size_t b = sizeof(struct member_record) + (size_t)n * sizeof(struct member_file);

	for (int i = 0; i < n; i++)
		b += strlen(names[i]) + 1;
	return (b + 7) & ~(size_t)7;
}

void *record_build(const struct set_geometry *g, const char *const *names, int n,
		   const struct lfile *lf, const uint64_t *crc, size_t *len)
{
	size_t bytes = record_bytes(n, names);
	unsigned char *b = calloc(1, bytes);
	struct member_record *rec = (void *)b;
	struct member_file *f = (void *)(rec + 1);
	char *name = (char *)(f + n);

	if (!b)
		return NULL;
	rec->index = g->me;
	rec->world_rank = g->world[g->me];
	rec->nfiles = n;
	rec->bytes = bytes;
	rec->logical_size = lf->total;
	for (int i = 0; i < n; i++) {
		f[i].size = lf->size[i];
		f[i].crc = crc ? crc[i] : 0;
		f[i].name_len = strlen(names[i]) + 1;
		memcpy(name, names[i], f[i].name_len);
		name += f[i].name_len;
	}
	*len = bytes;
	return b;
}

/* Parses and bounds-checks the records of the p members. */
int meta_parse(struct set_meta *m, int p)
{
	const unsigned char *b = m->blob, *end = b + m->blob_len;

	m->p = p;
	m->m = calloc(p, sizeof(*m->m));
	if (!m->m)
		return -ENOMEM;
	for (int x = 0; x < p; x++) {
		const struct member_record *rec = (const void *)b;
		struct member_info *mi = &m->m[x];
		const char *name;
		uint64_t total = 0;

		/* Sizes compared as lengths, never as pointers past the end. */
		if ((size_t)(end - b) < sizeof(*rec) || rec->bytes < sizeof(*rec) ||
		    rec->bytes > (size_t)(end - b) || rec->bytes % 8 || rec->index != (uint32_t)x ||
		    (uint64_t)rec->nfiles * sizeof(struct member_file) > rec->bytes - sizeof(*rec))
			return -EBADMSG;
		mi->index = x;
		mi->world_rank = rec->world_rank;
		mi->nfiles = rec->nfiles;
		mi->logical = rec->logical_size;
		mi->file = calloc(mi->nfiles + 1, sizeof(*mi->file));
		mi->name = calloc(mi->nfiles + 1, sizeof(*mi->name));
		if (!mi->file || !mi->name)
			return -ENOMEM;
		name = (const char *)(rec + 1) + (size_t)mi->nfiles * sizeof(struct member_file);
		for (int i = 0; i < mi->nfiles; i++) {
			const struct member_file *f = (const struct member_file *)(rec + 1) + i;

			/* A plain name in the directory: no '/', and no '.', '..'
			 * or hidden file either. */
			if (f->name_len < 2 ||
			    f->name_len > (size_t)((const char *)b + rec->bytes - name) ||
			    name[f->name_len - 1] || strlen(name) + 1 != f->name_len ||
			    strchr(name, '/') || name[0] == '.')
				return -EBADMSG;
			mi->file[i] = f;
			mi->name[i] = name;
			name += f->name_len;
			total += f->size;
		}
		if (total != mi->logical)
			return -EBADMSG;
		b += rec->bytes;
	}
	return b == end ? 0 : -EBADMSG;
}

void meta_free(struct set_meta *m)
{
	if (m->m)
		for (int x = 0; x < m->p; x++) {
			free(m->m[x].file);
			free(m->m[x].name);
		}
	free(m->m);
	free(m->blob);
	memset(m, 0, sizeof(*m));
}

/* ---- the redundancy file ---- */

char *path_join(const char *dir, const char *name, const char *suffix)
{
	char *s = NULL;

	if (asprintf(&s, "%s/%s%s", dir, name, suffix) < 0)
		return NULL;
	return s;
}

static uint64_t align_page(uint64_t v)
{
	return (v + HEADER_BYTES - 1) & ~(uint64_t)(HEADER_BYTES - 1);
}

/* Payload layout of member x's redundancy file: sections after the meta,
 * each page aligned. Returns the file's size. */
uint64_t file_layout(const struct set_geometry *g, const struct set_meta *m, int x,
		     struct payload_section *sec, int nsec)
{
	uint64_t off = align_page(HEADER_BYTES + m->blob_len + nsec * sizeof(*sec));

	for (int i = 0; i < nsec; i++) {
		sec[i].offset = off;
		sec[i].size = g->ops->section_size(g, m, x, i);
		sec[i].crc = 0;
		off = align_page(off + sec[i].size);
	}
	return off;
}

int file_create(const char *path, int *fd, uint64_t size)
{
	*fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*fd < 0)
		return -errno;
	if (ftruncate(*fd, (off_t)size))
		return -errno;
	return 0;
}

/* Writes the meta and the header of a redundancy file whose payload is in
 * place, and syncs it. */
int file_finish(const struct set_geometry *g, const struct set_meta *m, int fd,
		const struct payload_section *sec, int nsec)
{
	size_t tbytes = (size_t)nsec * sizeof(*sec);
	unsigned char *page = calloc(1, HEADER_BYTES);
	struct file_header *h = (void *)page;
	int ret;

	if (!page)
		return -ENOMEM;
	ret = full_pwrite(fd, m->blob, m->blob_len, HEADER_BYTES);
	if (!ret && nsec)
		ret = full_pwrite(fd, sec, tbytes, HEADER_BYTES + m->blob_len);
	if (ret)
		goto out;
	memcpy(h->magic, FILE_MAGIC, 8);
	h->version = FILE_VERSION;
	h->header_size = sizeof(*h);
	h->scheme = g->ops->id;
	h->set_size = g->p;
	h->set_index = g->me;
	h->set_id = g->set_id;
	h->param = g->param;
	h->world_rank = g->world[g->me];
	h->max_logical = m->max_logical;
	h->chunk = m->chunk;
	h->meta_offset = HEADER_BYTES;
	h->meta_bytes = m->blob_len + tbytes;
	h->records_bytes = m->blob_len;
	h->nsections = nsec;
	h->meta_crc = crc64_ecma_refl(0, m->blob, m->blob_len);
	h->meta_crc = crc64_ecma_refl(h->meta_crc, (const unsigned char *)sec, tbytes);
	h->header_crc = crc64_ecma_refl(0, page, sizeof(*h));
	ret = full_pwrite(fd, page, HEADER_BYTES, 0);
	if (!ret && fsync(fd))
		ret = -errno;
out:
	free(page);
	return ret;
}

/* Loads and checks this member's own redundancy file: header, meta, the
 * section table's bounds and, with payload, every payload section's crc
 * (without: the caller checks them as it reads them); also that it was
 * written for this set geometry. On success m holds the records and sec
 * (malloc'd) the sections. Any failure just means "not valid" to the
 * caller. */
int file_load(const struct set_geometry *g, const char *path, struct set_meta *m,
	      struct payload_section **secp, int *fdp, bool payload)
{
	unsigned char *page = malloc(HEADER_BYTES), *meta = NULL;
	struct file_header *h = (void *)page;
	struct payload_section *sec = NULL;
	int fd = fsutil_open_private(path, O_RDWR, NULL), ret = 0, nsec = g->ops->nsections(g);
	uint64_t crc, want;
	struct stat st;

	*secp = NULL;
	if (!page) {
		ret = -ENOMEM;
		goto err;
	}
	if (fd < 0) {
		ret = fd;
		goto err;
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		goto err;
	}
	ret = full_pread(fd, page, HEADER_BYTES, 0);
	if (ret)
		goto err;
	want = h->header_crc;
	h->header_crc = 0;
	if (memcmp(h->magic, FILE_MAGIC, 8) || h->version != FILE_VERSION ||
	    h->header_size != sizeof(*h) || crc64_ecma_refl(0, page, sizeof(*h)) != want ||
	    h->scheme != g->ops->id || h->set_size != (uint32_t)g->p ||
	    h->set_index != (uint32_t)g->me || h->param != (uint32_t)g->param ||
	    h->nsections != (uint32_t)nsec || h->meta_bytes > META_MAX ||
	    h->meta_bytes < nsec * sizeof(*sec) ||
	    h->records_bytes != h->meta_bytes - nsec * sizeof(*sec) ||
	    h->meta_offset > (uint64_t)st.st_size ||
	    h->meta_bytes > (uint64_t)st.st_size - h->meta_offset) {
		ret = -EBADMSG;
		goto err;
	}
	meta = malloc(h->meta_bytes ? h->meta_bytes : 1);
	if (!meta) {
		ret = -ENOMEM;
		goto err;
	}
	ret = full_pread(fd, meta, h->meta_bytes, h->meta_offset);
	if (ret)
		goto err;
	if (crc64_ecma_refl(0, meta, h->meta_bytes) != h->meta_crc) {
		ret = -EBADMSG;
		goto err;
	}
	m->blob = meta;
	m->blob_len = h->records_bytes;
	m->max_logical = h->max_logical;
	m->chunk = h->chunk;
	meta = NULL;
	ret = meta_parse(m, g->p);
	if (ret)
		goto err;
	sec = malloc(sizeof(*sec) * (nsec ? nsec : 1));
	if (!sec) {
		ret = -ENOMEM;
		goto err;
	}
	memcpy(sec, (unsigned char *)m->blob + m->blob_len, nsec * sizeof(*sec));
	for (int i = 0; i < nsec; i++) {
		if (sec[i].size != g->ops->section_size(g, m, g->me, i) ||
		    sec[i].offset > (uint64_t)st.st_size ||
		    sec[i].size > (uint64_t)st.st_size - sec[i].offset) {
			ret = -EBADMSG;
			goto err;
		}
		ret = payload ? crc64_range(fd, sec[i].offset, sec[i].size, &crc) : 0;
		if (!ret && payload && crc != sec[i].crc)
			ret = -EBADMSG;
		if (ret)
			goto err;
	}
	*secp = sec;
	*fdp = fd;
	free(page);
	return 0;
err:
	if (fd >= 0)
		close(fd);
	meta_free(m);
	free(meta);
	free(sec);
	free(page);
	return ret;
}
