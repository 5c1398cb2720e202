/* The stasis session of one MPI rank: what the preload layer and the
 * checkpoint code share. stasis's own globals are runtime state: never
 * saved, never restored (DESIGN.md section 2, "What resumes where"). */
#ifndef STASIS_SESSION_H
#define STASIS_SESSION_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "store.h"

struct dirty_backend;
struct redset;

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
	struct redset *redset;   /* NULL for scheme single */
};

/* True in an MPI rank started under stasis (decided when the library loads). */
extern bool stasis_active;
/* > 0 while the thread is inside a stasis MPI wrapper (or stasis itself):
 * allocations made then belong to the runtime. */
extern __thread int stasis_depth;

bool stasis_on_main_thread(void);
/* The next definition of an interposed symbol (dlsym(RTLD_NEXT)), cached by
 * the caller. */
void *stasis_next_symbol(const char *name);

/* The session of this process, or NULL before MPI_Init / when inactive. */
struct session *session_get(void);

/* MPI_Init / MPI_Init_thread wrappers: before and after the real call.
 * On a restart, session_after_init does not return: the process resumes
 * from the checkpoint, or stops with one line naming the cause. */
void session_before_init(int **argc, char ****argv);
void session_after_init(int required, int provided);
/* MPI_Finalize wrapper, before the real call. */
void session_finalize(void);

/* Collective over s->comm: print line (an error) on the lowest rank for
 * which mine is true, so that a cause several ranks share is said once. */
void session_report(struct session *s, bool mine, const char *line);

/* The application used a feature stasis cannot restore (derived
 * communicators, application threads, ...): checkpoints are skipped from
 * now on with one warning naming it; the run itself continues unharmed. */
void session_unsupported(const char *feature);

#endif
