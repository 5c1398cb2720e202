/* Fenix process recovery by relaunch (FENIX.md 4.3, tier B). No MPI here
 * survives a rank's death (no ULFM on Debian 12): Open MPI ends the job,
 * stasis-run --fenix launches it again with STASIS_FENIX_EPOCH one higher,
 * and Fenix_Init rebuilds what ULFM Fenix's repair would have given.
 *
 * What a launch leaves for the next one, in each process's fenix/ directory:
 *   epoch          the record of the launch: its epoch, the job size, the
 *                  spares asked for, spawn, and the reference's "world"
 *                  after all repairs so far (the live processes in the
 *                  order of their Fenix world rank; its top nspare are
 *                  spares), crc64. Every process writes the same one.
 *   survived.e<E>  written when the launcher, not a crash, ended the
 *                  process in epoch E: the SIGCONT, then SIGTERM, another
 *                  process sends (Open MPI sends both to the ranks left
 *                  after one died, SIGCONT first, then waits; a rank that
 *                  kills itself, crashes, exits or is SIGKILLed leaves
 *                  none), or Fenix_Finalize reached. The SIGCONT matters:
 *                  once the SIGTERMs come, the first ranks to die make the
 *                  MPI runtime abort the others (_exit on another thread),
 *                  which cut their SIGTERM handler short in about one
 *                  relaunch in four; nothing dies at SIGCONT. A SIGCONT
 *                  that was job control (a resume) is taken back at the
 *                  first Fenix call made more than CONT_HOLD seconds
 *                  after it.
 * A process of the record's world without its marker failed. The repair
 * rule is the reference's (src/fenix_process_recovery.c, read, not copied):
 * spares, the one with the highest world rank first, take the failed
 * ranks in ascending order; too few spares and spawn 0 shrink the
 * communicator (FENIX_WARNING_SPARE_RANKS_DEPLETED); spawn 1 gives the
 * failed rank's relaunched process its place back. The relaunched
 * processes of failed ranks ("ghosts") and unused spares wait in Fenix_Init
 * until Fenix_Finalize. A spare that takes a failed slot gets the failed
 * process's Fenix files from its ghost (same world rank, so the same
 * directory); if they are gone, restore rebuilds them through the group's
 * redundancy set. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc64.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fenix_int.h"
#include "fsutil.h"

#define EP_MAGIC 0x50455846u /* "FXEP" */
#define TAG_MOVE 0x4658

/* The record: a header of ints, then world[nworld], then the crc. */
enum { H_MAGIC, H_EPOCH, H_SIZE, H_SPARES, H_SPAWN, H_NWORLD, H_NSPARE, H_N };

static char marker[4300];

/* Open MPI's SIGTERM follows its SIGCONT by odls_base_sigkill_timeout
 * (stasis-run --fenix: 3 s), its SIGKILL as much later. */
#define CONT_HOLD 30
static volatile sig_atomic_t cont_marked;
static struct timespec cont_at;
static struct sigaction old_cont;

/* Only a signal from someone else (the launcher) means "survived". */
static bool from_launcher(const siginfo_t *si)
{
	return si && si->si_code == SI_USER && si->si_pid != getpid() && marker[0];
}

static void mark(void)
{
	int fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
}

static void on_term(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (from_launcher(si))
		mark();
	signal(sig, SIG_DFL);
	raise(sig); /* blocked until we return, then the default action */
}

static void on_cont(int sig, siginfo_t *si, void *uc)
{
	if (from_launcher(si)) {
		clock_gettime(CLOCK_MONOTONIC, &cont_at);
		mark();
		cont_marked = 1;
	}
	if (old_cont.sa_flags & SA_SIGINFO) {
		if (old_cont.sa_sigaction)
			old_cont.sa_sigaction(sig, si, uc);
	} else if (old_cont.sa_handler != SIG_DFL && old_cont.sa_handler != SIG_IGN) {
		old_cont.sa_handler(sig);
	}
}

void fx_proc_still_running(void)
{
	struct timespec now;

	if (!cont_marked)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec - cont_at.tv_sec > CONT_HOLD) {
		cont_marked = 0;
		unlink(marker); /* that SIGCONT was a resume: alive and well */
	}
}

