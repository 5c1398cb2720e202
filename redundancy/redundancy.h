/* Redundancy sets across ranks (DESIGN.md section 6); the design follows
 * LLNL's redset and SCR. Ranks are grouped into sets of STASIS_SET_SIZE
 * with at most one rank per failure domain per set; each set protects its
 * members' checkpoint files with one scheme (scheme_single.c,
 * scheme_partner.c, scheme_xor.c, scheme_rs.c behind one table,
 * struct scheme_ops). All MPI calls inside stasis use the PMPI_ entry
 * points (the MPI_ names are stasis's own wrappers). Functions return 0 or
 * -errno and say why in *why (util/why.h); a collective one leaves every
 * member of the set with the same result and why (session/agree.h). */
#ifndef STASIS_REDUNDANCY_H
#define STASIS_REDUNDANCY_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "redundancy_read.h"

struct redundancy_set;

/* Failure-domain index of this rank: spec "host" (ranks with the same
 * hostname share a domain; domains numbered 0.. in order of lowest rank) or
 * a positive integer N (rank / N). Collective over world. */
int redundancy_domain(MPI_Comm world, const char *spec, int *domain, struct why *why);

/* Form this rank's set. Collective over world. Fails with a clear message
 * when the scheme cannot be placed (set size + k > 256, fewer domains than
 * the scheme needs, replicas out of range, ...). */
int redundancy_set_create(MPI_Comm world, int domain, const struct redundancy_params *p,
			  struct redundancy_set **out, struct why *why);
void redundancy_set_free(struct redundancy_set *rs);
/* Lost members the set's scheme always survives; 0 (single): a rebuild
 * can give nothing back. */
int redundancy_tolerance(const struct redundancy_set *rs);

/* Collective over the set: protect this member's files dir/names[0..n) by
 * writing its redundancy file dir/red_name (0600, synced). The redundancy
 * file also records the names, sizes and crc64 of the files of every
 * member, so a rebuild knows what was lost. A set that tolerates no loss
 * writes nothing. */
int redundancy_encode(struct redundancy_set *rs, const char *dir, const char *const *names, int n,
		      const char *red_name, struct why *why);

/* Collective over the set. have_mine: this member's files are present and
 * intact (the caller checked them). Members that lack them get their files
 * and redundancy file rebuilt into dir (names from the neighbours'
 * records, contents checked against the recorded crc64), when the number
 * of lost members is within the scheme's tolerance. Otherwise -EUCLEAN on
 * every member, why naming the set, the lost ranks and the tolerance;
 * nothing is deleted. */
int redundancy_rebuild(struct redundancy_set *rs, const char *dir, const char *red_name,
		       bool have_mine, struct why *why);

#endif
