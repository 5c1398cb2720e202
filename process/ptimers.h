/* The program's POSIX timers (timer_create), saved in SECTION_TIMERS and
 * made again by a restart under the ids the program holds, with the
 * kernel's PR_TIMER_CREATE_RESTORE_IDS (Linux 6.15): their clock, how they
 * notify (SIGEV_SIGNAL, SIGEV_NONE: signal and sigev_value), the time left
 * and the interval. The phase within an interval and the overrun count are
 * not kept; a signal pending for the main thread comes back through the
 * signals part (without its sigev_value).
 *
 * Refused, named: SIGEV_THREAD timers (glibc runs them on a thread of its
 * own that a restart does not make) and SIGEV_THREAD_ID (a thread id,
 * which a restart changes). A kernel without PR_TIMER_CREATE_RESTORE_IDS
 * refuses at the first timer_create. */
#ifndef STASIS_PTIMERS_H
#define STASIS_PTIMERS_H

#include <signal.h>
#include <time.h>

#include "part.h"

/* The preload layer's timer_create() for the program returned 0 with
 * *id; sev as the program passed it (NULL: SIGALRM, the id as value). */
void ptimers_created(clockid_t clock, const struct sigevent *sev, timer_t id);
/* The program's timer_delete(id) returned 0. */
void ptimers_deleted(timer_t id);

/* The timers part (session/part.h). */
extern const struct part_ops timers_part;

#endif
