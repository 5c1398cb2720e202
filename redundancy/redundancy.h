/* Redundancy sets across ranks (DESIGN.md section 6), after redset/SCR.
 * Ranks are grouped into sets of STASIS_SET_SIZE with at most one rank per
 * failure domain per set; each set protects its members' checkpoint files
 * with one scheme (codec_single.c, codec_partner.c, codec_xor.c,
 * codec_rs.c behind one ops table). All MPI calls inside stasis use the
 * PMPI_ entry points (the MPI_ names are stasis's own wrappers).
 * Functions return 0 or -errno; err gets one line naming the cause. */
#ifndef STASIS_REDUNDANCY_H
#define STASIS_REDUNDANCY_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct redundancy_params {
	const char *scheme; /* "single", "partner", "xor", "rs" */
	int set_size;       /* STASIS_SET_SIZE */
	int rs_k;           /* STASIS_RS_K */
	int replicas;       /* STASIS_PARTNER_REPLICAS */
};

struct redundancy_set;

/* Failure-domain index of this rank: spec "host" (ranks with the same
 * hostname share a domain; domains numbered 0.. in order of lowest rank) or
 * a positive integer N (rank / N). Collective over world. */
int redundancy_domain(MPI_Comm world, const char *spec, int *domain, char *err, size_t errlen);

/* Form this rank's set. Collective over world. Fails with a clear message
 * when the scheme cannot be placed (set size + k > 256, fewer domains than
 * the scheme needs, replicas out of range, ...). */
int redundancy_set_create(MPI_Comm world, int domain, const struct redundancy_params *p, struct redundancy_set **out,
		  char *err, size_t errlen);
void redundancy_set_free(struct redundancy_set *rs);

/* Collective over the set: protect this member's files dir/names[0..n) by
 * writing its redundancy file dir/red_name (0600, synced). The redundancy
 * file also records the names, sizes and crc64 of the files of this member
 * and of its left neighbours, so a rebuild knows what was lost. */
int redundancy_encode(struct redundancy_set *rs, const char *dir, const char *const *names, int n,
		  const char *red_name, char *err, size_t errlen);

/* Collective over the set. have_mine: this member's files are present and
 * intact (the caller checked them). Members that lack them get their files
 * and redundancy file rebuilt into dir (names from the neighbours'
 * records, contents checked against the recorded crc64), when the number
 * of lost members is within the scheme's tolerance. Otherwise -EUCLEAN on
 * every member, err naming the set, the lost ranks and the tolerance;
 * nothing is deleted. */
int redundancy_rebuild(struct redundancy_set *rs, const char *dir, const char *red_name, bool have_mine,
		   char *err, size_t errlen);

/* ---- reading a redundancy file without MPI (stasis-inspect) ---- */

/* What one member's redundancy file says about its set: the geometry, the
 * world rank of each member, and the name, size and crc64 of each
 * member's first protected file (stasis protects one, the image). */
struct redundancy_info {
	const char *scheme; /* "single", "partner", "xor", "rs" */
	int set_id;
	int p;         /* members */
	int me;        /* the member that owns the file */
	int param;     /* rs k, partner replicas */
	int tolerance; /* lost members the scheme always survives */
	int *world;    /* [p] */
	char (*name)[64];
	uint64_t *size, *crc;
};

/* Read and check all of the file (header, records, every payload
 * section's crc64). 0, or -EBADMSG / -errno with err naming the cause. */
int redundancy_info_read(const char *path, struct redundancy_info *out, char *err, size_t errlen);
void redundancy_info_free(struct redundancy_info *info);
/* Whether the scheme can rebuild these losses (a dry run of what
 * redundancy_rebuild decides; data_lost/red_lost per member). */
bool redundancy_info_feasible(const struct redundancy_info *info, const bool *data_lost,
			  const bool *red_lost);

#endif
