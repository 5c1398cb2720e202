/* Reading a redundancy file without MPI, for stasis-inspect (redundancy_read.h):
 * the header says which scheme and set geometry wrote it; a set of that
 * geometry, without a communicator, then lets file_load check every byte and
 * the scheme's own feasible() judge a pattern of losses. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <isa-l.h>

#include "internal.h"

static const struct scheme_ops *const schemes[] = {
    &scheme_single,
    &scheme_partner,
    &scheme_xor,
    &scheme_rs,
};

/* The set described by a header whose crc matched. */
static int skeleton(const struct file_header *h, struct set_geometry *g)
{
	memset(g, 0, sizeof(*g));
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (schemes[i]->id == h->scheme)
			g->ops = schemes[i];
	if (!g->ops || !h->set_size || h->set_size > MAX_SET || h->set_index >= h->set_size)
		return -EBADMSG;
	g->p = h->set_size;
	g->me = h->set_index;
	g->param = h->param;
	g->set_id = h->set_id;
	return 0;
}

int redundancy_info_read(const char *path, struct redundancy_info *out, char *err, size_t errlen)
{
	unsigned char page[HEADER_BYTES];
	struct file_header *h = (void *)page;
	struct payload_section *sec = NULL;
	struct set_meta m = {0};
	struct set_geometry g;
	uint64_t want;
	int fd, ret;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		stasis_errf(err, errlen, "%s: %s", path, ret == -ENOENT ? "missing" : strerror(-ret));
		return ret;
	}
	ret = full_pread(fd, page, sizeof(page), 0);
	close(fd);
	if (ret) {
		stasis_errf(err, errlen, "%s: truncated header", path);
		return -EBADMSG;
	}
	want = h->header_crc;
	h->header_crc = 0;
	if (memcmp(h->magic, FILE_MAGIC, 8) || h->version != FILE_VERSION ||
	    crc64_ecma_refl(0, page, sizeof(*h)) != want || skeleton(h, &g)) {
		stasis_errf(err, errlen, "%s: not a valid redundancy file (header)", path);
		return -EBADMSG;
	}
	/* The whole file: records and every payload section's crc. */
	ret = file_load(&g, path, &m, &sec, &fd, true);
	if (ret) {
		stasis_errf(err, errlen, "%s: damaged redundancy file (%s)", path,
			    ret == -EBADMSG ? "checksum or layout mismatch" : strerror(-ret));
		return ret;
	}
	close(fd);
	free(sec);
	out->scheme = g.ops->name;
	out->set_id = g.set_id;
	out->p = g.p;
	out->me = g.me;
	out->param = g.param;
	out->tolerance = g.ops->tolerance(&g);
	out->world = calloc(g.p, sizeof(*out->world));
	out->name = calloc(g.p, sizeof(*out->name));
	out->size = calloc(g.p, sizeof(*out->size));
	out->crc = calloc(g.p, sizeof(*out->crc));
	if (!out->world || !out->name || !out->size || !out->crc) {
		meta_free(&m);
		redundancy_info_free(out);
		stasis_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (int x = 0; x < g.p; x++) {
		out->world[x] = m.m[x].world_rank;
		if (m.m[x].nfiles > 0) {
			snprintf(out->name[x], sizeof(out->name[x]), "%s", m.m[x].name[0]);
			out->size[x] = m.m[x].file[0]->size;
			out->crc[x] = m.m[x].file[0]->crc;
		}
	}
	meta_free(&m);
	return 0;
}

void redundancy_info_free(struct redundancy_info *info)
{
	free(info->world);
	free(info->name);
	free(info->size);
	free(info->crc);
	memset(info, 0, sizeof(*info));
}

bool redundancy_info_feasible(const struct redundancy_info *info, const bool *data_lost,
			  const bool *red_lost)
{
	struct file_header h = {.scheme = 0};
	struct set_geometry g;

	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (!strcmp(schemes[i]->name, info->scheme))
			h.scheme = schemes[i]->id;
	h.set_size = info->p;
	h.set_index = info->me;
	h.param = info->param;
	h.set_id = info->set_id;
	return !skeleton(&h, &g) && g.ops->feasible(&g, data_lost, red_lost);
}
