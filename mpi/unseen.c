/* MPI initialised behind stasis's back (unseen.h). Checked where a program
 * ends: its MPI_Finalize (stasis's, when that one is seen) and the exit
 * of the process (a destructor), for a program none of whose calls stasis
 * sees. MPI_Initialized stays true after MPI_Finalize, and may be called
 * at any time. */
#define LOG_PREFIX ""
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"
#include "config.h"
#include "log.h"
#include "store.h"
#include "unseen.h"

static bool seen, said;

/* Where rank 0 leaves the cause for stasis-restart, which finds no
 * checkpoint after such a run: "unseen" in the job's directory of rank 0
 * (STASIS_DIR with %n and %r 0, then the job key, as format/store.h). */
static int note_path(char *out, size_t len)
{
	static struct stasis_config cfg;
	struct why why = WHY_INIT;
	char dir[PATH_MAX], exe[PATH_MAX];
	const char *job = exe, *slash;
	ssize_t n;

	if (config_load(&cfg, &why) || store_expand(cfg.dir, 0, 0, dir, sizeof(dir)))
		return -EINVAL;
	if (cfg.job[0]) {
		job = cfg.job;
	} else {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0)
			return -EINVAL;
		exe[n] = 0;
		slash = strrchr(exe, '/');
		job = slash ? slash + 1 : exe;
	}
	return snprintf(out, len, "%s/%s/unseen", dir, job) < (int)len ? 0 : -ENAMETOOLONG;
}

/* mkdir -p of path's directory, new components 0700. */
static void make_parents(char *path)
{
	for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = 0;
		if (!mkdir(path, 0700))
			chmod(path, 0700);
		*p = '/';
	}
}

static void write_note(const char *line)
{
	char path[PATH_MAX];
	int fd;

	if (note_path(path, sizeof(path)))
		return;
	make_parents(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write(fd, line, strlen(line)) < 0 || write(fd, "\n", 1) < 0)
		pr_perror("cannot write %s", path);
	close(fd);
}

/* Rank 0 of the job, from the launcher's environment (the same variables
 * that make this process a rank, preload/load.c): MPI may be finalised. */
static bool rank_zero(void);

void unseen_init_seen(void)
{
	char path[PATH_MAX];

	seen = true;
	/* A run stasis sees: an earlier run's note is no longer the cause. */
	if (stasis_active && rank_zero() && !note_path(path, sizeof(path)))
		unlink(path);
}

static bool rank_zero(void)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);

		if (v)
			return !strcmp(v, "0");
	}
	return false;
}

#define CAUSE                                                                                      \
	"initialised MPI without passing through stasis's MPI_Init (a binding stasis does not "  \
	"wrap, PMPI_Init called directly, or another MPI library than the one stasis was built "  \
	"for)"

void unseen_check(void)
{
	const char *restart = getenv("STASIS_RESTART");
	int flag = 0;

	if (!stasis_active || seen || said || PMPI_Initialized(&flag) != MPI_SUCCESS || !flag)
		return;
	said = true;
	if (!rank_zero())
		return;
	pr_warn("the program " CAUSE ": %s",
		restart && !strcmp(restart, "1")
			? "nothing was restored, it ran from its start, unprotected"
			: "it ran unprotected, no checkpoint was taken");
	write_note("its last run under stasis " CAUSE);
}

__attribute__((destructor)) static void unseen_at_exit(void)
{
	unseen_check();
}
