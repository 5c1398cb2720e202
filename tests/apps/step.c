/* libstasis_step: an application library with state of its own (static
 * data), for the test of a restart that would run another build of it
 * (tests/cr/err_maps.sh). Built twice, with STEP_FACTOR 3 and 5: same
 * layout, other code. */
#include <stddef.h>

#ifndef STEP_FACTOR
#define STEP_FACTOR 3
#endif

static double table[4096];
static long calls;

double step_apply(double x)
{
	calls++;
	table[calls % 4096] = x;
	return x * STEP_FACTOR * 1e-3 + table[(calls * 7) % 4096] * 1e-6;
}

long step_calls(void)
{
	return calls;
}
