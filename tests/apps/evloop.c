/* evloop: an MPI program built around an event loop, as programs on libuv,
 * libevent or GLib are: a checkpoint/restart test subject that knows
 * nothing of stasis. Right after MPI_Init every rank makes
 *   - a self-pipe (non-blocking): each iteration writes 3 bytes into it and
 *     the loop reads 2 when epoll says it is readable, so the pipe holds
 *     more bytes every iteration, across every checkpoint;
 *   - an eventfd, written (the iteration's number mod 5, plus 1) each
 *     iteration and read back by the loop; a semaphore eventfd written
 *     once with 1000 and read once per iteration (one at a time);
 *   - an epoll instance watching the pipe's read end (data 1), the eventfd
 *     (2), the semaphore (3, edge-triggered) and the signalfd (4);
 *   - a timerfd far off (1 hour, interval 2 hours), and a timerfd that
 *     expired once at the start and is read only at the end;
 *   - a signalfd for SIGURG (blocked, never sent);
 *   - an AF_UNIX stream socketpair: each iteration writes 5 bytes (two
 *     writes) into one end and 1 byte back, and reads 3 of them (5 and the
 *     1 byte back from the 10th on), so that 20 and 10 bytes wait in its
 *     two ends, across every checkpoint; a datagram socketpair holding 3 messages of varied
 *     lengths, one sent and one received each iteration;
 *   - an inotify instance: a watch on "/" removed again (so that the next
 *     numbers are not the first), a watch on a file of its own in TMPDIR
 *     (written at the end, its events read and counted) and one on /usr;
 *   - POSIX timers: one signalling SIGWINCH (blocked) in 2 hours, every
 *     hour, and one of SIGEV_NONE in 90 minutes, made after one deleted.
 * What the loop reads is folded into a heat-like computation's hash; an
 * MPI_Allreduce ends every iteration. At the end each rank reads what is
 * left in the pipe, the timers and the signalfd's mask (fdinfo), so that the
 * answer depends on all of them and on nothing timed.
 *
 *   evloop [N [ITERS]]
 *
 * Output (rank 0, stdout):
 *   evloop: n=<N> iters=<ITERS> left=<bytes> ticks=<t> far=<ok> sock=<bytes>
 *   ino=<events> ptimers=<armed> hash=<16 hex>
 */
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"

static int rank;

static void die(const char *what)
{
	fprintf(stderr, "evloop[%d]: %s\n", rank, what);
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

static void watch(int ep, int fd, uint32_t events, uint64_t data)
{
	struct epoll_event ev = {.events = events, .data.u64 = data};

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		die("epoll_ctl");
}

/* The signalfd's mask as fdinfo shows it. */
static unsigned long long sigmask_of(int fd)
{
	char name[64], line[256];
	unsigned long long m = 0;
	FILE *f;

	snprintf(name, sizeof(name), "/proc/self/fdinfo/%d", fd);
	f = fopen(name, "r");
	if (!f)
		die("fdinfo");
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "sigmask: %llx", &m) == 1)
			break;
	fclose(f);
	return m;
}

