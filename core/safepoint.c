#define LOG_PREFIX ""
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "comms.h"
#include "interval_auto.h"
#include "log.h"
#include "safepoint.h"
#include "session.h"
#include "traffic.h"

#define TIMER_SIGNAL (SIGRTMIN + 2)
#define REQUEST_SIGNAL SIGUSR1 /* mpirun forwards it to every rank */

static struct session *sess;
static volatile sig_atomic_t wanted; /* set by the timer or a request */
static MPI_Request agreement = MPI_REQUEST_NULL;
/* {checkpoint wanted, -(safe points until the next agreement)}, reduced
 * with MAX: every rank learns whether any wants one, and the smallest
 * spacing any proposed. */
static int agree_in[2], agree_out[2];
static uint64_t index_;
static uint64_t next_agreement; /* safe point index of the next agreement */
static uint64_t last_index;     /* of the previous agreement, and its time */
static double last_time;
static timer_t timer;
static bool have_timer;

static void on_signal(int sig)
{
	(void)sig;
	wanted = 1;
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
	if (ret == 0)
		interval_auto_cost((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	wanted = 0;
	arm_timer();
}

static double monotonic(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* How many safe points from now this rank proposes until the next
 * agreement: about AGREE_PERIOD seconds (or a tenth of the interval) at the
 * rate safe points came since the last one. A program that calls
 * collectives every microsecond then pays for an agreement rarely; one that
 * calls them every minute still gets one at each.
 *
 * The rate of a burst says little about what follows it: LAMMPS makes
 * hundreds of collectives in its set-up and a few per time step after, and
 * a spacing learnt in the burst kept its first checkpoint away for the
 * whole run. So the spacing at most quadruples from one agreement to the
 * next, and never passes AGREE_MAX_SPACING: an agreement (completing one
 * MPI_Iallreduce and starting the next, a few us) every 64 collectives
 * costs well under 0.1 us per call (bench/safepoint_perf). */
#define AGREE_PERIOD 0.05
#define AGREE_MAX_SPACING 64
static int spacing_now = 1;
static int propose_spacing(void)
{
	double now = monotonic(), per = (now - last_time) / (double)(index_ - last_index + 1);
	double target = next_interval() / 10;
	double k;

	if (target > AGREE_PERIOD)
		target = AGREE_PERIOD;
	k = last_time > 0 && per > 0 ? target / per : 1;
	last_time = now;
	last_index = index_;
	if (k > 4.0 * spacing_now)
		k = 4.0 * spacing_now;
	return k < 1 ? 1 : k > AGREE_MAX_SPACING ? AGREE_MAX_SPACING : (int)k;
}

void safepoint_collective(MPI_Comm comm, const char *call)
{
	int spacing = 1;

	if (!sess || !sess->enabled || !mpi_comm_spans_world(comm))
		return;
	if (++index_ < next_agreement)
		return; /* the common case: one increment and one compare */
	if (agreement != MPI_REQUEST_NULL) {
		PMPI_Wait(&agreement, MPI_STATUS_IGNORE);
		spacing = spacing_now = -agree_out[1];
		if (agree_out[0])
			try_checkpoint(call);
	}
	/* Started here, completed at a later safe point, the same one on every
	 * rank: the agreement adds no latency (DESIGN.md section 3). */
	agree_in[0] = wanted;
	agree_in[1] = -propose_spacing();
	PMPI_Iallreduce(agree_in, agree_out, 2, MPI_INT, MPI_MAX, sess->comm, &agreement);
	next_agreement = index_ + spacing;
}

void safepoint_resumed(uint64_t index)
{
	index_ = index;
	last_index = index;
	last_time = 0;
	spacing_now = 1;
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
