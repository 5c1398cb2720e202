#define LOG_PREFIX "regions: "
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "format.h"
#include "log.h"
#include "regions.h"

#define MAX_OBJECTS 512
#define MAX_SEGS 4
#define MAX_EXCLUSIONS 256
#define PAGE_DOWN(x) ((x) & ~(uintptr_t)(STASIS_PAGE - 1))
#define PAGE_UP(x) PAGE_DOWN((x) + STASIS_PAGE - 1)

struct object {
	char name[256]; /* basename; "" for the executable */
	char path[256]; /* as the dynamic linker found it; "" for the executable */
	uintptr_t base;
	const ElfW(Dyn) *dynamic;
	struct span text[MAX_SEGS], data[MAX_SEGS], load[2 * MAX_SEGS];
	int ntext, ndata, nload;
	bool runtime;
	bool libc;
	bool self; /* libstasis.so */
};

/* Filled once by regions_init() before MPI_Init and only read afterwards
 * (malloc reads them on every call, without a lock). */
static struct object objects[MAX_OBJECTS];
static int nobjects;
static struct span exclusions[MAX_EXCLUSIONS];
static size_t nexclusions;
/* The application's writable data, read once at start: later the mprotect
 * backend keeps clean pages read-only, and "writable now" would miss them. */
#define MAX_DATA 256
static struct span data_spans[MAX_DATA];
static int ndata;
static uintptr_t stack_top; /* end of the [stack] mapping */
static bool ready;

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static void fill_object(struct object *o, struct dl_phdr_info *info)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "%s", base_name(info->dlpi_name));
	snprintf(o->path, sizeof(o->path), "%s", info->dlpi_name);
	o->base = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = o->base + ph->p_vaddr;
		struct span s = {PAGE_DOWN(start), PAGE_UP(start + ph->p_memsz)};

		if (ph->p_type == PT_DYNAMIC)
			o->dynamic = (const ElfW(Dyn) *)start;
		if (ph->p_type != PT_LOAD)
			continue;
		if (o->nload < 2 * MAX_SEGS)
			o->load[o->nload++] = s;
		if ((ph->p_flags & PF_X) && o->ntext < MAX_SEGS)
			o->text[o->ntext++] = s;
		if ((ph->p_flags & PF_W) && o->ndata < MAX_SEGS)
			o->data[o->ndata++] = s;
	}
}

static int collect_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;

	if (nobjects == MAX_OBJECTS)
		return 1;
	fill_object(&objects[nobjects++], info);
	return 0;
}

/* ld.so relocates most d_ptr entries of the dynamic section in place; an
 * entry still below the load base was left as a link-time address. */
static uintptr_t dyn_ptr(const struct object *o, ElfW(Addr) p)
{
	return p < o->base ? o->base + p : p;
}

static uintptr_t dyn_lookup(const struct object *o, ElfW(Sxword) tag)
{
	for (const ElfW(Dyn) *d = o->dynamic; d && d->d_tag != DT_NULL; d++)
		if (d->d_tag == tag)
			return d->d_un.d_val;
	return 0;
}

static struct object *find_by_name(const char *name)
{
	for (int i = 0; i < nobjects; i++)
		if (!strcmp(objects[i].name, name))
			return &objects[i];
	return NULL;
}

/* Mark o and everything it needs (DT_NEEDED, transitively) as runtime. */
static void mark_runtime(struct object *o)
{
	uintptr_t strtab;

	if (o->runtime)
		return;
	o->runtime = true;
	if (!o->dynamic)
		return;
	strtab = dyn_lookup(o, DT_STRTAB);
	if (!strtab)
		return;
	strtab = dyn_ptr(o, strtab);
	for (const ElfW(Dyn) *d = o->dynamic; d->d_tag != DT_NULL; d++) {
		struct object *dep;

		if (d->d_tag != DT_NEEDED)
			continue;
		dep = find_by_name((const char *)strtab + d->d_un.d_val);
		if (dep)
			mark_runtime(dep);
	}
}

/* Whether a runtime object (libc, the MPI library, what they need) defines
 * symbol name: a handle's lookup searches that object and what it needs,
 * never the executable that holds the copy. */
