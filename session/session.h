/* The stasis session of one MPI rank: what every layer above this one
 * (memory, process, mpi, engine, preload) shares about the rank: its
 * settings, its place in the job, its store and the newest checkpoint.
 * stasis's own globals are runtime state: never saved, never restored
 * (DESIGN.md section 2, "What resumes where"). */
#ifndef STASIS_SESSION_H
#define STASIS_SESSION_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "store.h"

struct dirty_backend;
struct redundancy_set;

struct session {
	struct stasis_config cfg;
	int rank, size;
	int node;      /* failure-domain index (%n) */
	MPI_Comm comm; /* stasis's private duplicate of MPI_COMM_WORLD */
	struct store store;
	char job[256]; /* job key: STASIS_JOB or the executable's file name */
	uint64_t exe_hash;
	uint64_t args_hash;      /* of the program's arguments (not argv[0]) */
	uint64_t stasis_hash;    /* of libstasis.so's file */
	uint64_t last_id;        /* newest committed checkpoint (0: none) */
	uint64_t next_id;        /* above every id on disk: never reuse a name */
	uint64_t own_from;       /* a fresh run's first id: retention leaves
				  * older ones (an earlier run's) alone */
	bool enabled;            /* checkpoints are taken */
	const char *blocked_by;  /* first unsupported feature used, or NULL */
	const struct dirty_backend *dirty; /* NULL: every checkpoint is full */
	struct redundancy_set *redset; /* this rank's set (made at MPI_Init) */
	/* The restart rebuilt this rank's images through the redundancy: its
	 * node lost them, and with them the undo records of the files it
	 * wrote in place (process/undo.h), which no redundancy holds. */
	bool images_rebuilt;
};

/* The session of this process, or NULL before MPI_Init / when inactive. */
struct session *session_get(void);

/* For the engine (engine/start.c): the session to fill at MPI_Init, and
 * whether session_get() hands it out (true once it is complete; false again
 * at MPI_Finalize). */
struct session *session_storage(void);
void session_publish(bool ready);

/* Collective over s->comm: print line (an error) on the lowest rank for
 * which mine is true, so that a cause several ranks share is said once. */
void session_report(struct session *s, bool mine, const char *line);

/* The application used a feature stasis cannot restore (derived
 * communicators, application threads, ...): checkpoints are skipped from
 * now on with one warning naming it; the run itself continues unharmed. */
void session_unsupported(const char *feature);

#endif
