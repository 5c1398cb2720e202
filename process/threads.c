/* Application threads: the table, their stacks, their creation and end,
 * and a restart's making them again (threads.h). */
#define LOG_PREFIX "threads: "
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime.h"
#include "log.h"
#include "session.h"
#include "threads.h"
#include "threads_int.h"
#include "tls.h"

#define PAGE_DOWN(x) ((x) & ~(uintptr_t)(STASIS_PAGE - 1))
#define PAGE_UP(x) PAGE_DOWN((x) + STASIS_PAGE - 1)
#define BLOCK_ALIGN ((uintptr_t)1 << 16)
#define TEMP_STACK (1 << 16)

struct slot slots[MAX_THREADS];
static bool zone_ready;
static pthread_mutex_t table = PTHREAD_MUTEX_INITIALIZER;

void table_lock(void)
{
	pthread_mutex_lock(&table);
}

bool table_trylock(void)
{
	return pthread_mutex_trylock(&table) == 0;
}

void table_unlock(void)
{
	pthread_mutex_unlock(&table);
}

/* --- the zone of stacks ---------------------------------------------------- */

int threads_init(void)
{
	void *p = mmap((void *)STASIS_STACKS_BASE, STASIS_STACKS_SIZE, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	struct sigaction sa;

	if (p == MAP_FAILED)
		return -errno;
	if (p != (void *)STASIS_STACKS_BASE) {
		munmap(p, STASIS_STACKS_SIZE);
		return -EEXIST;
	}
	stop_signal = SIGRTMIN + 3;
	memset(&sa, 0, sizeof(sa));
	extern void threads_stop_handler(int, siginfo_t *, void *);
	sa.sa_sigaction = threads_stop_handler;
	/* Restarted system calls resume as if the signal never came. Every
	 * other asynchronous signal waits while a thread sits stopped. */
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	sigdelset(&sa.sa_mask, SIGSEGV);
	sigdelset(&sa.sa_mask, SIGBUS);
	sigdelset(&sa.sa_mask, SIGILL);
	sigdelset(&sa.sa_mask, SIGFPE);
	if (sigaction(stop_signal, &sa, NULL))
		return -errno;
	zone_ready = true;
	return 0;
}

int threads_stop_signal(void)
{
	return stop_signal;
}

/* The lowest free place of size bytes in the zone (first fit, so that the
 * same sequence of threads gets the same blocks in every run). Under the
 * lock. */
static uintptr_t find_block(size_t size)
{
	uintptr_t at = STASIS_STACKS_BASE;

	for (;;) {
		bool moved = false;

		for (int i = 0; i < MAX_THREADS; i++) {
			const struct slot *t = &slots[i];

			if (t->state == SLOT_FREE || !t->block)
				continue;
			if (t->block < at + size && at < t->block + t->block_size) {
				at = (t->block + t->block_size + BLOCK_ALIGN - 1) &
				     ~(BLOCK_ALIGN - 1);
				moved = true;
			}
		}
		if (!moved)
			break;
	}
	return at + size <= STASIS_STACKS_BASE + STASIS_STACKS_SIZE ? at : 0;
}

/* Map a block: a guard page, then the stack. */
static int map_block(uintptr_t block, size_t size)
{
	if (mmap((void *)(block + STASIS_PAGE), size - STASIS_PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
		return -errno;
	return 0;
}

/* Give a block back to the reservation (its pages go). */
static void unmap_block(uintptr_t block, size_t size)
{
	mmap((void *)block, size, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

bool slot_gone(const struct slot *t)
{
	return t->tid && syscall(SYS_tgkill, getpid(), t->tid, 0) && errno == ESRCH;
}

static void free_slot(struct slot *t)
{
	if (t->block)
		unmap_block(t->block, t->block_size);
	memset(t, 0, sizeof(*t));
}

void reap_slots(void)
{
	for (int i = 0; i < MAX_THREADS; i++) {
		struct slot *t = &slots[i];

		if (t->state != SLOT_EXITING || !slot_gone(t))
			continue;
		if (t->detached)
			free_slot(t);
		else
			t->state = SLOT_ENDED;
	}
}

/* --- a thread's life ------------------------------------------------------- */

static void *thread_entry(void *arg)
{
	struct slot *t = arg;
	/* Everything of this frame and below is saved at a checkpoint. */
	uintptr_t top = (uintptr_t)__builtin_frame_address(0) + 16;
	void *ret;

	stasis_app_thread = t - slots + 1;
	t->tid = syscall(SYS_gettid);
	if (t->mode == MODE_ENDED)
		return t->retval;
	t->top = top;
	if (t->mode == MODE_RESTORE)
		park_for_restore(t);
	__atomic_store_n(&t->state, SLOT_RUNNING, __ATOMIC_SEQ_CST);
	ret = t->start(t->arg);
	threads_exiting(ret);
	return ret;
}

void threads_exiting(void *retval)
{
	struct slot *t;

	if (!stasis_app_thread)
		return;
	t = &slots[stasis_app_thread - 1];
	t->retval = retval;
	__atomic_store_n(&t->state, SLOT_EXITING, __ATOMIC_SEQ_CST);
}

static struct slot *slot_of(pthread_t pt)
{
	for (int i = 0; i < MAX_THREADS; i++)
		if (slots[i].state != SLOT_FREE && pthread_equal(slots[i].pt, pt))
			return &slots[i];
	return NULL;
}

void threads_joined(pthread_t pt)
{
	struct slot *t;

	table_lock();
	t = slot_of(pt);
	if (t)
		free_slot(t);
	table_unlock();
}

void threads_detached(pthread_t pt)
{
	struct slot *t;

	table_lock();
	t = slot_of(pt);
	if (t) {
		t->detached = true;
		if (t->state == SLOT_ENDED)
			free_slot(t);
	}
	table_unlock();
}

static int real_create(pthread_t *pt, const pthread_attr_t *attr, void *(*start)(void *), void *arg)
{
	static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

	if (!real)
		real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
				void *))stasis_next_symbol("pthread_create");
	return real ? real(pt, attr, start, arg) : EAGAIN;
}

/* The attributes of the thread to make, on block: those of attr (or the
 * defaults) that a restart can make again. */
static int make_attr(struct slot *t, const pthread_attr_t *attr, pthread_attr_t *out)
{
	struct sched_param sp = {0};
	pthread_attr_t defaults;
	const pthread_attr_t *from = attr;
	int detach = PTHREAD_CREATE_JOINABLE, ret;

	if (!from) {
		if (pthread_getattr_default_np(&defaults))
			return EAGAIN;
		from = &defaults;
	}
	pthread_attr_getdetachstate(from, &detach);
	pthread_attr_getinheritsched(from, &t->inherit);
	pthread_attr_getschedpolicy(from, &t->policy);
	pthread_attr_getschedparam(from, &sp);
	t->priority = sp.sched_priority;
	t->detached = detach == PTHREAD_CREATE_DETACHED;
	if (from == &defaults)
		pthread_attr_destroy(&defaults);
	ret = pthread_attr_init(out);
	if (!ret)
		ret = pthread_attr_setdetachstate(out, detach);
	if (!ret)
		ret = pthread_attr_setstack(out, (void *)(t->block + STASIS_PAGE),
					    t->block_size - STASIS_PAGE);
	if (!ret && t->inherit == PTHREAD_EXPLICIT_SCHED) {
		sp.sched_priority = t->priority;
		pthread_attr_setinheritsched(out, t->inherit);
		pthread_attr_setschedpolicy(out, t->policy);
		pthread_attr_setschedparam(out, &sp);
	}
	return ret;
}

static size_t stack_size_of(const pthread_attr_t *attr)
{
	pthread_attr_t defaults;
	size_t size = 0;

	if (attr) {
		pthread_attr_getstacksize(attr, &size);
	} else if (!pthread_getattr_default_np(&defaults)) {
		pthread_attr_getstacksize(&defaults, &size);
		pthread_attr_destroy(&defaults);
	}
	return size ? size : (size_t)8 << 20;
}

/* Whether attr carries a stack of the program's. With a size but no
 * address set, glibc 2.36's pthread_attr_getstack gives 0 - size: a stack
 * ending at address 0, which no stack does. */
static bool own_stack(const pthread_attr_t *attr)
{
	void *addr = NULL;
	size_t size = 0;

	if (pthread_attr_getstack(attr, &addr, &size))
		return false;
	return addr && (uintptr_t)addr + size != 0;
}

int threads_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg)
{
	pthread_attr_t mine;
	struct slot *t = NULL;
	size_t size;
	int ret;

	if (attr && own_stack(attr)) {
		session_unsupported(
		    "a thread on a stack of the program's own (pthread_attr_setstack)");
		return real_create(thread, attr, start, arg);
	}
	if (!zone_ready) {
		session_unsupported("application threads (no zone for their stacks)");
		return real_create(thread, attr, start, arg);
	}
	size = PAGE_UP(stack_size_of(attr)) + STASIS_PAGE;
	size = (size + BLOCK_ALIGN - 1) & ~(BLOCK_ALIGN - 1);
	table_lock();
	reap_slots();
	for (int i = 0; i < MAX_THREADS && !t; i++)
		if (slots[i].state == SLOT_FREE)
			t = &slots[i];
	if (!t || !(t->block = find_block(size))) {
		t = NULL;
		table_unlock();
		session_unsupported("more application threads than stasis keeps");
		return real_create(thread, attr, start, arg);
	}
	t->block_size = size;
	t->state = SLOT_STARTING;
	t->start = start;
	t->arg = arg;
	table_unlock();
	ret = map_block(t->block, t->block_size) ? EAGAIN : make_attr(t, attr, &mine);
	if (!ret) {
		ret = real_create(&t->pt, &mine, thread_entry, t);
		pthread_attr_destroy(&mine);
	}
	if (ret) {
		table_lock();
		free_slot(t);
		table_unlock();
		return ret;
	}
	*thread = t->pt;
	return 0;
}

/* --- a restart ------------------------------------------------------------- */

volatile int restore_requested;
static volatile int restore_go;
static const void *tls_record;
static size_t tls_record_len;

static void futex_wait(volatile int *word, int value)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

static void futex_wake(volatile int *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* On the thread's temporary stack: its own stack and TLS back from the
 * image, then wait for the memory, then jump into the image's handler. */
static void parked_main(int index)
{
	struct slot *t = &slots[index];
	const struct thread_record *r = t->rec;
	int ret;

	/* What glibc allocates for it meanwhile (a block of key values) is
	 * the runtime's: the arena is about to be overwritten. */
	stasis_depth = 1;
	memcpy((void *)r->low, t->stack_bytes, r->top - r->low);
	ret = tls_restore_thread(tls_record, tls_record_len, r->slot + 1, &t->why);
	if (!ret)
		ret = sched_setaffinity(0, sizeof(cpu_set_t), (const cpu_set_t *)r->affinity) &&
			      errno != EINVAL
			  ? -errno
			  : 0;
	if (ret)
		why_set(&t->why, ret, "thread %u: cannot set its CPU affinity: %s", r->slot,
			strerror(-ret));
	__atomic_store_n(&t->parked, ret ? -1 : 1, __ATOMIC_SEQ_CST);
	futex_wake(&t->parked);
	while (!__atomic_load_n(&restore_go, __ATOMIC_SEQ_CST))
		futex_wait(&restore_go, 0);
	if (ret)
		syscall(SYS_exit, 0); /* the restart stops: nothing to resume */
	memcpy(&t->ctx, r->context, sizeof(t->ctx));
	t->ctx.uc_mcontext.fpregs = &t->ctx.__fpregs_mem;
	t->errno_value = r->errno_value;
	t->state = SLOT_RUNNING;
	t->resumed = 1;
	stasis_depth = 0;
	stasis_busy = 0;
	/* Frames put back carry the checkpointed process's stack canary. */
	__asm__ volatile("mov %0, %%fs:0x28" : : "r"(r->canary) : "memory");
	setcontext(&t->ctx);
	syscall(SYS_exit, 0);
}

void park_for_restore(struct slot *t)
{
	/* The first cause is kept: none left from an earlier park. */
	why_clear(&t->why);
	t->temp_stack =
	    mmap(NULL, TEMP_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t->temp_stack == MAP_FAILED) {
		why_set(&t->why, -ENOMEM, "thread %d: no memory to park it", (int)(t - slots));
		__atomic_store_n(&t->parked, -1, __ATOMIC_SEQ_CST);
		futex_wake(&t->parked);
		for (;;)
			pause();
	}
	getcontext(&t->park_ctx);
	t->park_ctx.uc_stack.ss_sp = t->temp_stack;
	t->park_ctx.uc_stack.ss_size = TEMP_STACK;
	t->park_ctx.uc_link = NULL;
	makecontext(&t->park_ctx, (void (*)(void))parked_main, 1, (int)(t - slots));
	setcontext(&t->park_ctx);
	for (;;)
		pause();
}

struct parse {
	const struct threads_record *h;
	const uint8_t *p, *end;
};

/* The next thread of the record, with its stack bytes; NULL at the end or
 * when malformed (*bad). */
static const struct thread_record *next_record(struct parse *c, const uint8_t **bytes, bool *bad)
{
	const struct thread_record *r = (const struct thread_record *)c->p;
	size_t n;

	if (c->p == c->end)
		return NULL;
	if ((size_t)(c->end - c->p) < sizeof(*r) || r->slot >= MAX_THREADS || r->low > r->top ||
	    r->top - r->low > (size_t)(c->end - c->p) - sizeof(*r) || r->low < r->block ||
	    r->top > r->block + r->block_size) {
		*bad = true;
		return NULL;
	}
	n = (r->top - r->low + 7) & ~(size_t)7;
	*bytes = c->p + sizeof(*r);
	c->p += sizeof(*r) + n;
	return r;
}

/* Make thread r again (no thread of this run holds its slot). */
static int make_again(const struct thread_record *r, const uint8_t *bytes, struct why *why)
{
	struct slot *t = &slots[r->slot];
	pthread_attr_t attr;
	struct sched_param sp = {.sched_priority = r->priority};
	pthread_t pt;
	int ret;

	memset(t, 0, sizeof(*t));
	t->rec = r;
	t->stack_bytes = bytes;
	t->block = r->block;
	t->block_size = r->block_size;
	t->detached = r->detached;
	t->retval = (void *)(uintptr_t)r->retval;
	t->mode = r->state == THREAD_ENDED ? MODE_ENDED : MODE_RESTORE;
	t->state = r->state == THREAD_ENDED ? SLOT_EXITING : SLOT_STARTING;
	if (map_block(r->block, r->block_size)) {
		return why_set(why, -ENOMEM, "thread %u: cannot map its stack at %#llx", r->slot,
			       (unsigned long long)r->block);
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, r->detached ? PTHREAD_CREATE_DETACHED
						       : PTHREAD_CREATE_JOINABLE);
	pthread_attr_setstack(&attr, (void *)(r->block + STASIS_PAGE), r->block_size - STASIS_PAGE);
	if (r->inherit == PTHREAD_EXPLICIT_SCHED) {
		pthread_attr_setinheritsched(&attr, r->inherit);
		pthread_attr_setschedpolicy(&attr, r->policy);
		pthread_attr_setschedparam(&attr, &sp);
	}
	ret = real_create(&pt, &attr, thread_entry, t);
	pthread_attr_destroy(&attr);
	if (ret) {
		return why_set(why, -ret, "thread %u: cannot make it again: %s", r->slot,
			       strerror(ret));
	}
	t->pt = pt;
	if ((uintptr_t)pt != r->pthread) {
		return why_set(
		    why, -EINVAL,
		    "thread %u: glibc placed its descriptor at %#lx in this run, was %#llx",
		    r->slot, (unsigned long)pt, (unsigned long long)r->pthread);
	}
	return 0;
}

/* Wait until every thread of the record is parked (or ended again). */
static int wait_parked(struct parse c, struct why *why)
{
	const struct thread_record *r;
	const uint8_t *bytes;
	bool bad = false;

	while ((r = next_record(&c, &bytes, &bad))) {
		struct slot *t = &slots[r->slot];

		if (r->state == THREAD_ENDED) {
			/* Made again only to end again, with its result. */
			for (int ms = 0; !t->tid || !slot_gone(t); ms++) {
				if (ms == 10000) {
					return why_set(why, -ETIMEDOUT,
						       "thread %u: made again, it does "
						       "not end",
						       r->slot);
				}
				usleep(1000);
			}
			t->state = SLOT_ENDED;
			continue;
		}
		while (!__atomic_load_n(&t->parked, __ATOMIC_SEQ_CST))
			futex_wait(&t->parked, 0);
		if (t->parked < 0) {
			return why_set(why, -EINVAL, "%s", t->why.msg);
		}
		if (t->top != r->top) {
			return why_set(
			    why, -EINVAL,
			    "thread %u: its stack is at another place in this run (frame "
			    "%#lx, was %#llx)",
			    r->slot, (unsigned long)t->top, (unsigned long long)r->top);
		}
	}
	return 0;
}

int threads_restore(const void *tls, size_t tls_len, const void *thr, size_t thr_len,
		    struct why *why)
{
	struct parse c = {thr, thr, (const uint8_t *)thr};
	const struct thread_record *r;
	const uint8_t *bytes;
	bool bad = false, in_record[MAX_THREADS] = {false};
	int ret;

	if (!tls || !thr || thr_len < sizeof(*c.h) ||
	    memcmp(c.h->magic, STASIS_THREADS_MAGIC, sizeof(c.h->magic)) || c.h->bytes > thr_len) {
		return why_set(why, -EBADMSG, "the image holds no record of the threads");
	}
	c.p += sizeof(*c.h);
	c.end += c.h->bytes;
	ret = tls_restore_keys(tls, tls_len, why);
	if (!ret)
		ret = tls_restore_thread(tls, tls_len, 0, why);
	if (ret)
		return ret;
	tls_record = tls;
	tls_record_len = tls_len;
	{
		struct parse all = c;

		while ((r = next_record(&all, &bytes, &bad)))
			in_record[r->slot] = true;
	}
	for (int i = 0; i < MAX_THREADS; i++)
		if (slots[i].state != SLOT_FREE && !in_record[i]) {
			return why_set(
			    why, -EINVAL,
			    "this run's start made a thread (%d) the checkpointed run no "
			    "longer had",
			    i);
		}
	if (bad) {
		return why_set(why, -EBADMSG, "the record of the threads is malformed");
	}
	{
		struct parse each = c;

		while ((r = next_record(&each, &bytes, &bad))) {
			struct slot *t = &slots[r->slot];

			if (t->state == SLOT_FREE) {
				ret = make_again(r, bytes, why);
				if (ret)
					return ret;
				continue;
			}
			t->rec = r;
			t->stack_bytes = bytes;
			/* Made by this run's start, as in the checkpointed run. */
			if (r->state != THREAD_STOPPED || t->state != SLOT_RUNNING ||
			    t->block != r->block || (uintptr_t)t->pt != r->pthread) {
				return why_set(
				    why, -EINVAL,
				    "thread %u, made by this run's start, differs from the "
				    "checkpointed run's",
				    r->slot);
			}
		}
	}
	ret = threads_park_started(why);
	return ret ? ret : wait_parked(c, why);
}

void threads_release(void)
{
	for (int i = 0; i < MAX_THREADS; i++) {
		slots[i].rec = NULL;
		slots[i].mode = MODE_NORMAL;
	}
	__atomic_store_n(&restore_requested, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&restore_go, 1, __ATOMIC_SEQ_CST);
	futex_wake(&restore_go);
}

/* --- the threads part (session/part.h) ------------------------------------------------ */

static int threads_part_stop(struct why *why)
{
	return threads_stop(why);
}

/* Two sections: thread-local storage and keys, and the threads. */
static int threads_part_save(uint64_t id, struct section_list *out, struct why *why)
{
	struct image_region r[4];
	int n = threads_save(r, 4, why), ret = 0;

	(void)id;
	if (n < 0)
		return n;
	for (int i = 0; i < n && !ret; i++)
		ret = section_add(out, r[i].kind, (const void *)r[i].addr, r[i].length, why);
	return ret;
}

static int threads_part_recreate(const struct restart_input *in, struct why *why)
{
	const struct section *tls = restart_section(in, SECTION_TLS);
	const struct section *thr = restart_section(in, SECTION_THREADS);
	return threads_restore(tls->data, tls->len, thr->data, thr->len, why);
}

const struct part_ops threads_part = {
    .name = "threads",
    .stop = threads_part_stop,
    .save = threads_part_save,
    .thaw = threads_resume,
    .recreate = threads_part_recreate,
    .on_temp_stack = threads_release,
};
