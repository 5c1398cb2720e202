/* stasis configuration: environment variables, read once at MPI_Init and
 * validated (DESIGN.md section 1). A bad value is reported as one line naming
 * the variable, the value and what is accepted. */
#ifndef STASIS_CONFIG_H
#define STASIS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "why.h"

struct stasis_config {
	char dir[4096];           /* STASIS_DIR pattern (%n, %r) */
	char job[256];            /* STASIS_JOB, "" = the executable's name */
	double interval;          /* STASIS_INTERVAL seconds (> 0) */
	bool interval_auto;       /* STASIS_INTERVAL=auto */
	double mtbf;              /* STASIS_MTBF seconds, for auto */
	double mtbf_light;        /* STASIS_MTBF_LIGHT seconds, INFINITY: unset */
	double mtbf_heavy;        /* STASIS_MTBF_HEAVY seconds, INFINITY: unset */
	bool two_level;           /* either of the two was set */
	char flush_dir[4096];     /* STASIS_FLUSH_DIR pattern, "" = no flush level */
	int flush_every;          /* STASIS_FLUSH_EVERY >= 1 */
	int keep;                 /* STASIS_KEEP >= 1 */
	char scheme[64];	  /* STASIS_SCHEME (a name engine/start.c checks) */
	bool scheme_explicit;     /* STASIS_SCHEME was set, not defaulted */
	int set_size;             /* STASIS_SET_SIZE */
	int rs_k;                 /* STASIS_RS_K */
	int replicas;             /* STASIS_PARTNER_REPLICAS */
	char dirty[16];           /* STASIS_DIRTY */
	char compress[8];         /* STASIS_COMPRESS: none, lz4, zstd */
	int full_every;           /* STASIS_FULL_EVERY >= 1 */
	double fault_us;          /* STASIS_TRACK_FAULT_US >= 0, < 0: time it */
	unsigned long long undo_max; /* STASIS_UNDO_MAX bytes of one interval's undo record */
	unsigned long long deleted_max; /* STASIS_DELETED_MAX bytes of files without a name */
	char failure_domain[64];  /* STASIS_FAILURE_DOMAIN */
	int verbose;              /* STASIS_VERBOSE 0..2 */
	bool restart;             /* STASIS_RESTART=1: set by stasis-restart */
};

/* Fill cfg from the environment (and install STASIS_FAULT's fault points,
 * fault.h). Returns 0, or -EINVAL with why holding
 * "STASIS_X: 'value' <what is accepted>". */
int config_load(struct stasis_config *cfg, struct why *why);
/* One pr_info line per setting (rank 0, STASIS_VERBOSE >= 1). */
void config_print(const struct stasis_config *cfg);

#endif
