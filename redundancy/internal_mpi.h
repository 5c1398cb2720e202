/* The inside of the redundancy layer that needs MPI: a set with its
 * communicator, the agreement that ends each collective step, and the
 * exchanges that move a scheme's data between the members. */
#ifndef STASIS_REDUNDANCY_INTERNAL_MPI_H
#define STASIS_REDUNDANCY_INTERNAL_MPI_H

#include <mpi.h>

#include "agree.h"
#include "internal.h"
#include "redundancy.h"

struct redundancy_set {
	struct set_geometry g;
	MPI_Comm comm; /* the set, members in ring order */
};

static inline int mpi_ret(int rc)
{
	return rc == MPI_SUCCESS ? 0 : -EIO;
}

/* The end of each collective step (why_agree over the set): every member
 * leaves with the result and the why of the lowest member that failed,
 * the others' why starting with "<step> failed on rank R (set S): ". */
int set_agree(const struct redundancy_set *rs, const char *step, int ret, struct why *why);

/* One encode or rebuild of the set's scheme: moves and combines its data
 * as the scheme says (enum scheme_exchange). Collective over the set;
 * every member must pass the same data_lost/red_lost (agreed before).
 * Local I/O errors land in io->err and the member keeps exchanging (zeros)
 * so that nobody hangs. */
int scheme_exchange(struct redundancy_set *rs, struct scheme_io *io, const bool *data_lost,
		    const bool *red_lost);
/* The two ways, for stripes (exchange.c) with k checksum positions per
 * stripe, and for whole copies (exchange_copies.c). */
int stripe_run(struct redundancy_set *rs, struct scheme_io *io, int k,
	       const struct stripe_kernel *kern, const bool *data_lost, const bool *red_lost);
int copies_run(struct redundancy_set *rs, struct scheme_io *io, const bool *data_lost,
	       const bool *red_lost);

#endif
