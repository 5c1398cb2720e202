#define LOG_PREFIX ""
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "log.h"
#include "safepoint.h"
#include "session.h"
#include "traffic.h"

#define TIMER_SIGNAL (SIGRTMIN + 2)
#define REQUEST_SIGNAL SIGUSR1 /* mpirun forwards it to every rank */

static struct session *sess;
static volatile sig_atomic_t wanted; /* set by the timer or a request */
static MPI_Request agreement = MPI_REQUEST_NULL;
static int agree_in, agree_out;
static uint64_t index_;
static timer_t timer;
static bool have_timer;
static double last_cost; /* seconds, for STASIS_INTERVAL=auto */

static void on_signal(int sig)
{
	(void)sig;
	wanted = 1;
}

/* Young's first-order optimum T = sqrt(2 C M) for STASIS_INTERVAL=auto, on
 * the measured cost C of the last checkpoint; 60 s before the first. */
static double next_interval(void)
{
	double t;

	if (!sess->cfg.interval_auto)
		return sess->cfg.interval;
	if (last_cost <= 0)
		return 60;
	t = sqrt(2 * last_cost * sess->cfg.mtbf);
	return t < 1 ? 1 : t;
}

/* One-shot, re-armed after each checkpoint, so that a slow checkpoint does
 * not queue the next one behind it. */
static void arm_timer(void)
{
	double t = next_interval();
	struct itimerspec its = {0};

	if (!have_timer)
		return;
	its.it_value.tv_sec = (time_t)t;
	its.it_value.tv_nsec = (long)((t - floor(t)) * 1e9);
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1;
	timer_settime(timer, 0, &its, NULL);
}

int safepoint_start(struct session *s, char *err, size_t errlen)
{
	struct sigaction sa;
	struct sigevent sev;

	sess = s;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(REQUEST_SIGNAL, &sa, NULL) || sigaction(TIMER_SIGNAL, &sa, NULL)) {
		snprintf(err, errlen, "cannot install signal handlers: %s", strerror(errno));
		return -errno;
	}
	/* Only rank 0 keeps time: the agreement spreads its flag to all. */
	if (s->rank != 0)
		return 0;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_SIGNAL;
	sev.sigev_signo = TIMER_SIGNAL;
	if (timer_create(CLOCK_MONOTONIC, &sev, &timer)) {
		snprintf(err, errlen, "cannot create the checkpoint timer: %s", strerror(errno));
		return -errno;
	}
	have_timer = true;
	arm_timer();
	return 0;
}

/* All ranks are at the same safe point and know a checkpoint is wanted.
 * Take it if the world is quiet, else leave the wish for a later one. */
static void try_checkpoint(const char *call)
{
	int64_t local[3], global[3];
	struct timespec t0, t1;
	int ret;

	traffic_counts(&local[0], &local[1]);
	local[2] = sess->blocked_by != NULL;
	PMPI_Allreduce(local, global, 3, MPI_INT64_T, MPI_SUM, sess->comm);
	if (global[2]) {
		if (sess->rank == 0)
			pr_warn("checkpoint skipped at %s: the program uses a feature stasis "
				"cannot restore yet (named in a warning above)",
				call);
		wanted = 0;
		arm_timer();
		return;
	}
	if (global[0] || global[1]) {
		pr_debug("checkpoint deferred at %s: %lld messages in flight, %lld requests "
			 "pending",
			 call, (long long)global[0], (long long)global[1]);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = checkpoint_take(sess);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (ret == CHECKPOINT_RESUMED)
		return; /* safepoint_resumed() already re-armed everything */
	last_cost = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	wanted = 0;
	arm_timer();
}

void safepoint_collective(MPI_Comm comm, const char *call)
{
	if (!sess || !sess->enabled || comm != MPI_COMM_WORLD)
		return;
	index_++;
	if (agreement != MPI_REQUEST_NULL) {
		PMPI_Wait(&agreement, MPI_STATUS_IGNORE);
		if (agree_out)
			try_checkpoint(call);
	}
	/* Started here, completed at the next safe point: the agreement costs
	 * no extra latency (DESIGN.md section 3). */
	agree_in = wanted;
	PMPI_Iallreduce(&agree_in, &agree_out, 1, MPI_INT, MPI_MAX, sess->comm, &agreement);
}

void safepoint_resumed(uint64_t index)
{
	index_ = index;
	wanted = 0;
	agreement = MPI_REQUEST_NULL;
	arm_timer();
}

uint64_t safepoint_index(void)
{
	return index_;
}

void safepoint_stop(void)
{
	if (agreement != MPI_REQUEST_NULL)
		PMPI_Wait(&agreement, MPI_STATUS_IGNORE);
	if (have_timer)
		timer_delete(timer);
	have_timer = false;
	sess = NULL;
}
