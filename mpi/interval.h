/* The checkpoint period from a failure model (DESIGN.md section 8): the
 * two-level model of Bondarenko & Yakobovsky ("Optimal checkpointing to the
 * local storage device", 2015; shared/seeds/004_...txt), which splits
 * failures into light ones (recoverable from a rank's own local files, mean
 * time mu1) and heavy ones (a node lost, recovered through the other nodes,
 * mu2), and its single-level case (one kind of failure: Young/Daly's model
 * as [14] of the paper states it). Pure arithmetic, no I/O: unit tested
 * against the paper's setting by tests/unit/test_interval.c.
 *
 * All times in one unit (stasis uses seconds, the paper minutes). */
#ifndef STASIS_INTERVAL_H
#define STASIS_INTERVAL_H

struct interval_model {
	double cost;          /* C: duration of one checkpoint */
	double overlap;       /* omega in [0, 1]: share of C overlapped with work */
	double mtbf_light;    /* mu1; INFINITY: no light failures */
	double mtbf_heavy;    /* mu2; INFINITY: no heavy failures */
	double down_light;    /* D1: downtime before a restart, per kind */
	double down_heavy;    /* D2 */
	double restart_light; /* R1: restart from the rank's own files */
	double restart_heavy; /* R2: restart that rebuilds lost files first */
};

/* The single-level model (the paper's formulas 3 and 4): failures of one
 * kind every mtbf, each costing down + restart. */
struct interval_model interval_single(double cost, double overlap, double mtbf, double down,
				      double restart);

/* Formula 1: the total run time of work that takes `base` without
 * checkpoints and failures, checkpointed every `period`:
 *   base T / ((T - (1 - w) C) (1 - ((D1 + R1) mu2 + (D2 + R2) mu1
 *                                   + (w C + T / 2) (mu1 + mu2)) / (mu1 mu2)))
 * INFINITY where the run never ends (T <= (1 - w) C, or failures eat all
 * the time). */
double interval_total_time(const struct interval_model *m, double base, double period);

/* Formula 2, the period that minimises formula 1:
 *   sqrt(2 (1 - w) C (mu1 mu2 / (mu1 + mu2) - w C
 *                     - ((D1 + R1) mu2 + (D2 + R2) mu1) / (mu1 + mu2)))
 * NAN when there is none: no failures at all, or failures so frequent that
 * the expression under the root is not positive. */
double interval_optimal(const struct interval_model *m);

#endif
