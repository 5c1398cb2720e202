/* Stopping the application threads for a checkpoint, saving them, and
 * letting them go (threads.h). */
#define LOG_PREFIX "threads: "
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"
#include "log.h"
#include "session.h"
#include "threads.h"
#include "threads_int.h"
#include "tls.h"

#define STOP_SECONDS 5.0
#define RESEND_MS 2.0
#define ROUND8(x) (((x) + 7) & ~(size_t)7)
#define ROUND_PAGE(x) (((x) + STASIS_PAGE - 1) & ~(size_t)(STASIS_PAGE - 1))

__thread int stasis_app_thread __attribute__((tls_model("initial-exec")));
__thread int stasis_busy __attribute__((tls_model("initial-exec")));
volatile int threads_stopping;
int stop_signal;

/* Why a thread did not stop when last asked (for the warning). */
enum deferred { NOT_ASKED, BUSY, IN_MPI, IN_RUNTIME_CODE };
static volatile int deferred[MAX_THREADS];
static volatile int command_word;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void futex_wait(volatile int *word, int value)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

static void futex_wake(volatile int *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static void nap(void)
{
	struct timespec t = {0, 200000};

	nanosleep(&t, NULL);
}

void command_post(enum command c)
{
	int w = __atomic_load_n(&command_word, __ATOMIC_SEQ_CST);

	__atomic_store_n(&command_word, (((w >> 2) + 1) << 2) | c, __ATOMIC_SEQ_CST);
	futex_wake(&command_word);
}

/* --- where a thread must not be stopped ----------------------------------- */

static struct {
	uintptr_t start, end;
} code[8];
static int ncode;

static int find_code(struct dl_phdr_info *info, size_t size, void *data)
{
	uintptr_t self = (uintptr_t)data;
	bool want = info->dlpi_name && strstr(info->dlpi_name, "/ld-linux");

	(void)size;
	for (int i = 0; !want && i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		want = ph->p_type == PT_LOAD && self >= info->dlpi_addr + ph->p_vaddr &&
		       self < info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	for (int i = 0; want && i < info->dlpi_phnum && ncode < 8; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
			code[ncode++].start = info->dlpi_addr + ph->p_vaddr,
			code[ncode - 1].end = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	return 0;
}

/* ld.so's code and stasis's own. */
static void find_runtime_code(void)
{
	if (!ncode)
		dl_iterate_phdr(find_code, (void *)(uintptr_t)find_runtime_code);
}

static bool runtime_code(uintptr_t pc)
{
	for (int i = 0; i < ncode; i++)
		if (pc >= code[i].start && pc < code[i].end)
			return true;
	return false;
}

/* --- the thread's side ----------------------------------------------------- */

static uint64_t read_canary(void)
{
	uint64_t v;

	__asm__ volatile("mov %%fs:0x28, %0" : "=r"(v));
	return v;
}

/* Stopped: do what the main thread says until it lets go. */
static void wait_commands(struct slot *t)
{
	int seen = __atomic_load_n(&command_word, __ATOMIC_SEQ_CST);

	__atomic_store_n(&t->stopped, 1, __ATOMIC_SEQ_CST);
	/* Given up meanwhile (it lowers the flag before it lets go). */
	if (!__atomic_load_n(&threads_stopping, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&t->stopped, 0, __ATOMIC_SEQ_CST);
		return;
	}
	for (;;) {
		int w;

		while ((w = __atomic_load_n(&command_word, __ATOMIC_SEQ_CST)) == seen)
			futex_wait(&command_word, seen);
		seen = w;
		if ((w & 3) == CMD_SAVE) {
			tls_save_thread(t - slots + 1, t->position);
			__atomic_store_n(&t->saved, 1, __ATOMIC_SEQ_CST);
		} else if ((w & 3) == CMD_RELEASE) {
			__atomic_store_n(&t->stopped, 0, __ATOMIC_SEQ_CST);
			return;
		}
	}
}

/* SIGRTMIN+3 on an application thread. Not async-signal-safe in general,
 * but only where it is: never inside stasis, malloc, the MPI library or
 * ld.so (then it returns and the thread is asked again). */
void threads_stop_handler(int sig, siginfo_t *si, void *ucv)
{
	int saved = errno, index = stasis_app_thread - 1;
	const ucontext_t *uc = ucv;
	struct slot *t;

	(void)sig;
	(void)si;
	if (index < 0)
		goto out;
	t = &slots[index];
	if (t->state != SLOT_RUNNING)
		goto out;
	if (stasis_busy || stasis_depth || runtime_code(uc->uc_mcontext.gregs[REG_RIP])) {
		deferred[index] = stasis_depth ? IN_MPI : stasis_busy ? BUSY : IN_RUNTIME_CODE;
		goto out;
	}
	if (restore_requested) {
		if (t->rec && t->mode == MODE_NORMAL)
			park_for_restore(t);
		goto out;
	}
	if (!threads_stopping || t->stopped)
		goto out;
	t->errno_value = saved;
	t->canary = read_canary();
	sched_getaffinity(0, sizeof(t->affinity), &t->affinity);
	getcontext(&t->ctx);
	if (t->resumed) {
		/* A restart: the image's stack is back, return into it. */
		t->resumed = 0;
		errno = t->errno_value;
		return;
	}
	t->low = ((uintptr_t)t->ctx.uc_mcontext.gregs[REG_RSP] - 256) & ~(uintptr_t)15;
	wait_commands(t);
	errno = t->errno_value;
	return;
out:
	errno = saved;
}

void threads_stop_self(void)
{
	if (stasis_app_thread)
		syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), stop_signal);
}

void threads_mpi_call(void)
{
	session_unsupported("MPI called from a thread of the program other than the main one "
			    "(MPI_THREAD_MULTIPLE)");
}

/* --- the main thread's side ------------------------------------------------ */

extern FILE *_IO_list_all;
void _IO_list_lock(void);
void _IO_list_unlock(void);

static volatile int list_probe_done;

static void *probe_list_lock(void *arg)
{
	(void)arg;
	_IO_list_lock();
	_IO_list_unlock();
	__atomic_store_n(&list_probe_done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Whether the checkpoint's fflush(NULL) can take every stream's lock and
 * libc's list of streams: a stopped thread may hold one. The list lock
 * cannot be tried, so a thread of stasis's takes it, or is left waiting
 * for it until the threads go on. */
static bool stdio_free(void)
{
	static int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	pthread_t helper;
	double until;

	for (FILE *f = _IO_list_all; f; f = f->_chain) {
		if (ftrylockfile(f))
			return false;
		funlockfile(f);
	}
	if (!create)
		create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
				  void *))stasis_next_symbol("pthread_create");
	list_probe_done = 0;
	if (!create || create(&helper, NULL, probe_list_lock, NULL))
		return false;
	pthread_detach(helper);
	for (until = now() + 0.05; now() < until;) {
		if (__atomic_load_n(&list_probe_done, __ATOMIC_SEQ_CST))
			return true;
		nap();
	}
	return false;
}

static bool any_thread(void)
{
	for (int i = 0; i < MAX_THREADS; i++)
		if (slots[i].state != SLOT_FREE)
			return true;
	return false;
}

static void let_go(void)
{
	__atomic_store_n(&threads_stopping, 0, __ATOMIC_SEQ_CST);
	command_post(CMD_RELEASE);
}

static int explain(int i, struct why *why)
{
	static const char *const what[] = {
	    [NOT_ASKED] = "did not take stasis's signal (SIGRTMIN+3 blocked?)",
	    [BUSY] = "stayed inside stasis (allocating, loading a library)",
	    [IN_MPI] = "stayed inside the MPI library",
	    [IN_RUNTIME_CODE] = "stayed inside ld.so",
	};
	const struct slot *t = &slots[i];

	if (t->state == SLOT_EXITING)
		return why_set(why, -EBUSY,
			       "thread %d (tid %d) of the program did not finish ending", i,
			       (int)t->tid);
	if (t->state == SLOT_STARTING)
		return why_set(why, -EBUSY, "thread %d of the program did not start", i);
	return why_set(why, -EBUSY, "thread %d (tid %d) of the program could not be stopped: it %s",
		       i, (int)t->tid, what[deferred[i]]);
}

static int count_stopped(void)
{
	int n = 0;

	for (int i = 0; i < MAX_THREADS; i++)
		n += slots[i].state == SLOT_RUNNING && slots[i].stopped;
	return n;
}

int threads_stop(struct why *why)
{
	double t0 = now(), until = t0 + STOP_SECONDS, sent[MAX_THREADS] = {0};
	bool stdio_busy = false;

	if (!any_thread())
		return 0;
	find_runtime_code();
	memset((void *)deferred, 0, sizeof(deferred));
	for (int i = 0; i < MAX_THREADS; i++)
		slots[i].saved = 0;
	__atomic_store_n(&threads_stopping, 1, __ATOMIC_SEQ_CST);
	for (int pending = -1;; nap()) {
		if (now() > until) {
			let_go();
			if (pending >= 0)
				return explain(pending, why);
			return why_set(why, -EBUSY, "a thread of the program kept holding %s",
				       stdio_busy ? "a stdio stream" : "stasis's table");
		}
		/* A thread being made holds it a moment (and stops on its way out). */
		if (!table_trylock())
			continue;
		reap_slots();
		pending = -1;
		for (int i = 0; i < MAX_THREADS; i++) {
			struct slot *t = &slots[i];
			int state = __atomic_load_n(&t->state, __ATOMIC_SEQ_CST);

			if (state == SLOT_STARTING || (state == SLOT_EXITING && !slot_gone(t))) {
				pending = i;
			} else if (state == SLOT_RUNNING && !t->stopped) {
				pending = i;
				if (now() - sent[i] > RESEND_MS / 1e3) {
					syscall(SYS_tgkill, getpid(), t->tid, stop_signal);
					sent[i] = now();
				}
			}
		}
		table_unlock();
		if (pending < 0) {
			if (stdio_free()) {
				pr_debug("%d application threads stopped in %.1f ms",
					 count_stopped(), (now() - t0) * 1e3);
				return 0;
			}
			/* A stopped thread holds a stream: let them go on a moment. */
			stdio_busy = true;
			let_go();
			usleep(2000);
			__atomic_store_n(&threads_stopping, 1, __ATOMIC_SEQ_CST);
			memset(sent, 0, sizeof(sent));
		}
	}
}

void threads_resume(void)
{
	if (__atomic_load_n(&threads_stopping, __ATOMIC_SEQ_CST))
		let_go();
}

/* --- saving ----------------------------------------------------------------- */

static uint8_t *record;
static size_t record_cap;

static bool stopped(const struct slot *t)
{
	return t->state == SLOT_RUNNING && t->stopped;
}

static size_t record_bytes(void)
{
	size_t n = sizeof(struct threads_record);

	for (int i = 0; i < MAX_THREADS; i++) {
		const struct slot *t = &slots[i];

		if (stopped(t))
			n += sizeof(struct thread_record) + ROUND8(t->top - t->low);
		else if (t->state == SLOT_ENDED && !t->detached)
			n += sizeof(struct thread_record);
	}
	return n;
}

static void fill_record(struct thread_record *r, const struct slot *t)
{
	memset(r, 0, sizeof(*r));
	r->slot = t - slots;
	r->state = stopped(t) ? THREAD_STOPPED : THREAD_ENDED;
	r->pthread = (uintptr_t)t->pt;
	r->block = t->block;
	r->block_size = t->block_size;
	r->retval = (uintptr_t)t->retval;
	r->detached = t->detached;
	r->policy = t->policy;
	r->priority = t->priority;
	r->inherit = t->inherit;
	if (r->state != THREAD_STOPPED)
		return;
	r->top = t->top;
	r->low = t->low;
	r->canary = t->canary;
	r->errno_value = t->errno_value;
	memcpy(r->affinity, &t->affinity, sizeof(t->affinity));
	memcpy(r->context, &t->ctx, sizeof(t->ctx));
}

/* SECTION_THREADS: every stopped thread with the part of its stack in use
 * (read here: it does not move while stopped), every ended one waiting for
 * its join. */
static int save_threads(struct image_region *out)
{
	size_t need = record_bytes(), cap = ROUND_PAGE(need);
	struct threads_record *h;
	uint8_t *p;

	_Static_assert(sizeof(ucontext_t) <= STASIS_CONTEXT_MAX, "ucontext_t too big");
	_Static_assert(sizeof(cpu_set_t) <= 128, "cpu_set_t too big");
	if (cap > record_cap) {
		void *m =
		    mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			return -ENOMEM;
		if (record)
			munmap(record, record_cap);
		record = m;
		record_cap = cap;
	}
	memset(record, 0, cap);
	h = (struct threads_record *)record;
	memcpy(h->magic, STASIS_THREADS_MAGIC, sizeof(h->magic));
	h->bytes = need;
	p = record + sizeof(*h);
	for (int i = 0; i < MAX_THREADS; i++) {
		const struct slot *t = &slots[i];
		struct thread_record *r = (struct thread_record *)p;

		if (!stopped(t) && !(t->state == SLOT_ENDED && !t->detached))
			continue;
		fill_record(r, t);
		p += sizeof(*r);
		if (r->state == THREAD_STOPPED) {
			memcpy(p, (const void *)t->low, t->top - t->low);
			p += ROUND8(t->top - t->low);
		}
		h->nthreads++;
	}
	*out = (struct image_region){(uintptr_t)record, cap, SECTION_THREADS, NULL};
	return 0;
}

int threads_save(struct image_region *out, int max, struct why *why)
{
	uint32_t n = 1;
	double until;
	int ret;

	if (max < 2) {
		return why_set(why, -ENOSPC, "too many regions");
	}
	for (int i = 0; i < MAX_THREADS; i++)
		if (stopped(&slots[i]))
			slots[i].position = n++;
	ret = tls_save_begin(n);
	if (!ret)
		ret = tls_save_thread(0, 0);
	if (!ret && n > 1) {
		/* Each thread saves its own: its dynamic TLS blocks and key
		 * values are found from itself. */
		command_post(CMD_SAVE);
		for (int i = 0; i < MAX_THREADS && !ret; i++)
			for (until = now() + STOP_SECONDS; stopped(&slots[i]) && !slots[i].saved;
			     nap())
				if (now() > until)
					ret = -ETIMEDOUT;
	}
	if (!ret)
		ret = tls_save_end(&out[0]);
	if (!ret)
		ret = save_threads(&out[1]);
	if (ret) {
		return why_set(why, ret,
			       "cannot save the threads and their thread-local storage: %s",
			       strerror(-ret));
	}
	return 2;
}

/* --- a restart ---------------------------------------------------------------- */

int threads_park_started(struct why *why)
{
	find_runtime_code();
	__atomic_store_n(&restore_requested, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < MAX_THREADS; i++) {
		struct slot *t = &slots[i];
		double until = now() + STOP_SECONDS, sent = 0;

		if (!t->rec || t->mode != MODE_NORMAL)
			continue;
		while (!__atomic_load_n(&t->parked, __ATOMIC_SEQ_CST)) {
			if (now() > until)
				return explain(i, why);
			if (now() - sent > RESEND_MS / 1e3) {
				syscall(SYS_tgkill, getpid(), t->tid, stop_signal);
				sent = now();
			}
			nap();
		}
	}
	return 0;
}
