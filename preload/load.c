/* What happens when libstasis.so is loaded: decide whether this process is
 * an MPI rank to checkpoint, make sure its address layout is the fixed one,
 * and reserve the application arena before anything else maps there. */
#define LOG_PREFIX ""
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "runtime.h"
#include "arena.h"
#include "fds.h"
#include "handles.h"
#include "log.h"
#include "preload.h"
#include "libraries.h"
#include "regions.h"
#include "session.h"
#include "threads.h"
#include "unseen.h"
#include STASIS_MPI_FAMILY_H

/* The launcher, shells and tools the wrappers start get LD_PRELOAD too;
 * only a process that is an MPI rank has one of these. A process a rank
 * starts (the shell of system(), a tool it runs) has the rank's
 * environment, those included: each rank names itself in STASIS_RANK_PID,
 * which such children inherit, and they stay out (a re-executed rank keeps
 * its pid). Without it, every shell of a system() took itself for a rank,
 * reserved an arena and said its dup2() switched checkpoints off. */
static bool is_mpi_rank(void)
{
	const char *rank_pid = getenv("STASIS_RANK_PID");

	if (rank_pid && strtol(rank_pid, NULL, 10) != (long)getpid())
		return false;
	return getenv("OMPI_COMM_WORLD_RANK") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

static void name_rank(void)
{
	char pid[24];

	stasis_pid = getpid();
	snprintf(pid, sizeof(pid), "%ld", (long)stasis_pid);
	setenv("STASIS_RANK_PID", pid, 1);
}

/* A re-executed rank's name: exec through /proc/self/exe names it "exe",
 * which ps, top, pgrep and the tools that find ranks by name would see;
 * the name it had comes through STASIS_COMM and is set back (the kernel
 * keeps 15 bytes of it, as it did). */
static void keep_name(void)
{
	const char *comm = getenv("STASIS_COMM");

	if (!comm)
		return;
	if (prctl(PR_SET_NAME, comm, 0, 0, 0))
		pr_perror("cannot name the re-executed process %s", comm);
	unsetenv("STASIS_COMM");
}

/* A restart needs every library, the executable and the stack at the
 * addresses of the first run (DESIGN.md fact 1). stasis-run turns
 * randomisation off for the launcher; a rank started some other way (a
 * remote launcher) re-executes itself with it off. */
static void ensure_fixed_layout(void)
{
	static char cmdline[1 << 16];
	char *argv[1024], comm[32];
	int persona = personality(0xffffffff), fd, argc = 0;
	ssize_t n;

	if (persona != -1 && (persona & ADDR_NO_RANDOMIZE))
		keep_name();
	if (persona == -1 || (persona & ADDR_NO_RANDOMIZE))
		return;
	if (getenv("STASIS_REEXEC")) {
		pr_warn("address randomisation is still on after re-executing: checkpoints "
			"are off");
		stasis_active = false;
		return;
	}
	fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, cmdline, sizeof(cmdline) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0 || personality(persona | ADDR_NO_RANDOMIZE) == -1) {
		pr_warn("cannot turn address randomisation off: checkpoints are off");
		stasis_active = false;
		return;
	}
	cmdline[n] = 0;
	for (char *p = cmdline; p < cmdline + n && argc < 1023; p += strlen(p) + 1)
		argv[argc++] = p;
	argv[argc] = NULL;
	setenv("STASIS_REEXEC", "1", 1);
	if (!prctl(PR_GET_NAME, comm, 0, 0, 0)) {
		comm[16] = 0;
		setenv("STASIS_COMM", comm, 1);
	}
	execv("/proc/self/exe", argv);
	pr_perror("cannot re-execute with address randomisation off");
	stasis_active = false;
}

/* A rank of another MPI family (a program linked against MPICH with this
 * Open MPI build preloaded, bypassing stasis-run's check): its MPI calls
 * would reach this build's wrappers and its MPI's functions with handles
 * of the other (MPICH.md A.1: an abort inside MPI_Comm_rank). Stop it at
 * load with one line naming both. The link map is walked without a lock:
 * this may run inside another library's constructor. */
