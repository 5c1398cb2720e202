/* Under stasis-run, the calls of libfenix that write files or exchange
 * redundancy are sections no transparent checkpoint may fall inside
 * (preload/sections.c in libstasis.so says why): found with dlsym(), so
 * that without stasis nothing is called. */
#include <dlfcn.h>

#include "fenix_int.h"

static int (*begin_fn)(void);
static void (*end_fn)(int);
static bool looked;

int fx_section_begin(void)
{
	if (!looked) {
		begin_fn = (int (*)(void))dlsym(RTLD_DEFAULT, "stasis_section_begin");
		end_fn = (void (*)(int))dlsym(RTLD_DEFAULT, "stasis_section_end");
		looked = true;
	}
	return begin_fn && end_fn ? begin_fn() : 0;
}

void fx_section_end(int token)
{
	if (token && end_fn)
		end_fn(token);
}
