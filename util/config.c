#define LOG_PREFIX "config: "
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fault.h"
#include "log.h"

#define BAD(var, val, what)                                                                        \
	do {                                                                                       \
		return why_set(why, -EINVAL, "%s: '%s' %s", var, val, what);                       \
	} while (0)

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* An integer in [lo, hi] with nothing after it. */
static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

/* A finite number >= 0 with nothing after it. */
static int parse_nonnegative(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_seconds(const char *s, double *out)
{
	double v;

	if (parse_nonnegative(s, &v) || v == 0)
		return -EINVAL;
	*out = v;
	return 0;
}

/* A size in bytes: digits with an optional K, M, G or T (powers of 1024). */
static int parse_bytes(const char *s, unsigned long long *out)
{
	static const char units[] = "KMGT";
	const char *u;
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -EINVAL;
	if (*end && (u = strchr(units, *end & ~0x20))) {
		shift = 10 * (int)(u - units + 1);
		end++;
	}
	if (*end || (shift && v > (~0ull >> shift)))
		return -EINVAL;
	*out = v << shift;
	return 0;
}

static int one_of(const char *s, const char *const *choices)
{
	for (; *choices; choices++)
		if (!strcmp(s, *choices))
			return 1;
	return 0;
}

static bool has_dotdot(const char *path)
{
	for (const char *p = path; (p = strstr(p, "..")); p += 2)
		if ((p == path || p[-1] == '/') && (p[2] == '/' || !p[2]))
			return true;
	return false;
}

static void default_dir(char *buf, size_t len)
{
	const char *tmp = env("TMPDIR");
	const char *user = env("USER");
	struct passwd *pw;

	if (!user) {
		pw = getpwuid(getuid());
		user = pw ? pw->pw_name : "unknown";
	}
	snprintf(buf, len, "%s/stasis-%s", tmp ? tmp : "/tmp", user);
}

int config_load(struct stasis_config *cfg, struct why *why)
{
	static const char *const dirty[] = {"auto", "uffd", "mprotect", "off", NULL};
	static const char *const compress[] = {"none", "lz4", "zstd", NULL};
	const char *v;
	int n;

	memset(cfg, 0, sizeof(*cfg));
	cfg->interval = 600;
	cfg->mtbf = 86400;
	cfg->mtbf_light = cfg->mtbf_heavy = INFINITY;
	cfg->flush_every = 1;
	cfg->keep = 2;
	strcpy(cfg->scheme, "xor");
	cfg->set_size = 8;
	cfg->rs_k = 2;
	cfg->replicas = 1;
	strcpy(cfg->dirty, "auto");
	strcpy(cfg->compress, "none");
	cfg->full_every = 8;
	cfg->fault_us = -1;
	cfg->undo_max = 1ull << 30;
	cfg->deleted_max = 64ull << 20;
	strcpy(cfg->failure_domain, "host");

	if ((v = env("STASIS_DIR"))) {
		if (v[0] != '/')
			BAD("STASIS_DIR", v, "is not an absolute path");
		if (strlen(v) >= sizeof(cfg->dir) - 256)
			BAD("STASIS_DIR", v, "is too long");
		/* A path through ".." may name another directory once a
		 * component is a symbolic link: say the one meant. */
		if (has_dotdot(v))
			BAD("STASIS_DIR", v, "has a '..' component: give the directory without it");
		strcpy(cfg->dir, v);
	} else {
		default_dir(cfg->dir, sizeof(cfg->dir));
	}
	if ((v = env("STASIS_JOB"))) {
		/* It names a directory: one plain path component. */
		if (!v[0] || v[0] == '.' || strlen(v) >= sizeof(cfg->job) ||
		    strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
			    strlen(v))
			BAD("STASIS_JOB", v,
			    "is not a name of 1-255 letters, digits, '.', '_', '-' (not starting with '.')");
		strcpy(cfg->job, v);
	}
	if ((v = env("STASIS_INTERVAL"))) {
		if (!strcmp(v, "auto"))
			cfg->interval_auto = true;
		else if (parse_seconds(v, &cfg->interval))
			BAD("STASIS_INTERVAL", v, "is not a number of seconds > 0 or 'auto'");
	}
	if ((v = env("STASIS_MTBF")) && parse_seconds(v, &cfg->mtbf))
		BAD("STASIS_MTBF", v, "is not a number of seconds > 0");
	if ((v = env("STASIS_MTBF_LIGHT")) && parse_seconds(v, &cfg->mtbf_light))
		BAD("STASIS_MTBF_LIGHT", v, "is not a number of seconds > 0");
	if ((v = env("STASIS_MTBF_HEAVY")) && parse_seconds(v, &cfg->mtbf_heavy))
		BAD("STASIS_MTBF_HEAVY", v, "is not a number of seconds > 0");
	cfg->two_level = isfinite(cfg->mtbf_light) || isfinite(cfg->mtbf_heavy);
	/* Two models of the same failures would contradict each other. */
	if (cfg->two_level && (v = env("STASIS_MTBF")))
		BAD("STASIS_MTBF", v,
		    "cannot be set with STASIS_MTBF_LIGHT or STASIS_MTBF_HEAVY (one model or the "
		    "other)");
	if ((v = env("STASIS_FLUSH_DIR"))) {
		if (v[0] != '/')
			BAD("STASIS_FLUSH_DIR", v, "is not an absolute path");
		if (strlen(v) >= sizeof(cfg->flush_dir) - 256)
			BAD("STASIS_FLUSH_DIR", v, "is too long");
		strcpy(cfg->flush_dir, v);
	}
	if ((v = env("STASIS_FLUSH_EVERY"))) {
		if (parse_int(v, 1, 1000000, &cfg->flush_every))
			BAD("STASIS_FLUSH_EVERY", v, "is not an integer >= 1");
		if (!cfg->flush_dir[0])
			BAD("STASIS_FLUSH_EVERY", v, "needs STASIS_FLUSH_DIR (where to flush)");
	}
	if ((v = env("STASIS_KEEP")) && parse_int(v, 1, 1000, &cfg->keep))
		BAD("STASIS_KEEP", v, "is not an integer from 1 to 1000");
	if ((v = env("STASIS_SCHEME"))) {
		/* Which names exist is the redundancy layer's to say: engine/start.c
		 * asks it (scheme_find) before anything else is done. */
		if (strlen(v) >= sizeof(cfg->scheme))
			BAD("STASIS_SCHEME", v, "is too long for a scheme's name");
		strcpy(cfg->scheme, v);
		cfg->scheme_explicit = true;
	}
	if ((v = env("STASIS_SET_SIZE")) && parse_int(v, 1, 256, &cfg->set_size))
		BAD("STASIS_SET_SIZE", v, "is not an integer from 1 to 256");
	if ((v = env("STASIS_RS_K")) && parse_int(v, 1, 255, &cfg->rs_k))
		BAD("STASIS_RS_K", v, "is not an integer from 1 to 255");
	if ((v = env("STASIS_PARTNER_REPLICAS")) && parse_int(v, 1, 255, &cfg->replicas))
		BAD("STASIS_PARTNER_REPLICAS", v, "is not an integer from 1 to 255");
	if ((v = env("STASIS_DIRTY"))) {
		if (!one_of(v, dirty))
			BAD("STASIS_DIRTY", v, "is not one of auto, uffd, mprotect, off");
		strcpy(cfg->dirty, v);
	}
	if ((v = env("STASIS_COMPRESS"))) {
		if (!one_of(v, compress))
			BAD("STASIS_COMPRESS", v, "is not one of none, lz4, zstd");
		strcpy(cfg->compress, v);
	}
	if ((v = env("STASIS_FULL_EVERY")) && parse_int(v, 1, 1000000, &cfg->full_every))
		BAD("STASIS_FULL_EVERY", v, "is not an integer >= 1");
	if ((v = env("STASIS_TRACK_FAULT_US")) && parse_nonnegative(v, &cfg->fault_us))
		BAD("STASIS_TRACK_FAULT_US", v, "is not a number of microseconds >= 0");
	if ((v = env("STASIS_UNDO_MAX")) && parse_bytes(v, &cfg->undo_max))
		BAD("STASIS_UNDO_MAX", v, "is not a number of bytes (K, M, G or T allowed)");
	if ((v = env("STASIS_DELETED_MAX")) && parse_bytes(v, &cfg->deleted_max))
		BAD("STASIS_DELETED_MAX", v, "is not a number of bytes (K, M, G or T allowed)");
	if ((v = env("STASIS_FAILURE_DOMAIN"))) {
		if (strcmp(v, "host") && parse_int(v, 1, INT_MAX, &n))
			BAD("STASIS_FAILURE_DOMAIN", v, "is not 'host' or a positive integer");
		snprintf(cfg->failure_domain, sizeof(cfg->failure_domain), "%s", v);
	}
	if ((v = env("STASIS_VERBOSE")) && parse_int(v, 0, 2, &cfg->verbose))
		BAD("STASIS_VERBOSE", v, "is not 0, 1 or 2");
	/* Installs the fault points too: a test's faults are known at once. */
	if (fault_configure(env("STASIS_FAULT"), why))
		return -EINVAL;
	if ((v = env("STASIS_RESTART"))) {
		if (strcmp(v, "0") && strcmp(v, "1"))
			BAD("STASIS_RESTART", v, "is not 0 or 1");
		cfg->restart = !strcmp(v, "1");
	}
	return 0;
}

void config_print(const struct stasis_config *cfg)
{
	pr_info("STASIS_DIR=%s STASIS_JOB=%s", cfg->dir, cfg->job[0] ? cfg->job : "(executable name)");
	if (cfg->interval_auto && cfg->two_level)
		pr_info("STASIS_INTERVAL=auto (STASIS_MTBF_LIGHT=%g s STASIS_MTBF_HEAVY=%g s)",
			cfg->mtbf_light, cfg->mtbf_heavy);
	else if (cfg->interval_auto)
		pr_info("STASIS_INTERVAL=auto (STASIS_MTBF=%g s)", cfg->mtbf);
	else
		pr_info("STASIS_INTERVAL=%g s", cfg->interval);
	pr_info("STASIS_KEEP=%d STASIS_SCHEME=%s STASIS_SET_SIZE=%d STASIS_RS_K=%d "
		"STASIS_PARTNER_REPLICAS=%d",
		cfg->keep, cfg->scheme, cfg->set_size, cfg->rs_k, cfg->replicas);
	if (cfg->flush_dir[0])
		pr_info("STASIS_FLUSH_DIR=%s STASIS_FLUSH_EVERY=%d", cfg->flush_dir,
			cfg->flush_every);
	pr_info("STASIS_DIRTY=%s STASIS_FULL_EVERY=%d STASIS_FAILURE_DOMAIN=%s STASIS_RESTART=%d",
		cfg->dirty, cfg->full_every, cfg->failure_domain, cfg->restart);
	pr_info("STASIS_UNDO_MAX=%llu STASIS_DELETED_MAX=%llu STASIS_COMPRESS=%s", cfg->undo_max,
		cfg->deleted_max, cfg->compress);
	if (cfg->fault_us >= 0)
		pr_info("STASIS_TRACK_FAULT_US=%g", cfg->fault_us);
}
