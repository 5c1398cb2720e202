/* The one ordered table of the parts of a process (session/part.h says
 * what a part is and what each stage guarantees) and the loops that run a
 * stage over it. Only the engine runs stages. */
#ifndef STASIS_PARTS_H
#define STASIS_PARTS_H

#include <stdbool.h>

#include "part.h"

struct session;

enum part_stage {
	STAGE_STOP,
	STAGE_QUIESCE,
	STAGE_THAW,
	STAGE_CHECK,
	STAGE_RECREATE,
	STAGE_VERIFY,
	STAGE_REATTACH,
	STAGE_ON_TEMP_STACK,
	STAGE_RESUMED,
};

/* Run a stage that can fail on this rank: every part's hook in the
 * stage's order until one fails. Local: 0, or -errno with why set (the
 * part's name in front). */
int parts_run(enum part_stage stage, const struct restart_input *in, struct why *why);
/* Run a restart stage on every rank and agree: 0, or the explaining rank's
 * -errno on every rank, after that rank printed "checkpoint <id>: <why>"
 * (VERIFY: "checkpoint <id> cannot be restored into this process: <why>"). */
int parts_restart_stage(struct session *s, enum part_stage stage, const struct restart_input *in);
/* Stages that cannot fail: THAW, ON_TEMP_STACK, RESUMED. */
void parts_run_void(enum part_stage stage, bool restarted);
/* SAVE, table order: the sections of the parts whose save_early is early
 * into out. 0 or -errno (why). */
int parts_save(uint64_t id, bool early, struct section_list *out, struct why *why);

#endif
