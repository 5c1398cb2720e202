/* The program's POSIX timers (ptimers.h). */
#define LOG_PREFIX "timers: "
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "format.h"
#include "log.h"
#include "ptimers.h"
#include "session.h"

#ifndef PR_TIMER_CREATE_RESTORE_IDS
#define PR_TIMER_CREATE_RESTORE_IDS 77
#define PR_TIMER_CREATE_RESTORE_IDS_OFF 0
#define PR_TIMER_CREATE_RESTORE_IDS_ON 1
#define PR_TIMER_CREATE_RESTORE_IDS_GET 2
#endif

#define MAX_TIMERS 64

static struct ptimer_record timers[MAX_TIMERS];
static int ntimers;

/* glibc hands the kernel's id out as the timer_t of a SIGEV_SIGNAL or
 * SIGEV_NONE timer (sysdeps/unix/sysv/linux/timer_create.c, 2.34 on). */
static int32_t kernel_id(timer_t id)
{
	return (int32_t)(intptr_t)id;
}

void ptimers_created(clockid_t clock, const struct sigevent *sev, timer_t id)
{
	struct ptimer_record t = {.id = kernel_id(id), .clockid = clock};

	if (sev && sev->sigev_notify != SIGEV_SIGNAL && sev->sigev_notify != SIGEV_NONE) {
		session_unsupported(
		    sev->sigev_notify == SIGEV_THREAD
			? "a POSIX timer run on a thread (timer_create, SIGEV_THREAD)"
			: "a POSIX timer signalling one thread (timer_create, "
			  "SIGEV_THREAD_ID)");
		return;
	}
	if (prctl(PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_GET, 0, 0, 0) < 0) {
		session_unsupported("POSIX timers (timer_create) on a kernel without "
				    "PR_TIMER_CREATE_RESTORE_IDS (Linux 6.15)");
		return;
	}
	if (ntimers == MAX_TIMERS) {
		session_unsupported("more than 64 POSIX timers (timer_create)");
		return;
	}
	t.notify = sev ? sev->sigev_notify : SIGEV_SIGNAL;
	t.signo = sev ? sev->sigev_signo : SIGALRM;
	t.value = sev ? (uint64_t)(uintptr_t)sev->sigev_value.sival_ptr : (uint64_t)t.id;
	ptimers_deleted(id);
	timers[ntimers++] = t;
}

void ptimers_deleted(timer_t id)
{
	for (int i = 0; i < ntimers; i++)
		if (timers[i].id == kernel_id(id))
			timers[i--] = timers[--ntimers];
}

/* --- the part ------------------------------------------------------------------------ */

/* Page aligned, whole pages: the image writer hands section data to
 * O_DIRECT as it is. */
#define OUT_BYTES (sizeof(struct timers_record) + sizeof(struct ptimer_record) * MAX_TIMERS)
static union {
	struct {
		struct timers_record h;
		struct ptimer_record t[MAX_TIMERS];
	} s;
	char bytes[(OUT_BYTES + STASIS_PAGE - 1) / STASIS_PAGE * STASIS_PAGE];
} out_buf __attribute__((aligned(STASIS_PAGE)));
#define out out_buf.s

static int timers_save(uint64_t id, struct section_list *l, struct why *why)
{
	(void)id;
	if (!ntimers)
		return 0;
	memcpy(out.h.magic, STASIS_TIMERS_MAGIC, 8);
	out.h.record_size = sizeof(struct ptimer_record);
	out.h.ntimers = (uint32_t)ntimers;
	for (int i = 0; i < ntimers; i++) {
		struct itimerspec its;

		out.t[i] = timers[i];
		if (syscall(SYS_timer_gettime, timers[i].id, &its))
			return why_set(why, -errno, "cannot read POSIX timer %d: %s", timers[i].id,
				       strerror(errno));
		/* Expired with its signal pending: the kernel arms it again one
		 * interval on when the signal is taken (as sigstate.c's
		 * interval timers). */
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value = its.it_interval;
		out.t[i].value_sec = its.it_value.tv_sec;
		out.t[i].value_nsec = its.it_value.tv_nsec;
		out.t[i].interval_sec = its.it_interval.tv_sec;
		out.t[i].interval_nsec = its.it_interval.tv_nsec;
	}
	return section_add(l, SECTION_TIMERS, &out_buf, sizeof(out_buf), why);
}

static struct ptimer_record restored[MAX_TIMERS];
static int nrestored;

/* VERIFY, before the memory comes back: each timer made again, disarmed,
 * under its id (another timer of this process holding one fails here, the
 * process as MPI_Init made it). */
static int timers_verify(const struct restart_input *in, struct why *why)
{
	const struct section *sec = restart_section(in, SECTION_TIMERS);
	const struct timers_record *h = sec->data;

	nrestored = 0;
	if (!h)
		return 0;
	if (sec->len < sizeof(*h) || memcmp(h->magic, STASIS_TIMERS_MAGIC, 8) ||
	    h->record_size != sizeof(struct ptimer_record) || h->ntimers > MAX_TIMERS ||
	    sec->len < sizeof(*h) + (size_t)h->ntimers * sizeof(struct ptimer_record))
		return why_set(why, -EBADMSG,
			       "the record of the program's POSIX timers is damaged");
	memcpy(restored, h + 1, h->ntimers * sizeof(struct ptimer_record));
	for (uint32_t i = 0; i < h->ntimers; i++) {
		struct ptimer_record *t = &restored[i];
		struct sigevent sev;
		int kid = t->id, ret = 0;

		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = t->notify;
		sev.sigev_signo = t->signo;
		sev.sigev_value.sival_ptr = (void *)(uintptr_t)t->value;
		if (prctl(PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_ON, 0, 0, 0) ||
		    syscall(SYS_timer_create, t->clockid, &sev, &kid))
			ret = -errno;
		prctl(PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_OFF, 0, 0, 0);
		if (!ret && kid != t->id) {
			syscall(SYS_timer_delete, kid);
			ret = -EBUSY;
		}
		if (ret)
			return why_set(why, ret, "cannot make POSIX timer %d again: %s", t->id,
				       strerror(-ret));
		nrestored++;
	}
	return 0;
}

/* Once the program's signal dispositions are back (signals part first):
 * armed again, and known for the next checkpoints. */
static void timers_resumed(bool restarted)
{
	if (!restarted)
		return;
	ntimers = 0;
	for (int i = 0; i < nrestored; i++) {
		struct ptimer_record *t = &restored[i];
		struct itimerspec its = {{t->interval_sec, t->interval_nsec},
					 {t->value_sec, t->value_nsec}};

		if ((t->value_sec || t->value_nsec) &&
		    syscall(SYS_timer_settime, t->id, 0, &its, NULL))
			pr_warn("cannot arm POSIX timer %d again: %s", t->id, strerror(errno));
		timers[ntimers++] = *t;
	}
	nrestored = 0;
}

const struct part_ops timers_part = {
    .name = "timers",
    .save = timers_save,
    .verify = timers_verify,
    .resumed = timers_resumed,
};
