#define LOG_PREFIX "tls: "
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "format.h"
#include "log.h"
#include "regions.h"
#include "tls.h"

#define MAX_KEYS 1024 /* PTHREAD_KEYS_MAX */
#define MAX_MODULES 512
#define ROUND8(x) (((x) + 7) & ~(size_t)7)
#define ROUND_PAGE(x) (((x) + STASIS_PAGE - 1) & ~(size_t)(STASIS_PAGE - 1))

/* Every key this process has, as the preload layer saw it made. Runtime
 * state: a restart fills it again from the image. */
static struct key {
	uintptr_t caller; /* where pthread_key_create returned to */
	uintptr_t destructor;
	bool live;
	bool program; /* made again by a restart for the program, whoever called */
} keys[MAX_KEYS];
static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;

void tls_key_created(pthread_key_t key, void (*destructor)(void *), uintptr_t caller)
{
	if (key >= MAX_KEYS)
		return;
	pthread_mutex_lock(&keys_lock);
	keys[key] = (struct key){caller, (uintptr_t)destructor, true, false};
	pthread_mutex_unlock(&keys_lock);
}

void tls_key_deleting(pthread_key_t key)
{
	if (key >= MAX_KEYS)
		return;
	pthread_mutex_lock(&keys_lock);
	keys[key].live = false;
	pthread_mutex_unlock(&keys_lock);
}

void tls_key_kept(pthread_key_t key)
{
	if (key >= MAX_KEYS)
		return;
	pthread_mutex_lock(&keys_lock);
	keys[key].live = true;
	pthread_mutex_unlock(&keys_lock);
}

static bool program_key(pthread_key_t k)
{
	return keys[k].live && (keys[k].program || regions_app_object_code(keys[k].caller));
}

/* --- saving -------------------------------------------------------------- */

/* The application's TLS modules, listed by tls_save_begin on the main
 * thread and read by every thread that saves itself after it. */
static struct module {
	const char *name; /* dlpi_name: valid while the object is loaded */
	uintptr_t base;
	uintptr_t image; /* the initialisation image (PT_TLS contents) */
	size_t filesz, memsz;
	intptr_t offset; /* static block: its distance from the thread pointer */
	bool dynamic;
} modules[MAX_MODULES];
static int nmodules;
static pthread_key_t saved_keys[MAX_KEYS];
static uint32_t nsaved_keys;
static size_t section_bytes; /* of one thread's section */
static uint8_t *record;	     /* mmap'ed, record_cap bytes */
static size_t record_cap, record_used;
static uint32_t record_threads;

static size_t static_tls_size(void)
{
	static void (*info)(size_t *, size_t *);
	size_t size = 0, align = 0;

	/* ld.so's own account of the static TLS area (GLIBC_PRIVATE, stable
	 * since glibc 2.3): blocks inside it sit at fixed offsets. */
	if (!info)
		info = (void (*)(size_t *, size_t *))dlsym(RTLD_DEFAULT, "_dl_get_tls_static_info");
	if (info)
		info(&size, &align);
	return size;
}

static int list_module(struct dl_phdr_info *info, size_t size, void *data)
{
	uintptr_t tp = *(uintptr_t *)data, block = (uintptr_t)info->dlpi_tls_data;
	static size_t static_size;
	struct module *m;

	(void)size;
	if (!info->dlpi_tls_modid || !regions_app_object(info->dlpi_addr))
		return 0;
	if (nmodules == MAX_MODULES)
		return 1;
	if (!static_size)
		static_size = static_tls_size();
	m = &modules[nmodules];
	memset(m, 0, sizeof(*m));
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_TLS)
			continue;
		m->image = info->dlpi_addr + ph->p_vaddr;
		m->filesz = ph->p_filesz;
		m->memsz = ph->p_memsz;
	}
	if (!m->memsz)
		return 0;
	m->name = info->dlpi_name ? info->dlpi_name : "";
	m->base = info->dlpi_addr;
	m->dynamic = !block || block >= tp || tp - block > static_size;
	m->offset = m->dynamic ? 0 : (intptr_t)(block - tp);
	nmodules++;
	return 0;
}

