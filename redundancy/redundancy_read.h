/* The part of the redundancy layer that needs no MPI (redundancy_read_lib):
 * the schemes by name, the settings of a set, and reading one member's
 * redundancy file without its set, for stasis-inspect and the fuzzer.
 * redundancy.h adds the sets themselves, which need MPI. Functions return
 * 0 or -errno and say why in *why (util/why.h; NULL: not said). */
#ifndef STASIS_REDUNDANCY_READ_H
#define STASIS_REDUNDANCY_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "why.h"

struct scheme_ops; /* a redundancy scheme (internal.h) */

/* The scheme called name ("single", "partner", "xor", "rs"), or NULL. */
const struct scheme_ops *scheme_find(const char *name);
const char *scheme_name(const struct scheme_ops *scheme);
/* Every scheme's name, ", " between them (for a message). */
const char *scheme_names(void);

/* What a set is made with (redundancy_set_create). Here rather than in
 * redundancy.h because the schemes, which need no MPI, check it. */
struct redundancy_params {
	const struct scheme_ops *scheme;
	int set_size; /* STASIS_SET_SIZE */
	int rs_k;     /* STASIS_RS_K */
	int replicas; /* STASIS_PARTNER_REPLICAS */
};

/* What one member's redundancy file says about its set: the geometry, the
 * world rank of each member, and the name, size and crc64 of each
 * member's first protected file (stasis protects one, the image). */
struct redundancy_info {
	const char *scheme; /* "single", "partner", "xor", "rs" */
	int set_id;
	int p;	       /* members */
	int me;	       /* the member that owns the file */
	int param;     /* rs k, partner replicas */
	int tolerance; /* lost members the scheme always survives */
	int *world;    /* [p] */
	char (*name)[64];
	uint64_t *size, *crc;
};

/* Read and check all of the file (header, records, every payload
 * section's crc64). 0, or -EBADMSG / -errno with why naming the cause. */
int redundancy_info_read(const char *path, struct redundancy_info *out, struct why *why);
void redundancy_info_free(struct redundancy_info *info);
/* Whether the scheme can rebuild these losses (a dry run of what
 * redundancy_rebuild decides; data_lost/red_lost per member). */
bool redundancy_info_feasible(const struct redundancy_info *info, const bool *data_lost,
			      const bool *red_lost);

#endif
