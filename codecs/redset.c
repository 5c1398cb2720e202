/* Redundancy sets (DESIGN.md section 6): failure domains, set formation,
 * the redundancy file (header and member records, format in redset_int.h)
 * and the parts of encode and rebuild common to all schemes. The schemes
 * themselves sit behind struct codec_ops in codec_*.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l.h>

#define LOG_PREFIX "redset: "
#include "log.h"
#include "redset_int.h"

#define IO_PIECE (1u << 20)
#define META_MAX (64u << 20) /* sanity bound on a stored records blob */

static const struct codec_ops *const codecs[] = {
	&codec_single_ops,
	&codec_partner_ops,
	&codec_xor_ops,
	&codec_rs_ops,
};

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int mpi_ret(int rc)
{
	return rc == MPI_SUCCESS ? 0 : -EIO;
}

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
 * part past the last file is the logical zero padding. */
int lf_read(const struct lfile *lf, uint64_t off, void *buf, size_t len)
{
	unsigned char *p = buf;
	uint64_t start = 0;
	int ret;

	for (int i = 0; i < lf->n && len; start += lf->size[i], i++) {
		uint64_t end = start + lf->size[i];
		size_t n;

		if (off >= end)
			continue;
		n = end - off < len ? end - off : len;
		ret = full_pread(lf->fd[i], p, n, off - start);
		if (ret)
			return ret;
		p += n;
		off += n;
		len -= n;
	}
	memset(p, 0, len);
	return 0;
}

int lf_write(const struct lfile *lf, uint64_t off, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t start = 0;
	int ret;

	for (int i = 0; i < lf->n && len; start += lf->size[i], i++) {
		uint64_t end = start + lf->size[i];
		size_t n;

		if (off >= end)
			continue;
		n = end - off < len ? end - off : len;
		ret = full_pwrite(lf->fd[i], p, n, off - start);
		if (ret)
			return ret;
		p += n;
		off += n;
		len -= n;
	}
	return 0;
}

static void lf_close(struct lfile *lf)
{
	for (int i = 0; i < lf->n; i++)
		if (lf->fd && lf->fd[i] >= 0)
			close(lf->fd[i]);
	free(lf->fd);
	free(lf->size);
	memset(lf, 0, sizeof(*lf));
}

static int lf_alloc(struct lfile *lf, int n)
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

/* crc64 of size bytes of fd from off (page aligned): through a read-only
 * mapping, which spares copying the file into a buffer first (the crc
 * passes over the files and redundancy files are as long as the coding
 * itself); through pread into buf when the file cannot be mapped. */
static int range_crc(int fd, uint64_t off, uint64_t size, unsigned char *buf, uint64_t *crc)
{
	uint64_t c = 0;
	void *map = size ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, (off_t)off) : MAP_FAILED;
	int ret;

	if (map != MAP_FAILED) {
		*crc = crc64_ecma_refl(0, map, size);
		munmap(map, size);
		return 0;
	}
	for (uint64_t o = 0; o < size; o += IO_PIECE) {
		size_t n = size - o < IO_PIECE ? size - o : IO_PIECE;

		ret = full_pread(fd, buf, n, off + o);
		if (ret)
			return ret;
		c = crc64_ecma_refl(c, buf, n);
	}
	*crc = c;
	return 0;
}

static int file_crc(int fd, uint64_t size, unsigned char *buf, uint64_t *crc)
{
	return range_crc(fd, 0, size, buf, crc);
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		ret = -errno;
	close(fd);
	return ret;
}

/* ---- failure domains and sets ---- */

int redset_domain(MPI_Comm world, const char *spec, int *domain, char *err, size_t errlen)
{
	char name[MPI_MAX_PROCESSOR_NAME + 1] = "", *all = NULL, *end;
	int rank, size, len, first, ret = 0;
	long n;

	PMPI_Comm_rank(world, &rank);
	PMPI_Comm_size(world, &size);
	if (!spec)
		spec = "host";
	if (strcmp(spec, "host")) {
		errno = 0;
		n = strtol(spec, &end, 10);
		if (errno || end == spec || *end || n < 1 || n > INT_MAX) {
			seterr(err, errlen,
			       "STASIS_FAILURE_DOMAIN: '%s' is not 'host' or a positive integer", spec);
			return -EINVAL;
		}
		*domain = rank / (int)n;
		return 0;
	}

	/* Domains numbered 0.. in order of their lowest rank: a rank's domain
	 * is the number of hosts whose first rank precedes its host's. */
	PMPI_Get_processor_name(name, &len);
	all = calloc((size_t)size, sizeof(name));
	if (!all) {
		seterr(err, errlen, "out of memory gathering host names");
		return -ENOMEM;
	}
	ret = mpi_ret(PMPI_Allgather(name, sizeof(name), MPI_CHAR, all, sizeof(name), MPI_CHAR,
				     world));
	if (ret) {
		seterr(err, errlen, "gathering host names failed");
		goto out;
	}
	for (first = 0; strcmp(all + first * sizeof(name), name); first++)
		;
	*domain = 0;
	for (int r = 0; r < first; r++) {
		int f;

		for (f = 0; strcmp(all + f * sizeof(name), all + r * sizeof(name)); f++)
			;
		*domain += f == r;
	}
out:
	free(all);
	return ret;
}

