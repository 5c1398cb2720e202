/* plugtwo: a second library the plugin program loads with dlopen(), a third
 * of the way through its run. */
#include <stdint.h>

static double sum;
static int count;

double plugtwo_add(double x)
{
	sum = sum * 0.999 + x;
	count++;
	return sum;
}

double plugtwo_total(void)
{
	return sum + count;
}