int tls_save_begin(uint32_t nthreads)
{
	uintptr_t tp = tls_thread_pointer();
	size_t need;

	nmodules = 0;
	dl_iterate_phdr(list_module, &tp);
	if (nmodules == MAX_MODULES)
		return -ENOSPC;
	nsaved_keys = 0;
	pthread_mutex_lock(&keys_lock);
	for (pthread_key_t k = 0; k < MAX_KEYS; k++)
		if (program_key(k))
			saved_keys[nsaved_keys++] = k;
	pthread_mutex_unlock(&keys_lock);
	section_bytes = sizeof(struct tls_thread) + nsaved_keys * sizeof(uint64_t);
	for (int i = 0; i < nmodules; i++)
		section_bytes += sizeof(struct tls_block) + ROUND8(modules[i].memsz);
	need = ROUND_PAGE(sizeof(struct tls_record) + nsaved_keys * sizeof(struct tls_key) +
			  (size_t)nthreads * section_bytes);
	if (need > record_cap) {
		void *p =
		    mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return -ENOMEM;
		if (record)
			munmap(record, record_cap);
		record = p;
		record_cap = need;
	}
	memset(record, 0, need);
	record_used = sizeof(struct tls_record);
	for (uint32_t i = 0; i < nsaved_keys; i++) {
		struct tls_key *k = (struct tls_key *)(record + record_used);

		k->key = saved_keys[i];
		k->destructor = keys[saved_keys[i]].destructor;
		record_used += sizeof(*k);
	}
	record_threads = nthreads;
	return 0;
}

struct dynamic_find {
	const struct module *m;
	void *block;
};

static int find_block(struct dl_phdr_info *info, size_t size, void *data)
{
	struct dynamic_find *f = data;

	(void)size;
	if (info->dlpi_addr != f->m->base || strcmp(info->dlpi_name ?: "", f->m->name))
		return 0;
	f->block = info->dlpi_tls_data;
	return 1;
}

int tls_save_thread(uint32_t thread, uint32_t position)
{
	uintptr_t tp = tls_thread_pointer();
	uint8_t *p;
	struct tls_thread *t;

	if (!record || position >= record_threads)
		return -EINVAL;
	p = record + record_used + (size_t)position * section_bytes;
	t = (struct tls_thread *)p;
	t->thread = thread;
	t->nblocks = nmodules;
	t->tp = tp;
	p += sizeof(*t);
	for (uint32_t i = 0; i < nsaved_keys; i++, p += sizeof(uint64_t)) {
		uint64_t v = (uintptr_t)pthread_getspecific(saved_keys[i]);

		memcpy(p, &v, sizeof(v));
	}
	for (int i = 0; i < nmodules; i++) {
		const struct module *m = &modules[i];
		struct tls_block *b = (struct tls_block *)p;
		struct dynamic_find f = {m, NULL};
		uint8_t *bytes = p + sizeof(*b);

		snprintf(b->object, sizeof(b->object), "%s", m->name);
		b->base = m->base;
		b->size = m->memsz;
		b->dynamic = m->dynamic;
		if (m->dynamic)
			dl_iterate_phdr(find_block, &f);
		else
			f.block = (void *)(tp + m->offset);
		b->addr = (uintptr_t)f.block;
		if (f.block) {
			memcpy(bytes, f.block, m->memsz);
		} else {
			/* Never used by this thread: what its first use would find. */
			memcpy(bytes, (const void *)m->image, m->filesz);
			memset(bytes + m->filesz, 0, m->memsz - m->filesz);
		}
		p += sizeof(*b) + ROUND8(m->memsz);
	}
	return 0;
}

int tls_save_end(struct image_region *out)
{
	struct tls_record *h = (struct tls_record *)record;

	if (!record)
		return -EINVAL;
	memcpy(h->magic, STASIS_TLS_MAGIC, sizeof(h->magic));
	h->nkeys = nsaved_keys;
	h->nthreads = record_threads;
	h->bytes = record_used + (size_t)record_threads * section_bytes;
	*out = (struct image_region){(uintptr_t)record, ROUND_PAGE(h->bytes), SECTION_TLS, NULL};
	return 0;
}