struct slot {
	int rank;
	int domain;
	int nth; /* rank's index within its domain */
};

static int by_domain(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;

	if (x->domain != y->domain)
		return x->domain < y->domain ? -1 : 1;
	return x->rank - y->rank;
}

static int by_round(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;

	if (x->nth != y->nth)
		return x->nth - y->nth;
	return by_domain(a, b);
}

/* Set g holds seq[start[g] .. start[g + 1]). seq lists the ranks round-robin
 * over the domains (the first rank of each domain, then the second, ...);
 * cutting it into runs of set_size consecutive slots puts at most one rank
 * of a domain in a set whenever set_size <= the number of domains. A
 * remainder too small for the scheme is merged into the last set. */
static int plan_sets(const struct codec_ops *ops, const struct redset_params *prm, struct slot *seq,
		     int n, int *start, int *nsets, char *err, size_t errlen)
{
	int q = prm->set_size < n ? prm->set_size : n, full = n / q, rem = n % q, param, ret;
	int ndomains = 0, *seen;
	char tmp[256];

	*nsets = full;
	for (int g = 0; g <= full; g++)
		start[g] = g * q;
	if (rem) {
		if (ops->check(prm, rem, &param, tmp, sizeof(tmp)) == 0) {
			start[++*nsets] = n;
		} else {
			start[full] = n;
		}
	}
	for (int g = 0; g < *nsets; g++) {
		ret = ops->check(prm, start[g + 1] - start[g], &param, err, errlen);
		if (ret)
			return ret;
	}
	if (ops == &codec_single_ops)
		return 0;

	seen = calloc((size_t)n, sizeof(int));
	if (!seen)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		ndomains = seq[i].domain + 1 > ndomains ? seq[i].domain + 1 : ndomains;
	for (int g = 0; g < *nsets; g++) {
		for (int i = start[g]; i < start[g + 1]; i++) {
			int dom = seq[i].domain;

			if (dom >= 0 && dom < n && seen[dom] == g + 1) {
				seterr(err, errlen,
				       "scheme %s: a set of %d ranks needs %d failure domains, but "
				       "STASIS_FAILURE_DOMAIN gives %d for %d ranks (set %d would "
				       "hold two ranks of domain %d)",
				       ops->name, start[g + 1] - start[g], start[g + 1] - start[g],
				       ndomains, n, g, dom);
				free(seen);
				return -EINVAL;
			}
			if (dom >= 0 && dom < n)
				seen[dom] = g + 1;
		}
	}
	free(seen);
	return 0;
}

int redset_create(MPI_Comm world, int domain, const struct redset_params *prm, struct redset **out,
		  char *err, size_t errlen)
{
	const struct codec_ops *ops = NULL;
	struct slot *seq = NULL;
	struct redset *rs = NULL;
	int *doms = NULL, *start = NULL;
	int rank, n, nsets, g, key = 0, ret;

	*out = NULL;
	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++)
		if (prm->scheme && !strcmp(prm->scheme, codecs[i]->name))
			ops = codecs[i];
	if (!ops) {
		seterr(err, errlen, "unknown redundancy scheme '%s' (single, partner, xor, rs)",
		       prm->scheme ? prm->scheme : "(null)");
		return -EINVAL;
	}
	if (prm->set_size < 1) {
		seterr(err, errlen, "set size %d: must be >= 1", prm->set_size);
		return -EINVAL;
	}
	PMPI_Comm_rank(world, &rank);
	PMPI_Comm_size(world, &n);
	doms = malloc(sizeof(int) * n);
	seq = malloc(sizeof(*seq) * n);
	start = malloc(sizeof(int) * (n + 2));
	rs = calloc(1, sizeof(*rs));
	if (!doms || !seq || !start || !rs) {
		seterr(err, errlen, "out of memory forming sets");
		ret = -ENOMEM;
		goto err;
	}
	ret = mpi_ret(PMPI_Allgather(&domain, 1, MPI_INT, doms, 1, MPI_INT, world));
	if (ret) {
		seterr(err, errlen, "gathering failure domains failed");
		goto err;
	}
	for (int r = 0; r < n; r++)
		seq[r] = (struct slot){.rank = r, .domain = doms[r]};
	qsort(seq, n, sizeof(*seq), by_domain);
	for (int i = 0; i < n; i++)
		seq[i].nth = i > 0 && seq[i - 1].domain == seq[i].domain ? seq[i - 1].nth + 1 : 0;
	qsort(seq, n, sizeof(*seq), by_round);

	/* Every rank evaluates every set from the same gathered data, so all
	 * agree on success or failure without another collective. */
	ret = plan_sets(ops, prm, seq, n, start, &nsets, err, errlen);
	if (ret)
		goto err;
	for (g = 0; g + 1 < nsets; g++) {
		bool mine = false;

		for (int i = start[g]; i < start[g + 1]; i++)
			mine = mine || seq[i].rank == rank;
		if (mine)
			break;
	}
	for (int i = start[g]; i < start[g + 1]; i++)
		if (seq[i].rank == rank)
			key = i - start[g];
	rs->ops = ops;
	rs->set_id = g;
	rs->me = key;
	rs->p = start[g + 1] - start[g];
	ops->check(prm, rs->p, &rs->param, err, errlen);
	rs->world = malloc(sizeof(int) * rs->p);
	if (!rs->world) {
		seterr(err, errlen, "out of memory forming sets");
		ret = -ENOMEM;
		goto err;
	}
	for (int i = 0; i < rs->p; i++)
		rs->world[i] = seq[start[g] + i].rank;
	ret = mpi_ret(PMPI_Comm_split(world, g, key, &rs->comm));
	if (ret) {
		seterr(err, errlen, "splitting the set communicator failed");
		rs->comm = MPI_COMM_NULL;
		goto err;
	}
	pr_debug("set %d: member %d of %d, scheme %s", g, key, rs->p, ops->name);
	*out = rs;
	rs = NULL;
