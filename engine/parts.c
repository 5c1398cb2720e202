#define LOG_PREFIX ""
#include <stdio.h>

#include "agree.h"
#include "callstack.h"
#include "exits.h"
#include "fds.h"
#include "libraries.h"
#include "log.h"
#include "maps.h"
#include "parts.h"
#include "procname.h"
#include "ptimers.h"
#include "session.h"
#include "sigstate.h"
#include "section.h"
#include "threads.h"
#include "windows.h"
#include "workdir.h"
#include "names.h"
#include "stdin_relay.h"

/* The only place the order is written; each position has its reason
 * (session/part.h describes the stages). */
static const struct part_ops *const parts[] = {
    &mpi_part,	     /* first to be made again: the memory names MPI objects by virtual handle */
    &shared_windows_part, /* their parts written back once the windows are made again */
    &libraries_part, /* before threads: their code and TLS may be in these libraries */
    &threads_part,   /* stopped first and resumed last; released last on a restart */
    &files_part,     /* checked before anything of a restart changes the process */
    &signals_part,   /* held before mappings are read: nothing may change protections then */
    &timers_part,    /* armed again once the program's signal dispositions are back */
    &mappings_part,  /* checked after the libraries are back: they are among the mappings */
    &callstack_part, /* saved only, for stasis-inspect */
    &procname_part,  /* restart only: /proc's command line, once the stack is back */
    &workdir_part,   /* checked with the files; entered once the memory is back */
    &names_part,     /* after the files: their undo records name names too */
    &stdin_part,     /* checked last: a restart's input is read only once the rest is sound */
    &exits_part,     /* registered again last, once everything they may touch is back */
};
#define NPARTS ((int)(sizeof(parts) / sizeof(parts[0])))

/* Stages that undo or follow the others run the table backwards. */
static bool reverse(enum part_stage stage)
{
	return stage == STAGE_THAW || stage == STAGE_ON_TEMP_STACK;
}

static const char *stage_name(enum part_stage stage)
{
	static const char *const names[] = {
	    [STAGE_STOP] = "checkpoint:stop",	     [STAGE_QUIESCE] = "checkpoint:quiesce",
	    [STAGE_THAW] = "checkpoint:thaw",	     [STAGE_CHECK] = "restart:check",
	    [STAGE_RECREATE] = "restart:recreate",   [STAGE_VERIFY] = "restart:verify",
	    [STAGE_REATTACH] = "restart:reattach",   [STAGE_ON_TEMP_STACK] = "restart:temp-stack",
	    [STAGE_RESUMED] = "resumed",
	};
	return names[stage];
}

static const struct part_ops *part_at(enum part_stage stage, int i)
{
	return parts[reverse(stage) ? NPARTS - 1 - i : i];
}

static int run_one(const struct part_ops *p, enum part_stage stage,
		   const struct restart_input *in, struct why *why)
{
	switch (stage) {
	case STAGE_STOP:
		return p->stop ? p->stop(why) : 0;
	case STAGE_QUIESCE:
		return p->quiesce ? p->quiesce(why) : 0;
	case STAGE_CHECK:
		return p->check ? p->check(in, why) : 0;
	case STAGE_RECREATE:
		return p->recreate ? p->recreate(in, why) : 0;
	case STAGE_VERIFY:
		return p->verify ? p->verify(in, why) : 0;
	case STAGE_REATTACH:
		return p->reattach ? p->reattach(in, why) : 0;
	default:
		return 0;
	}
}

int parts_run(enum part_stage stage, const struct restart_input *in, struct why *why)
{
	for (int i = 0; i < NPARTS; i++) {
		const struct part_ops *p = part_at(stage, i);
		int ret = run_one(p, stage, in, why);

		if (ret) {
			pr_debug("%s:%s: %s", stage_name(stage), p->name, why->msg);
			return ret;
		}
	}
	return 0;
}

int parts_restart_stage(struct session *s, enum part_stage stage, const struct restart_input *in)
{
	struct why why = WHY_INIT;
	int ret = stage_agree(s, stage_name(stage), parts_run(stage, in, &why), &why);

	if (ret && why.rank == s->rank)
		pr_err("checkpoint %llu%s%s", (unsigned long long)in->id,
		       stage == STAGE_VERIFY ? " cannot be restored into this process: " : ": ",
		       why.msg);
	return ret;
}

void parts_run_void(enum part_stage stage, bool restarted)
{
	for (int i = 0; i < NPARTS; i++) {
		const struct part_ops *p = part_at(stage, i);

		if (stage == STAGE_THAW && p->thaw)
			p->thaw();
		else if (stage == STAGE_ON_TEMP_STACK && p->on_temp_stack)
			p->on_temp_stack();
		else if (stage == STAGE_RESUMED && p->resumed)
			p->resumed(restarted);
	}
}

int parts_save(uint64_t id, bool early, struct section_list *out, struct why *why)
{
	for (int i = 0; i < NPARTS; i++) {
		bool now = parts[i]->save && parts[i]->save_early == early;
		int ret = now ? parts[i]->save(id, out, why) : 0;

		if (ret)
			return ret;
	}
	return 0;
}
