/* stasis's coordinator thread, one per rank (coord.h): it answers for its
 * rank over stasis's network (oob.h) whatever the program's thread does,
 * and on rank 0 it also leads: starts attempts, collects the collective
 * counts, sets targets, runs rounds until every rank is level and out of
 * collectives, then tells all to stop. It never calls MPI and never allocates in the
 * program's arena (it is not the main thread). */
#define LOG_PREFIX ""
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collective_counts.h"
#include "coord.h"
#include "coord_int.h"
#include "log.h"
#include "requests.h"
#include "trigger.h"
#include "windows.h"
#include "session.h"

#define SH coord_sh
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)
#define ROUND_GAP_MS 1
#define RETRY_GAP_MS 10
/* An attempt that cannot conclude is abandoned and the program runs on
 * (README, "When a checkpoint is taken"): a rank held at a gate may be the
 * one another rank waits for (a receive from MPI_ANY_SOURCE, a Waitall),
 * and only letting it go ends that wait. STALL_MS without a rank entering a
 * collective says nobody moves; BUDGET_MS bounds an attempt whose ranks
 * keep moving without ever being level (targets raised again and again).
 * The wish stays: the next attempt starts RETRY_GAP_MS later, at another
 * point of the program. */
#define STALL_MS 50
#define BUDGET_MS 250
/* How long nobody moved before the ranks held at gates are let go one
 * collective further (MSG_RELEASE): long enough for a rank that is behind
 * but runs (computes, or waits for a processor on a node with more ranks
 * than cores) to show it moves. */
#define RELEASE_MS 5

static void leader_handle(const struct oob_msg *m);
static void client_handle(const struct oob_msg *m);

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void to_leader(uint32_t type, uint64_t a, uint64_t b)
{
	struct oob_msg m = {type, (uint32_t)SH.rank, a, b, 0};

	if (SH.rank == 0)
		leader_handle(&m);
	else
		oob_send(SH.fds[0], &m);
}

static void to_rank(int r, uint32_t type, uint64_t a, uint64_t b)
{
	struct oob_msg m = {type, 0, a, b, 0};

	if (r == 0)
		client_handle(&m);
	else
		oob_send(SH.fds[r], &m);
}

static void to_all(uint32_t type, uint64_t a, uint64_t b)
{
	for (int r = 0; r < SH.size; r++)
		to_rank(r, type, a, b);
}

/* --- every rank ------------------------------------------------------------------------- */

struct seq_ctx {
	int n;
};

static void report_counts(struct comm_info *ci, void *arg)
{
	struct seq_ctx *c = arg;

	if (ci->gid == GID_SELF)
		return; /* one member: never behind anyone */
	to_leader(MSG_SEQ, ci->gid, LOAD(ci->entered));
	c->n++;
}

/* Rank 0 starts attempt a: report this rank's collective counts. A restarted rank
 * still restoring answers once it has resumed (coord_int.h, ready). */
static void answer_intent(uint64_t a)
{
	struct seq_ctx c = {0};

	pthread_mutex_lock(&SH.lock);
	if (!SH.ready) {
		SH.deferred = a;
		pthread_mutex_unlock(&SH.lock);
		return;
	}
	SH.deferred = 0;
	SH.attempt = a;
	SH.ntargets = 0;
	/* Before reading the counts: a collective entered meanwhile
	 * either is in them or sees the attempt (coord.c). */
	STORE(SH.pending, 1);
	pthread_mutex_unlock(&SH.lock);
	coord_flag = 1;
	collective_counts_walk(report_counts, &c);
	to_leader(MSG_SEQ_END, a, LOAD(SH.blocked) || (session_get() && session_get()->blocked_by));
}

static void sum_entered(struct comm_info *ci, void *arg)
{
	*(uint64_t *)arg += LOAD(ci->entered) + LOAD(ci->completed);
}

/* How far this rank is, all communicators summed: the leader sees from it
 * whether anybody moves (STALL_MS). */
