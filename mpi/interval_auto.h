/* STASIS_INTERVAL=auto (DESIGN.md section 8): the period between
 * checkpoints from the failure model of interval.h, fed with what stasis
 * measures: C, the blocking time of this run's checkpoints (their mean),
 * and R1 / R2, the restart times of earlier restarts of the job without /
 * with rebuilding lost files, which each restart records in the job
 * directory (file restart-times, one line per restart:
 * "<unix seconds> light|heavy <seconds>"). The mean times between failures
 * come from STASIS_MTBF_LIGHT and STASIS_MTBF_HEAVY (two-level model) or
 * STASIS_MTBF (single-level). Only rank 0 keeps time (trigger.c). */
#ifndef STASIS_INTERVAL_AUTO_H
#define STASIS_INTERVAL_AUTO_H

#include <stdbool.h>

struct session;

/* At MPI_Init: read the job's restart record (rank 0). */
void interval_auto_start(struct session *s);
/* A checkpoint blocked the application for this long. */
void interval_auto_cost(double seconds);
/* The period to arm the timer with now. Each change of more than 1% is
 * logged (pr_info, STASIS_VERBOSE=1) with its inputs. */
double interval_auto_period(void);
/* A restart took this long from the end of the real MPI_Init to the jump
 * into the image (the slowest rank's time); heavy when lost files had to be
 * rebuilt or fetched from the flush level. Collective: every rank passes
 * its own time and flag; rank 0 appends the line to the record. */
void interval_auto_restarted(struct session *s, double seconds, bool heavy);

#endif
