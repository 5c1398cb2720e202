/* The two-level checkpoint period model (interval.h). Written with failure
 * rates (1 / mu) rather than mean times, so that one kind of failure may be
 * absent (mu = INFINITY, rate 0): the single-level formulas 3 and 4 of the
 * paper are then formulas 1 and 2 with mu2 = INFINITY, exactly. */
#include <math.h>

#include "interval.h"

/* 1 / mu, 0 for "never" (INFINITY) and for nonsense (<= 0, NAN). */
static double rate(double mtbf)
{
	return mtbf > 0 && isfinite(mtbf) ? 1 / mtbf : 0;
}

/* Expected time lost per unit of run time to the fixed part of failures:
 * lambda1 (D1 + R1) + lambda2 (D2 + R2) = ((D1 + R1) mu2 + (D2 + R2) mu1) / (mu1 mu2). */
static double fixed_loss_rate(const struct interval_model *m)
{
	return rate(m->mtbf_light) * (m->down_light + m->restart_light) +
	       rate(m->mtbf_heavy) * (m->down_heavy + m->restart_heavy);
}

struct interval_model interval_single(double cost, double overlap, double mtbf, double down,
				      double restart)
{
	return (struct interval_model){
		.cost = cost,
		.overlap = overlap,
		.mtbf_light = mtbf,
		.mtbf_heavy = INFINITY,
		.down_light = down,
		.restart_light = restart,
	};
}

double interval_total_time(const struct interval_model *m, double base, double period)
{
	double all = rate(m->mtbf_light) + rate(m->mtbf_heavy);
	double useful = period - (1 - m->overlap) * m->cost;
	double left = 1 - fixed_loss_rate(m) - (m->overlap * m->cost + period / 2) * all;

	if (!(useful > 0) || !(left > 0))
		return INFINITY;
	return base * period / (useful * left);
}

/* d/dT of ln(formula 1) = 0 gives T^2 = 2 (1 - w) C (1 - fixed - w C all) / all,
 * which is formula 2 once 1 / all = mu1 mu2 / (mu1 + mu2) is multiplied in. */
double interval_optimal(const struct interval_model *m)
{
	double all = rate(m->mtbf_light) + rate(m->mtbf_heavy);
	double under;

	if (!(all > 0))
		return NAN;
	under = 2 * (1 - m->overlap) * m->cost *
		(1 / all - m->overlap * m->cost - fixed_loss_rate(m) / all);
	return under > 0 ? sqrt(under) : NAN;
}