static uint64_t progress(void)
{
	uint64_t sum = 0;

	collective_counts_walk(sum_entered, &sum);
	return sum + windows_progress();
}

/* REPLY_WINDOW_* of this rank now. */
static uint64_t window_bits(void)
{
	return (windows_busy() ? REPLY_WINDOW_BUSY : 0) | (windows_pscw() ? REPLY_WINDOW_PSCW : 0);
}

static void client_handle(const struct oob_msg *m)
{
	uint64_t bits;

	switch (m->type) {
	case MSG_INTENT:
		answer_intent(m->a);
		break;
	case MSG_TARGET:
		pthread_mutex_lock(&SH.lock);
		coord_set_target(m->a, m->b);
		pthread_cond_broadcast(&SH.cond);
		pthread_mutex_unlock(&SH.lock);
		break;
	case MSG_QUERY:
		pthread_mutex_lock(&SH.lock);
		bits =
		    (coord_converged() ? REPLY_CONVERGED : 0) |
		    (LOAD(SH.in_collective) || mpi_coll_pending() > 0 ? REPLY_IN_COLLECTIVE : 0) |
		    (LOAD(SH.in_ungated) ? REPLY_IN_UNGATED : 0) | window_bits() |
		    progress() << REPLY_PROGRESS_SHIFT;
		pthread_mutex_unlock(&SH.lock);
		to_leader(MSG_REPLY, m->a, bits);
		break;
	case MSG_STOP:
		STORE(SH.stop, 1);
		coord_flag = 1;
		/* Read after the store: an epoch the program opens from now on
		 * sees the stop first and is not opened (coord.h); a match
		 * under way is waited for (a non-blocking call), one that begins
		 * now sees the stop first (coord_match_begin). */
		bits = window_bits();
		while (LOAD(SH.in_match))
			sched_yield();
		if (mpi_matched() > 0)
			bits |= REPLY_MATCHED;
		pthread_mutex_lock(&SH.lock);
		pthread_cond_broadcast(&SH.cond);
		pthread_mutex_unlock(&SH.lock);
		to_leader(MSG_STOP_ACK, m->a, bits);
		break;
	case MSG_GO:
		pthread_mutex_lock(&SH.lock);
		STORE(SH.go, m->a);
		pthread_cond_broadcast(&SH.cond);
		pthread_mutex_unlock(&SH.lock);
		break;
	case MSG_ABORT:
		pthread_mutex_lock(&SH.lock);
		/* A restarted rank that had not answered yet never will. */
		SH.deferred = 0;
		STORE(SH.pending, 0);
		STORE(SH.stop, 0);
		SH.ntargets = 0;
		pthread_cond_broadcast(&SH.cond);
		pthread_mutex_unlock(&SH.lock);
		coord_flag = 1; /* the program's thread looks once and clears it */
		break;
	case MSG_RELEASE:
		pthread_mutex_lock(&SH.lock);
		if (m->a == SH.attempt) {
			SH.release++;
			pthread_cond_broadcast(&SH.cond);
		}
		pthread_mutex_unlock(&SH.lock);
		break;
	case MSG_BYE_OK:
		pthread_mutex_lock(&SH.lock);
		SH.bye_ok = 1;
		pthread_cond_broadcast(&SH.cond);
		pthread_mutex_unlock(&SH.lock);
		break;
	default:
		break;
	}
}

/* --- rank 0 --------------------------------------------------------------------------------- */

