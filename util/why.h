/* Why something failed: one error idiom for every layer. A function that
 * can fail returns 0 or -errno and, when it fails, says why in a struct why
 * its caller owns: `return why_set(why, -EIO, "cannot read %s", path);`.
 * The first cause set is kept (a caller may add context in front with
 * why_prefix), so the line a user reads names the real cause. No
 * allocation: safe at a checkpoint, in a restart, after a fork. */
#ifndef STASIS_WHY_H
#define STASIS_WHY_H

#include <stdbool.h>

struct why {
	int err;       /* the -errno of the failure, 0 while none */
	int rank;      /* after an agreement (session/agree.h): the rank that explains */
	char msg[1024]; /* one line, no trailing newline; "" while none */
};

#define WHY_INIT {0, -1, ""}

/* Record err with a message (printf format) unless a cause is already
 * recorded; returns err, so that a failure path is one line. */
int why_set(struct why *w, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Put "<context>: " in front of the recorded message (no-op when none). */
void why_prefix(struct why *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Forget any recorded cause. */
void why_clear(struct why *w);

static inline bool why_said(const struct why *w)
{
	return w->msg[0] != '\0';
}

#endif
