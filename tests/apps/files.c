/* files: an MPI program that keeps files open all run long, as simulation
 * codes do: a checkpoint/restart test subject that knows nothing of stasis.
 * Every rank, in its current directory,
 *   - reads one line per iteration from the input files.in (a FILE* with a
 *     small buffer, so that its descriptor's offset moves as it goes; at
 *     the end of the file it starts again);
 *   - appends a line per iteration to its log files.log.<rank> (emptied at
 *     start, then opened with fopen "a");
 *   - writes a record per iteration to its data file files.data.<rank>
 *     (pwrite at the record's offset) and reads back, through a duplicate
 *     of that descriptor, the record of half as many iterations ago (pread);
 *   - writes progress to /dev/null, keeps its directory open (a descriptor
 *     and a directory stream, read again at the end);
 *   - keeps three files without a name, whose bytes only the checkpoint
 *     holds: a tmpfile() stream it writes a line to per iteration and
 *     reads the last 16 back every 16; an O_TMPFILE descriptor it rewrites a record
 *     of in place per iteration (pwrite) and reads another (pread); and a
 *     file it opened twice (appending, and read-only) before deleting it,
 *     whose reader follows what the writer appends;
 *   - folds what it read into its state; an MPI_Allreduce ends each
 *     iteration.
 * At the end rank 0 prints the answer through a stream on a duplicate of
 * standard output that it never closes (exit() must flush it).
 *
 *   files [N [ITERS]] [--early] [--refuse KIND] [--overwrite]
 *
 *   --early      open the data file (O_TRUNC) before MPI_Init
 *   --refuse K   make, right after MPI_Init, something stasis cannot
 *                restore and keep it: pipe (to a child) socket socketpair
 *                memfd inotify fifo device popen
 *                stdout (dup2 onto descriptor 1)
 *   --overwrite  from the second iteration on, rewrite record 0 of the
 *                data file in place every iteration, and read it back;
 *                and every iteration open the tally file files.tally.<rank>
 *                again, add to one of its numbers in place, and close it
 *                (as codes that reopen their output every step do), and
 *                append a line to files.journal.<rank>, opened in append
 *                mode and closed again each time (made empty at start)
 *
 * Output (rank 0, stdout):
 *   files: n=<N> iters=<ITERS> checksum=<16 hex> log=<bytes> data=<bytes>
 */
#include <dirent.h>
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hash.h"

#define RECORD 256

static int rank;

static void die(const char *what)
{
	fprintf(stderr, "files[%d]: %s\n", rank, what);
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

/* Something stasis cannot restore, kept open to the end. */
static void make_refused(const char *kind)
{
	int fds[2], fd = -1;
	sigset_t set;
	FILE *fp = NULL;
	char name[64];

	if (!strcmp(kind, "pipe")) {
		/* A pipe to another process: its write end given to a child
		 * (which writes a byte and ends), the parent keeps the read end. */
		pid_t child;

		if (pipe(fds))
			die("pipe");
		child = fork();
		if (child < 0)
			die("fork");
		if (!child) {
			close(fds[0]);
			_exit(write(fds[1], "x", 1) == 1 ? 0 : 1);
		}
		close(fds[1]);
		if (waitpid(child, NULL, 0) != child)
			die("waitpid");
	} else if (!strcmp(kind, "socket")) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
	} else if (!strcmp(kind, "socketpair")) {
		/* A socketpair to another process: one end given to a child,
		 * which writes a byte and ends. */
		pid_t child;

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds))
			die("socketpair");
		child = fork();
		if (child < 0)
			die("fork");
		if (!child) {
			close(fds[0]);
			_exit(write(fds[1], "x", 1) == 1 ? 0 : 1);
		}
		close(fds[1]);
		if (waitpid(child, NULL, 0) != child)
			die("waitpid");
	} else if (!strcmp(kind, "eventfd")) {
		fd = eventfd(0, 0);
	} else if (!strcmp(kind, "epoll")) {
		fd = epoll_create1(0);
	} else if (!strcmp(kind, "timerfd")) {
		fd = timerfd_create(CLOCK_MONOTONIC, 0);
	} else if (!strcmp(kind, "signalfd")) {
		sigemptyset(&set);
		sigaddset(&set, SIGUSR2);
		fd = signalfd(-1, &set, 0);
	} else if (!strcmp(kind, "memfd")) {
		fd = memfd_create("files", 0);
	} else if (!strcmp(kind, "inotify")) {
		/* A watch added by a system call stasis does not see: its
		 * path cannot be known. */
		fd = inotify_init1(0);
		if (fd >= 0 && syscall(SYS_inotify_add_watch, fd, "/", IN_DELETE_SELF) < 0)
			die("inotify_add_watch");
	} else if (!strcmp(kind, "fifo")) {
		snprintf(name, sizeof(name), "files.fifo.%d", rank);
		unlink(name);
		if (mkfifo(name, 0600))
			die("mkfifo");
		fd = open(name, O_RDWR); /* a FIFO opened both ways does not block */
	} else if (!strcmp(kind, "device")) {
		fd = open("/dev/ptmx", O_RDWR | O_NOCTTY);
	} else if (!strcmp(kind, "popen")) {
		fp = popen("cat", "w");
		if (!fp)
			die("popen");
	} else if (!strcmp(kind, "stdout")) {
		fd = dup(1);
		if (fd < 0 || dup2(fd, 1) != 1)
			die("dup2");
	} else {
		die("unknown --refuse kind");
	}
	if (fd < 0 && !fp && strcmp(kind, "pipe") && strcmp(kind, "socketpair"))
		die(kind);
}