/* L_ACKING: STOP sent, its acknowledgements awaited; L_STOPPING: GO sent. */
static enum { L_IDLE, L_GATHER, L_ROUNDS, L_ACKING, L_STOPPING } lstate;
static uint64_t attempt, round_no;
static int nseq_end, nreplies, nacks, ndone, nbye;
static uint64_t ack_bits;	/* REPLY_WINDOW_* of the acknowledgements, or'ed */
static int ack_rank;		/* a rank that acknowledged with an epoch open */
static int64_t refused_ms = -1; /* since when every STOP found an epoch open */
static bool any_blocked, all_converged, any_inside, any_ungated, any_busy, changed, no_more;
static int64_t busy_ms = -1; /* since when every round found a window busy */
static bool busy_said;       /* STASIS_VERBOSE=1 told so, for this wish */
static int64_t retry_ms = -1; /* an attempt given up: the next one not before */
static int64_t next_round_ms = -1;
static int64_t attempt_ms, stop_ms; /* when the attempt started, STOP went out */
static int64_t moved_ms;	    /* when a rank last entered a collective */
static uint64_t moved_sum, round_sum; /* the ranks' progress summed, last round, this one */
static uint64_t nabandoned, nreleased;
static int still_rounds; /* releases since a rank last moved */
static int64_t wanted_ms = -1; /* when the wish came (the first attempt for it) */
static struct coord_target *lt;
static size_t nlt, lt_cap;
static bool *bye, *bye_told;
static uint64_t *reply_of; /* each rank's last reply, for STASIS_VERBOSE=2 */

static uint64_t *lt_slot(uint64_t gid)
{
	for (size_t i = 0; i < nlt; i++)
		if (lt[i].gid == gid)
			return &lt[i].target;
	if (nlt == lt_cap) {
		size_t cap = lt_cap ? lt_cap * 2 : 64;
		void *p = realloc(lt, sizeof(*lt) * cap);

		if (!p)
			return NULL;
		lt = p;
		lt_cap = cap;
	}
	lt[nlt] = (struct coord_target){gid, 0};
	return &lt[nlt++].target;
}

static void answer_byes(void)
{
	for (int r = 0; r < SH.size; r++)
		if (bye[r] && !bye_told[r]) {
			bye_told[r] = true;
			to_rank(r, MSG_BYE_OK, 0, 0);
		}
}

static void new_round(void)
{
	round_no++;
	nreplies = 0;
	all_converged = true;
	any_inside = false;
	any_ungated = false;
	any_busy = false;
	changed = false;
	round_sum = 0;
	next_round_ms = -1;
	to_all(MSG_QUERY, round_no, 0);
}

static void start_attempt(void)
{
	attempt++;
	attempt_ms = now_ms();
	moved_ms = attempt_ms;
	moved_sum = 0;
	still_rounds = 0;
	nreleased = 0;
	round_no = 0;
	lstate = L_GATHER;
	nseq_end = 0;
	any_blocked = false;
	nlt = 0;
	to_all(MSG_INTENT, attempt, 0);
}

/* The checkpoint is dropped, not tried again: rank 0 has said why. */
static void give_up(void)
{
	to_all(MSG_ABORT, attempt, 0);
	lstate = L_IDLE;
	wanted_ms = -1;
	busy_ms = -1;
	refused_ms = -1;
	busy_said = false;
	nabandoned = 0;
	trigger_checkpoint_done(-1);
	answer_byes();
}

static void epoch_skipped(uint64_t bits, int r)
{
	pr_warn("checkpoint skipped: %s stayed open on a window of rank %d for %d s",
		bits & REPLY_WINDOW_PSCW
		    ? "an epoch of post/start/complete/wait (MPI_Win_post or MPI_Win_start)"
		    : "a passive-target epoch (MPI_Win_lock, or MPI_Win_lock_all with operations "
		      "not flushed)",
		r, WINDOWS_HOLD_SECONDS);
	give_up();
}

static void abandon(const char *why);

/* A rank with a passive-target epoch open is not told to stop (it may
 * enter a collective before the epoch ends, and could not stop there): the
 * attempt goes on, or is abandoned and tried again, until no rank has one,
 * for at most WINDOWS_HOLD_SECONDS; then this checkpoint is skipped. True
 * when it was. */
