/* MPI initialised behind stasis's back (unseen.h). Checked while the
 * program runs (a watcher thread, every interval until stasis's MPI_Init
 * is seen) and where it ends: its MPI_Finalize (stasis's, when that one is
 * seen) and the exit of the process (a destructor), for a program none of
 * whose calls stasis sees. MPI_Initialized stays true after MPI_Finalize,
 * and may be called at any time, from any thread. */
#define LOG_PREFIX ""
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"
#include "config.h"
#include "log.h"
#include "store.h"
#include "unseen.h"

static bool seen, said, said_early;
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cond = PTHREAD_COND_INITIALIZER;
static pthread_t watcher;
static bool watching;
static pid_t watcher_pid; /* a child forked meanwhile has no watcher */
static double watch_every;

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

	pthread_mutex_lock(&watch_lock);
	seen = true;
	pthread_cond_broadcast(&watch_cond);
	pthread_mutex_unlock(&watch_lock);
	/* Gone before the first checkpoint: no thread of stasis's but the
	 * coordinator's lives in a rank that stasis sees. */
	if (watching && getpid() == watcher_pid) {
		pthread_join(watcher, NULL);
		watching = false;
	}
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
		said_early ? "it ran unprotected, no checkpoint was taken"
		: restart && !strcmp(restart, "1")
			? "nothing was restored, it ran from its start, unprotected"
			: "it ran unprotected, no checkpoint was taken");
	write_note("its last run under stasis " CAUSE);
}

/* Every interval until stasis's MPI_Init is seen (unseen_init_seen runs
 * before the real MPI_Init, so a seen one is never mistaken): MPI
 * initialised meanwhile was initialised behind stasis's back. */
static void *watch_main(void *unused)
{
	struct timespec t;
	int flag;

	(void)unused;
	pthread_mutex_lock(&watch_lock);
	while (!seen) {
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += (time_t)watch_every;
		t.tv_nsec += (long)((watch_every - (double)(time_t)watch_every) * 1e9);
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&watch_cond, &watch_lock, &t);
		flag = 0;
		if (seen || PMPI_Initialized(&flag) != MPI_SUCCESS || !flag)
			continue;
		said_early = true;
		if (rank_zero())
			pr_warn("the program " CAUSE ": it runs unprotected, no checkpoint will be "
				"taken");
		break;
	}
	pthread_mutex_unlock(&watch_lock);
	return NULL;
}

void unseen_watch(void)
{
	static struct stasis_config cfg;
	struct why why = WHY_INIT;
	double interval;
	/* Its own small stack: nothing mapped for it, nothing left cached. */
	static char stack[64 << 10] __attribute__((aligned(64)));
	int (*real_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	pthread_attr_t attr;
	sigset_t all, old;

	if (!stasis_active || watching || config_load(&cfg, &why))
		return;
	interval = cfg.interval;
	watch_every = interval < 0.05 ? 0.05 : interval > 60 ? 60 : interval;
	real_create = stasis_next_symbol("pthread_create");
	if (!real_create || pthread_attr_init(&attr))
		return;
	pthread_attr_setstack(&attr, stack, sizeof(stack));
	/* The program's signals are its main thread's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	watching = !real_create(&watcher, &attr, watch_main, NULL);
	watcher_pid = getpid();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
}

__attribute__((destructor)) static void unseen_at_exit(void)
{
	unseen_check();
}
