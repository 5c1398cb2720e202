/* Sections of a library's calls that no checkpoint may fall inside, for
 * libraries built to run under stasis: libfenix's stores and commits
 * write files through temporaries it renames, and a checkpoint inside one
 * would hold a descriptor of a file gone by the restart (and half a
 * redundancy exchange). The library finds these with dlsym() and calls
 * nothing when stasis is not there. A section is counted as an epoch of
 * post/start/complete/wait (mpi/windows.h): its begin is a point where
 * this rank may stop, inside it none is. */
#include "coord.h"
#include "interpose.h"
#include "session.h"
#include "windows.h"

/* Returns the token stasis_section_end takes: 1 when the section counts
 * (a session is running: MPI_Init has been), else 0. */
EXPORT int stasis_section_begin(void)
{
	if (!session_get())
		return 0;
	stasis_depth++;
	coord_entry();
	windows_section_begin();
	stasis_depth--;
	return 1;
}

/* May be called on another thread than the begin (libfenix's writer). */
EXPORT void stasis_section_end(int token)
{
	if (token)
		windows_section_end();
}