static bool window_held(void)
{
	int64_t t = now_ms();
	int r;

	if (!any_busy) {
		busy_ms = -1;
		return false;
	}
	for (r = 0; r < SH.size && !(reply_of[r] & REPLY_WINDOW_BUSY); r++)
		;
	if (busy_ms < 0) {
		busy_ms = t;
		if (!busy_said && session_get() && session_get()->cfg.verbose >= 1)
			fprintf(
			    stderr,
			    "stasis: the checkpoint waits for %s to end (%s) on rank %d, at most "
			    "%d s\n",
			    reply_of[r] & REPLY_WINDOW_PSCW
				? "an epoch of post/start/complete/wait or a library's section"
				: "a passive-target epoch",
			    reply_of[r] & REPLY_WINDOW_PSCW
				? "MPI_Win_complete, MPI_Win_wait; libfenix's store or commit"
				: "MPI_Win_unlock, MPI_Win_flush_all",
			    r, WINDOWS_HOLD_SECONDS);
		busy_said = true;
		return false;
	}
	if (t - busy_ms < WINDOWS_HOLD_SECONDS * 1000)
		return false;
	epoch_skipped(reply_of[r], r);
	return true;
}

/* Every rank acknowledged STOP (L_ACKING): GO, or, when a rank had an
 * epoch open on a window (it opened after it last replied: it may wait in
 * MPI_Win_complete for a post of a rank that stopped), the attempt given up
 * and tried again, the ranks going on; the checkpoint skipped once that
 * went on for WINDOWS_HOLD_SECONDS. */
static void acknowledged(void)
{
	int64_t t = now_ms();

	if (!ack_bits) {
		lstate = L_STOPPING;
		ndone = 0;
		to_all(MSG_GO, attempt, 0);
		return;
	}
	if (!(ack_bits & REPLY_WINDOW_BUSY)) {
		abandon("a rank matched a message (MPI_Mprobe, MPI_Improbe) as the others stopped");
		return;
	}
	if (refused_ms < 0)
		refused_ms = t;
	if (t - refused_ms >= WINDOWS_HOLD_SECONDS * 1000) {
		epoch_skipped(ack_bits, ack_rank);
		return;
	}
	abandon(ack_bits & REPLY_WINDOW_PSCW
		    ? "a rank opened an epoch of post/start/complete/wait as the others stopped"
		    : "a rank opened a passive-target epoch as the others stopped");
}

/* Let every rank go on: the attempt cannot conclude (STALL_MS). */
static void abandon(const char *why)
{
	int64_t t = now_ms();

	nabandoned++;
	if (session_get() && session_get()->cfg.verbose >= 1)
		fprintf(stderr,
			"stasis: attempt %llu abandoned after %lld ms and %llu releases: %s; the "
			"program runs on, next attempt in %d ms\n",
			(unsigned long long)attempt, (long long)(t - attempt_ms),
			(unsigned long long)nreleased, why, RETRY_GAP_MS);
	if (session_get() && session_get()->cfg.verbose >= 2)
		for (int r = 0; r < SH.size; r++)
			fprintf(stderr, "stasis: attempt %llu: rank %d %s%s%s%s, %llu collectives\n",
				(unsigned long long)attempt, r,
				reply_of[r] & REPLY_CONVERGED ? "level" : "behind",
				reply_of[r] & REPLY_IN_COLLECTIVE ? ", in a collective" : "",
				reply_of[r] & REPLY_IN_UNGATED ? ", in an ungated call" : "",
				reply_of[r] & REPLY_WINDOW_BUSY ? ", in a passive-target epoch" : "",
				(unsigned long long)(reply_of[r] >> REPLY_PROGRESS_SHIFT));
	to_all(MSG_ABORT, attempt, 0);
	lstate = L_IDLE;
	retry_ms = t + RETRY_GAP_MS;
	answer_byes();
}

