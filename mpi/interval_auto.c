/* STASIS_INTERVAL=auto: measured inputs of the period model (interval_auto.h). */
#define LOG_PREFIX "interval: "
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "interval.h"
#include "interval_auto.h"
#include "log.h"
#include "session.h"

#define RECORD "restart-times"
#define FIRST_PERIOD 60.0 /* before the first checkpoint has been measured... */
#define FIRST_SHARE 0.1   /* ...or a tenth of the shortest MTBF, if less */
#define MIN_PERIOD 1.0    /* never a checkpoint storm, whatever the model says */

/* Runtime state of rank 0 (never saved, never restored). */
static const struct session *sess;
static double cost_sum;
static unsigned cost_count;
static double restart_light, restart_heavy; /* newest measured, 0: none */
static double last_period;
static bool warned_storm;

static void record_path(const struct session *s, char *buf, size_t len)
{
	snprintf(buf, len, "%s/" RECORD, s->store.dir);
}

/* The newest time of each kind in the record; lines that do not parse are
 * skipped (the file is advisory: a wrong value costs efficiency only). */
void interval_auto_start(struct session *s)
{
	char path[4200], line[256], kind[16];
	double t;
	FILE *f;

	sess = s;
	if (s->rank != 0)
		return;
	record_path(s, path, sizeof(path));
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*f %15s %lf", kind, &t) == 2 && isfinite(t) && t >= 0) {
			if (!strcmp(kind, "light"))
				restart_light = t;
			else if (!strcmp(kind, "heavy"))
				restart_heavy = t;
		}
	fclose(f);
}

void interval_auto_cost(double seconds)
{
	if (!(seconds >= 0))
		return;
	cost_sum += seconds;
	cost_count++;
}

void interval_auto_restarted(struct session *s, double seconds, bool heavy)
{
	char path[4200], line[128];
	double slowest;
	int any_heavy = heavy, n, fd;

	PMPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, s->comm);
	PMPI_Allreduce(MPI_IN_PLACE, &any_heavy, 1, MPI_INT, MPI_LOR, s->comm);
	if (s->rank != 0)
		return;
	*(any_heavy ? &restart_heavy : &restart_light) = slowest;
	record_path(s, path, sizeof(path));
	n = snprintf(line, sizeof(line), "%lld %s %.6f\n", (long long)time(NULL),
		     any_heavy ? "heavy" : "light", slowest);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, line, n) != n)
		pr_warn("cannot record the restart time in %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* An estimate stands in for a restart time not measured yet: reading back
 * what a checkpoint wrote costs about what writing it did, and a rebuild
 * also reads the set's redundancy and decodes. */
static double or_estimate(double measured, double estimate, const char **how)
{
	*how = measured > 0 ? "measured" : "estimated";
	return measured > 0 ? measured : estimate;
}

/* Called by every rank (the agreement's spacing depends on it), logged by
 * rank 0, whose timer it sets. */
double interval_auto_period(void)
{
	const struct stasis_config *cfg = &sess->cfg;
	struct interval_model m;
	const char *how1, *how2;
	char inputs[512];
	double c, r1, r2, t;

	/* C is not known before a checkpoint has been taken: take one soon,
	 * well before the first failure is expected. */
	if (!cost_count) {
		t = FIRST_SHARE * fmin(cfg->two_level ? fmin(cfg->mtbf_light, cfg->mtbf_heavy)
						      : cfg->mtbf, FIRST_PERIOD / FIRST_SHARE);
		return t < MIN_PERIOD ? MIN_PERIOD : t;
	}
	c = cost_sum / cost_count;
	r1 = or_estimate(restart_light, c, &how1);
	r2 = or_estimate(restart_heavy, 2 * c, &how2);
	if (cfg->two_level) {
		m = (struct interval_model){.cost = c,
					    .mtbf_light = cfg->mtbf_light,
					    .mtbf_heavy = cfg->mtbf_heavy,
					    .restart_light = r1,
					    .restart_heavy = r2};
		snprintf(inputs, sizeof(inputs),
			 "two-level: C %.6g s (mean of %u checkpoints), R1 %.6g s (%s), R2 %.6g s "
			 "(%s), MTBF light %.6g s, heavy %.6g s, D1 = D2 = 0, w = 0",
			 c, cost_count, r1, how1, r2, how2, cfg->mtbf_light, cfg->mtbf_heavy);
	} else {
		m = interval_single(c, 0, cfg->mtbf, 0, r1);
		snprintf(inputs, sizeof(inputs),
			 "single-level: C %.6g s (mean of %u checkpoints), R %.6g s (%s), MTBF "
			 "%.6g s, D = 0, w = 0",
			 c, cost_count, r1, how1, cfg->mtbf);
	}
	t = interval_optimal(&m);
	if (isnan(t) && !warned_storm && sess->rank == 0) {
		pr_warn("failures as frequent as STASIS_MTBF%s leave no optimal period (%s): "
			"checkpointing every %g s",
			cfg->two_level ? "_LIGHT/_HEAVY say" : " says", inputs, MIN_PERIOD);
		warned_storm = true;
	}
	if (isnan(t) || t < MIN_PERIOD)
		t = MIN_PERIOD;
	if (fabs(t - last_period) > 0.01 * last_period && sess->rank == 0)
		pr_info("period %.6g s (%s)", t, inputs);
	last_period = t;
	return t;
}
