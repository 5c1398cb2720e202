/* Checks shared by the unit tests: a failed check is reported with its line
 * and counted in `failures`; the test decides its exit status from it. */
#ifndef STASIS_TEST_CHECK_H
#define STASIS_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

/* cond must hold; else the printf-style message says what was seen. */
#define CHECKF(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

/* rc must be want and err exactly the formatted text. */
#define CHECK_ERR(rc, want, err, ...) check_err(__FILE__, __LINE__, rc, want, err, __VA_ARGS__)

static void check_err(const char *file, int line, int rc, int want, const char *err,
		      const char *fmt, ...) __attribute__((format(printf, 6, 7), unused));

static void check_err(const char *file, int line, int rc, int want, const char *err,
		      const char *fmt, ...)
{
	char expect[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(expect, sizeof(expect), fmt, ap);
	va_end(ap);
	if (rc != want || strcmp(err, expect)) {
		fprintf(stderr, "%s:%d: got %d \"%s\"\n    want %d \"%s\"\n", file, line, rc, err,
			want, expect);
		failures++;
	}
}

#endif