static void refuse_foreign_mpi(void)
{
	const size_t n = strlen(STASIS_MPI_FOREIGN_LIBRARY);

	for (struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
		const char *name = l->l_name ? strrchr(l->l_name, '/') : NULL;

		name = name ? name + 1 : l->l_name;
		if (!name || strncmp(name, STASIS_MPI_FOREIGN_LIBRARY, n))
			continue;
		pr_err("the program is linked against %s (%s) but this libstasis.so is built for "
		       "%s (%s): run it with stasis-run, which preloads the build for its MPI, or "
		       "without stasis",
		       STASIS_MPI_FOREIGN_FAMILY, name, STASIS_MPI_FAMILY, STASIS_MPI_LIBRARY);
		_exit(1);
	}
}

bool stasis_loaded;

static void load(void)
{
	int ret;

	if (!is_mpi_rank())
		return;
	name_rank();
	refuse_foreign_mpi();
	stasis_active = true;
	ensure_fixed_layout();
	if (!stasis_active)
		return;
	ret = arena_init();
	if (!ret)
		ret = vh_init();
	if (!ret)
		ret = regions_init();
	if (!ret && fds_init())
		pr_warn("cannot reserve descriptors for the program: its open files are not "
			"restored, and files it opens switch checkpoints off");
	if (ret) {
		pr_warn("cannot reserve the application arena at %#lx: %s; checkpoints are off",
			(unsigned long)STASIS_ARENA_BASE, strerror(-ret));
		stasis_active = false;
		return;
	}
	/* Reserve the address range where the program's own dlopen()ed
	 * libraries are placed; without it, a library the program loads
	 * switches checkpoints off (process/libraries.h). */
	ret = libraries_init();
	if (ret)
		pr_warn("cannot reserve the zone for libraries loaded with dlopen() at %#lx: %s",
			(unsigned long)STASIS_LIBRARIES_BASE, strerror(-ret));
	/* Reserve the address range for the stacks of the program's own
	 * threads; without it, a thread the program makes switches
	 * checkpoints off (threads.h). */
	ret = threads_init();
	if (ret)
		pr_warn("cannot reserve the zone for the program's thread stacks at %#lx: %s",
			(unsigned long)STASIS_STACKS_BASE, strerror(-ret));
	/* Last: a program that initialises MPI behind stasis's back is told
	 * within an interval (unseen.h). */
	unseen_watch();
}

/* Whether pc is ld.so's code, found from its ELF header (AT_BASE): no lock,
 * no allocation, usable while ld.so itself is still loading. */
static bool in_loader(uintptr_t pc)
{
	static uintptr_t start, end;

	if (!end) {
		const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)getauxval(AT_BASE);
		const ElfW(Phdr) * ph;

		if (!eh)
			return false;
		ph = (const ElfW(Phdr) *)((uintptr_t)eh + eh->e_phoff);
		start = UINTPTR_MAX;
		for (int i = 0; i < eh->e_phnum; i++) {
			if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X))
				continue;
			if ((uintptr_t)eh + ph[i].p_vaddr < start)
				start = (uintptr_t)eh + ph[i].p_vaddr;
			if ((uintptr_t)eh + ph[i].p_vaddr + ph[i].p_memsz > end)
				end = (uintptr_t)eh + ph[i].p_vaddr + ph[i].p_memsz;
		}
	}
	return pc >= start && pc < end;
}

/* libstasis.so is preloaded, yet ld.so runs the constructors of the
 * executable's own libraries before its own (they are loaded first), and
 * those allocate: libgfortran makes its preconnected units there, C++
 * libraries their static objects. Such memory must be the application's
 * from the start (libgfortran links later units to those structures), so
 * the first allocation that is not ld.so's own sets stasis up, from
 * whichever constructor makes it. */
void stasis_load_early(uintptr_t caller)
{
	static bool loading;

	if (stasis_loaded || loading || in_loader(caller))
		return;
	loading = true;
	load();
	stasis_loaded = true;
}

__attribute__((constructor)) static void stasis_load(void)
{
	stasis_load_early(0);
}