/* The files without a name (see the top). */
static FILE *scratch;
static int slots = -1, gone_writer = -1, gone_reader = -1;
static long mark; /* where the scratch stream's last 16 lines begin */
#define SLOTS 64

static void nameless_open(void)
{
	char name[64];

	scratch = tmpfile();
	slots = open(".", O_TMPFILE | O_RDWR, 0600);
	snprintf(name, sizeof(name), "files.gone.%d", rank);
	gone_writer = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	gone_reader = open(name, O_RDONLY);
	if (!scratch || slots < 0 || gone_writer < 0 || gone_reader < 0 || unlink(name))
		die("cannot make the files without a name");
	if (ftruncate(slots, SLOTS * RECORD))
		die("ftruncate");
}

static uint64_t nameless_step(long it, const char *record, uint64_t h)
{
	char back[RECORD], line[RECORD];
	ssize_t n;

	if (it % 16 == 0)
		mark = ftell(scratch);
	fprintf(scratch, "%s\n", record);
	if (it % 16 == 15) {
		/* The last 16 lines read back, then the writes go on at the end. */
		fflush(scratch);
		fseek(scratch, mark, SEEK_SET);
		while (fgets(line, sizeof(line), scratch))
			h = hash_mix(h, line, strlen(line));
		fseek(scratch, 0, SEEK_END);
	}
	if (pwrite(slots, record, RECORD, (it % SLOTS) * RECORD) != RECORD ||
	    pread(slots, back, RECORD, ((it * 7) % SLOTS) * RECORD) != RECORD)
		die("the O_TMPFILE file");
	h = hash_mix(h, back, RECORD);
	if (write(gone_writer, record, 40) != 40)
		die("the deleted file's writer");
	n = read(gone_reader, back, 40);
	if (n != 40)
		die("the deleted file's reader");
	return hash_mix(h, back, 40);
}

static uint64_t file_size(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, 0) ? 0 : (uint64_t)st.st_size;
}

