/* segv_handler: a test subject with a SIGSEGV handler of its own, the way
 * garbage collectors and distributed-shared-memory runtimes use one: it
 * write-protects pages of its own memory with mprotect() and takes the
 * fault on purpose. Stasis's mprotect backend owns SIGSEGV too (DESIGN.md
 * section 4): the program's faults must still reach the program.
 *
 * It is an ordinary MPI program that knows nothing of stasis. Every
 * iteration it
 *   - protects a page of a static array (read-only) and writes to it: its
 *     handler counts the fault and makes the page writable, the write runs
 *     again and succeeds;
 *   - protects a page of an anonymous mapping and writes to it under
 *     sigsetjmp(): its handler counts the fault and siglongjmp()s out, the
 *     program unprotects the page and writes again;
 *   - updates a heap array and ends with an MPI_Allreduce on
 *     MPI_COMM_WORLD.
 * The handler installs itself with sigaction() after MPI_Init (when stasis
 * already has its own) and again with SA_SIGINFO every 64 iterations.
 *
 *   segv_handler [N [ITERS]]             N doubles of heap state per rank
 *   segv_handler --crash [N [SECONDS]]   no handler: iterations go on
 *                                        until SECONDS (default 2.5) after
 *                                        MPI_Init, then rank 1 (or 0 alone)
 *                                        writes through a NULL pointer and
 *                                        must die of SIGSEGV (a time, not an
 *                                        iteration: checkpoints must have
 *                                        been taken however fast the
 *                                        machine is)
 *
 * Output (rank 0, stdout, only at the end):
 *   segv_handler: n=<N> iters=<ITERS> faults=<sum over ranks> expected=<2*ITERS*ranks> checksum=<16 hex>
 */
#include <mpi.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096

/* The static page the program protects: alone in its page, in .bss. */
static char guard_static[PAGE] __attribute__((aligned(PAGE)));
static char *guard_map; /* one page of an anonymous mapping */
static volatile sig_atomic_t faults_static, faults_map, longjmp_armed;
static sigjmp_buf jump;
static int rank;

static void handler(int sig, siginfo_t *si, void *ctx)
{
	char *a = si->si_addr;

	(void)sig;
	(void)ctx;
	if (a >= guard_static && a < guard_static + PAGE) {
		faults_static++;
		mprotect(guard_static, PAGE, PROT_READ | PROT_WRITE);
		return;
	}
	if (guard_map && a >= guard_map && a < guard_map + PAGE && longjmp_armed) {
		faults_map++;
		longjmp_armed = 0;
		siglongjmp(jump, 1);
	}
	/* Not one of ours: die of it as without a handler. */
	signal(SIGSEGV, SIG_DFL);
}

static void install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL)) {
		perror("segv_handler: sigaction");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
}

/* One iteration's two faults. A function of its own, so that sigsetjmp()
 * clobbers nothing of main. */
static __attribute__((noinline)) void provoke(long it)
{
	/* 1: the handler unprotects, the store runs again. */
	if (mprotect(guard_static, PAGE, PROT_READ))
		perror("segv_handler: mprotect");
	((volatile char *)guard_static)[(it * 64) % PAGE] = (char)it;
	/* 2: the handler jumps back here; unprotect and store. */
	if (mprotect(guard_map, PAGE, PROT_READ))
		perror("segv_handler: mprotect");
	if (!sigsetjmp(jump, 1)) {
		longjmp_armed = 1;
		((volatile char *)guard_map)[(it * 8) % PAGE] = (char)(it + 1);
		longjmp_armed = 0; /* reached only if no fault happened */
	} else {
		mprotect(guard_map, PAGE, PROT_READ | PROT_WRITE);
		guard_map[(it * 8) % PAGE] = (char)(it + 1);
	}
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

int main(int argc, char **argv)
{
	int crash = 0, size, a = 1;
	long n, iters, faults[2], total_faults[2];
	double *x, sum, total, t0, crash_after = 2.5;
	uint64_t h = 0;

	if (argc > 1 && !strcmp(argv[1], "--crash")) {
		crash = 1;
		a = 2;
	}
	n = argc > a ? atol(argv[a]) : 1 << 17;
	iters = argc > a + 1 ? atol(argv[a + 1]) : 6000;
	if (crash) {
		crash_after = argc > a + 1 ? atof(argv[a + 1]) : 2.5;
		iters = 1L << 40; /* until the crash */
	}
	MPI_Init(&argc, &argv);
	t0 = MPI_Wtime();
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	x = malloc(n * sizeof(double));
	guard_map = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!x || guard_map == MAP_FAILED || n < 1 || iters < 2) {
		fprintf(stderr, "segv_handler: bad arguments or out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (long i = 0; i < n; i++)
		x[i] = (double)(i % 1000) / 1000.0 + rank;
	if (!crash)
		install();

	for (long it = 0; it < iters; it++) {
		if (crash && rank == (size > 1 ? 1 : 0) && MPI_Wtime() - t0 >= crash_after) {
			fprintf(stderr, "segv_handler[%d]: writing through NULL at iteration %ld\n",
				rank, it);
			*(volatile int *)(uintptr_t)0 = 1; /* no handler: must kill the rank */
		}
		if (!crash) {
			if (it % 64 == 0)
				install();
			provoke(it);
		}
		sum = 0;
		for (long i = 0; i < n; i++) {
			x[i] = x[i] * 0.999 + 0.001 * (double)((i + it) % 7);
			sum += x[i];
		}
		MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		x[it % n] += total * 1e-9;
	}

	for (long i = 0; i < n; i++) {
		uint64_t b;
		memcpy(&b, &x[i], sizeof(b));
		h = mix(h ^ b);
	}
	for (long i = 0; i < PAGE; i++)
		h = mix(h ^ (uint64_t)(unsigned char)guard_static[i] ^
			((uint64_t)(unsigned char)guard_map[i] << 8));
	faults[0] = faults_static + faults_map;
	faults[1] = (long)h;
	MPI_Reduce(&faults[0], &total_faults[0], 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&faults[1], &total_faults[1], 1, MPI_LONG, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("segv_handler: n=%ld iters=%ld faults=%ld expected=%ld checksum=%016llx\n", n,
		       iters, total_faults[0], crash ? 0 : 2 * iters * size,
		       (unsigned long long)total_faults[1]);
	MPI_Finalize();
	return 0;
}