/* --- restoring ----------------------------------------------------------- */

struct cursor {
	const uint8_t *p, *end;
};

static const void *take(struct cursor *c, size_t n)
{
	const void *at = c->p;

	if ((size_t)(c->end - c->p) < n)
		return NULL;
	c->p += n;
	return at;
}

/* The record's header and keys, checked; c is left at the first thread. */
static const struct tls_record *open_record(const void *rec, size_t len, struct cursor *c,
					    const struct tls_key **keys_out, struct why *why)
{
	const struct tls_record *h;

	c->p = rec;
	c->end = c->p + len;
	h = take(c, sizeof(*h));
	if (!h || memcmp(h->magic, STASIS_TLS_MAGIC, sizeof(h->magic)) || h->bytes > len ||
	    h->nkeys > MAX_KEYS) {
		why_set(why, -EBADMSG, "the thread-local storage record is malformed");
		return NULL;
	}
	c->end = c->p - sizeof(*h) + h->bytes;
	*keys_out = take(c, (size_t)h->nkeys * sizeof(struct tls_key));
	if (!*keys_out) {
		why_set(why, -EBADMSG, "the thread-local storage record is malformed");
		return NULL;
	}
	for (uint32_t i = 0; i < h->nkeys; i++)
		if ((*keys_out)[i].key >= MAX_KEYS ||
		    (i && (*keys_out)[i].key <= (*keys_out)[i - 1].key)) {
			why_set(why, -EBADMSG, "the thread-local storage record is malformed");
			return NULL;
		}
	return h;
}

/* Make key `want` with libc's lowest-free numbering: lower free numbers
 * are taken by placeholders (*fill), deleted by the caller. */
static int make_key(const struct tls_key *want, pthread_key_t *fill, int *nfill, struct why *why)
{
	for (;;) {
		pthread_key_t got;
		int ret = pthread_key_create(&got, (void (*)(void *))want->destructor);

		if (ret) {
			return why_set(why, -ret, "cannot make pthread key %u of the program: %s",
				       want->key, strerror(ret));
		}
		if (got == want->key) {
			pthread_mutex_lock(&keys_lock);
			keys[got].program = true;
			pthread_mutex_unlock(&keys_lock);
			return 0;
		}
		if (got > want->key) {
			pthread_key_delete(got);
			return why_set(
			    why, -EBUSY,
			    "pthread key %u of the program is taken in this run by the MPI "
			    "library or another part of the runtime",
			    want->key);
		}
		/* A placeholder, then deleted: its destructor must never run. */
		pthread_setspecific(got, NULL);
		fill[(*nfill)++] = got;
	}
}

int tls_restore_keys(const void *rec, size_t len, struct why *why)
{
	static pthread_key_t fill[MAX_KEYS];
	bool want[MAX_KEYS] = {false};
	const struct tls_key *saved;
	struct cursor c;
	const struct tls_record *h = open_record(rec, len, &c, &saved, why);
	int nfill = 0, ret = 0;

	if (!h)
		return -EBADMSG;
	for (uint32_t i = 0; i < h->nkeys; i++)
		want[saved[i].key] = true;
	/* Keys this run's program made at start that it had deleted by the
	 * checkpoint. */
	for (pthread_key_t k = 0; k < MAX_KEYS; k++)
		if (!want[k] && program_key(k))
			pthread_key_delete(k);
	for (uint32_t i = 0; i < h->nkeys && !ret; i++) {
		const struct key *have = &keys[saved[i].key];

		if (program_key(saved[i].key)) {
			/* Made again by the program's own start, as in the run. */
			if (have->destructor != saved[i].destructor) {
				ret = why_set(
				    why, -EINVAL,
				    "pthread key %u of the program has another destructor in "
				    "this run",
				    saved[i].key);
			}
			continue;
		}
		ret = make_key(&saved[i], fill, &nfill, why);
	}
	for (int i = 0; i < nfill; i++)
		pthread_key_delete(fill[i]);
	return ret;
}

