#define LOG_PREFIX ""
#include <dlfcn.h>
#include <fcntl.h>
#include <isa-l.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime.h"
#include "checkpoint.h"
#include "dirty.h"
#include "flush.h"
#include "image.h"
#include "log.h"
#include "maps.h"
#include "redundancy.h"
#include "restore.h"
#include "trigger.h"
#include "session.h"
#include "start.h"
#include "section.h"
#include "tracking.h"
#include "unseen.h"
#include "stdin_relay.h"

/* The restore overwrites the main stack, where argv and environ live: the
 * runtime must only ever see copies (DESIGN.md section 2). */
static char **copy_strings(char **v, int n)
{
	char **copy = malloc((n + 1) * sizeof(*copy));

	if (!copy)
		return v;
	for (int i = 0; i < n; i++)
		copy[i] = strdup(v[i]) ?: v[i];
	copy[n] = NULL;
	return copy;
}

void engine_before_init(int **argc, char ****argv)
{
	static int argc_copy;
	static char **argv_copy;
	static int *argc_copy_p = &argc_copy;
	static char ***argv_copy_p = &argv_copy;
	extern char **environ;
	const char *restart = getenv("STASIS_RESTART");
	int n = 0;

	unseen_init_seen();
	if (!stasis_active || !restart || strcmp(restart, "1"))
		return;
	while (environ[n])
		n++;
	environ = copy_strings(environ, n);
	if (argc && *argc && argv && *argv && **argv) {
		argc_copy = **argc;
		argv_copy = copy_strings(**argv, argc_copy);
		*argc = argc_copy_p;
		*argv = argv_copy_p;
	}
}

/* A setting or a restart failed at MPI_Init: the cause was printed on one
 * rank; every rank stops the same way. */
static void __attribute__((noreturn)) stop_run(void)
{
	PMPI_Finalize();
	exit(1);
}