static void leader_handle(const struct oob_msg *m)
{
	uint64_t *t;

	switch (m->type) {
	case MSG_SEQ:
	case MSG_RAISE:
		if (lstate != L_GATHER && lstate != L_ROUNDS)
			break;
		t = lt_slot(m->a);
		if (t && m->b > *t) {
			*t = m->b;
			if (lstate == L_ROUNDS) {
				to_all(MSG_TARGET, m->a, m->b);
				changed = true;
			}
		}
		break;
	case MSG_SEQ_END:
		if (lstate != L_GATHER || m->a != attempt)
			break;
		any_blocked |= m->b != 0;
		if (++nseq_end < SH.size)
			break;
		if (any_blocked) {
			pr_warn(
			    "checkpoint skipped: the program uses a feature stasis cannot restore "
			    "yet (named in a warning above)");
			give_up();
			break;
		}
		for (size_t i = 0; i < nlt; i++)
			to_all(MSG_TARGET, lt[i].gid, lt[i].target);
		lstate = L_ROUNDS;
		new_round();
		break;
	case MSG_REPLY:
		if (lstate != L_ROUNDS || m->a != round_no)
			break;
		all_converged &= (m->b & REPLY_CONVERGED) != 0;
		any_inside |= (m->b & REPLY_IN_COLLECTIVE) != 0;
		any_ungated |= (m->b & REPLY_IN_UNGATED) != 0;
		any_busy |= (m->b & REPLY_WINDOW_BUSY) != 0;
		round_sum += m->b >> REPLY_PROGRESS_SHIFT;
		if (m->from < (uint32_t)SH.size)
			reply_of[m->from] = m->b;
		if (++nreplies < SH.size)
			break;
		if (round_sum != moved_sum || changed) {
			moved_sum = round_sum;
			moved_ms = now_ms();
			still_rounds = 0;
		}
		if (any_ungated) {
			/* Its other members may be waiting at gates: let all go
			 * and try again (the wish to checkpoint stays). */
			to_all(MSG_ABORT, attempt, 0);
			lstate = L_IDLE;
			retry_ms = now_ms() + RETRY_GAP_MS;
			answer_byes();
			break;
		}
		if (window_held())
			break;
		/* A target raised during the round may have reached a rank after
		 * it replied: only a round without one decides. */
		if (all_converged && !any_inside && !any_busy && !changed) {
			lstate = L_ACKING;
			nacks = 0;
			ack_bits = 0;
			stop_ms = now_ms();
			to_all(MSG_STOP, attempt, 0);
		} else if (now_ms() - moved_ms >= RELEASE_MS * (still_rounds + 1) &&
			   (!all_converged || any_busy)) {
			/* Some rank is behind, or in an epoch on a window, and
			 * nobody moves: it waits for one held at a gate (a
			 * collective's, or an MPI_Win_post's its MPI_Win_complete
			 * needs). Let those go one call further. */
			still_rounds++;
			nreleased++;
			to_all(MSG_RELEASE, attempt, 0);
			next_round_ms = now_ms() + ROUND_GAP_MS;
		} else if (now_ms() - moved_ms >= STALL_MS) {
			abandon("no rank moved towards the point where all could stop (a rank "
				"held at a collective may be the one another waits for)");
		} else if (now_ms() - attempt_ms >= BUDGET_MS) {
			abandon("the ranks kept moving without meeting");
		} else {
			next_round_ms = now_ms() + ROUND_GAP_MS;
		}
		break;
	case MSG_STOP_ACK:
		if (lstate != L_ACKING || m->a != attempt)
			break;
		if ((m->b & (REPLY_WINDOW_BUSY | REPLY_MATCHED)) && m->from < (uint32_t)SH.size) {
			ack_bits |= m->b;
			ack_rank = (int)m->from;
		}
		if (++nacks == SH.size)
			acknowledged();
		break;
	case MSG_DONE:
		if (lstate != L_STOPPING || m->a != attempt || ++ndone < SH.size)
			break;
		lstate = L_IDLE;
		if (session_get() && session_get()->cfg.verbose >= 2)
			fprintf(stderr,
				"stasis: attempt %llu: ranks agreed in %lld ms (%llu rounds), "
				"checkpoint done %lld ms after the request; from the request %lld ms "
				"to all stopped, %llu attempts abandoned, %llu releases\n",
				(unsigned long long)attempt, (long long)(stop_ms - attempt_ms),
				(unsigned long long)round_no, (long long)(now_ms() - attempt_ms),
				(long long)(stop_ms - wanted_ms), (unsigned long long)nabandoned,
				(unsigned long long)nreleased);
		nabandoned = 0;
		wanted_ms = -1;
		busy_ms = -1;
		refused_ms = -1;
		busy_said = false;
		answer_byes();
		break;
	case MSG_BYE:
		if (m->from < (uint32_t)SH.size && !bye[m->from]) {
			bye[m->from] = true;
			nbye++;
		}
		no_more = true;
		if (lstate == L_IDLE)
			answer_byes();
		break;
	default:
		break;
	}
}

