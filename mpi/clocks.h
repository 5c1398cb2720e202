/* Per-communicator clocks (issue 8, DESIGN.md section 10 "agreement
 * anywhere"): each communicator the program can use has a global id, the
 * same on every member (agreed when it is made), the world ranks of its
 * peers (to count messages by world rank), and the number of collectives
 * this rank entered and completed on it. The coordinator (coord.h) compares
 * the clocks of all ranks to find where each must stop so that no rank is
 * inside a collective when a checkpoint is taken. */
#ifndef STASIS_MPI_CLOCKS_H
#define STASIS_MPI_CLOCKS_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "handles.h"

struct comm_info {
	uint64_t gid;		     /* the same on every member; 0: MPI_COMM_WORLD */
	int size;		     /* peers: the size, or the remote size */
	const int *world;	     /* world rank of each peer */
	uint64_t entered, completed; /* collectives on it, this rank */
	MPI_Comm self;		     /* the program's handle for it */
};

#define GID_WORLD 0
#define GID_SELF 1

/* After MPI_Init. */
int clocks_init(void);

/* The clock of the program's communicator v: MPI_COMM_WORLD, MPI_COMM_SELF
 * or a virtual one; NULL for one stasis does not know. */
struct comm_info *clocks_of(MPI_Comm v);

/* A communicator MPI just made (collective over its members): agree on
 * its global id with them and hang a clock on its virtual handle v; peers
 * are the world ranks of its (remote) group. With gid != 0 (a replay) the
 * recorded id is taken instead. Returns the id, 0 on failure. */
uint64_t clocks_attach(MPI_Comm v, MPI_Comm real, const int *peers, int npeers, bool inter,
		       uint64_t gid);
/* The communicator behind e is gone. */
void clocks_detach(struct vh_entry *e);

/* The next id this rank would give: carried in the MPI state. */
uint64_t clocks_next_gid(void);
void clocks_set_next_gid(uint64_t next);

/* Walk every clock this rank has (MPI_COMM_WORLD's first, then the
 * virtual communicators'). */
typedef void (*clocks_walk_fn)(struct comm_info *ci, void *arg);
void clocks_walk(clocks_walk_fn fn, void *arg);
/* The live communicator with global id gid, or NULL. */
struct comm_info *clocks_find(uint64_t gid);

#endif