void fx_proc_survived(void)
{
	if (marker[0])
		close(open(marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
}

static void marker_name(char *buf, size_t len, int epoch)
{
	snprintf(buf, len, "%s/survived.e%d", fx.dir, epoch);
}

static int write_record(const int *rec, int n)
{
	char path[4300], tmp[4400];
	snprintf(path, sizeof(path), "%s/epoch", fx.dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	uint64_t crc = crc64_ecma_refl(0, (const uint8_t *)rec, sizeof(int) * (size_t)n);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int ret = 0;
	if (write(fd, rec, sizeof(int) * (size_t)n) != (ssize_t)(sizeof(int) * (size_t)n) ||
	    write(fd, &crc, sizeof(crc)) != (ssize_t)sizeof(crc) || fsync(fd))
		ret = -EIO;
	close(fd);
	if (!ret && rename(tmp, path))
		ret = -errno;
	return ret ? ret : fsutil_sync_dir(fx.dir);
}

/* This process's record of epoch want for a job of size processes, in rec
 * (H_N + size ints): 0, or -ENOENT / -EBADMSG. */
static int read_record(int *rec, int size, int want)
{
	char path[4300];
	snprintf(path, sizeof(path), "%s/epoch", fx.dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ENOENT;
	ssize_t max = (ssize_t)(sizeof(int) * (size_t)(H_N + size) + sizeof(uint64_t));
	unsigned char *b = malloc((size_t)max + 1);
	ssize_t got = b ? read(fd, b, (size_t)max + 1) : -1;
	close(fd);
	int ret = -EBADMSG;
	if (got >= (ssize_t)(sizeof(int) * H_N + sizeof(uint64_t))) {
		size_t n = ((size_t)got - sizeof(uint64_t)) / sizeof(int);
		uint64_t crc;
		memcpy(&crc, b + n * sizeof(int), sizeof(crc));
		memcpy(rec, b, n * sizeof(int));
		if (n * sizeof(int) + sizeof(crc) == (size_t)got &&
		    crc == crc64_ecma_refl(0, b, n * sizeof(int)) && rec[H_MAGIC] == (int)EP_MAGIC &&
		    rec[H_NWORLD] >= 0 && rec[H_NWORLD] <= size && n == (size_t)(H_N + rec[H_NWORLD]))
			ret = rec[H_EPOCH] == want && rec[H_SIZE] == size ? 0 : -ENOENT;
	}
	free(b);
	return ret;
}

/* Send every Fenix file of this process's directory (not the records) to
 * world rank dst, or receive them from src and write them here (tmp,
 * fsync, rename): the spare that takes a failed slot becomes, for the
 * Data API, the process that held it. */
static bool movable(const char *name)
{
	return name[0] == 'g' && !strstr(name, ".tmp");
}

static int send_files(int dst)
{
	DIR *d = opendir(fx.dir);
	int n = 0;
	struct dirent *e;
	char names[1024][64];
	while (d && (e = readdir(d)))
		if (movable(e->d_name) && strlen(e->d_name) < 64 && n < 1024)
			snprintf(names[n++], 64, "%s", e->d_name);
	if (d)
		closedir(d);
	MPI_Send(&n, 1, MPI_INT, dst, TAG_MOVE, fx.world);
	for (int i = 0; i < n; i++) {
		char path[4400];
		snprintf(path, sizeof(path), "%s/%s", fx.dir, names[i]);
		struct stat sb;
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		long long len = fd >= 0 && !fstat(fd, &sb) ? (long long)sb.st_size : 0;
		char *buf = malloc((size_t)len + 1);
		if (!buf || (len && read(fd, buf, (size_t)len) != len))
			len = -1; /* the receiver drops it; restore rebuilds */
		if (fd >= 0)
			close(fd);
		MPI_Send(names[i], 64, MPI_CHAR, dst, TAG_MOVE, fx.world);
		MPI_Send(&len, 1, MPI_LONG_LONG, dst, TAG_MOVE, fx.world);
		if (len > 0)
			MPI_Send(buf, (int)len, MPI_BYTE, dst, TAG_MOVE, fx.world);
		free(buf);
	}
	return n;
}

static int recv_files(int src)
{
	int n, ret = 0;
	MPI_Recv(&n, 1, MPI_INT, src, TAG_MOVE, fx.world, MPI_STATUS_IGNORE);
	for (int i = 0; i < n; i++) {
		char name[64], path[4400], tmp[4500];
		long long len;
		MPI_Recv(name, 64, MPI_CHAR, src, TAG_MOVE, fx.world, MPI_STATUS_IGNORE);
		MPI_Recv(&len, 1, MPI_LONG_LONG, src, TAG_MOVE, fx.world, MPI_STATUS_IGNORE);
		char *buf = len > 0 ? malloc((size_t)len) : NULL;
		if (len > 0)
			MPI_Recv(buf, (int)len, MPI_BYTE, src, TAG_MOVE, fx.world, MPI_STATUS_IGNORE);
		name[63] = '\0';
		if (len < 0 || !movable(name) || strchr(name, '/') || (len > 0 && !buf)) {
			free(buf);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", fx.dir, name);
		snprintf(tmp, sizeof(tmp), "%s.tmp", path);
		int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		bool ok = fd >= 0 && (len == 0 || write(fd, buf, (size_t)len) == len) && !fsync(fd);
		if (fd >= 0)
			close(fd);
		if (!ok || rename(tmp, path)) {
			unlink(tmp);
			ret = -EIO;
		}
		free(buf);
	}
	fsutil_sync_dir(fx.dir);
	return ret;
}

/* The reference's repair of world w[0..nw) (top nspare spares) after the
 * processes at the sorted positions fail[0..nf) died: new order in w,
 * new spare count, and whether each survivor came from the spares.
 * Returns FENIX_SUCCESS or FENIX_WARNING_SPARE_RANKS_DEPLETED. */
static int repair(int *w, int *nw, int *nspare, const int *fail, int nf, int spawn,
		  int *was_spare)
{
	int n = *nw, s = *nspare, code = FENIX_SUCCESS;
	if (spawn && s < nf) {
		/* Spawned in place: every failed process's relaunch takes its
		 * own place back; no spare is used, nothing shrinks. */
		for (int i = 0; i < n; i++)
			was_spare[i] = 0;
		return FENIX_SUCCESS;
	}
	int *key = malloc(sizeof(int) * (size_t)n), *sv = malloc(sizeof(int) * (size_t)n);
	int *sp = malloc(sizeof(int) * (size_t)n), m = 0;
	for (int pos = 0, f = 0; pos < n; pos++) {
		if (f < nf && fail[f] == pos) {
			f++;
			continue;
		}
		int k = pos, spare = pos >= n - s;
		if (spare) {
			/* Live ranks above it, failed ones not counted. */
			int off = n - 1 - pos;
			for (int j = 0; j < nf; j++)
				off -= fail[j] > pos;
			if (off < nf)
				k = fail[off];
			else
				spare = 0; /* stays a spare */
		}
		key[m] = k, sv[m] = w[pos], sp[m++] = spare;
	}
	if (s < nf)
		code = FENIX_WARNING_SPARE_RANKS_DEPLETED, s = 0;
	else
		s -= nf;
	/* split(world, 0, key): the new order is by key */
	for (int i = 1; i < m; i++)
		for (int j = i; j > 0 && key[j] < key[j - 1]; j--) {
			int t = key[j];
			key[j] = key[j - 1], key[j - 1] = t;
			t = sv[j], sv[j] = sv[j - 1], sv[j - 1] = t;
			t = sp[j], sp[j] = sp[j - 1], sp[j - 1] = t;
		}
	memcpy(w, sv, sizeof(int) * (size_t)m);
	memcpy(was_spare, sp, sizeof(int) * (size_t)m);
	*nw = m, *nspare = s;
	free(key), free(sv), free(sp);
	return code;
}

int fx_proc_init(MPI_Comm comm, int spares, int spawn, struct fx_proc *p)
{
	int size, me;
	MPI_Comm_size(comm, &size);
	MPI_Comm_rank(comm, &me);
	const char *ep = getenv("STASIS_FENIX_EPOCH");
	int epoch = ep ? atoi(ep) : 0;
	if (epoch < 0)
		epoch = 0;
	int *rec = calloc((size_t)(H_N + size), sizeof(int));
	int *have = malloc(sizeof(int) * 2 * (size_t)size);
	p->world = malloc(sizeof(int) * (size_t)size);
	p->role = malloc(sizeof(int) * (size_t)size);
	p->fail = malloc(sizeof(int) * (size_t)size);
	int *was_spare = calloc((size_t)size, sizeof(int));
	if (!rec || !have || !p->world || !p->role || !p->fail || !was_spare)
		return FENIX_ERROR_INTERN;
	p->epoch = epoch, p->nfail = 0, p->code = FENIX_SUCCESS;
	int init_role = epoch ? FENIX_ROLE_RECOVERED_RANK : FENIX_ROLE_INITIAL_RANK;
	for (int i = 0; i < size; i++)
		p->world[i] = i, p->role[i] = init_role;
	p->nworld = size, p->nspare = spares;

	char path[4300];
	int mine[2] = {0, 0};
	if (epoch > 0) {
		mine[0] = !read_record(rec, size, epoch - 1);
		marker_name(path, sizeof(path), epoch - 1);
		mine[1] = !access(path, F_OK);
	}
	MPI_Allgather(mine, 2, MPI_INT, have, 2, MPI_INT, comm);
	int from = -1;
	for (int r = 0; r < size && from < 0; r++)
		if (have[2 * r])
			from = r;
	bool fresh = epoch == 0;
	if (epoch > 0 && from >= 0) {
		MPI_Bcast(rec, H_N + size, MPI_INT, from, comm);
		if (rec[H_SPARES] != spares || rec[H_SPAWN] != spawn) {
			if (me == 0)
				fx_say(0, "Fenix_Init: launch %d asks %d spares (spawn %d), launch %d "
					  "asked %d (spawn %d): started as a new job, every rank "
					  "RECOVERED", epoch, spares, spawn, epoch - 1,
				       rec[H_SPARES], rec[H_SPAWN]);
			fresh = true;
		}
	} else if (epoch > 0) {
		if (me == 0)
			fx_say(0, "Fenix_Init: launch %d of %d processes finds no record of launch "
				  "%d of that size: started as a new job, every rank RECOVERED",
			       epoch, size, epoch - 1);
		fresh = true;
	}
	if (!fresh) {
		int nw = rec[H_NWORLD], ns = rec[H_NSPARE];
		memcpy(p->world, rec + H_N, sizeof(int) * (size_t)nw);
		/* Failed: the processes of that world that left no marker. */
		for (int pos = 0; pos < nw; pos++)
			if (!have[2 * p->world[pos] + 1])
				p->fail[p->nfail++] = pos;
		int *old = malloc(sizeof(int) * (size_t)nw);
		memcpy(old, p->world, sizeof(int) * (size_t)nw);
		int old_active = nw - ns;
		p->code = repair(p->world, &nw, &ns, p->fail, p->nfail, spawn, was_spare);
		p->nworld = nw, p->nspare = ns;
		/* Roles of the new active ranks: RECOVERED where a spare came
		 * in or a failed process was spawned again, else SURVIVOR. */
		for (int q = 0; q < nw - ns; q++) {
			bool dead = false;
			for (int f = 0; f < p->nfail; f++)
				dead |= old[p->fail[f]] == p->world[q];
			p->role[q] = was_spare[q] || dead ? FENIX_ROLE_RECOVERED_RANK
							  : FENIX_ROLE_SURVIVOR_RANK;
		}
		/* A spare now at the failed position q (< old_active) inherits
		 * the files of the process that held it, from its ghost. */
		int ret = 0;
		for (int q = 0; q < nw - ns && q < old_active; q++) {
			int src = old[q], dst = p->world[q];
			if (src == dst || !was_spare[q])
				continue;
			if (me == src)
				send_files(dst);
			else if (me == dst)
				ret = recv_files(src);
		}
		if (ret)
			fx_say(0, "Fenix_Init: world rank %d: cannot keep the files of the slot it "
				  "took over (restore rebuilds them through the redundancy set)", me);
		free(old);
	}
	/* Where this process is now. */
	p->slot = -1;
	for (int q = 0; q < p->nworld; q++)
		if (p->world[q] == me)
			p->slot = q < p->nworld - p->nspare ? q : -1;
	/* This launch's record, and the marker that says "the launcher ended
	 * me" for it. */
	rec[H_MAGIC] = (int)EP_MAGIC, rec[H_EPOCH] = epoch, rec[H_SIZE] = size;
	rec[H_SPARES] = spares, rec[H_SPAWN] = spawn;
	rec[H_NWORLD] = p->nworld, rec[H_NSPARE] = p->nspare;
	memcpy(rec + H_N, p->world, sizeof(int) * (size_t)p->nworld);
	marker_name(marker, sizeof(marker), epoch);
	unlink(marker); /* a stale one from an earlier job */
	int ret = write_record(rec, H_N + p->nworld);
	if (ret)
		fx_say(0, "Fenix_Init: world rank %d: cannot write %s/epoch: %s (a relaunch will "
			  "not know this launch)", me, fx.dir, strerror(-ret));
	struct sigaction sa = {.sa_sigaction = on_term, .sa_flags = SA_SIGINFO};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	struct sigaction sc = {.sa_sigaction = on_cont, .sa_flags = SA_SIGINFO | SA_RESTART};
	sigemptyset(&sc.sa_mask);
	sigaction(SIGCONT, &sc, &old_cont);
	free(rec), free(have), free(was_spare);
	return FENIX_SUCCESS;
}
