/* Collective counts per communicator (DESIGN.md section 10 "agreement
 * anywhere"; MANA calls them collective clocks). Each communicator the
 * program can use carries:
 *  - a global id, the same on every member and no other communicator,
 *    agreed when it is made;
 *  - the world rank of each peer, so that messages are counted by world
 *    rank (traffic.h);
 *  - how many collectives this rank has entered and completed on it.
 * To checkpoint, the coordinator (coord.h) gathers these counts from every
 * rank and picks, for each communicator, the count every member must reach
 * before it stops, so that no rank is inside a collective when the
 * checkpoint is taken. */
#ifndef STASIS_MPI_COLLECTIVE_COUNTS_H
#define STASIS_MPI_COLLECTIVE_COUNTS_H

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
int collective_counts_init(void);

/* The counts of the program's communicator v: MPI_COMM_WORLD, MPI_COMM_SELF
 * or a virtual one; NULL for one stasis does not know. */
struct comm_info *collective_counts_of(MPI_Comm v);

/* A communicator MPI just made (collective over its members): agree on
 * its global id with them and hang its counts on its virtual handle v; peers
 * are the world ranks of its (remote) group. With gid != 0 (a replay) the
 * recorded id is taken instead. Returns the id, 0 on failure. */
uint64_t collective_counts_attach(MPI_Comm v, MPI_Comm real, const int *peers, int npeers,
				 bool inter, uint64_t gid);
/* The communicator behind e is gone. */
void collective_counts_detach(struct vh_entry *e);

/* The next global id this rank would propose: saved in the MPI section of
 * an image (state.h) so that a restart goes on numbering from it. */
uint64_t collective_counts_next_gid(void);
void collective_counts_set_next_gid(uint64_t next);

/* Call fn for the counts of every communicator this rank has: MPI_COMM_WORLD,
 * MPI_COMM_SELF, then the virtual communicators. */
typedef void (*collective_counts_walk_fn)(struct comm_info *ci, void *arg);
void collective_counts_walk(collective_counts_walk_fn fn, void *arg);
/* The live communicator with global id gid, or NULL. */
struct comm_info *collective_counts_find(uint64_t gid);

#endif
