/* The program's side of the coordinator (coord.h): the gate at the entry
 * of collectives, the places where it stops, and the checkpoint it takes
 * with every other rank once the coordinator threads said so. */
#define LOG_PREFIX ""
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"
#include "collective_counts.h"
#include "coord.h"
#include "windows.h"
#include "coord_int.h"
#include "drain.h"
#include "log.h"
#include "requests.h"
#include "session.h"

volatile int coord_flag;

struct coord_shared coord_sh = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cond = PTHREAD_COND_INITIALIZER,
    .wake = {-1, -1},
};

static struct session *sess;
static coord_take_fn take_fn;
static pthread_t thread;
static bool have_thread;

#define SH coord_sh
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)

/* --- shared helpers (under the lock) -------------------------------------------- */

uint64_t coord_target_of(uint64_t gid)
{
	for (size_t i = 0; i < SH.ntargets; i++)
		if (SH.targets[i].gid == gid)
			return SH.targets[i].target;
	return 0;
}

void coord_set_target(uint64_t gid, uint64_t target)
{
	for (size_t i = 0; i < SH.ntargets; i++)
		if (SH.targets[i].gid == gid) {
			if (target > SH.targets[i].target)
				SH.targets[i].target = target;
			return;
		}
	if (SH.ntargets == SH.targets_cap) {
		size_t cap = SH.targets_cap ? SH.targets_cap * 2 : 16;
		void *p = realloc(SH.targets, sizeof(*SH.targets) * cap);

		if (!p)
			return; /* unknown targets are 0: the rank stops sooner, no harm */
		SH.targets = p;
		SH.targets_cap = cap;
	}
	SH.targets[SH.ntargets++] = (struct coord_target){gid, target};
}

struct conv_ctx {
	bool converged;
};

static void check_one(struct comm_info *ci, void *arg)
{
	struct conv_ctx *c = arg;

	if (LOAD(ci->entered) < coord_target_of(ci->gid))
		c->converged = false;
}

/* This rank has entered as many collectives as any member on every
 * communicator, and holds no message it matched but did not receive. */
bool coord_converged(void)
{
	struct conv_ctx c = {mpi_matched() == 0};

	collective_counts_walk(check_one, &c);
	return c.converged;
}

void coord_queue(uint32_t type, uint64_t a, uint64_t b)
{
	if (SH.nout == SH.out_cap) {
		size_t cap = SH.out_cap ? SH.out_cap * 2 : 16;
		void *p = realloc(SH.out, sizeof(*SH.out) * cap);

		if (!p)
			return;
		SH.out = p;
		SH.out_cap = cap;
	}
	SH.out[SH.nout++] = (struct oob_msg){type, (uint32_t)SH.rank, a, b, 0};
}

void coord_wanted(void)
{
	coord_wake();
}

void coord_wake(void)
{
	char c = 1;
	int saved = errno;

	if (SH.wake[1] >= 0 && write(SH.wake[1], &c, 1) < 0) {
		/* full pipe: the thread is awake already */
	}
	errno = saved;
}

/* --- start ---------------------------------------------------------------------------- */

