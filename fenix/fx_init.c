/* Fenix_Init and the process side of Fenix on stasis. Without ULFM (none
 * works on Debian 12, FENIX.md section 3) a failed rank ends the job;
 * stasis-run --fenix launches it again (STASIS_FENIX_EPOCH one higher) and
 * Fenix_Init rebuilds the communicator, roles, spares and fail list the
 * reference's repair would give (fx_proc.c); the program restores its data
 * from the store. Here: the resilient communicator, the spares and the
 * relaunched processes of failed ranks parked in Fenix_Init until
 * Fenix_Finalize, and the role queries. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "fenix_int.h"
#include "log.h"
#include "store.h"

struct fx_state fx = {.world = MPI_COMM_NULL, .comm = MPI_COMM_NULL};

struct callback {
	void (*fn)(MPI_Comm, int, void *);
	void *data;
};
static struct callback *cbs;
static int ncbs;

static void say(const char *fmt, va_list ap)
{
	char line[1200];

	vsnprintf(line, sizeof(line), fmt, ap);
	fprintf(stderr, "stasis fenix: %s\n", line);
}

int fx_say(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
	return code;
}

int fx_say_before_return(MPI_Comm comm, bool speaker, int code, const char *fmt, ...)
{
	/* Every rank returns the error and a program may exit at once; the
	 * launcher then kills the speaker, so the line is written before any
	 * rank leaves the barrier. */
	if (speaker) {
		va_list ap;

		va_start(ap, fmt);
		say(fmt, ap);
		va_end(ap);
	}
	MPI_Barrier(comm);
	return code;
}

