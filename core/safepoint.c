#define LOG_PREFIX ""
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "coord.h"
#include "interval_auto.h"
#include "log.h"
#include "safepoint.h"
#include "session.h"

#define TIMER_SIGNAL (SIGRTMIN + 2)
#define REQUEST_SIGNAL SIGUSR1 /* mpirun forwards it to every rank */

static struct session *sess;
static volatile sig_atomic_t wanted; /* set by the timer or a request */
static timer_t timer;
static bool have_timer;

/* Only sets flags: the coordinator acts at the next MPI call. */
static void on_signal(int sig)
{
	(void)sig;
	wanted = 1;
	coord_wanted();
}

static double next_interval(void)
{
	return sess->cfg.interval_auto ? interval_auto_period() : sess->cfg.interval;
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
	interval_auto_start(s);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(REQUEST_SIGNAL, &sa, NULL) || sigaction(TIMER_SIGNAL, &sa, NULL)) {
		snprintf(err, errlen, "cannot install signal handlers: %s", strerror(errno));
		return -errno;
	}
	coord_start(s);
	/* Only rank 0 keeps time: the coordinator spreads its wish to all. */
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

bool safepoint_wanted(void)
{
	return wanted && sess && sess->enabled;
}

void safepoint_checkpoint_done(double cost)
{
	if (cost > 0)
		interval_auto_cost(cost);
	wanted = 0;
	arm_timer();
}

void safepoint_resumed(void)
{
	wanted = 0;
	arm_timer();
}

void safepoint_stop(void)
{
	coord_finalize();
	if (have_timer)
		timer_delete(timer);
	have_timer = false;
	sess = NULL;
}
