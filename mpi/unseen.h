/* A program whose MPI calls do not reach stasis is never silent (issue 16):
 * one that initialises MPI some way stasis's MPI_Init wrappers do not see
 * (a binding stasis does not wrap, PMPI_Init called directly, an MPI
 * library other than the one stasis was built for) runs unprotected, and
 * rank 0 says so in one line within one interval (a watcher thread, from
 * load until stasis's MPI_Init is seen), and again at its MPI_Finalize or
 * at exit. */
#ifndef STASIS_MPI_UNSEEN_H
#define STASIS_MPI_UNSEEN_H

/* Stasis's MPI_Init (any binding) is under way: MPI is seen. */
void unseen_init_seen(void);
/* At load, in a rank: watch every interval (STASIS_INTERVAL, at most 60 s)
 * whether MPI was initialised without stasis's MPI_Init. */
void unseen_watch(void);
/* Says, once, on rank 0, that MPI is initialised but not through stasis. */
void unseen_check(void);

#endif
