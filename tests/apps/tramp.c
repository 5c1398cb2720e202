/* tramp: an MPI program that makes machine code and protects memory of its
 * own, as JIT compilers, FFI trampolines and guard-page allocators do:
 *
 *   - a trampoline: an mmap()ed page (PROT_READ|PROT_WRITE) it writes x86-64
 *     code into (lea eax,[rdi+imm32]; ret), then mprotect()s
 *     PROT_READ|PROT_EXEC and calls every iteration; every REWRITE
 *     iterations it makes the page writable, changes imm32 and makes it
 *     executable again;
 *   - a page of a mapping made read-only, and a page of its static data
 *     (.bss) made read-only, each checked every CHECK iterations by a
 *     deliberate write that its SIGSEGV handler catches (sigsetjmp and
 *     siglongjmp);
 *   - a PROT_NONE guard page holding a pattern, checked every CHECK
 *     iterations by a read the handler catches, its pattern hashed at the
 *     end;
 *   - an anonymous MAP_SHARED mapping, a MAP_FIXED mapping over part of
 *     an earlier mapping of its own, and a private mapping of /dev/zero,
 *     all written every iteration;
 *   - /proc/self/maps read every CHECK iterations: the trampoline r-x, the
 *     read-only pages r--, the guard page ---.
 *
 *   tramp [N [ITERS]]
 *
 * Output (rank 0, stdout, at the end):
 *   tramp: n=<N> iters=<ITERS> faults=<sum> expected=<3*checks*ranks> maps=<ok ranks> hash=<16 hex>
 */
#include <mpi.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hash.h"

#define PAGE 4096
#define CHECK 200
#define REWRITE 500
#define SHARED_BYTES (64 * 1024)

typedef int (*tramp_fn)(int);

static char static_ro[PAGE] __attribute__((aligned(PAGE)));
static unsigned char *tramp;
static char *ro, *guard, *shared_map, *fixed_map, *zero_map;
static sigjmp_buf jump;
static volatile sig_atomic_t armed;
static long faults;

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
	(void)si;
	(void)ctx;
	if (armed) {
		armed = 0;
		faults++;
		siglongjmp(jump, 1);
	}
	signal(sig, SIG_DFL); /* not ours: die of it */
}

static void fail(const char *what)
{
	perror(what);
	MPI_Abort(MPI_COMM_WORLD, 2);
}

static void write_tramp(int imm)
{
	static const unsigned char lea[] = {0x8d, 0x87}; /* lea eax, [rdi + imm32] */

	if (mprotect(tramp, PAGE, PROT_READ | PROT_WRITE))
		fail("tramp: mprotect(RW)");
	memcpy(tramp, lea, 2);
	memcpy(tramp + 2, &imm, 4);
	tramp[6] = 0xc3; /* ret */
	if (mprotect(tramp, PAGE, PROT_READ | PROT_EXEC))
		fail("tramp: mprotect(RX)");
	__builtin___clear_cache((char *)tramp, (char *)tramp + 7);
}

/* A write (or a read) that must fault. A function of its own, so that
 * sigsetjmp() clobbers nothing of main. */
static __attribute__((noinline)) void must_fault(volatile char *p, int write)
{
	if (!sigsetjmp(jump, 1)) {
		armed = 1;
		if (write)
			*p = 1;
		else
			(void)*p;
		armed = 0;
		fprintf(stderr, "tramp: %p did not fault\n", (void *)p);
	}
}