static bool runtime_defines(const char *name)
{
	for (int i = 1; i < nobjects; i++) {
		const struct object *o = &objects[i];
		void *h, *p;

		if (!(o->runtime || o->libc) || !o->path[0])
			continue;
		h = dlopen(o->path, RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			continue;
		p = dlsym(h, name);
		dlclose(h);
		if (p)
			return true;
	}
	return false;
}

/* Copy relocations put MPI's predefined handles (ompi_mpi_comm_world,
 * ompi_mpi_double, ...) and libc's stdout/stderr/environ into the
 * executable's .bss (DESIGN.md fact 2): runtime bytes inside application
 * data. Those of application libraries (HDF5's H5T_NATIVE_DOUBLE_g, set
 * when the library starts) are the application's: saved. */
static void read_copy_relocations(const struct object *exe)
{
	uintptr_t rela = dyn_lookup(exe, DT_RELA), relasz = dyn_lookup(exe, DT_RELASZ);
	uintptr_t symtab = dyn_lookup(exe, DT_SYMTAB), strtab = dyn_lookup(exe, DT_STRTAB);
	const ElfW(Rela) *r;
	const ElfW(Sym) *syms;
	const char *names;

	if (!rela || !symtab || !strtab)
		return;
	r = (const ElfW(Rela) *)dyn_ptr(exe, rela);
	syms = (const ElfW(Sym) *)dyn_ptr(exe, symtab);
	names = (const char *)dyn_ptr(exe, strtab);
	for (size_t i = 0; i < relasz / sizeof(*r); i++) {
		uintptr_t addr;

		if (ELF64_R_TYPE(r[i].r_info) != R_X86_64_COPY ||
		    !runtime_defines(names + syms[ELF64_R_SYM(r[i].r_info)].st_name))
			continue;
		if (nexclusions == MAX_EXCLUSIONS) {
			pr_warn("more than %d copy relocations; the rest are saved", MAX_EXCLUSIONS);
			return;
		}
		addr = exe->base + r[i].r_offset;
		exclusions[nexclusions].start = addr;
		exclusions[nexclusions].end = addr + syms[ELF64_R_SYM(r[i].r_info)].st_size;
		nexclusions++;
	}
}

static bool is_runtime_root(const struct object *o)
{
	static const char *const prefixes[] = {"ld-linux", "libc.so",  "libmpi",      "libopen-",
					       "libpmix",  "liboshmem", "libompitrace", "libmca_",
					       "linux-vdso", NULL};
	for (const char *const *p = prefixes; *p; p++)
		if (!strncmp(o->name, *p, strlen(*p)))
			return true;
	return false;
}

/* Code in the address range reserved for the program's libraries
 * (process/libraries.h) is theirs even before they are classified: their
 * constructors run inside dlopen(). */
static bool in_libraries_zone(uintptr_t pc)
{
	return pc - STASIS_LIBRARIES_BASE < STASIS_LIBRARIES_SIZE;
}

bool regions_app_code(uintptr_t pc)
{
	if (in_libraries_zone(pc))
		return true;
	for (int i = 0; i < nobjects; i++) {
		const struct object *o = &objects[i];

		if (o->runtime && !o->libc)
			continue;
		for (int t = 0; t < o->ntext; t++)
			if (pc >= o->text[t].start && pc < o->text[t].end)
				return true;
	}
	return false;
}

static bool in_text(const struct object *o, uintptr_t pc)
{
	for (int t = 0; t < o->ntext; t++)
		if (pc >= o->text[t].start && pc < o->text[t].end)
			return true;
	return false;
}

bool regions_libc_code(uintptr_t pc)
{
	for (int i = 0; i < nobjects; i++)
		if (objects[i].libc && in_text(&objects[i], pc))
			return true;
	return false;
}

bool regions_self_code(uintptr_t pc)
{
	for (int i = 0; i < nobjects; i++)
		if (objects[i].self && in_text(&objects[i], pc))
			return true;
	return false;
}

bool regions_app_object(uintptr_t base)
{
	for (int i = 0; i < nobjects; i++)
		if (objects[i].base == base)
			return !objects[i].runtime && !objects[i].libc;
	return false;
}

bool regions_app_object_code(uintptr_t pc)
{
	if (in_libraries_zone(pc))
		return true;
	for (int i = 0; i < nobjects; i++) {
		const struct object *o = &objects[i];

		for (int t = 0; t < o->ntext; t++)
			if (pc >= o->text[t].start && pc < o->text[t].end)
				return !o->runtime && !o->libc;
	}
	return false;
}

/* Calls fn(start, end, perms, path, arg) for each line of /proc/self/maps,
 * read without malloc (this runs inside the checkpoint, and from tools).
 * One walk at a time (one buffer); fn must not start another. */
int regions_walk_maps(void (*fn)(uintptr_t, uintptr_t, const char *, const char *, void *),
		      void *arg)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static char buf[1 << 16];
	size_t have = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	pthread_mutex_lock(&lock);
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
		char *line = buf, *nl;

		if (n < 0) {
			pthread_mutex_unlock(&lock);
			close(fd);
			return -errno;
		}
		have += n;
		buf[have] = 0;
		while ((nl = strchr(line, '\n'))) {
			unsigned long start, end;
			char perms[8] = "", path[512] = "";

			*nl = 0;
			if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %511[^\n]", &start, &end, perms,
				   path) >= 3)
				fn(start, end, perms, path, arg);
			line = nl + 1;
		}
		have -= line - buf;
		memmove(buf, line, have);
		if (n == 0)
			break;
	}
	pthread_mutex_unlock(&lock);
	close(fd);
	return 0;
}