int main(int argc, char **argv)
{
	int n = 65536, iters = 16000, pos = 0, size, p[2], ev, sem, ep, far, once, sfd;
	double *u, *v, sum, total;
	uint64_t h = HASH_START, val, ticks = 0, all[1], mine[7];
	long left = 0;
	unsigned char buf[4096];
	struct itimerspec its = {{7200, 0}, {3600, 0}}, now;
	struct epoll_event evs[8];
	sigset_t set;
	int ss[2], ds[2], ino, wd[3];
	char watched[4096];
	uint64_t sock = 0, inev = 0;
	timer_t pt[3];
	struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGWINCH};

	for (int i = 1; i < argc; i++) {
		if (pos++ == 0)
			n = atoi(argv[i]);
		else
			iters = atoi(argv[i]);
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	u = calloc(n + 2, sizeof(*u));
	v = calloc(n + 2, sizeof(*v));
	if (!u || !v || n < 4 || iters < 1)
		die("bad arguments or out of memory");
	for (int i = 1; i <= n; i++)
		u[i] = (double)((i * 7 + rank * 13) % 101) / 100.0;

	sigemptyset(&set);
	sigaddset(&set, SIGURG);
	sigaddset(&set, SIGWINCH);
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) || sigprocmask(SIG_BLOCK, &set, NULL))
		die("pipe2");
	ev = eventfd(0, EFD_NONBLOCK);
	sem = eventfd(0, EFD_NONBLOCK | EFD_SEMAPHORE);
	ep = epoll_create1(EPOLL_CLOEXEC);
	far = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	once = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	sfd = signalfd(-1, &set, SFD_NONBLOCK);
	if (ev < 0 || sem < 0 || ep < 0 || far < 0 || once < 0 || sfd < 0)
		die("making the descriptors");
	val = 1000;
	if (write(sem, &val, 8) != 8)
		die("write sem");
	if (timerfd_settime(far, 0, &its, NULL))
		die("timerfd_settime far");
	its = (struct itimerspec){{0, 0}, {0, 1}};
	if (timerfd_settime(once, 0, &its, NULL))
		die("timerfd_settime once");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, ss) ||
	    socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, ds))
		die("socketpair");
	for (int k = 0; k < 3; k++)
		if (send(ds[0], "abcdefgh", (size_t)k + 2, 0) != k + 2)
			die("send dgram");
	snprintf(watched, sizeof(watched), "%s/evloop-%d-%d",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(), rank);
	ino = inotify_init1(IN_NONBLOCK);
	if (ino < 0 || close(open(watched, O_WRONLY | O_CREAT | O_TRUNC, 0600)))
		die("inotify_init1 or the watched file");
	wd[0] = inotify_add_watch(ino, "/", IN_DELETE_SELF);
	wd[1] = inotify_add_watch(ino, watched, IN_MODIFY | IN_CLOSE_WRITE);
	wd[2] = inotify_add_watch(ino, "/usr", IN_MOVE_SELF | IN_ONLYDIR);
	if (wd[0] < 0 || wd[1] < 0 || wd[2] < 0 || inotify_rm_watch(ino, wd[0]))
		die("inotify_add_watch");
	if (read(ino, buf, sizeof(buf)) <= 0) /* the removed watch's IN_IGNORED */
		die("no IN_IGNORED");
	its = (struct itimerspec){{3600, 0}, {7200, 0}};
	if (timer_create(CLOCK_MONOTONIC, &sev, &pt[0]) || timer_settime(pt[0], 0, &its, NULL))
		die("timer_create");
	sev.sigev_notify = SIGEV_NONE;
	its = (struct itimerspec){{0, 0}, {5400, 0}};
	if (timer_create(CLOCK_REALTIME, &sev, &pt[1]) || timer_delete(pt[1]) ||
	    timer_create(CLOCK_REALTIME, &sev, &pt[2]) || timer_settime(pt[2], 0, &its, NULL))
		die("timer_create");
	watch(ep, p[0], EPOLLIN, 1);
	watch(ep, ev, EPOLLIN, 2);
	watch(ep, sem, EPOLLIN | EPOLLET, 3);
	watch(ep, sfd, EPOLLIN, 4);

	for (int it = 0; it < iters; it++) {
		unsigned char out[3] = {(unsigned char)it, (unsigned char)(it >> 3),
					(unsigned char)(it * 7)};
		int nev;

		if (write(p[1], out, 3) != 3)
			die("write pipe");
		val = (uint64_t)(it % 5) + 1;
		if (write(ev, &val, 8) != 8)
			die("write eventfd");
		nev = epoll_wait(ep, evs, 8, 0);
		if (nev < 0)
			die("epoll_wait");
		for (int e = 0; e < nev; e++) {
			/* An edge-triggered registration may report one more edge
			 * after a restart (made again on a ready descriptor), as
			 * epoll may at any time: the semaphore's are not counted. */
			if (evs[e].data.u64 != 3)
				h = hash_mix(h, &evs[e].data.u64, 8);
			if (evs[e].data.u64 == 1) {
				if (read(p[0], buf, 2) != 2)
					die("read pipe");
				h = hash_mix(h, buf, 2);
			} else if (evs[e].data.u64 == 2) {
				if (read(ev, &val, 8) != 8)
					die("read eventfd");
				h = hash_mix(h, &val, 8);
			} else if (evs[e].data.u64 == 4) {
				die("the signalfd is readable: SIGURG was never sent");
			}
		}
		/* The socketpairs: bytes and messages wait in both. */
		if (write(ss[0], out, 3) != 3 || write(ss[0], "xy", 2) != 2 ||
		    write(ss[1], out + 2, 1) != 1 ||
		    read(ss[1], buf, it < 10 ? 3 : 5) != (it < 10 ? 3 : 5) ||
		    (it >= 10 && read(ss[0], buf + 5, 1) != 1))
			die("stream socketpair");
		h = hash_mix(h, buf, it < 10 ? 3 : 6);
		if (send(ds[0], out, (size_t)(it % 3) + 1, 0) != (it % 3) + 1)
			die("send dgram");
		val = 0;
		if (recv(ds[1], &val, 8, 0) <= 0)
			die("recv dgram");
		h = hash_mix(h, &val, 8);

		/* The semaphore: one at a time, seen by epoll only at its start
		 * (edge-triggered). */
		if (it < 1000 && read(sem, &val, 8) == 8)
			h = hash_mix(h, &val, 8);

		for (int i = 1; i <= n; i++)
			v[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1]);
		memcpy(u + 1, v + 1, n * sizeof(*u));
		sum = 0;
		for (int i = 1; i <= n; i++)
			sum += u[i];
		sum += (double)(h & 0xff) * 1e-6;
		MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		h = hash_mix(h, &total, sizeof(total));
	}

	for (ssize_t r; (r = read(p[0], buf, sizeof(buf))) > 0;) {
		h = hash_mix(h, buf, (size_t)r);
		left += r;
	}
	for (ssize_t r; (r = read(ss[1], buf, sizeof(buf))) > 0 || (r = read(ss[0], buf, 1)) > 0;) {
		h = hash_mix(h, buf, (size_t)r);
		sock += (uint64_t)r;
	}
	for (int k = 0; k < 3; k++) {
		ssize_t r = recv(ds[1], buf, sizeof(buf), MSG_DONTWAIT);

		if (r <= 0)
			die("the datagrams");
		h = hash_mix(h, buf, (size_t)r);
		sock += (uint64_t)r;
	}
	/* The watches, under the numbers they had: events of the watched file. */
	{
		int f = open(watched, O_WRONLY | O_APPEND);

		if (f < 0 || write(f, "z", 1) != 1 || close(f) || unlink(watched))
			die("the watched file");
		for (ssize_t r; (r = read(ino, buf, sizeof(buf))) > 0;)
			for (ssize_t at = 0; at < r;) {
				struct inotify_event e;

				memcpy(&e, buf + at, sizeof(e));
				h = hash_mix(h, &e.wd, sizeof(e.wd));
				h = hash_mix(h, &e.mask, sizeof(e.mask));
				inev++;
				at += (ssize_t)(sizeof(e) + e.len);
			}
		h = hash_mix(h, wd, sizeof(wd));
	}
	/* The POSIX timers: still armed, their intervals kept. */
	{
		struct itimerspec a, b;

		if (timer_gettime(pt[0], &a) || timer_gettime(pt[2], &b))
			die("timer_gettime");
		mine[6] = (a.it_value.tv_sec > 0 && a.it_value.tv_sec <= 7200 &&
			   a.it_interval.tv_sec == 3600) +
			  (b.it_value.tv_sec > 0 && b.it_value.tv_sec <= 5400 &&
			   !b.it_interval.tv_sec && !b.it_interval.tv_nsec);
	}
	if (read(once, &ticks, 8) != 8)
		ticks = 0;
	if (timerfd_gettime(far, &now))
		die("timerfd_gettime");
	val = sigmask_of(sfd);
	h = hash_mix(h, &val, 8);
	h = hash_mix(h, &now.it_interval, sizeof(now.it_interval));
	mine[0] = hash_mix(h, &rank, sizeof(rank));
	mine[1] = (uint64_t)left;
	mine[2] = ticks;
	/* Far off still: armed, due within its first 2 hours. */
	mine[3] = now.it_value.tv_sec > 0 && now.it_value.tv_sec <= 7200;
	mine[4] = sock;
	mine[5] = inev;
	MPI_Reduce(mine, all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		uint64_t sums[6];

		MPI_Reduce(&mine[1], sums, 6, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
		printf("evloop: n=%d iters=%d left=%llu ticks=%llu far=%llu/%d sock=%llu ino=%llu "
		       "ptimers=%llu hash=%016llx\n",
		       n, iters, (unsigned long long)sums[0], (unsigned long long)sums[1],
		       (unsigned long long)sums[2], size, (unsigned long long)sums[3],
		       (unsigned long long)sums[4], (unsigned long long)sums[5],
		       (unsigned long long)all[0]);
	} else {
		MPI_Reduce(&mine[1], NULL, 6, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	}
	MPI_Finalize();
	return 0;
}
