/* alarm: an MPI program with signal business of its own, the way long runs
 * use it (a periodic progress report, a watchdog, a CPU-time budget):
 *
 *   - SIGALRM: a handler installed with sigaction(SA_SIGINFO) after
 *     MPI_Init, driven by an ITIMER_REAL interval timer (setitimer; alarm()
 *     is the same kernel timer);
 *   - SIGVTALRM: a handler installed with signal(), driven by an
 *     ITIMER_VIRTUAL timer (the process's CPU time);
 *   - SIGUSR2: ignored (SIG_IGN) and raised at itself now and then, which
 *     kills the process if the disposition is lost;
 *   - with --own: handlers of its own for the signals stasis uses, SIGUSR1
 *     (installed before MPI_Init) and SIGRTMIN+2, each raised at itself
 *     now and then and counted by its handler.
 *
 * Every WAIT iterations it waits (up to 5 s) until its SIGALRM handler has
 * run since the previous wait, and burns CPU (up to 5 s) until its SIGVTALRM
 * handler has: a timer or handler that did not come back after a restart
 * shows as a missed wait. Nothing it prints depends on timing: the answer
 * of a heat-like computation, the number of waits and of missed waits
 * (0), and how many raised signals its handlers counted.
 *
 *   alarm [N [ITERS]] [--own]
 *
 * Output (rank 0, stdout, at the end):
 *   alarm: n=<N> iters=<ITERS> waits=<W> missed=<sum> usr2=<sum> own=<sum> hash=<16 hex>
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "hash.h"

#define WAIT 100
#define RAISE 37

static volatile sig_atomic_t alarms, vtalarms, own;

static void on_alarm(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	if (sig == SIGALRM && si->si_signo == SIGALRM)
		alarms++;
}

static void on_vtalarm(int sig)
{
	(void)sig;
	vtalarms++;
}

static void on_own(int sig)
{
	(void)sig;
	own++;
}

static void fail(const char *what)
{
	perror(what);
	MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Whether counter moves within 5 s, sleeping or (cpu) computing. */
static int moves(volatile sig_atomic_t *counter, int cpu)
{
	sig_atomic_t seen = *counter;
	struct timespec nap = {0, 1000000};
	double t0 = MPI_Wtime();
	volatile double x = 1;

	while (*counter == seen && MPI_Wtime() - t0 < 5.0) {
		if (cpu)
			for (int i = 0; i < 100000; i++)
				x = x * 1.0000001 + 1e-9;
		else
			nanosleep(&nap, NULL);
	}
	return *counter != seen;
}

int main(int argc, char **argv)
{
	int n = 4096, iters = 3000, pos = 0, with_own = 0, rank, size;
	long waits = 0, missed = 0, usr2 = 0, counts[3], totals[3];
	double *u, *v, sum, total;
	uint64_t h = HASH_START;
	struct sigaction sa;
	struct itimerval real = {{0, 20000}, {0, 20000}}, virt = {{0, 10000}, {0, 10000}};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--own"))
			with_own = 1;
		else if (pos++ == 0)
			n = atoi(argv[i]);
		else
			iters = atoi(argv[i]);
	}
	if (with_own) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_own;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGUSR1, &sa, NULL))
			fail("alarm: sigaction(SIGUSR1)");
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	u = calloc(n + 2, sizeof(*u));
	v = calloc(n + 2, sizeof(*v));
	if (!u || !v || n < 4 || iters < 1)
		fail("alarm: bad arguments or out of memory");
	for (int i = 1; i <= n; i++)
		u[i] = (double)((i * 7 + rank * 13) % 101) / 100.0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_alarm;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL))
		fail("alarm: sigaction(SIGALRM)");
	if (signal(SIGVTALRM, on_vtalarm) == SIG_ERR)
		fail("alarm: signal(SIGVTALRM)");
	if (signal(SIGUSR2, SIG_IGN) == SIG_ERR)
		fail("alarm: signal(SIGUSR2)");
	if (with_own && signal(SIGRTMIN + 2, on_own) == SIG_ERR)
		fail("alarm: signal(SIGRTMIN+2)");
	if (setitimer(ITIMER_REAL, &real, NULL) || setitimer(ITIMER_VIRTUAL, &virt, NULL))
		fail("alarm: setitimer");

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
		if (it % WAIT == WAIT - 1) {
			waits++;
			missed += !moves(&alarms, 0);
			missed += !moves(&vtalarms, 1);
		}
		if (it % RAISE == 0) {
			raise(SIGUSR2); /* ignored: the process lives on */
			usr2++;
			if (with_own) {
				raise(SIGUSR1);
				raise(SIGRTMIN + 2);
			}
		}
	}
	counts[0] = missed;
	counts[1] = usr2;
	counts[2] = own;
	MPI_Reduce(counts, totals, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("alarm: n=%d iters=%d waits=%ld missed=%ld usr2=%ld own=%ld hash=%016llx\n",
		       n, iters, waits, totals[0], totals[1], totals[2], (unsigned long long)h);
	MPI_Finalize();
	return 0;
}