struct collect_ctx {
	struct region *out;
	int max, n;
	uintptr_t stack_low, stack_top;
};

/* At start, RELRO is already read-only (ld.so protects it before any
 * constructor runs, DESIGN.md fact 3): what is writable then in the
 * application's writable segments is its data. */
static void find_data(uintptr_t start, uintptr_t end, const char *perms, const char *path,
		      void *arg)
{
	int first = arg ? *(int *)arg : 0;

	(void)path;
	if (perms[1] != 'w' || arena_contains((void *)start))
		return;
	for (int i = first; i < nobjects; i++) {
		const struct object *o = &objects[i];

		if (o->runtime || o->libc)
			continue;
		for (int d = 0; d < o->ndata; d++) {
			uintptr_t s = start > o->data[d].start ? start : o->data[d].start;
			uintptr_t e = end < o->data[d].end ? end : o->data[d].end;

			if (s >= e)
				continue;
			if (ndata > 0 && data_spans[ndata - 1].end == s)
				data_spans[ndata - 1].end = e; /* .data followed by .bss */
			else if (ndata < MAX_DATA)
				data_spans[ndata++] = (struct span){s, e};
		}
	}
}

static void add_region(struct collect_ctx *c, uintptr_t start, uintptr_t end, uint32_t kind)
{
	if (start >= end)
		return;
	if (c->n > 0 && c->out[c->n - 1].end == start && c->out[c->n - 1].kind == kind) {
		c->out[c->n - 1].end = end; /* .data followed by .bss */
		return;
	}
	if (c->n < c->max)
		c->out[c->n] = (struct region){start, end, kind};
	c->n++;
}

static void find_stack(uintptr_t start, uintptr_t end, const char *perms, const char *path,
		       void *arg);

int regions_init(void)
{
	uintptr_t self = (uintptr_t)&regions_init;

	if (ready)
		return 0;
	nobjects = 0;
	dl_iterate_phdr(collect_object, NULL);
	if (nobjects == 0)
		return -ENOENT;
	for (int i = 0; i < nobjects; i++) {
		struct object *o = &objects[i];

		o->libc = !strncmp(o->name, "libc.so", 7);
		/* The MPI language bindings (libmpi_mpifh, libmpi_cxx) are runtime,
		 * but what they need (libgfortran, libstdc++) serves the
		 * application as well: only libmpi.so's own closure is runtime. */
		if (!strncmp(o->name, "libmpi", 6) && strncmp(o->name, "libmpi.so", 9))
			o->runtime = true;
	}
	for (int i = 0; i < nobjects; i++) {
		struct object *o = &objects[i];
		bool self_object = false;

		for (int t = 0; t < o->ntext; t++)
			if (self >= o->text[t].start && self < o->text[t].end)
				self_object = true;
		o->self = self_object;
		if (i > 0 && (self_object || (is_runtime_root(o) && !o->runtime) ||
			      !strncmp(o->name, "libmpi.so", 9)))
			mark_runtime(o);
	}
	objects[0].runtime = false; /* the executable */
	read_copy_relocations(&objects[0]);
	ndata = 0;
	if (regions_walk_maps(find_data, NULL))
		return -EIO;
	{
		struct collect_ctx c = {0};

		if (!regions_walk_maps(find_stack, &c))
			stack_top = c.stack_top;
	}
	ready = true;
	return 0;
}

/* A library the program loaded with dlopen() (process/libraries.c) is
 * application memory unless its name is one of the runtime's (libc, the
 * loader, the MPI library and its helpers: is_runtime_root); the data it
 * has writable now goes into the image. */
struct add_ctx {
	const uintptr_t *bases;
	int n;
};

