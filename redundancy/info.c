/* Reading a redundancy file without MPI, for stasis-inspect
 * (redundancy_read.h): the header says which scheme and set geometry wrote
 * it; a set of that geometry, without a communicator, then lets file_load
 * check every byte and the scheme's own feasible() judge a pattern of
 * losses. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <isa-l.h>

#include "internal.h"

/* The geometry of a set that a scheme could have written a file for. */
static int skeleton(const struct scheme_ops *ops, uint32_t p, uint32_t me, uint32_t param,
		    uint32_t set_id, struct set_geometry *g)
{
	if (!ops || !p || p > MAX_SET || me >= p)
		return -EBADMSG;
	*g = (struct set_geometry){.ops = ops, .p = p, .me = me, .param = param, .set_id = set_id};
	return 0;
}

int redundancy_info_read(const char *path, struct redundancy_info *out, struct why *why)
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
	if (fd < 0)
		return why_set(why, -errno, "%s: %s", path,
			       errno == ENOENT ? "missing" : strerror(errno));
	ret = full_pread(fd, page, sizeof(page), 0);
	close(fd);
	if (ret)
		return why_set(why, -EBADMSG, "%s: truncated header", path);
	want = h->header_crc;
	h->header_crc = 0;
	if (memcmp(h->magic, FILE_MAGIC, 8) || h->version != FILE_VERSION ||
	    crc64_ecma_refl(0, page, sizeof(*h)) != want ||
	    skeleton(scheme_by_id(h->scheme), h->set_size, h->set_index, h->param, h->set_id, &g))
		return why_set(why, -EBADMSG, "%s: not a valid redundancy file (header)", path);
	/* The whole file: records and every payload section's crc. */
	ret = file_load(&g, path, &m, &sec, &fd, true);
	if (ret)
		return why_set(why, ret, "%s: damaged redundancy file (%s)", path,
			       ret == -EBADMSG ? "checksum or layout mismatch" : strerror(-ret));
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
		return why_set(why, -ENOMEM, "out of memory");
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
	struct set_geometry g;

	return !skeleton(scheme_find(info->scheme), info->p, info->me, info->param, info->set_id,
			 &g) &&
	       g.ops->feasible(&g, data_lost, red_lost);
}