static void leader_tick(void)
{
	if (lstate == L_IDLE && !no_more && trigger_wanted() && wanted_ms < 0)
		wanted_ms = now_ms();
	if (lstate == L_IDLE && !no_more && trigger_wanted() && now_ms() >= retry_ms) {
		retry_ms = -1;
		start_attempt();
	}
	if (lstate == L_ROUNDS && next_round_ms >= 0 && now_ms() >= next_round_ms)
		new_round();
}

/* --- the loop ----------------------------------------------------------------------------------
 */

/* What the program's thread queued (raises, done, bye). */
static void flush_queue(void)
{
	struct oob_msg batch[64];
	size_t n;

	do {
		pthread_mutex_lock(&SH.lock);
		n = SH.nout < 64 ? SH.nout : 64;
		memcpy(batch, SH.out, sizeof(*batch) * n);
		memmove(SH.out, SH.out + n, sizeof(*SH.out) * (SH.nout - n));
		SH.nout -= n;
		pthread_mutex_unlock(&SH.lock);
		for (size_t i = 0; i < n; i++)
			to_leader(batch[i].type, batch[i].a, batch[i].b);
	} while (n == 64);
}

static bool finished(void)
{
	if (!SH.quit)
		return false;
	return SH.rank != 0 || nbye == SH.size;
}

void *coord_thread_main(void *arg)
{
	int n = SH.rank == 0 ? SH.size : 2;
	struct pollfd *p = calloc(n, sizeof(*p));
	char buf[64];

	(void)arg;
	if (SH.rank == 0) {
		bye = calloc(SH.size, sizeof(*bye));
		bye_told = calloc(SH.size, sizeof(*bye_told));
		reply_of = calloc(SH.size, sizeof(*reply_of));
	}
	if (!p || (SH.rank == 0 && (!bye || !bye_told || !reply_of))) {
		pr_err("out of memory in stasis's coordinator: checkpoints are off");
		return NULL;
	}
	p[0] = (struct pollfd){SH.wake[0], POLLIN, 0};
	for (int i = 1; i < n; i++)
		p[i] = (struct pollfd){SH.rank == 0 ? SH.fds[i] : SH.fds[0], POLLIN, 0};
	while (!finished()) {
		int timeout = -1;

		if (SH.rank == 0)
			timeout = lstate == L_ROUNDS || retry_ms >= 0 ? ROUND_GAP_MS : 100;

		if (poll(p, n, timeout) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN)
			while (read(SH.wake[0], buf, sizeof(buf)) > 0)
				;
		flush_queue();
		if (LOAD(SH.ready) && LOAD(SH.deferred))
			answer_intent(LOAD(SH.deferred));
		for (int i = 1; i < n; i++) {
			struct oob_msg m;

			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (oob_recv(p[i].fd, &m)) {
				/* A rank is gone: the job is ending one way or another. */
				p[i].fd = -1;
				continue;
			}
			if (SH.rank == 0)
				leader_handle(&m);
			else
				client_handle(&m);
		}
		if (SH.rank == 0)
			leader_tick();
	}
	free(p);
	return NULL;
}
