#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

int stasis_log_verbosity;
int stasis_log_rank = -1;

void stasis_log(enum stasis_log_level level, const char *prefix, int with_errno, const char *fmt,
		...)
{
	int saved_errno = errno;
	char line[1024];
	size_t n = 0;
	va_list ap;

	if (level == STASIS_LOG_INFO && stasis_log_verbosity < 1)
		return;
	if (level == STASIS_LOG_DEBUG && stasis_log_verbosity < 2)
		return;

	if (stasis_log_rank >= 0)
		n = snprintf(line, sizeof(line), "stasis[%d]: %s", stasis_log_rank, prefix);
	else
		n = snprintf(line, sizeof(line), "stasis: %s", prefix);
	if (level == STASIS_LOG_WARN && n < sizeof(line))
		n += snprintf(line + n, sizeof(line) - n, "warning: ");
	va_start(ap, fmt);
	if (n < sizeof(line))
		n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (with_errno && n < sizeof(line))
		n += snprintf(line + n, sizeof(line) - n, ": %s", strerror(saved_errno));
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write(2) per line so that lines of different ranks do not interleave
	 * and nothing sits in a stdio buffer when the process is killed. */
	if (write(STDERR_FILENO, line, n) < 0)
		(void)0;
	errno = saved_errno;
}
