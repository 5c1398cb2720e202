#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "why.h"

int why_set(struct why *w, int err, const char *fmt, ...)
{
	va_list ap;

	if (!w || why_said(w))
		return err;
	w->err = err;
	va_start(ap, fmt);
	vsnprintf(w->msg, sizeof(w->msg), fmt, ap);
	va_end(ap);
	return err;
}

void why_prefix(struct why *w, const char *fmt, ...)
{
	char head[sizeof(w->msg)], rest[sizeof(w->msg)];
	va_list ap;

	if (!w || !why_said(w))
		return;
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	memcpy(rest, w->msg, sizeof(rest));
	/* Cut at the end of msg when too long: the head names the step. */
	if (snprintf(w->msg, sizeof(w->msg), "%s: %s", head, rest) >= (int)sizeof(w->msg))
		w->msg[sizeof(w->msg) - 1] = '\0';
}

void why_clear(struct why *w)
{
	w->err = 0;
	w->rank = -1;
	w->msg[0] = '\0';
}