struct object_find {
	const struct tls_block *b;
	size_t modid, memsz;
	void *block;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct object_find *f = data;

	(void)size;
	if (info->dlpi_addr != f->b->base ||
	    strncmp(info->dlpi_name ?: "", f->b->object, sizeof(f->b->object)))
		return 0;
	f->modid = info->dlpi_tls_modid;
	f->block = info->dlpi_tls_data;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_TLS)
			f->memsz = info->dlpi_phdr[i].p_memsz;
	return 1;
}

/* The calling thread's block of module modid, allocated now if it never
 * used it (ld.so's __tls_get_addr does that on first use). */
static void *block_now(size_t modid)
{
	static void *(*get_addr)(size_t *);
	size_t index[2] = {modid, 0};

	if (!get_addr)
		get_addr = (void *(*)(size_t *))dlsym(RTLD_DEFAULT, "__tls_get_addr");
	return get_addr ? get_addr(index) : NULL;
}

static int restore_block(const struct tls_block *b, const void *bytes, uintptr_t tp,
			 uintptr_t saved_tp, struct why *why)
{
	struct object_find f = {b, 0, 0, NULL};
	const char *name = b->object[0] ? b->object : "the executable";

	dl_iterate_phdr(find_object, &f);
	if (!f.modid || f.memsz != b->size) {
		return why_set(why, -ENOENT, "thread-local storage of %s: %s in this run at %#llx",
			       name, f.modid ? "the object differs" : "the object is not loaded",
			       (unsigned long long)b->base);
	}
	if (!f.block)
		f.block = block_now(f.modid);
	if (!f.block) {
		return why_set(why, -ENOMEM, "thread-local storage of %s cannot be allocated",
			       name);
	}
	if (!b->dynamic && (uintptr_t)f.block - tp != b->addr - saved_tp) {
		return why_set(why, -EINVAL,
			       "thread-local storage of %s is at another place in this run (%+lld "
			       "bytes from the thread pointer, was %+lld)",
			       name, (long long)((uintptr_t)f.block - tp),
			       (long long)(b->addr - saved_tp));
	}
	memcpy(f.block, bytes, b->size);
	return 0;
}

int tls_restore_thread(const void *rec, size_t len, uint32_t thread, struct why *why)
{
	const struct tls_key *saved;
	struct cursor c;
	const struct tls_record *h = open_record(rec, len, &c, &saved, why);
	uintptr_t tp = tls_thread_pointer();

	if (!h)
		return -EBADMSG;
	for (uint32_t n = 0; n < h->nthreads; n++) {
		const struct tls_thread *t = take(&c, sizeof(*t));
		const uint64_t *values = t ? take(&c, (size_t)h->nkeys * sizeof(uint64_t)) : NULL;
		bool mine = t && t->thread == thread;
		int ret;

		if (!values)
			break;
		if (mine && t->tp != tp) {
			return why_set(
			    why, -EINVAL,
			    "the thread pointer of thread %u is %#lx in this run, was %#llx",
			    thread, (unsigned long)tp, (unsigned long long)t->tp);
		}
		for (uint32_t i = 0; mine && i < h->nkeys; i++) {
			ret = pthread_setspecific(saved[i].key, (void *)(uintptr_t)values[i]);
			if (ret) {
				return why_set(why, -ret, "cannot set pthread key %u: %s",
					       saved[i].key, strerror(ret));
			}
		}
		for (uint32_t i = 0; i < t->nblocks; i++) {
			const struct tls_block *b = take(&c, sizeof(*b));
			const void *bytes = b && b->size < len ? take(&c, ROUND8(b->size)) : NULL;

			if (!bytes)
				goto bad;
			if (mine && (ret = restore_block(b, bytes, tp, t->tp, why)))
				return ret;
		}
		if (mine)
			return 0;
	}
bad:
	return why_set(why, -EBADMSG, "the thread-local storage record has no thread %u", thread);
}