int fx_agree(MPI_Comm comm, int code)
{
	/* Errors are negative, warnings positive: the lowest error, else the
	 * highest warning, reaches every rank. */
	int in[2] = {code < 0 ? code : 0, code > 0 ? -code : 0}, out[2];
	if (MPI_Allreduce(in, out, 2, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
		return FENIX_ERROR_INTERN;
	return out[0] ? out[0] : -out[1];
}

/* The store directory: STASIS_DIR (%r, %n) / job key / fenix, as the
 * checkpoints' (format/store.c checks ownership and modes). */
static int open_dir(int rank, struct why *why)
{
	struct stasis_config cfg;
	int ret = config_load(&cfg, why);
	if (ret)
		return ret;
	const char *job = cfg.job[0] ? cfg.job : program_invocation_short_name;
	struct store st;
	ret = store_open(&st, cfg.dir, rank, rank, job, true, why);
	if (ret)
		return ret;
	snprintf(fx.dir, sizeof(fx.dir), "%s/fenix", st.dir);
	if (mkdir(fx.dir, 0700) && errno != EEXIST)
		return why_set(why, -errno, "cannot create %s: %s", fx.dir, strerror(errno));
	struct stat sb;
	if (lstat(fx.dir, &sb) || !S_ISDIR(sb.st_mode) || (sb.st_mode & 077))
		return why_set(why, -EPERM, "%s must be a directory of mode 0700: refused", fx.dir);
	return 0;
}

static void init(MPI_Comm comm, MPI_Comm *newcomm, int *role, int spare_ranks, int spawn,
		 MPI_Info info, int *error)
{
	int size, rank, ret;
	*error = FENIX_SUCCESS;
	if (fx.init) {
		*error = fx_say(FENIX_ERROR_INVALID_LOGIC_CALL, "Fenix_Init called twice: refused");
		return;
	}
	if (comm == MPI_COMM_SELF) {
		*error = fx_say(FENIX_ERROR_INVALID_LOGIC_CALL,
				"Fenix_Init on MPI_COMM_SELF: refused (the resilient "
				"communicator needs the ranks that may fail)");
		return;
	}
	MPI_Comm_size(comm, &size);
	MPI_Comm_rank(comm, &rank);
	if (spare_ranks < 0 || spare_ranks >= size) {
		*error = fx_say_before_return(comm, rank == 0, FENIX_ERROR_INVALID_LOGIC_CALL,
					      "Fenix_Init: %d spare ranks of %d: refused (at least "
					      "one rank must be active)", spare_ranks, size);
		return;
	}
	if (info != MPI_INFO_NULL) {
		char v[64];
		int flag = 0;
		MPI_Info_get(info, "FENIX_RESUME_MODE", sizeof(v) - 1, v, &flag);
		if (!flag)
			MPI_Info_get(info, "resume_mode", sizeof(v) - 1, v, &flag);
		if (flag && strcasecmp(v, "fenix_init")) {
			*error = fx_say_before_return(comm, rank == 0, FENIX_ERROR_INVALID_LOGIC_CALL,
						      "Fenix_Init: resume mode '%s' needs in-place "
						      "recovery (ULFM), which stasis cannot give here: "
						      "refused", v);
			return;
		}
	}
	struct why why = WHY_INIT;
	stasis_log_rank = rank; /* the rank the store's lines and STASIS_FAULT's @rank name */
	ret = open_dir(rank, &why);
	if (fx_agree(comm, ret ? -1 : 0)) {
		if (ret)
			fx_say(0, "Fenix_Init: %s", why.msg);
		*error = FENIX_ERROR_INTERN;
		return;
	}
	fx.nspare = spare_ranks;
	MPI_Comm_dup(comm, &fx.world);
	ret = fx_agree(comm, fx_proc_init(comm, spare_ranks, spawn ? 1 : 0, &fx.proc));
	if (ret) {
		*error = ret;
		return;
	}
	int slot = fx.proc.slot;
	MPI_Comm_split(fx.world, slot >= 0 ? 0 : MPI_UNDEFINED, slot, &fx.comm);
	fx.init = true;
	if (slot < 0) {
		/* A spare, or the relaunched process of a failed rank: no
		 * failure can be repaired in place here, so it waits for
		 * Fenix_Finalize and leaves as the spec's spares do. */
		MPI_Barrier(fx.world);
		fx_proc_survived();
		MPI_Comm_free(&fx.world);
		MPI_Finalize();
		exit(0);
	}
	fx.role = fx.proc.role[slot];
	*error = fx.proc.code;
	int world_policy[3] = {1, 0, 0};
	fx_group_make(FENIX_DATA_GROUP_WORLD_ID, fx.comm, 0, 0, world_policy);
	if (newcomm)
		MPI_Comm_dup(fx.comm, newcomm);
	*role = fx.role;
}

void Fenix_Init_spec(MPI_Comm comm, MPI_Comm *newcomm, int *role, int *argc, char ***argv,
		     int spare_ranks, int spawn, MPI_Info info, int *error)
{
	(void)argc, (void)argv;
	int dummy, section = fx_section_begin();
	init(comm, newcomm, role ? role : &dummy, spare_ranks, spawn, info, error);
	fx_section_end(section);
}

void Fenix_Init_ref(int *role, MPI_Comm comm, MPI_Comm *newcomm, int *argc, char ***argv,
		    int spare_ranks, int spawn, MPI_Info info, int *error)
{
	Fenix_Init_spec(comm, newcomm, role, argc, argv, spare_ranks, spawn, info, error);
}

int Fenix_Initialized(int *flag)
{
	*flag = fx.init;
	return FENIX_SUCCESS;
}

int Fenix_Callback_register(void (*recover)(MPI_Comm, int, void *), void *data)
{
	if (!fx.init)
		return FENIX_ERROR_UNINITIALIZED;
	if (!recover)
		return FENIX_ERROR_CALLBACK_NOT_REGISTERED;
	struct callback *n = realloc(cbs, sizeof(*cbs) * (size_t)(ncbs + 1));
	if (!n)
		return FENIX_ERROR_CALLBACK_NOT_REGISTERED;
	cbs = n;
	cbs[ncbs++] = (struct callback){recover, data};
	return FENIX_SUCCESS;
}

int Fenix_Callback_pop(void)
{
	if (!fx.init)
		return FENIX_ERROR_UNINITIALIZED;
	if (!ncbs)
		return FENIX_ERROR_CALLBACK_NOT_REGISTERED;
	ncbs--;
	return FENIX_SUCCESS;
}

/* The roles are those of the resilient communicator's ranks (fx.proc);
 * comm must have its size (the resilient comm or a dup of it). */
static int check_comm(MPI_Comm comm)
{
	int size;
	if (comm == MPI_COMM_NULL || MPI_Comm_size(comm, &size) != MPI_SUCCESS ||
	    size != fx.proc.nworld - fx.proc.nspare)
		return -1;
	return size;
}

int Fenix_Get_number_of_ranks_with_role(MPI_Comm comm, int role, int *n)
{
	if (!fx.init)
		return FENIX_ERROR_UNINITIALIZED;
	if (role < FENIX_ROLE_INITIAL_RANK || role > FENIX_ROLE_SURVIVOR_RANK || !n)
		return FENIX_ERROR_INVALID_ATTRIBUTE_VALUE;
	int size = check_comm(comm);
	if (size < 0)
		return FENIX_ERROR_INVALID_ATTRIBUTE_VALUE;
	*n = 0;
	for (int r = 0; r < size; r++)
		*n += fx.proc.role[r] == role;
	return FENIX_SUCCESS;
}

int Fenix_get_number_of_ranks_with_role(int role, int *n)
{
	return Fenix_Get_number_of_ranks_with_role(fx.comm, role, n);
}

int Fenix_Get_role(MPI_Comm comm, int rank, int *role)
{
	if (!fx.init)
		return FENIX_ERROR_UNINITIALIZED;
	int size = check_comm(comm);
	if (size < 0 || rank < 0 || rank >= size || !role)
		return FENIX_ERROR_INVALID_POSITION;
	*role = fx.proc.role[rank];
	return FENIX_SUCCESS;
}

int Fenix_get_role(MPI_Comm comm, int rank, int *role)
{
	return Fenix_Get_role(comm, rank, role);
}

/* The reference's form: the count, and the failed Fenix world ranks of the
 * most recent recovery (none on the first launch). */
int Fenix_Process_fail_list(int **fail_list)
{
	if (fail_list)
		*fail_list = fx.init ? fx.proc.fail : NULL;
	return fx.init ? fx.proc.nfail : 0;
}

int Fenix_Process_detect_failures(int do_recovery)
{
	(void)do_recovery;
	return fx.init ? FENIX_SUCCESS : FENIX_ERROR_UNINITIALIZED;
}

int Fenix_check_cancelled(MPI_Request *request, MPI_Status *status)
{
	(void)request, (void)status;
	return 0; /* no request survives a relaunch to be cancelled */
}

int Fenix_Finalize(void)
{
	if (!fx.init || fx.finalized)
		return FENIX_ERROR_UNINITIALIZED;
	int section = fx_section_begin();
	/* An istore never waited for ends with its writer. */
	for (struct fx_group *g = fx.groups; g; g = g->next)
		fx_async_join(g);
	/* Releases the spares waiting in Fenix_Init. */
	MPI_Barrier(fx.world);
	fx_proc_survived();
	fx.finalized = true;
	MPI_Comm_free(&fx.world);
	fx_section_end(section);
	return FENIX_SUCCESS;
}