static int add_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct add_ctx *c = data;
	struct object *o;
	bool wanted = false;

	for (int i = 0; i < c->n; i++)
		wanted |= c->bases[i] == info->dlpi_addr;
	for (int i = 0; i < nobjects; i++)
		wanted &= objects[i].base != info->dlpi_addr;
	(void)size;
	if (!wanted)
		return 0;
	if (nobjects == MAX_OBJECTS)
		return 1;
	/* Complete before nobjects counts it: malloc reads the table on other
	 * threads without a lock. */
	o = &objects[nobjects];
	fill_object(o, info);
	o->runtime = is_runtime_root(o) || !strncmp(o->name, "libmpi", 6);
	__atomic_store_n(&nobjects, nobjects + 1, __ATOMIC_RELEASE);
	return 0;
}

int regions_add_objects(const uintptr_t *bases, int n)
{
	struct add_ctx c = {bases, n};
	int first = nobjects;

	if (!ready)
		return -EAGAIN;
	if (dl_iterate_phdr(add_object, &c))
		return -ENOSPC;
	return regions_walk_maps(find_data, &first);
}

bool regions_ready(void)
{
	return ready;
}

static void find_stack(uintptr_t start, uintptr_t end, const char *perms, const char *path,
		       void *arg)
{
	struct collect_ctx *c = arg;

	(void)start;
	(void)perms;
	if (!strcmp(path, "[stack]"))
		c->stack_top = end;
}

int regions_collect(struct region *out, int max, uintptr_t stack_low)
{
	struct collect_ctx c = {out, max, 0, PAGE_DOWN(stack_low), 0};
	int ret = regions_walk_maps(find_stack, &c);

	if (ret)
		return ret;
	for (int i = 0; i < ndata; i++)
		add_region(&c, data_spans[i].start, data_spans[i].end, REGION_DATA);
	if (arena_ready())
		add_region(&c, STASIS_ARENA_BASE, STASIS_ARENA_BASE + arena_committed(),
			   REGION_ARENA);
	if (!c.stack_top || c.stack_low >= c.stack_top)
		return -ENOENT;
	add_region(&c, c.stack_low, c.stack_top, REGION_STACK);
	return c.n > max ? -ENOSPC : c.n;
}

static bool is_app_object(const struct object *o)
{
	return !o->runtime && !o->libc;
}

bool regions_app_text(uintptr_t pc)
{
	for (int i = 0; i < nobjects; i++)
		for (int t = 0; is_app_object(&objects[i]) && t < objects[i].ntext; t++)
			if (pc >= objects[i].text[t].start && pc < objects[i].text[t].end)
				return true;
	return false;
}

int regions_app_library(int i, const char **path, uintptr_t *base)
{
	for (int k = 1; k < nobjects; k++) {
		if (!is_app_object(&objects[k]) || i--)
			continue;
		*path = objects[k].path;
		*base = objects[k].base;
		return 0;
	}
	return -ENOENT;
}

const char *regions_object_at(uintptr_t addr)
{
	for (int i = 0; i < nobjects; i++)
		for (int l = 0; l < objects[i].nload; l++)
			if (addr >= objects[i].load[l].start && addr < objects[i].load[l].end)
				return i ? objects[i].path : "the executable";
	return NULL;
}

/* Whether [start, end) holds a page of an application object's segments
 * outside its saved data: code, read-only data, RELRO. */
bool regions_app_readonly(uintptr_t start, uintptr_t end)
{
	for (int i = 0; i < nobjects; i++) {
		const struct object *o = &objects[i];

		for (int l = 0; is_app_object(o) && l < o->nload; l++) {
			uintptr_t s = start > o->load[l].start ? start : o->load[l].start;
			uintptr_t e = end < o->load[l].end ? end : o->load[l].end;

			for (uintptr_t p = PAGE_DOWN(s); s < e && p < e; p += STASIS_PAGE)
				if (!regions_in_data(p, p + STASIS_PAGE))
					return true;
		}
	}
	return false;
}

bool regions_in_data(uintptr_t start, uintptr_t end)
{
	for (int i = 0; i < ndata; i++)
		if (start >= data_spans[i].start && end <= data_spans[i].end)
			return true;
	return false;
}

size_t regions_data(const struct span **out)
{
	*out = data_spans;
	return ndata;
}

uintptr_t regions_stack_top(void)
{
	return stack_top;
}

size_t regions_exclusions(const struct span **out)
{
	*out = exclusions;
	return nexclusions;
}

void regions_print(void)
{
	for (int i = 0; i < nobjects; i++)
		pr_debug("%-32s %s", i ? objects[i].name : "(executable)",
			 objects[i].runtime ? "runtime" : "application");
	pr_debug("%zu copy-relocated runtime objects in the executable, %d data spans",
		 nexclusions, ndata);
}
