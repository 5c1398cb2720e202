/* The program's standard input through a relay of stasis's (stdin_relay.h). */
#define LOG_PREFIX "stdin: "
#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc64.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "log.h"
#include "stdin_relay.h"

#define RING (1u << 20)		/* the newest bytes put in: more than the pipe holds */
#define PIPE_BYTES 65536	/* the relay pipe's capacity, set so */
#define SKIP_WAIT_MS 30000	/* a restart's input that stops coming */

static int real_fd = -1, out_fd = -1; /* the launcher's input; the relay pipe's write end */
static ino_t pipe_ino;
static bool installed, started, at_eof;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t relayed; /* bytes put into the pipe (a restart: skipped ones too) */
static unsigned char head[STDIN_HEAD], ring[RING];
static struct section_buf out;

/* Under lock: n more bytes went in. */
static void note(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (relayed + i < STDIN_HEAD)
			head[relayed + i] = p[i];
		ring[(relayed + i) % RING] = p[i];
	}
	relayed += n;
}

static void *relay(void *arg)
{
	unsigned char buf[16384];
	ssize_t n;

	(void)arg;
	while ((n = read(real_fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w;

			pthread_mutex_lock(&lock);
			w = write(out_fd, buf + off, (size_t)(n - off));
			if (w > 0)
				note(buf + off, (size_t)w);
			pthread_mutex_unlock(&lock);
			if (w > 0) {
				off += w;
			} else if (w < 0 && errno == EAGAIN) {
				struct pollfd p = {out_fd, POLLOUT, 0};

				poll(&p, 1, -1);
			} else if (!(w < 0 && errno == EINTR)) {
				goto out; /* the program closed its end */
			}
		}
	}
out:
	pthread_mutex_lock(&lock);
	at_eof = true;
	close(out_fd); /* the program reads the end of its input */
	out_fd = -1;
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void start(void)
{
	sigset_t all, old;
	pthread_t t;

	if (!installed || started)
		return;
	started = true;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* none of the program's signals land there */
	if (pthread_create(&t, NULL, relay, NULL)) {
		pr_warn("cannot start the thread that passes standard input on: the program reads "
			"none");
		close(out_fd);
		out_fd = -1;
	} else {
		pthread_detach(t);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void stdin_relay_install(bool restart)
{
	struct stat st;
	int p[2];

	if (fstat(0, &st) || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
		return;
	real_fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
	if (real_fd < 0 || pipe2(p, O_CLOEXEC)) {
		pr_warn("cannot put a relay on standard input (%s): a restart would give the "
			"program its input again from the start",
			strerror(errno));
		if (real_fd >= 0)
			close(real_fd);
		real_fd = -1;
		return;
	}
	fcntl(p[1], F_SETPIPE_SZ, PIPE_BYTES);
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	if (dup2(p[0], 0) != 0) {
		close(p[0]);
		close(p[1]);
		close(real_fd);
		real_fd = -1;
		return;
	}
	close(p[0]);
	out_fd = p[1];
	fstat(0, &st);
	pipe_ino = st.st_ino;
	installed = true;
	if (!restart)
		start();
}

/* --- the part ------------------------------------------------------------------- */

static int stdin_save(uint64_t id, struct section_list *l, struct why *why)
{
	struct stdin_record r;
	struct stat st;
	uint64_t buffered = 0;
	int unread = 0;
	size_t len;

	(void)id;
	memset(&r, 0, sizeof(r));
	/* The program put something else at 0: what it reads is its own. */
	if (!installed || fstat(0, &st) || st.st_ino != pipe_ino)
		return 0;
	/* libc's stdin is the runtime's (libc's data, never restored): what it
	 * took from the pipe and the program has not read yet comes again. */
	if (stdin && stdin->_fileno == 0 && stdin->_IO_read_base &&
	    stdin->_IO_read_end > stdin->_IO_read_ptr)
		buffered = (uint64_t)(stdin->_IO_read_end - stdin->_IO_read_ptr);
	pthread_mutex_lock(&lock);
	if (ioctl(0, FIONREAD, &unread) || unread < 0 ||
	    (uint64_t)unread + buffered > relayed) {
		pthread_mutex_unlock(&lock);
		return why_set(why, -EIO, "cannot tell how much of its standard input the program "
					  "read");
	}
	memcpy(r.magic, STASIS_STDIN_MAGIC, 8);
	r.consumed = relayed - (uint64_t)unread - buffered;
	r.head_len = (uint32_t)(r.consumed < STDIN_HEAD ? r.consumed : STDIN_HEAD);
	r.head_crc = crc64_ecma_refl(0, head, r.head_len);
	r.tail_len = (uint32_t)(r.consumed < STDIN_TAIL ? r.consumed : STDIN_TAIL);
	for (uint32_t i = 0; i < r.tail_len; i++)
		r.tail[i] = ring[(r.consumed - r.tail_len + i) % RING];
	r.eof = at_eof && r.consumed == relayed;
	pthread_mutex_unlock(&lock);
	if (section_buf_fill(&out, &r, sizeof(r), &len))
		return why_set(why, -ENOMEM, "no memory for the record of standard input");
	return section_add(l, SECTION_STDIN, out.data, len, why);
}

/* Read n bytes of the restart's input, as the relay would have. */
static int skip(const struct stdin_record *r, struct why *why)
{
	unsigned char buf[16384];
	uint64_t left = r->consumed;
	bool same;

	while (left) {
		struct pollfd p = {real_fd, POLLIN, 0};
		ssize_t n;

		if (poll(&p, 1, SKIP_WAIT_MS) == 0)
			break;
		n = read(real_fd, buf, left < sizeof(buf) ? left : sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		note(buf, (size_t)n);
		left -= (uint64_t)n;
	}
	if (left)
		return why_set(why, -ENODATA,
			       "standard input gave %llu bytes, and the program had read %llu "
			       "before the checkpoint: give the restart the first run's input "
			       "(stasis-restart ... < the same file)",
			       (unsigned long long)(r->consumed - left),
			       (unsigned long long)r->consumed);
	/* note() kept them as the relay keeps what it puts in. */
	same = crc64_ecma_refl(0, head, r->head_len) == r->head_crc;
	for (uint32_t i = 0; same && i < r->tail_len; i++)
		same = ring[(r->consumed - r->tail_len + i) % RING] == r->tail[i];
	if (!same)
		return why_set(why, -EBADMSG,
			       "standard input is not the first run's: its first %llu bytes, "
			       "which the program had read, differ",
			       (unsigned long long)r->consumed);
	return 0;
}

/* CHECK: the restart's input is the first run's up to where the program
 * was; the relay goes on from there. */
static int stdin_check(const struct restart_input *in, struct why *why)
{
	const struct section *sec = restart_section(in, SECTION_STDIN);
	const struct stdin_record *r = sec->data;
	int ret;

	if (!r) {
		start();
		return 0;
	}
	if (sec->len < sizeof(*r) || memcmp(r->magic, STASIS_STDIN_MAGIC, 8) ||
	    r->head_len > STDIN_HEAD || r->tail_len > STDIN_TAIL ||
	    r->head_len > r->consumed || r->tail_len > r->consumed)
		return why_set(why, -EBADMSG, "the record of standard input is damaged");
	if (r->eof) {
		/* It had read all of it: the rest is the end. */
		if (installed) {
			close(out_fd);
			out_fd = -1;
		}
		return 0;
	}
	if (!installed) {
		if (!r->consumed)
			return 0;
		return why_set(why, -ENODATA,
			       "the program had read %llu bytes of its standard input (a pipe) and "
			       "may read on, but the restart's is not one: give it the first run's "
			       "input (stasis-restart ... < the same file)",
			       (unsigned long long)r->consumed);
	}
	ret = skip(r, why);
	if (!ret)
		start();
	return ret;
}

const struct part_ops stdin_part = {
    .name = "stdin",
    .save = stdin_save,
    .check = stdin_check,
};