err:
	redset_free(rs);
	free(doms);
	free(seq);
	free(start);
	return ret;
}

void redset_free(struct redset *rs)
{
	if (!rs)
		return;
	if (rs->comm != MPI_COMM_NULL && rs->comm != 0)
		PMPI_Comm_free(&rs->comm);
	free(rs->world);
	free(rs);
}

/* ---- member records ---- */

static size_t record_bytes(int n, const char *const *names)
{
	size_t b = sizeof(struct red_member) + (size_t)n * sizeof(struct red_file);

	for (int i = 0; i < n; i++)
		b += strlen(names[i]) + 1;
	return (b + 7) & ~(size_t)7;
}

/* Parses and bounds-checks the records of the p members. */
static int meta_parse(struct set_meta *m, int p)
{
	const unsigned char *b = m->blob, *end = b + m->blob_len;

	m->p = p;
	m->m = calloc(p, sizeof(*m->m));
	if (!m->m)
		return -ENOMEM;
	for (int x = 0; x < p; x++) {
		const struct red_member *rec = (const void *)b;
		struct member_info *mi = &m->m[x];
		const char *name;
		uint64_t total = 0;

		if ((size_t)(end - b) < sizeof(*rec) || rec->bytes > (size_t)(end - b) ||
		    rec->bytes % 8 || rec->index != (uint32_t)x ||
		    (uint64_t)rec->nfiles * sizeof(struct red_file) >
			    rec->bytes - sizeof(*rec))
			return -EBADMSG;
		mi->index = x;
		mi->world_rank = rec->world_rank;
		mi->nfiles = rec->nfiles;
		mi->logical = rec->logical_size;
		mi->file = calloc(mi->nfiles + 1, sizeof(*mi->file));
		mi->name = calloc(mi->nfiles + 1, sizeof(*mi->name));
		if (!mi->file || !mi->name)
			return -ENOMEM;
		name = (const char *)(rec + 1) + (size_t)mi->nfiles * sizeof(struct red_file);
		for (int i = 0; i < mi->nfiles; i++) {
			const struct red_file *f = (const struct red_file *)(rec + 1) + i;

			if (f->name_len < 2 || name + f->name_len > (const char *)b + rec->bytes ||
			    name[f->name_len - 1] || strlen(name) + 1 != f->name_len ||
			    strchr(name, '/'))
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

static void meta_free(struct set_meta *m)
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

static char *path_join(const char *dir, const char *name, const char *suffix)
{
	char *s = NULL;

	if (asprintf(&s, "%s/%s%s", dir, name, suffix) < 0)
		return NULL;
	return s;
}

static uint64_t align_page(uint64_t v)
{
	return (v + RED_HEADER_BYTES - 1) & ~(uint64_t)(RED_HEADER_BYTES - 1);
}

/* Payload layout of member x's redundancy file: sections after the meta,
 * each page aligned. Returns the file's size. */
static uint64_t red_layout(const struct redset *rs, const struct set_meta *m, int x,
			   struct red_section *sec, int nsec)
{
	uint64_t off = align_page(RED_HEADER_BYTES + m->blob_len + nsec * sizeof(*sec));

	for (int i = 0; i < nsec; i++) {
		sec[i].offset = off;
		sec[i].size = rs->ops->section_size(rs, m, x, i);
		sec[i].crc = 0;
		off = align_page(off + sec[i].size);
	}
	return off;
}

/* Writes the meta and the header of a redundancy file whose payload is in
 * place, and syncs it. */
static int red_finish(const struct redset *rs, const struct set_meta *m, int fd,
		      const struct red_section *sec, int nsec)
{
	size_t tbytes = (size_t)nsec * sizeof(*sec);
	unsigned char *page = calloc(1, RED_HEADER_BYTES);
	struct red_header *h = (void *)page;
	int ret;

	if (!page)
		return -ENOMEM;
	ret = full_pwrite(fd, m->blob, m->blob_len, RED_HEADER_BYTES);
	if (!ret && nsec)
		ret = full_pwrite(fd, sec, tbytes, RED_HEADER_BYTES + m->blob_len);
	if (ret)
		goto out;
	memcpy(h->magic, RED_MAGIC, 8);
	h->version = RED_VERSION;
	h->header_size = sizeof(*h);
	h->scheme = rs->ops->id;
	h->set_size = rs->p;
	h->set_index = rs->me;
	h->set_id = rs->set_id;
	h->param = rs->param;
	h->world_rank = rs->world[rs->me];
	h->max_logical = m->max_logical;
	h->chunk = m->chunk;
	h->meta_offset = RED_HEADER_BYTES;
	h->meta_bytes = m->blob_len + tbytes;
	h->records_bytes = m->blob_len;
	h->nsections = nsec;
	h->meta_crc = crc64_ecma_refl(0, m->blob, m->blob_len);
	h->meta_crc = crc64_ecma_refl(h->meta_crc, (const unsigned char *)sec, tbytes);
	h->header_crc = crc64_ecma_refl(0, page, sizeof(*h));
	ret = full_pwrite(fd, page, RED_HEADER_BYTES, 0);
	if (!ret && fsync(fd))
		ret = -errno;
out:
	free(page);
	return ret;
}

/* Loads and checks this member's own redundancy file: header, meta and
 * every payload section's crc; also that it was written for this set
 * geometry. On success m holds the records and sec (malloc'd) the
 * sections. Any failure just means "not valid" to the caller. */
static int red_load(const struct redset *rs, const char *path, struct set_meta *m,
		    struct red_section **secp, int *fdp)
{
	unsigned char *page = malloc(RED_HEADER_BYTES), *buf = malloc(IO_PIECE), *meta = NULL;
	struct red_header *h = (void *)page;
	struct red_section *sec = NULL;
	int fd = open(path, O_RDWR | O_CLOEXEC), ret = 0, nsec = rs->ops->nsections(rs);
	uint64_t crc, want;
	struct stat st;

	*secp = NULL;
	if (!page || !buf) {
		ret = -ENOMEM;
		goto err;
	}
	if (fd < 0 || fstat(fd, &st)) {
		ret = -errno;
		goto err;
	}
	ret = full_pread(fd, page, RED_HEADER_BYTES, 0);
	if (ret)
		goto err;
	want = h->header_crc;
	h->header_crc = 0;
	if (memcmp(h->magic, RED_MAGIC, 8) || h->version != RED_VERSION ||
	    h->header_size != sizeof(*h) || crc64_ecma_refl(0, page, sizeof(*h)) != want ||
	    h->scheme != rs->ops->id || h->set_size != (uint32_t)rs->p ||
	    h->set_index != (uint32_t)rs->me || h->param != (uint32_t)rs->param ||
	    h->nsections != (uint32_t)nsec || h->meta_bytes > META_MAX ||
	    h->records_bytes + nsec * sizeof(*sec) != h->meta_bytes ||
	    h->meta_offset + h->meta_bytes > (uint64_t)st.st_size) {
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
	ret = meta_parse(m, rs->p);
	if (ret)
		goto err;
	sec = malloc(sizeof(*sec) * (nsec ? nsec : 1));
	if (!sec) {
		ret = -ENOMEM;
		goto err;
	}
	memcpy(sec, (unsigned char *)m->blob + m->blob_len, nsec * sizeof(*sec));
	for (int i = 0; i < nsec; i++) {
		if (sec[i].size != rs->ops->section_size(rs, m, rs->me, i) ||
		    sec[i].offset + sec[i].size > (uint64_t)st.st_size) {
			ret = -EBADMSG;
			goto err;
		}
		ret = range_crc(fd, sec[i].offset, sec[i].size, buf, &crc);
		if (!ret && crc != sec[i].crc)
			ret = -EBADMSG;
		if (ret)
			goto err;
	}
	*secp = sec;
	*fdp = fd;
	free(page);
	free(buf);
	return 0;
err:
	if (fd >= 0)
		close(fd);
	meta_free(m);
	free(meta);
	free(sec);
	free(page);
	free(buf);
	return ret;
}

/* All members learn the worst result; a member that did not fail itself
 * names the one that did in err. MPI_MINLOC: the most negative errno wins,
 * ties to the lowest member. */
static int agree(const struct redset *rs, int ret, char *err, size_t errlen, const char *what)
{
	struct {
		int v;
		int r;
	} in = {ret, rs->me}, out;

	if (PMPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MINLOC, rs->comm) != MPI_SUCCESS)
		return -EIO;
	if (out.v && !ret)
		seterr(err, errlen, "%s failed on rank %d (set %d): %s", what,
		       rs->world[out.r], rs->set_id, strerror(-out.v));
	return out.v;
}

/* Opens this member's files for reading, with their sizes and crc64. */
static int open_mine(const char *dir, const char *const *names, int n, struct lfile *lf,
		     uint64_t *crc, char *err, size_t errlen)
{
	unsigned char *buf = malloc(IO_PIECE);
	int ret = lf_alloc(lf, n);
	struct stat st;

	if (!buf || ret) {
		ret = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		char *path = path_join(dir, names[i], "");

		if (!path) {
			ret = -ENOMEM;
			goto out;
		}
		if (!*names[i] || strchr(names[i], '/')) {
			/* Rebuilt files go to dir/<name>: keep names plain. */
			seterr(err, errlen, "file name '%s' must be non-empty without '/'",
			       names[i]);
			free(path);
			ret = -EINVAL;
			goto out;
		}
		lf->fd[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (lf->fd[i] < 0 || fstat(lf->fd[i], &st)) {
			ret = -errno;
			seterr(err, errlen, "open %s: %s", path, strerror(errno));
			free(path);
			goto out;
		}
		lf->size[i] = st.st_size;
		lf->total += st.st_size;
		ret = file_crc(lf->fd[i], lf->size[i], buf, &crc[i]);
		if (ret) {
			seterr(err, errlen, "read %s: %s", path, strerror(-ret));
			free(path);
			goto out;
		}
		free(path);
	}
out:
	free(buf);
	return ret;
}

static void *build_record(const struct redset *rs, const char *const *names, int n,
			  const struct lfile *lf, const uint64_t *crc, size_t *len)
{
	size_t bytes = record_bytes(n, names);
	unsigned char *b = calloc(1, bytes);
	struct red_member *rec = (void *)b;
	struct red_file *f = (void *)(rec + 1);
	char *name = (char *)(f + n);

	if (!b)
		return NULL;
	rec->index = rs->me;
	rec->world_rank = rs->world[rs->me];
	rec->nfiles = n;
	rec->bytes = bytes;
	rec->logical_size = lf->total;
	for (int i = 0; i < n; i++) {
		f[i].size = lf->size[i];
		f[i].crc = crc[i];
		f[i].name_len = strlen(names[i]) + 1;
		memcpy(name, names[i], f[i].name_len);
		name += f[i].name_len;
	}
	*len = bytes;
	return b;
}

/* Every member gets every member's record (the set is small; keeping all
 * of them in each redundancy file covers any tolerated loss). */
static int gather_meta(const struct redset *rs, const void *rec, size_t len, struct set_meta *m)
{
	int mine = (int)len, *lens = malloc(sizeof(int) * rs->p), *displs = malloc(sizeof(int) * rs->p);
	size_t total = 0;
	int ret;

	if (!lens || !displs) {
		ret = -ENOMEM;
		goto out;
	}
	ret = mpi_ret(PMPI_Allgather(&mine, 1, MPI_INT, lens, 1, MPI_INT, rs->comm));
	if (ret)
		goto out;
	for (int x = 0; x < rs->p; x++) {
		displs[x] = (int)total;
		total += lens[x];
	}
	m->blob = malloc(total);
	m->blob_len = total;
	if (!m->blob) {
		ret = -ENOMEM;
		goto out;
	}
	ret = mpi_ret(PMPI_Allgatherv(rec, mine, MPI_BYTE, m->blob, lens, displs, MPI_BYTE,
				      rs->comm));
	if (!ret)
		ret = meta_parse(m, rs->p);
	for (int x = 0; !ret && x < rs->p; x++)
		if (m->m[x].logical > m->max_logical)
			m->max_logical = m->m[x].logical;
	m->chunk = ret ? 0 : rs->ops->chunk(rs, m->max_logical);
out:
	free(lens);
	free(displs);
	return ret;
}

static int red_create(const char *path, int *fd, uint64_t size)
{
	*fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (*fd < 0)
		return -errno;
	if (ftruncate(*fd, (off_t)size))
		return -errno;
	return 0;
}

int redset_encode(struct redset *rs, const char *dir, const char *const *names, int n,
		  const char *red_name, char *err, size_t errlen)
{
	struct codec_io io = {.red_fd = -1};
	struct set_meta m = {0};
	bool *data_lost = calloc(rs->p, sizeof(bool)), *red_lost = calloc(rs->p, sizeof(bool));
	uint64_t *crc = calloc(n ? n : 1, sizeof(uint64_t));
	char *red = path_join(dir, red_name, ""), *tmp = path_join(dir, red_name, ".tmp");
	void *rec = NULL;
	size_t reclen = 0;
	int nsec = rs->ops->nsections(rs), ret;

	io.sec = calloc(nsec ? nsec : 1, sizeof(*io.sec));
	io.nsec = nsec;
	ret = !data_lost || !red_lost || !crc || !red || !tmp || !io.sec ? -ENOMEM : 0;
	if (ret)
		seterr(err, errlen, "out of memory");
	if (!ret)
		ret = open_mine(dir, names, n, &io.lf, crc, err, errlen);
	if (!ret && !(rec = build_record(rs, names, n, &io.lf, crc, &reclen)))
		ret = -ENOMEM;
	ret = agree(rs, ret, err, errlen, "reading the files to protect");
	if (ret)
		goto out;

	ret = gather_meta(rs, rec, reclen, &m);
	if (ret)
		seterr(err, errlen, "exchanging the set's records failed: %s", strerror(-ret));
	else {
		ret = red_create(tmp, &io.red_fd, red_layout(rs, &m, rs->me, io.sec, nsec));
		if (ret)
			seterr(err, errlen, "create %s: %s", tmp, strerror(-ret));
	}
	ret = agree(rs, ret, err, errlen, "creating the redundancy file");
	if (ret)
		goto out;

	io.meta = &m;
	for (int x = 0; x < rs->p; x++)
		red_lost[x] = true;
	ret = rs->ops->run(rs, &io, data_lost, red_lost);
	if (!ret)
		ret = io.err;
	if (!ret)
		ret = red_finish(rs, &m, io.red_fd, io.sec, nsec);
	if (ret)
		seterr(err, errlen, "encoding %s (scheme %s) failed: %s", red, rs->ops->name,
		       strerror(-ret));
	/* Rename only once every member has a complete file, so that a set
	 * never mixes new and old redundancy files after a failed encode. */
	ret = agree(rs, ret, err, errlen, "encoding");
	if (!ret && rename(tmp, red)) {
		ret = -errno;
		seterr(err, errlen, "rename %s: %s", tmp, strerror(errno));
	}
	if (!ret)
		ret = fsync_dir(dir);
	ret = agree(rs, ret, err, errlen, "installing the redundancy file");
	pr_debug("encoded %s: scheme %s, set %d, S %llu, C %llu", red, rs->ops->name, rs->set_id,
		 (unsigned long long)m.max_logical, (unsigned long long)m.chunk);
out:
	if (io.red_fd >= 0) {
		close(io.red_fd);
		if (ret)
			unlink(tmp); /* our own temporary, never a user file */
	}
	lf_close(&io.lf);
	meta_free(&m);
	free(rec);
	free(io.sec);
	free(data_lost);
	free(red_lost);
	free(crc);
	free(red);
	free(tmp);
	return ret;
}

/* ---- rebuild ---- */

/* Checks this member's files against its record (size and crc64): the
 * caller's have_mine may predate a flipped byte, and rebuilding from a
 * corrupt source would spread the damage to the lost members. */
static bool verify_mine(const char *dir, const struct member_info *mi, struct lfile *lf)
{
	unsigned char *buf = malloc(IO_PIECE);
	bool ok = buf && !lf_alloc(lf, mi->nfiles);
	uint64_t crc;
	struct stat st;

	for (int i = 0; ok && i < mi->nfiles; i++) {
		char *path = path_join(dir, mi->name[i], "");

		lf->fd[i] = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
		ok = lf->fd[i] >= 0 && !fstat(lf->fd[i], &st) &&
		     (uint64_t)st.st_size == mi->file[i]->size &&
		     !file_crc(lf->fd[i], mi->file[i]->size, buf, &crc) && crc == mi->file[i]->crc;
		if (!ok)
			pr_warn("%s does not match its record: rebuilding it", path ? path : "?");
		lf->size[i] = mi->file[i]->size;
		lf->total += lf->size[i];
		free(path);
	}
	free(buf);
	if (!ok)
		lf_close(lf);
	return ok;
}

/* The members' records and geometry, from the lowest member whose
 * redundancy file is valid. */
static int bcast_meta(const struct redset *rs, int root, struct set_meta *m)
{
	uint64_t hdr[3] = {m->blob_len, m->max_logical, m->chunk};
	void *blob;
	int ret;

	ret = mpi_ret(PMPI_Bcast(hdr, 3, MPI_UINT64_T, root, rs->comm));
	if (ret)
		return ret;
	if (rs->me == root)
		return mpi_ret(PMPI_Bcast(m->blob, (int)m->blob_len, MPI_BYTE, root, rs->comm));
	meta_free(m);
	blob = malloc(hdr[0] ? hdr[0] : 1);
	ret = mpi_ret(PMPI_Bcast(blob ? blob : (void *)hdr, blob ? (int)hdr[0] : 0, MPI_BYTE, root,
				 rs->comm));
	if (!blob)
		return -ENOMEM;
	m->blob = blob;
	m->blob_len = hdr[0];
	m->max_logical = hdr[1];
	m->chunk = hdr[2];
	return ret ? ret : meta_parse(m, rs->p);
}

/* Creates the temporaries a lost member's files are rebuilt into, at their
 * recorded sizes (sparse: the zero tail needs no write). */
static int open_rebuilt(const char *dir, const struct member_info *mi, struct lfile *lf,
			char *err, size_t errlen)
{
	int ret = lf_alloc(lf, mi->nfiles);

	if (mkdir(dir, 0700) && errno != EEXIST) {
		seterr(err, errlen, "mkdir %s: %s", dir, strerror(errno));
		return -errno;
	}
	for (int i = 0; !ret && i < mi->nfiles; i++) {
		char *path = path_join(dir, mi->name[i], ".rebuild");

		if (!path)
			return -ENOMEM;
		lf->fd[i] = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (lf->fd[i] < 0 || ftruncate(lf->fd[i], (off_t)mi->file[i]->size)) {
			ret = -errno;
			seterr(err, errlen, "create %s: %s", path, strerror(errno));
		}
		lf->size[i] = mi->file[i]->size;
		lf->total += lf->size[i];
		free(path);
	}
	return ret;
}

/* Syncs the rebuilt files, checks them against the recorded crc64 and
 * only then moves them to their names. */
static int install_rebuilt(const char *dir, const struct member_info *mi, struct lfile *lf,
			   char *err, size_t errlen)
{
	unsigned char *buf = malloc(IO_PIECE);
	uint64_t crc;
	int ret = buf ? 0 : -ENOMEM;

	for (int i = 0; !ret && i < mi->nfiles; i++) {
		if (fsync(lf->fd[i]))
			ret = -errno;
		if (!ret)
			ret = file_crc(lf->fd[i], lf->size[i], buf, &crc);
		if (!ret && crc != mi->file[i]->crc) {
			seterr(err, errlen, "rebuilt %s/%s fails its crc64 check", dir,
			       mi->name[i]);
			ret = -EBADMSG;
		}
	}
	for (int i = 0; !ret && i < mi->nfiles; i++) {
		char *from = path_join(dir, mi->name[i], ".rebuild");
		char *to = path_join(dir, mi->name[i], "");

		if (!from || !to)
			ret = -ENOMEM;
		else if (rename(from, to))
			ret = -errno;
		free(from);
		free(to);
	}
	if (!ret)
		ret = fsync_dir(dir);
	free(buf);
	return ret;
}

static void remove_rebuilt(const char *dir, const struct member_info *mi)
{
	for (int i = 0; i < mi->nfiles; i++) {
		char *path = path_join(dir, mi->name[i], ".rebuild");

		if (path)
			unlink(path); /* our own temporary */
		free(path);
	}
}

static void beyond_tolerance(const struct redset *rs, const bool *data_lost, const bool *red_lost,
			     char *err, size_t errlen)
{
	char buf[1024];
	size_t n = 0;

	n += snprintf(buf + n, sizeof(buf) - n, "set %d (ranks ", rs->set_id);
	for (int x = 0; x < rs->p && n < sizeof(buf); x++)
		n += snprintf(buf + n, sizeof(buf) - n, "%s%d", x ? "," : "", rs->world[x]);
	if (n < sizeof(buf))
		n += snprintf(buf + n, sizeof(buf) - n, "): lost ranks ");
	for (int x = 0, first = 1; x < rs->p && n < sizeof(buf); x++) {
		if (!data_lost[x] && !red_lost[x])
			continue;
		n += snprintf(buf + n, sizeof(buf) - n, "%s%d%s", first ? "" : ",", rs->world[x],
			      data_lost[x] ? "" : " (redundancy file)");
		first = 0;
	}
	if (n < sizeof(buf))
		snprintf(buf + n, sizeof(buf) - n, "; scheme %s tolerates %d", rs->ops->name,
			 rs->ops->tolerance(rs));
	seterr(err, errlen, "%s", buf);
}

int redset_rebuild(struct redset *rs, const char *dir, const char *red_name, bool have_mine,
		   char *err, size_t errlen)
{
	struct codec_io io = {.red_fd = -1};
	struct set_meta m = {0};
	int nsec = rs->ops->nsections(rs), p = rs->p, root = -1, nlost = 0, ret;
	int *flags = calloc((size_t)2 * p, sizeof(int)), mine[2];
	bool *data_lost = calloc(p, sizeof(bool)), *red_lost = calloc(p, sizeof(bool));
	char *red = path_join(dir, red_name, ""), *tmp = path_join(dir, red_name, ".tmp");
	bool red_ok, red_new = false, data_new = false;
	int have;

	if (!flags || !data_lost || !red_lost || !red || !tmp) {
		ret = -ENOMEM;
		seterr(err, errlen, "out of memory");
		goto out;
	}

	red_ok = red_load(rs, red, &m, &io.sec, &io.red_fd) == 0;
	if (!red_ok)
		pr_info("%s: missing or not valid", red);
	mine[0] = red_ok;
	mine[1] = have_mine;
	ret = mpi_ret(PMPI_Allgather(mine, 2, MPI_INT, flags, 2, MPI_INT, rs->comm));
	if (ret)
		goto out;
	for (int x = p - 1; x >= 0; x--) {
		red_lost[x] = !flags[2 * x];
		data_lost[x] = !flags[2 * x + 1];
		if (flags[2 * x])
			root = x;
	}
	if (root < 0) {
		/* Nobody knows the names and sizes: nothing can be rebuilt. */
		beyond_tolerance(rs, data_lost, red_lost, err, errlen);
		ret = -EUCLEAN;
		goto out;
	}
	ret = bcast_meta(rs, root, &m);
	if (ret) {
		seterr(err, errlen, "exchanging the set's records failed: %s", strerror(-ret));
		agree(rs, ret, err, errlen, "rebuild");
		goto out;
	}

	have = have_mine && verify_mine(dir, &m.m[rs->me], &io.lf);
	ret = mpi_ret(PMPI_Allgather(&have, 1, MPI_INT, flags, 1, MPI_INT, rs->comm));
	if (ret)
		goto out;
	for (int x = 0; x < p; x++) {
		data_lost[x] = !flags[x];
		nlost += data_lost[x] || red_lost[x];
	}
	if (!nlost)
		goto out;
	if (!rs->ops->feasible(rs, data_lost, red_lost)) {
		beyond_tolerance(rs, data_lost, red_lost, err, errlen);
		ret = -EUCLEAN;
		goto out;
	}
	pr_info("set %d: rebuilding %d member(s), scheme %s", rs->set_id, nlost, rs->ops->name);

	data_new = data_lost[rs->me];
	red_new = red_lost[rs->me];
	if (data_new)
		ret = open_rebuilt(dir, &m.m[rs->me], &io.lf, err, errlen);
	if (!ret && red_new) {
		free(io.sec);
		io.sec = calloc(nsec ? nsec : 1, sizeof(*io.sec));
		if (!io.sec)
			ret = -ENOMEM;
		else if (mkdir(dir, 0700) && errno != EEXIST)
			ret = -errno;
		else
			ret = red_create(tmp, &io.red_fd, red_layout(rs, &m, rs->me, io.sec, nsec));
		if (ret)
			seterr(err, errlen, "create %s: %s", tmp, strerror(-ret));
	}
	io.nsec = nsec;
	io.meta = &m;
	ret = agree(rs, ret, err, errlen, "preparing the rebuild");
	if (ret)
		goto out;

	ret = rs->ops->run(rs, &io, data_lost, red_lost);
	if (!ret)
		ret = io.err;
	if (ret)
		seterr(err, errlen, "rebuild (scheme %s) failed: %s", rs->ops->name,
		       strerror(-ret));
	if (!ret && data_new)
		ret = install_rebuilt(dir, &m.m[rs->me], &io.lf, err, errlen);
	if (!ret && red_new) {
		ret = red_finish(rs, &m, io.red_fd, io.sec, nsec);
		if (!ret && rename(tmp, red))
			ret = -errno;
		if (!ret)
			ret = fsync_dir(dir);
		if (ret)
			seterr(err, errlen, "writing %s: %s", red, strerror(-ret));
	}
	ret = agree(rs, ret, err, errlen, "rebuild");
out:
	if (ret && data_new)
		remove_rebuilt(dir, &m.m[rs->me]);
	if (io.red_fd >= 0)
		close(io.red_fd);
	if (ret && red_new)
		unlink(tmp); /* our own temporary */
	lf_close(&io.lf);
	meta_free(&m);
	free(io.sec);
	free(flags);
	free(data_lost);
	free(red_lost);
	free(red);
	free(tmp);
	return ret;
}