/* The permissions /proc/self/maps shows for the page at p. */
static int perms_are(const void *p, const char *want)
{
	char line[512], perms[8];
	unsigned long s, e;
	FILE *f = fopen("/proc/self/maps", "r");
	int ok = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &s, &e, perms) == 3 && (uintptr_t)p >= s &&
		    (uintptr_t)p < e) {
			ok = !strncmp(perms, want, 3);
			if (!ok)
				fprintf(stderr, "tramp: %p is %s, not %s\n", p, perms, want);
			break;
		}
	fclose(f);
	return ok;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096, iters = argc > 2 ? atoi(argv[2]) : 4000;
	int rank, size, maps_ok = 1;
	long counts[2], totals[2];
	double *u, sum, total;
	uint64_t h = HASH_START;
	struct sigaction sa;
	char *map;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	u = malloc(n * sizeof(*u));
	tramp = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	map = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	shared_map =
	    mmap(NULL, SHARED_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	fixed_map =
	    mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	{
		int fd = open("/dev/zero", O_RDWR);

		zero_map = fd < 0 ? MAP_FAILED
				  : mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		if (fd >= 0)
			close(fd);
	}
	if (!u || n < 1 || iters < 1 || tramp == MAP_FAILED || map == MAP_FAILED ||
	    shared_map == MAP_FAILED || fixed_map == MAP_FAILED || zero_map == MAP_FAILED)
		fail("tramp: bad arguments or out of memory");
	memset(fixed_map, 0x5a, 4 * PAGE);
	/* Fresh pages over the middle of a mapping of its own: zero there. */
	if (mmap(fixed_map + PAGE, 2 * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != fixed_map + PAGE)
		fail("tramp: mmap(MAP_FIXED)");
	for (int i = 0; i < n; i++)
		u[i] = (double)((i * 7 + rank * 13) % 101) / 100.0;
	write_tramp(rank + 7);
	ro = map;
	guard = map + 2 * PAGE;
	memset(ro, 'r', PAGE);
	for (int i = 0; i < PAGE; i++)
		guard[i] = (char)(i * 31 + rank);
	memset(static_ro, 's', PAGE);
	if (mprotect(ro, PAGE, PROT_READ) || mprotect(guard, PAGE, PROT_NONE) ||
	    mprotect(static_ro, PAGE, PROT_READ))
		fail("tramp: mprotect");

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL))
		fail("tramp: sigaction");

	for (int it = 0; it < iters; it++) {
		int r = ((tramp_fn)(uintptr_t)tramp)(it);

		h = hash_mix(h, &r, sizeof(r));
		sum = 0;
		for (int i = 0; i < n; i++) {
			u[i] = u[i] * 0.999 + 0.001 * (double)((i + r) % 7);
			sum += u[i];
		}
		shared_map[(it * 61) % SHARED_BYTES] += (char)it;
		fixed_map[(it * 67) % (4 * PAGE)] += (char)(it + 1);
		zero_map[(it * 71) % PAGE] += (char)(it + 2);
		MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		u[it % n] += total * 1e-9;
		h = hash_mix(h, &total, sizeof(total));
		if (it % REWRITE == REWRITE - 1)
			write_tramp(rank + 7 + it);
		if (it % CHECK == 0) {
			must_fault(ro + it % PAGE, 1);
			must_fault(static_ro + it % PAGE, 1);
			must_fault(guard + it % PAGE, 0);
			maps_ok &= perms_are(tramp, "r-x") && perms_are(ro, "r--") &&
				   perms_are(static_ro, "r--") && perms_are(guard, "---");
		}
	}
	if (mprotect(guard, PAGE, PROT_READ))
		fail("tramp: mprotect(guard)");
	h = hash_mix(h, guard, PAGE);
	h = hash_mix(h, ro, PAGE);
	h = hash_mix(h, static_ro, PAGE);
	h = hash_mix(h, shared_map, SHARED_BYTES);
	h = hash_mix(h, fixed_map, 4 * PAGE);
	h = hash_mix(h, zero_map, PAGE);
	h = hash_mix(h, u, n * sizeof(*u));
	counts[0] = faults;
	counts[1] = maps_ok;
	MPI_Reduce(counts, totals, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	h = hash_mix(h, &rank, sizeof(rank));
	{
		uint64_t all;

		MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
		h = all;
	}
	if (rank == 0)
		printf("tramp: n=%d iters=%d faults=%ld expected=%ld maps=%ld hash=%016llx\n", n,
		       iters, totals[0], 3L * ((iters + CHECK - 1) / CHECK) * size, totals[1],
		       (unsigned long long)h);
	MPI_Finalize();
	return 0;
}
