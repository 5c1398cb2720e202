/* refuse: an MPI program that, right after MPI_Init, does one thing to its
 * address space or its process that stasis cannot restore, then computes
 * as heat does. Under stasis the run must finish with the same answer and
 * stasis must have said, in a warning naming it, that checkpoints stop.
 *
 *   refuse --KIND [N [ITERS]]
 *
 * KIND (what the program does, and cleans up where it can):
 *   file           mmap() of a file of its own, MAP_SHARED
 *   fixed          an anonymous MAP_FIXED_NOREPLACE mapping at an address
 *                  of its choice (far from stasis's arena)
 *   shmat          a System V shared memory segment, attached and detached
 *   sbrk           sbrk() of a page, given back
 *   pkey           pkey_alloc() (fails where the CPU has no protection keys)
 *   personality    personality() with MMAP_PAGE_ZERO added
 *   mdwe           prctl(PR_SET_MDWE) (fails before Linux 6.3)
 *   timer          a POSIX timer run on a thread (SIGEV_THREAD), deleted again
 *   text           mprotect() of a page of its own code writable, then back
 *   guard          madvise(MADV_GUARD_INSTALL) on a page of a mapping
 *                  (fails before Linux 6.13), removed again
 *   fork-shared    an anonymous MAP_SHARED mapping, then fork(): the child
 *                  writes to it, the parent must see the child's bytes
 *   sigwait        sigtimedwait() for SIGUSR1 (which stasis uses), not
 *                  waiting: a conflict stasis warns about, checkpoints go on
 *
 * Output (rank 0, stdout, at the end): one line hashing the computation.
 */
#include <mpi.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"

#define PAGE 4096

static void fail(const char *what)
{
	perror(what);
	MPI_Abort(MPI_COMM_WORLD, 2);
}

static void do_file(int rank)
{
	char path[] = "/tmp/stasis-refuse.XXXXXX";
	int fd = mkstemp(path);
	char *p;

	if (fd < 0 || ftruncate(fd, PAGE))
		fail("refuse: temporary file");
	unlink(path);
	p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		fail("refuse: mmap(file)");
	p[0] = (char)rank;
	munmap(p, PAGE);
	close(fd);
}

static void do_fixed(void)
{
	void *want = (void *)(uintptr_t)0x300000000000ull, *p;

	p = mmap(want, PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p != want)
		fail("refuse: mmap(MAP_FIXED_NOREPLACE)");
	munmap(p, PAGE);
}

static void do_shmat(void)
{
	int id = shmget(IPC_PRIVATE, PAGE, IPC_CREAT | 0600);
	char *p;

	if (id < 0)
		fail("refuse: shmget");
	p = shmat(id, NULL, 0);
	shmctl(id, IPC_RMID, NULL);
	if (p == (char *)-1)
		fail("refuse: shmat");
	p[0] = 1;
	shmdt(p);
}

static void do_sbrk(void)
{
	char *p = sbrk(PAGE);

	if (p == (char *)-1)
		fail("refuse: sbrk");
	p[0] = 1;
	sbrk(-PAGE);
}

static void do_text(void)
{
	uintptr_t page = (uintptr_t)do_text & ~(uintptr_t)(PAGE - 1);

	if (mprotect((void *)page, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC) ||
	    mprotect((void *)page, PAGE, PROT_READ | PROT_EXEC))
		fail("refuse: mprotect(code)");
}

static void on_timer(union sigval v)
{
	(void)v;
}

static void do_timer(void)
{
	/* Run on a thread of glibc's: a restart could not make it again. */
	struct sigevent sev = {.sigev_notify = SIGEV_THREAD, .sigev_notify_function = on_timer};
	timer_t t;

	if (timer_create(CLOCK_MONOTONIC, &sev, &t))
		fail("refuse: timer_create");
	timer_delete(t);
}

static void do_guard(void)
{
	char *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		fail("refuse: mmap");
	if (!madvise(p + PAGE, PAGE, 102 /* MADV_GUARD_INSTALL */))
		madvise(p + PAGE, PAGE, 103 /* MADV_GUARD_REMOVE */);
	munmap(p, 2 * PAGE);
}

/* The child's write must reach the parent, as it would without stasis. */
static void do_fork_shared(void)
{
	volatile char *p =
	    mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid;
	int status;

	if (p == MAP_FAILED)
		fail("refuse: mmap(MAP_SHARED)");
	p[0] = 'p';
	pid = fork();
	if (pid < 0)
		fail("refuse: fork");
	if (pid == 0) {
		p[0] = 'c';
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || p[0] != 'c') {
		fprintf(stderr, "refuse: the parent does not see what its child wrote\n");
		MPI_Abort(MPI_COMM_WORLD, 3);
	}
	munmap((void *)p, PAGE);
}

static void do_sigwait(void)
{
	struct timespec none = {0, 0};
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	(void)sigtimedwait(&set, NULL, &none);
}

int main(int argc, char **argv)
{
	const char *kind = argc > 1 && !strncmp(argv[1], "--", 2) ? argv[1] + 2 : "";
	int n = argc > 2 ? atoi(argv[2]) : 4096, iters = argc > 3 ? atoi(argv[3]) : 2000;
	int rank;
	double *u, *v, sum, total;
	uint64_t h = HASH_START;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (!strcmp(kind, "file"))
		do_file(rank);
	else if (!strcmp(kind, "fixed"))
		do_fixed();
	else if (!strcmp(kind, "shmat"))
		do_shmat();
	else if (!strcmp(kind, "sbrk"))
		do_sbrk();
	else if (!strcmp(kind, "pkey"))
		(void)pkey_alloc(0, 0);
	else if (!strcmp(kind, "personality"))
		personality(personality(0xffffffff) | MMAP_PAGE_ZERO);
	else if (!strcmp(kind, "mdwe"))
		prctl(65 /* PR_SET_MDWE */, 1 /* PR_MDWE_REFUSE_EXEC_GAIN */, 0, 0, 0);
	else if (!strcmp(kind, "timer"))
		do_timer();
	else if (!strcmp(kind, "text"))
		do_text();
	else if (!strcmp(kind, "guard"))
		do_guard();
	else if (!strcmp(kind, "fork-shared"))
		do_fork_shared();
	else if (!strcmp(kind, "sigwait"))
		do_sigwait();
	else {
		fprintf(stderr, "refuse: unknown kind '%s'\n", kind);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}

	u = calloc(n + 2, sizeof(*u));
	v = calloc(n + 2, sizeof(*v));
	if (!u || !v || n < 4 || iters < 1)
		fail("refuse: bad arguments or out of memory");
	for (int i = 1; i <= n; i++)
		u[i] = (double)((i * 7 + rank * 13) % 101) / 100.0;
	for (int it = 0; it < iters; it++) {
		for (int i = 1; i <= n; i++)
			v[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1]);
		memcpy(u + 1, v + 1, n * sizeof(*u));
		sum = 0;
		for (int i = 1; i <= n; i++)
			sum += u[i];
		MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		u[1 + it % n] += total * 1e-9;
		h = hash_mix(h, &total, sizeof(total));
	}
	if (rank == 0)
		printf("refuse: n=%d iters=%d hash=%016llx\n", n, iters, (unsigned long long)h);
	MPI_Finalize();
	return 0;
}