int main(int argc, char **argv)
{
	long n = 4096, iters = 2000, pos = 0;
	int size, data = -1, back, null, dir, early = 0, overwrite = 0, out;
	const char *refuse = NULL;
	char logname[64], dataname[64], tallyname[64], journalname[64], line[256];
	char record[RECORD], old[RECORD];
	double tally[8] = {0};
	double *x, sum, total = 0;
	uint64_t h = HASH_START, logb = 0, datab = 0, all[2];
	FILE *in, *log, *answer;
	DIR *listing;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--early"))
			early = 1;
		else if (!strcmp(argv[i], "--overwrite"))
			overwrite = 1;
		else if (!strcmp(argv[i], "--refuse") && i + 1 < argc)
			refuse = argv[++i];
		else if (pos == 0 && ++pos)
			n = atol(argv[i]);
		else if (pos == 1 && ++pos)
			iters = atol(argv[i]);
	}
	if (early) {
		/* Before MPI_Init the rank is not known yet: the launcher's is. */
		const char *r = getenv("OMPI_COMM_WORLD_RANK");

		snprintf(dataname, sizeof(dataname), "files.data.%s", r ? r : "0");
		data = open(dataname, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (data < 0)
			return 2;
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (n < 1 || iters < 1)
		die("usage: files [N [ITERS]] [--early] [--refuse KIND] [--overwrite]");

	snprintf(logname, sizeof(logname), "files.log.%d", rank);
	snprintf(dataname, sizeof(dataname), "files.data.%d", rank);
	snprintf(tallyname, sizeof(tallyname), "files.tally.%d", rank);
	snprintf(journalname, sizeof(journalname), "files.journal.%d", rank);
	if (overwrite) {
		int t = open(tallyname, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (t < 0 || write(t, tally, sizeof(tally)) != (ssize_t)sizeof(tally) || close(t))
			die("cannot make the tally file");
		t = open(journalname, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (t < 0 || close(t))
			die("cannot make the journal");
	}
	in = fopen("files.in", "r");
	log = fopen(logname, "w");
	if (log)
		fclose(log);
	log = fopen(logname, "a");
	if (!in || !log)
		die("cannot open files.in or the log");
	setvbuf(in, NULL, _IOFBF, 64);
	if (data < 0)
		data = open(dataname, O_RDWR | O_CREAT | O_TRUNC, 0644);
	back = dup(data);
	null = open("/dev/null", O_WRONLY);
	dir = open(".", O_RDONLY | O_DIRECTORY);
	listing = opendir(".");
	out = dup(1);
	answer = out >= 0 ? fdopen(out, "w") : NULL;
	if (data < 0 || back < 0 || null < 0 || dir < 0 || !listing || !answer)
		die("cannot open the data file, /dev/null, the directory or a stream");
	nameless_open();
	if (refuse)
		make_refused(refuse);

	x = malloc(sizeof(*x) * n);
	if (!x)
		die("out of memory");
	for (long i = 0; i < n; i++)
		x[i] = (double)(i % 97) / 97.0 + rank;

	for (long it = 0; it < iters; it++) {
		double v;

		if (!fgets(line, sizeof(line), in)) {
			rewind(in);
			if (!fgets(line, sizeof(line), in))
				die("files.in is empty");
		}
		v = atof(line);
		for (long i = 0; i < n; i++)
			x[i] = 0.5 * x[i] + 0.25 * x[(i + 1) % n] + 1e-3 * v;
		sum = 0;
		for (long i = 0; i < n; i++)
			sum += x[i];
		fprintf(log, "it %ld in %.6g sum %.17g\n", it, v, sum);

		memset(record, 0, sizeof(record));
		snprintf(record, sizeof(record), "rank %d it %ld sum %.17g", rank, it, sum);
		if (pwrite(data, record, RECORD, it * RECORD) != RECORD)
			die("pwrite");
		if (pread(back, old, RECORD, (it / 2) * RECORD) != RECORD)
			die("pread");
		h = hash_mix(h, old, RECORD);
		x[it % n] += (double)(old[RECORD / 2] + strlen(old)) * 1e-9;
		if (overwrite && it >= 1) {
			/* What it held goes into the answer: a restart that
			 * did not put it back reads another record. */
			if (pread(back, old, RECORD, 0) != RECORD)
				die("pread of record 0");
			h = hash_mix(h, old, RECORD);
			if (pwrite(data, record, RECORD, 0) != RECORD)
				die("pwrite in place");
		}
		if (overwrite) {
			/* Closed at most checkpoints: a restart that did not
			 * put its bytes back adds to what it already holds. */
			int t = open(tallyname, O_RDWR);

			if (t < 0 || pread(t, tally, sizeof(tally), 0) != (ssize_t)sizeof(tally))
				die("cannot read the tally file");
			tally[it % 8] += sum * 1e-3;
			if (pwrite(t, &tally[it % 8], sizeof(double), (off_t)(it % 8) * 8) != 8 ||
			    close(t))
				die("cannot write the tally file");
			h = hash_mix(h, tally, sizeof(tally));
			/* Appended to, closed at most checkpoints: a restart
			 * that did not cut it back repeats lines. */
			FILE *j = fopen(journalname, "a");

			if (!j || fprintf(j, "it %ld sum %.17g\n", it, sum) < 0 || fclose(j))
				die("cannot append to the journal");
		}
		if (write(null, record, 16) != 16)
			die("write /dev/null");
		h = nameless_step(it, record, h);

		MPI_Allreduce(&sum, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		total += v;
	}
	fflush(log);
	/* The directory stream still reads its directory. */
	rewinddir(listing);
	if (!readdir(listing) || closedir(listing))
		die("the directory stream no longer reads");
	logb = file_size(dir, logname);
	datab = file_size(dir, dataname);
	h = hash_mix(h, &total, sizeof(total));
	all[0] = logb;
	all[1] = datab;
	MPI_Allreduce(MPI_IN_PLACE, all, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(MPI_IN_PLACE, &h, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
	fclose(log);
	close(data);
	close(back);
	fclose(in);
	if (rank == 0)
		fprintf(answer, "files: n=%ld iters=%ld checksum=%016llx log=%llu data=%llu\n", n,
			iters, (unsigned long long)h, (unsigned long long)all[0],
			(unsigned long long)all[1]);
	free(x);
	MPI_Finalize();
	return 0; /* answer is flushed by exit() */
}
