/* Exit handlers registered after MPI_Init (exits.h). */
#define LOG_PREFIX "exits: "
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "exits.h"
#include "libraries.h"
#include "log.h"
#include "runtime.h"
#include "session.h"

/* A program registers a handful; past this many the restart would lose
 * some, so checkpoints stop, named. */
#define MAX_EXITS 4096

extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);
extern int __cxa_thread_atexit_impl(void (*fn)(void *), void *obj, void *dso);
extern int on_exit(void (*fn)(int, void *), void *arg);

static struct exit_record table[MAX_EXITS];
static int nexits;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void exits_registered(uint32_t kind, uintptr_t fn, uintptr_t arg, uintptr_t dso)
{
	bool full;

	/* Before MPI_Init the restart registers it again itself; during a
	 * dlopen() the library's constructor does. */
	if (!session_get() || libraries_loading)
		return;
	pthread_mutex_lock(&lock);
	full = nexits == MAX_EXITS;
	if (!full)
		table[nexits++] = (struct exit_record){.kind = kind, .fn = fn, .arg = arg, .dso = dso};
	pthread_mutex_unlock(&lock);
	if (full)
		session_unsupported("more than 4096 exit handlers (atexit, __cxa_atexit, on_exit) "
				    "registered after MPI_Init");
}

/* --- the part ------------------------------------------------------------------------ */

static void *out;    /* mmap()ed, whole pages: the image writer hands it to O_DIRECT */
static size_t out_cap;

static int exits_save(uint64_t id, struct section_list *l, struct why *why)
{
	struct exits_record h = {.record_size = sizeof(struct exit_record)};
	size_t len;

	(void)id;
	pthread_mutex_lock(&lock);
	h.nexits = (uint32_t)nexits;
	len = sizeof(h) + (size_t)nexits * sizeof(struct exit_record);
	if (!nexits) {
		pthread_mutex_unlock(&lock);
		return 0;
	}
	if (len > out_cap) {
		size_t cap = (len + STASIS_PAGE - 1) / STASIS_PAGE * STASIS_PAGE;
		void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			pthread_mutex_unlock(&lock);
			return why_set(why, -ENOMEM, "no memory for the record of exit handlers");
		}
		if (out)
			munmap(out, out_cap);
		out = p;
		out_cap = cap;
	}
	memcpy(h.magic, STASIS_EXITS_MAGIC, 8);
	memcpy(out, &h, sizeof(h));
	memcpy((char *)out + sizeof(h), table, (size_t)nexits * sizeof(struct exit_record));
	memset((char *)out + len, 0, out_cap - len);
	pthread_mutex_unlock(&lock);
	return section_add(l, SECTION_EXITS, out, out_cap, why);
}

static struct exit_record restored[MAX_EXITS];
static int nrestored = -1; /* -1: nothing to register (no restart, or done) */

/* VERIFY: the record is read before anything is changed. */
static int exits_verify(const struct restart_input *in, struct why *why)
{
	const struct section *sec = restart_section(in, SECTION_EXITS);
	const struct exits_record *h = sec->data;

	nrestored = 0;
	if (!h)
		return 0;
	if (sec->len < sizeof(*h) || memcmp(h->magic, STASIS_EXITS_MAGIC, 8) ||
	    h->record_size != sizeof(struct exit_record) || h->nexits > MAX_EXITS ||
	    sec->len < sizeof(*h) + (size_t)h->nexits * sizeof(struct exit_record))
		return why_set(why, -EBADMSG, "the record of the program's exit handlers is damaged");
	for (uint32_t i = 0; i < h->nexits; i++) {
		const struct exit_record *e = (const struct exit_record *)(h + 1) + i;

		if (e->kind < EXIT_CXA || e->kind > EXIT_THREAD || !e->fn)
			return why_set(why, -EBADMSG,
				       "the record of the program's exit handlers is damaged");
		restored[i] = *e;
	}
	nrestored = (int)h->nexits;
	return 0;
}

/* Once the program is back: its handlers registered again in their order,
 * on the main thread (thread_local destructors are that thread's). */
static void exits_resumed(bool restarted)
{
	if (!restarted || nrestored < 0)
		return;
	pthread_mutex_lock(&lock);
	nexits = 0;
	stasis_depth++;
	for (int i = 0; i < nrestored; i++) {
		const struct exit_record *e = &restored[i];
		void *fn = (void *)(uintptr_t)e->fn, *arg = (void *)(uintptr_t)e->arg;
		void *dso = (void *)(uintptr_t)e->dso;
		int ret;

		if (e->kind == EXIT_ON_EXIT)
			ret = on_exit((void (*)(int, void *))fn, arg);
		else if (e->kind == EXIT_THREAD)
			ret = __cxa_thread_atexit_impl((void (*)(void *))fn, arg, dso);
		else
			ret = __cxa_atexit((void (*)(void *))fn, arg, dso);
		if (ret)
			pr_warn("cannot register the program's exit handler %p again: it will not "
				"run at exit", fn);
		else
			table[nexits++] = *e;
	}
	stasis_depth--;
	pthread_mutex_unlock(&lock);
	nrestored = -1;
}

const struct part_ops exits_part = {
    .name = "exits",
    .save = exits_save,
    .verify = exits_verify,
    .resumed = exits_resumed,
};
