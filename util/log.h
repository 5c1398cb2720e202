/* One logging layer for stasis. Each .c file defines LOG_PREFIX ("arena: ")
 * before including this header. Messages go to stderr as one line:
 *   stasis[<rank>]: <prefix><message>
 * pr_err/pr_warn always print, pr_info when STASIS_VERBOSE >= 1, pr_debug
 * when >= 2. pr_perror appends ": <strerror(errno)>". Not async-signal-safe:
 * never call from a signal handler. */
#ifndef STASIS_LOG_H
#define STASIS_LOG_H

#include <errno.h>

#ifndef LOG_PREFIX
#define LOG_PREFIX ""
#endif

enum stasis_log_level { STASIS_LOG_ERR, STASIS_LOG_WARN, STASIS_LOG_INFO, STASIS_LOG_DEBUG };

/* Verbosity (0..2) and the rank shown in the prefix (-1: none yet). */
extern int stasis_log_verbosity;
extern int stasis_log_rank;

void stasis_log(enum stasis_log_level level, const char *prefix, int with_errno, const char *fmt,
		...) __attribute__((format(printf, 4, 5)));

#define pr_err(fmt, ...) stasis_log(STASIS_LOG_ERR, LOG_PREFIX, 0, fmt, ##__VA_ARGS__)
#define pr_warn(fmt, ...) stasis_log(STASIS_LOG_WARN, LOG_PREFIX, 0, fmt, ##__VA_ARGS__)
#define pr_info(fmt, ...) stasis_log(STASIS_LOG_INFO, LOG_PREFIX, 0, fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...) stasis_log(STASIS_LOG_DEBUG, LOG_PREFIX, 0, fmt, ##__VA_ARGS__)
#define pr_perror(fmt, ...) stasis_log(STASIS_LOG_ERR, LOG_PREFIX, 1, fmt, ##__VA_ARGS__)

#endif