static void job_key(const char *configured, char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n;
	const char *base;

	if (configured[0]) {
		snprintf(out, len, "%.255s", configured);
		return;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	base = strrchr(exe, '/');
	snprintf(out, len, "%.255s", base ? base + 1 : (n > 0 ? exe : "program"));
}

/* crc64 of the program's arguments after argv[0] (whose spelling depends
 * on how the launcher was called, while the executable is checked by its
 * contents), from /proc/self/cmdline: Fortran programs have no argv. */
static uint64_t args_crc64(void)
{
	static char buf[1 << 16];
	size_t n = 0, first;
	ssize_t r;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	while (n < sizeof(buf) && (r = read(fd, buf + n, sizeof(buf) - n)) > 0)
		n += r;
	close(fd);
	first = strnlen(buf, n);
	first += first < n;
	return crc64_ecma_refl(0, (const unsigned char *)buf + first, n - first);
}

/* crc64 of the file stasis's code was loaded from (libstasis.so): a
 * checkpoint's stack returns into it, so a restart needs the same build. */
static uint64_t stasis_crc64(void)
{
	Dl_info info;
	uint64_t crc = 0;

	if (!dladdr((void *)stasis_crc64, &info) || !info.dli_fname ||
	    file_crc64(info.dli_fname, &crc))
		pr_warn("cannot read stasis's own library to identify its build");
	return crc;
}

/* Checkpoints are numbered above every id any rank has on disk: no name
 * is reused, and a fresh run's own (above an earlier run's, of the same
 * job key) are the newest for stasis-restart. */
static uint64_t first_free_id(struct session *s)
{
	uint64_t ids[1], newest = 0;

	if (store_list(&s->store, ids, 1) == 1)
		newest = ids[0];
	if (flush_newest_id() > newest)
		newest = flush_newest_id();
	PMPI_Allreduce(MPI_IN_PLACE, &newest, 1, MPI_UINT64_T, MPI_MAX, s->comm);
	return newest + 1;
}

/* This rank's redundancy set. The default scheme on a machine it cannot
 * protect (one node): say so and go on with single, which protects
 * nothing; a scheme asked for is an error. Collective: a scheme that
 * cannot be placed fails the same way on every rank. */
static int make_set(struct session *s, const struct scheme_ops *scheme, struct why *why)
{
	struct redundancy_params rp = {scheme, s->cfg.set_size, s->cfg.rs_k, s->cfg.replicas};
	int ret = redundancy_set_create(MPI_COMM_WORLD, s->node, &rp, &s->redset, why);

	if (ret && !s->cfg.scheme_explicit) {
		if (s->rank == 0)
			pr_warn("STASIS_SCHEME defaults to %s, which cannot be placed here (%s): "
				"checkpoints are not protected against node loss",
				s->cfg.scheme, why->msg);
		strcpy(s->cfg.scheme, "single");
		rp.scheme = scheme_find(s->cfg.scheme);
		why_clear(why);
		ret = redundancy_set_create(MPI_COMM_WORLD, s->node, &rp, &s->redset, why);
	}
	return ret;
}

void engine_after_init(int required, int provided)
{
	struct session *s = session_storage();
	const struct scheme_ops *scheme;
	struct why why = WHY_INIT;
	int ret;
	bool mine;

	if (!stasis_active || session_get())
		return;
	PMPI_Comm_rank(MPI_COMM_WORLD, &s->rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &s->size);
	stasis_log_rank = s->rank;
	if (config_load(&s->cfg, &why)) {
		if (s->rank == 0)
			pr_err("%s", why.msg);
		stop_run();
	}
	/* The schemes' names are the redundancy layer's: one a user mistyped
	 * stops the run here, as any other bad setting does. */
	scheme = scheme_find(s->cfg.scheme);
	if (!scheme) {
		if (s->rank == 0)
			pr_err("STASIS_SCHEME: '%s' is not one of %s", s->cfg.scheme,
			       scheme_names());
		stop_run();
	}
	stasis_log_verbosity = s->cfg.verbose;
	if (s->rank == 0)
		config_print(&s->cfg);
	/* Any thread level is fine while the program has only its main
	 * thread: a thread it starts is refused where it is made (threads.c). */
	(void)required;
	(void)provided;
	PMPI_Comm_dup(MPI_COMM_WORLD, &s->comm);
	if (mpi_section_init()) {
		if (s->rank == 0)
			pr_err("cannot set up the MPI state stasis keeps");
		stop_run();
	}
	job_key(s->cfg.job, s->job, sizeof(s->job));
	if (file_crc64("/proc/self/exe", &s->exe_hash))
		pr_warn("cannot read /proc/self/exe to identify the executable");
	s->args_hash = args_crc64();
	s->stasis_hash = stasis_crc64();

	s->dirty = dirty_select(s->cfg.dirty, &why);
	ret = !s->dirty && why_said(&why) ? -EINVAL : 0;
	if (!ret && s->rank == 0)
		pr_info("dirty-page tracking: %s (STASIS_DIRTY=%s)",
			s->dirty ? s->dirty->name : "off", s->cfg.dirty);
	if (!ret)
		ret = redundancy_domain(MPI_COMM_WORLD, s->cfg.failure_domain, &s->node, &why);
	if (!ret)
		ret = store_open(&s->store, s->cfg.dir, s->node, s->rank, s->job, true, &why);
	if (!ret)
		ret = store_lock(&s->store, &why);
	if (!ret)
		ret = flush_open(s, &why);
	/* The set is made by every rank together: only once all got here. */
	mine = ret != 0;
	PMPI_Allreduce(MPI_IN_PLACE, &ret, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (!ret) {
		ret = make_set(s, scheme, &why);
		mine = ret != 0;
		PMPI_Allreduce(MPI_IN_PLACE, &ret, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	}
	if (ret) {
		session_report(s, mine && why_said(&why), why.msg);
		stop_run();
	}
	tracking_set_program_protected(maps_protected);
	tracking_start(s);
	s->next_id = first_free_id(s);
	/* A fresh run leaves an earlier run's checkpoints in place: they may
	 * be the ones the user meant to restart. */
	if (!s->cfg.restart) {
		s->own_from = s->next_id;
		if (s->next_id > 1 && s->rank == 0)
			pr_warn("%s holds checkpoints of an earlier run of '%s' (up to %llu): they "
				"stay, this run numbers its own from %llu, and stasis-restart "
				"resumes the newest",
				s->store.dir, s->job, (unsigned long long)s->next_id - 1,
				(unsigned long long)s->next_id);
	}
	stdin_relay_install(s->cfg.restart);
	s->enabled = true;
	session_publish(true);
	{
		struct why tw = WHY_INIT;

		if (trigger_start(s, checkpoint_take, &tw)) {
			pr_err("%s", tw.msg);
			stop_run();
		}
	}
	if (s->cfg.restart) {
		restore_latest(s); /* returns only on failure, cause printed */
		stop_run();
	}
}

void engine_finalize(void)
{
	struct session *s = session_get();

	if (!s)
		return;
	trigger_stop();
	flush_stop();
	s->enabled = false;
	if (s->redset)
		redundancy_set_free(s->redset);
	s->redset = NULL;
	PMPI_Comm_free(&s->comm);
	session_publish(false);
}
