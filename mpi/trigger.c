#define LOG_PREFIX ""
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coord.h"
#include "interval_auto.h"
#include "log.h"
#include "trigger.h"
#include "session.h"
#include "sigstate.h"

#define TIMER_SIGNAL (SIGRTMIN + 2)
#define REQUEST_SIGNAL SIGUSR1 /* mpirun forwards it to every rank */

static struct session *sess;
static volatile sig_atomic_t wanted; /* set by the timer or a request */
static timer_t timer;
static bool have_timer;

/* Only set flags: the coordinator acts at the next MPI call. Both signals
 * are stasis's own (sigstate.h): the program's handler of either runs
 * after, as it would without stasis, for every delivery that is not the
 * checkpoint timer's. */
static void want(void)
{
	wanted = 1;
	coord_wanted();
}

/* A request comes from another process (mpirun forwards it); a program
 * raising SIGUSR1 itself means its own handler, not a checkpoint. */
static void on_request(int sig, siginfo_t *si, void *ctx)
{
	if (si->si_pid != getpid())
		want();
	sigstate_chain(sig, si, ctx);
}

static void on_timer(int sig, siginfo_t *si, void *ctx)
{
	if (si->si_code == SI_TIMER && si->si_value.sival_ptr == &timer)
		want();
	else
		sigstate_chain(sig, si, ctx);
}

static double next_interval(void)
{
	return sess->cfg.interval_auto ? interval_auto_period() : sess->cfg.interval;
}

/* A checkpoint put off (a pipe to another process open) is tried again
 * after this many seconds (or the interval, if shorter): a program that
 * holds the pipe a moment is not left a whole interval without one. A try
 * costs one agreement of the ranks. */
#define DEFER_SECONDS 1.0

/* One-shot, re-armed after each checkpoint, so that a slow checkpoint does
 * not queue the next one behind it. */
static void arm_in(double t)
{
	struct itimerspec its = {0};

	if (!have_timer)
		return;
	its.it_value.tv_sec = (time_t)t;
	its.it_value.tv_nsec = (long)((t - floor(t)) * 1e9);
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1;
	timer_settime(timer, 0, &its, NULL);
}

static void arm_timer(void)
{
	arm_in(next_interval());
}

int trigger_start(struct session *s, coord_take_fn take, struct why *why)
{
	struct sigevent sev;
	int ret;

	sess = s;
	interval_auto_start(s);
	if ((ret = sigstate_claim(REQUEST_SIGNAL, on_request, "checkpoint requests")) ||
	    (ret = sigstate_claim(TIMER_SIGNAL, on_timer, "rank 0's checkpoint timer"))) {
		return why_set(why, ret, "cannot install signal handlers: %s", strerror(-ret));
	}
	coord_start(s, take);
	/* Only rank 0 keeps time: the coordinator spreads its wish to all. */
	if (s->rank != 0)
		return 0;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_SIGNAL;
	sev.sigev_signo = TIMER_SIGNAL;
	sev.sigev_value.sival_ptr = &timer; /* tells its signals from the program's */
	if (timer_create(CLOCK_MONOTONIC, &sev, &timer)) {
		return why_set(why, -errno, "cannot create the checkpoint timer: %s",
			       strerror(errno));
	}
	have_timer = true;
	arm_timer();
	return 0;
}

bool trigger_wanted(void)
{
	return wanted && sess && sess->enabled;
}

void trigger_checkpoint_done(double cost)
{
	if (cost > 0)
		interval_auto_cost(cost);
	wanted = 0;
	arm_timer();
}

void trigger_checkpoint_deferred(void)
{
	wanted = 0;
	arm_in(fmin(DEFER_SECONDS, next_interval()));
}

void trigger_resumed(void)
{
	wanted = 0;
	arm_timer();
}

void trigger_stop(void)
{
	coord_finalize();
	if (have_timer)
		timer_delete(timer);
	have_timer = false;
	sess = NULL;
}
