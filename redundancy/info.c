/* Reading a redundancy file without MPI, for stasis-inspect (redset.h):
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

static const struct scheme_ops *const codecs[] = {
	&scheme_single,
	&scheme_partner,
	&scheme_xor,
	&scheme_rs,
};

/* The set described by a header whose crc matched. */
static int skeleton(const struct file_header *h, struct redundancy_set *rs)
{
	memset(rs, 0, sizeof(*rs));
	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++)
		if (codecs[i]->id == h->scheme)
			rs->ops = codecs[i];
	if (!rs->ops || !h->set_size || h->set_size > MAX_SET || h->set_index >= h->set_size)
		return -EBADMSG;
	rs->p = h->set_size;
	rs->me = h->set_index;
	rs->param = h->param;
	rs->set_id = h->set_id;
	rs->comm = MPI_COMM_NULL;
	return 0;
}

int redundancy_info_read(const char *path, struct redundancy_info *out, char *err, size_t errlen)
{
	unsigned char page[HEADER_BYTES];
	struct file_header *h = (void *)page;
	struct payload_section *sec = NULL;
	struct set_meta m = {0};
	struct redundancy_set rs;
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
	    crc64_ecma_refl(0, page, sizeof(*h)) != want || skeleton(h, &rs)) {
		stasis_errf(err, errlen, "%s: not a valid redundancy file (header)", path);
		return -EBADMSG;
	}
	/* The whole file: records and every payload section's crc. */
	ret = file_load(&rs, path, &m, &sec, &fd, true);
	if (ret) {
		stasis_errf(err, errlen, "%s: damaged redundancy file (%s)", path,
			    ret == -EBADMSG ? "checksum or layout mismatch" : strerror(-ret));
		return ret;
	}
	close(fd);
	free(sec);
	out->scheme = rs.ops->name;
	out->set_id = rs.set_id;
	out->p = rs.p;
	out->me = rs.me;
	out->param = rs.param;
	out->tolerance = rs.ops->tolerance(&rs);
	out->world = calloc(rs.p, sizeof(*out->world));
	out->name = calloc(rs.p, sizeof(*out->name));
	out->size = calloc(rs.p, sizeof(*out->size));
	out->crc = calloc(rs.p, sizeof(*out->crc));
	if (!out->world || !out->name || !out->size || !out->crc) {
		meta_free(&m);
		redundancy_info_free(out);
		stasis_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (int x = 0; x < rs.p; x++) {
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
	struct redundancy_set rs;

	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++)
		if (!strcmp(codecs[i]->name, info->scheme))
			h.scheme = codecs[i]->id;
	h.set_size = info->p;
	h.set_index = info->me;
	h.param = info->param;
	h.set_id = info->set_id;
	return !skeleton(&h, &rs) && rs.ops->feasible(&rs, data_lost, red_lost);
}