void coord_start(struct session *s, coord_take_fn take)
{
	struct why why = WHY_INIT;
	int ret, (*real_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	sigset_t all, old;

	sess = s;
	take_fn = take;
	SH.rank = s->rank;
	SH.size = s->size;
	SH.ready = !s->cfg.restart;
	ret = oob_start(s->comm, s->rank, s->size, &SH.fds, &why);
	if (ret) {
		if (why_said(&why))
			pr_warn("%s; checkpoints are off", why.msg);
		session_unsupported("no network for stasis's coordinator");
		return;
	}
	if (pipe2(SH.wake, O_CLOEXEC | O_NONBLOCK)) {
		session_unsupported("no pipe for stasis's coordinator");
		return;
	}
	/* stasis's own thread: the interposed pthread_create would take it
	 * for the program's. */
	real_create = stasis_next_symbol("pthread_create");
	/* Born with every signal blocked: the program's signals (its timers,
	 * its handlers) are the main thread's, not stasis's thread's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = !real_create || real_create(&thread, NULL, coord_thread_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		session_unsupported("no thread for stasis's coordinator");
		return;
	}
	have_thread = true;
}

/* --- the checkpoint ----------------------------------------------------------------------- */

/* Every rank was told to stop (the coordinator threads agreed that no
 * rank is inside a collective or behind one): take the checkpoint here,
 * all together. */
static void wait_at_entry(void);
static void hold_while_level(void);

/* Stopped: wait for the leader's word. MSG_GO once every rank acknowledged
 * STOP with no epoch open on a window (coord_thread.c): a rank whose epoch
 * opened after the last round may wait inside MPI_Win_complete for a
 * post of this rank's, which only going on gives. False when the attempt
 * was given up instead. MPI is kept moving meanwhile. */
static bool await_go(void)
{
	bool go;

	pthread_mutex_lock(&SH.lock);
	while (LOAD(SH.stop) && LOAD(SH.go) != SH.attempt)
		wait_at_entry();
	go = LOAD(SH.stop) != 0;
	pthread_mutex_unlock(&SH.lock);
	return go;
}

static void take_checkpoint(void)
{
	uint64_t attempt = SH.attempt;

	if (!await_go()) {
		coord_flag = LOAD(SH.pending) || LOAD(SH.stop) || drain_pending();
		return;
	}
	if (drain_and_checkpoint(sess, take_fn)) {
		/* A restart resumed here: attempt and the shared state are the new
		 * process's, where no attempt got past this rank's answer. */
		pthread_mutex_lock(&SH.lock);
		SH.ready = true;
		pthread_mutex_unlock(&SH.lock);
		coord_wake();
		coord_flag = LOAD(SH.pending) || drain_pending();
		return;
	}
	pthread_mutex_lock(&SH.lock);
	STORE(SH.stop, 0);
	STORE(SH.pending, 0);
	SH.ntargets = 0;
	coord_queue(MSG_DONE, attempt, 0);
	pthread_mutex_unlock(&SH.lock);
	coord_wake();
	coord_flag = drain_pending();
}

void coord_poll(void)
{
	if (LOAD(SH.stop)) {
		/* Not while a passive-target epoch has work open (windows.h):
		 * looked at again at the next MPI call. */
		if (windows_hold_stop())
			return;
		take_checkpoint();
		return;
	}
	drain_progress();
	coord_flag = LOAD(SH.pending) || LOAD(SH.stop) || drain_pending();
}

void coord_match_begin(void)
{
	if (stasis_app_thread)
		return;
	for (;;) {
		if (LOAD(SH.pending)) {
			/* A match would make this rank one that cannot stop: a
			 * level rank waits here as at a collective's entry. */
			pthread_mutex_lock(&SH.lock);
			hold_while_level();
			pthread_mutex_unlock(&SH.lock);
		}
		STORE(SH.in_match, 1);
		if (!LOAD(SH.stop) || windows_hold_stop())
			return;
		STORE(SH.in_match, 0);
		take_checkpoint();
	}
}

void coord_match_end(void)
{
	if (!stasis_app_thread)
		STORE(SH.in_match, 0);
}

void coord_wait_point(void)
{
	if (stasis_app_thread)
		threads_mpi_call();
	else if (coord_flag)
		coord_poll();
}

/* Wait at the entry of a collective: an attempt is under way and this
 * rank is level with every member on every communicator. MPI is kept
 * moving meanwhile (another rank may be receiving from this one). */
static void wait_at_entry(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&SH.cond, &SH.lock, &t);
	pthread_mutex_unlock(&SH.lock);
	mpi_req_progress(VH_COLL);
	drain_progress();
	pthread_mutex_lock(&SH.lock);
}

/* Under the lock, at the entry of a collective during an attempt: while
 * this rank is level with every member on every communicator, it stops
 * here (and takes the checkpoint here when every rank may stop); it goes
 * on once it is behind somewhere (a member went further), the attempt is
 * over, or the leader released the gates: nobody moved, so a rank held
 * here may be the one another waits for (a receive from MPI_ANY_SOURCE, a
 * Waitall, a collective elsewhere that needs this rank's next one first),
 * or an epoch is open on one of its windows (windows.h: it could not stop
 * inside the collective, nor take the checkpoint here; a peer may wait in
 * MPI_Win_complete or MPI_Win_wait for its next call).
 * Going on, it enters beyond the target and raises it: the others follow. */
static void hold_while_level(void)
{
	uint64_t release = SH.release;

	for (;;) {
		if (LOAD(SH.stop)) {
			pthread_mutex_unlock(&SH.lock);
			take_checkpoint();
			pthread_mutex_lock(&SH.lock);
			release = SH.release;
			continue;
		}
		if (!LOAD(SH.pending) || SH.release != release || !coord_converged() ||
		    windows_busy())
			break;
		wait_at_entry();
	}
}

static void gate(MPI_Comm comm, int blocking)
{
	struct comm_info *ci = collective_counts_of(comm);

	if (!ci)
		return;
	if (!LOAD(SH.pending)) {
		/* The common case: count it, and look again, so that an attempt
		 * starting meanwhile either saw this collective in its count or
		 * is told of it. */
		__atomic_add_fetch(&ci->entered, 1, __ATOMIC_SEQ_CST);
		if (blocking)
			STORE(SH.in_collective, 1);
		if (!LOAD(SH.pending))
			return;
		pthread_mutex_lock(&SH.lock);
		coord_queue(MSG_RAISE, ci->gid, LOAD(ci->entered));
		pthread_mutex_unlock(&SH.lock);
		coord_wake();
		return;
	}
	pthread_mutex_lock(&SH.lock);
	hold_while_level();
	/* Looked up again: a restart may have resumed in take_checkpoint(). */
	ci = collective_counts_of(comm);
	if (ci) {
		uint64_t e = __atomic_add_fetch(&ci->entered, 1, __ATOMIC_SEQ_CST);

		if (LOAD(SH.pending) && e > coord_target_of(ci->gid)) {
			/* Beyond where the others were told to stop: they follow. */
			coord_set_target(ci->gid, e);
			coord_queue(MSG_RAISE, ci->gid, e);
			coord_wake();
		}
	}
	if (blocking)
		STORE(SH.in_collective, 1);
	pthread_mutex_unlock(&SH.lock);
}

void coord_epoch_gate(void)
{
	if (!LOAD(SH.pending))
		return;
	pthread_mutex_lock(&SH.lock);
	hold_while_level();
	pthread_mutex_unlock(&SH.lock);
}

bool coord_stopping(void)
{
	return LOAD(SH.stop) != 0;
}

void coord_stop_here(void)
{
	if (LOAD(SH.stop))
		take_checkpoint();
}

void coord_collective(MPI_Comm comm)
{
	gate(comm, 1);
}

/* A non-blocking one is in progress until its request completes
 * (requests.h counts those). */
void coord_icollective(MPI_Comm comm)
{
	gate(comm, 0);
}

void coord_ungated(void)
{
	if (!LOAD(SH.pending)) {
		/* An attempt starting meanwhile finds it in its replies. */
		STORE(SH.in_ungated, 1);
		if (!LOAD(SH.pending))
			return;
	}
	pthread_mutex_lock(&SH.lock);
	STORE(SH.in_ungated, 0);
	hold_while_level();
	STORE(SH.in_ungated, 1);
	pthread_mutex_unlock(&SH.lock);
}

void coord_ungated_done(void)
{
	STORE(SH.in_ungated, 0);
}

void coord_collective_done(MPI_Comm comm)
{
	struct comm_info *ci = collective_counts_of(comm);

	if (ci)
		__atomic_add_fetch(&ci->completed, 1, __ATOMIC_SEQ_CST);
	STORE(SH.in_collective, 0);
}

/* --- the end -------------------------------------------------------------------------------- */

/* MPI_Finalize: say so to rank 0, which starts no attempt after it, and
 * take part in one under way until rank 0 lets this rank go on. */
void coord_finalize(void)
{
	if (!have_thread)
		return;
	pthread_mutex_lock(&SH.lock);
	coord_queue(MSG_BYE, 0, 0);
	coord_wake();
	while (!SH.bye_ok) {
		if (LOAD(SH.stop)) {
			pthread_mutex_unlock(&SH.lock);
			take_checkpoint();
			pthread_mutex_lock(&SH.lock);
			continue;
		}
		wait_at_entry();
	}
	SH.quit = true;
	pthread_mutex_unlock(&SH.lock);
	coord_wake();
	drain_finish();
	pthread_join(thread, NULL);
	have_thread = false;
	coord_flag = 0;
}
