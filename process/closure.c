#define LOG_PREFIX "libraries: "
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "closure.h"
#include "log.h"

/* A deep tree (h5py: parallel HDF5, its MPI, compression and network
 * libraries) has a few hundred objects at most. */
#define MAX_SEEN 512
#define NAME_MAX_LEN 256

static char seen[MAX_SEEN][NAME_MAX_LEN];
static int nseen;

/* Whether ld.so has an object of this soname (or file name) loaded. */
static bool is_loaded(const char *name)
{
	for (struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
		const char *base = l->l_name ? strrchr(l->l_name, '/') : NULL;

		if (base && !strcmp(base + 1, name))
			return true;
	}
	return false;
}

static bool mark_seen(const char *name)
{
	for (int i = 0; i < nseen; i++)
		if (!strcmp(seen[i], name))
			return true;
	if (nseen < MAX_SEEN)
		snprintf(seen[nseen++], NAME_MAX_LEN, "%s", name);
	return false;
}

/* dir/name into out when the file exists; $ORIGIN is origin's directory. */
static bool try_dir(const char *dir, size_t dlen, const char *origin, const char *name, char *out,
		    size_t len)
{
	if (dlen >= 7 && !strncmp(dir, "$ORIGIN", 7)) {
		const char *slash = strrchr(origin, '/');
		int olen = slash ? (int)(slash - origin) : 1;

		snprintf(out, len, "%.*s%.*s/%s", olen, slash ? origin : ".", (int)(dlen - 7),
			 dir + 7, name);
	} else {
		snprintf(out, len, "%.*s/%s", (int)dlen, dir, name);
	}
	return access(out, R_OK) == 0;
}

static bool search_list(const char *list, const char *origin, const char *name, char *out,
			size_t len)
{
	while (list && *list) {
		size_t n = strcspn(list, ":");

		if (n && try_dir(list, n, origin, name, out, len))
			return true;
		list += n + (list[n] == ':');
	}
	return false;
}

/* As ld.so looks (RPATH without RUNPATH, LD_LIBRARY_PATH, RUNPATH, the
 * system directories; the ld.so cache's extra directories are not read:
 * what is not found there is left to the caller's check). */
static bool find(const char *name, const char *origin, const char *rpath, const char *runpath,
		 char *out, size_t len)
{
	static const char sys[] = "/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:"
				  "/lib64:/usr/lib64:/lib:/usr/lib:/usr/local/lib";

	if (strchr(name, '/')) {
		snprintf(out, len, "%s", name);
		return access(out, R_OK) == 0;
	}
	return (!runpath && search_list(rpath, origin, name, out, len)) ||
	       search_list(getenv("LD_LIBRARY_PATH"), origin, name, out, len) ||
	       search_list(runpath, origin, name, out, len) ||
	       search_list(sys, origin, name, out, len);
}

/* File offset of virtual address v, by the PT_LOAD that holds it. */
static off_t offset_of(const ElfW(Phdr) * ph, int n, ElfW(Addr) v)
{
	for (int i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD && v >= ph[i].p_vaddr &&
		    v < ph[i].p_vaddr + ph[i].p_filesz)
			return (off_t)(ph[i].p_offset + v - ph[i].p_vaddr);
	return -1;
}

#define PAGE 4096UL

/* Queued objects to read, by path (breadth first: no recursion, the
 * thread calling dlopen() may have a small stack). */
static char queue[MAX_SEEN][512];
static int nqueue;

/* The string at offset at of the dynamic string table (file offset
 * strtab), in out: the table itself can be large (libpetsc's is 300 KiB),
 * so each name is read where it is. */
static bool read_str(int fd, off_t strtab, ElfW(Xword) at, char *out, size_t len)
{
	ssize_t got = pread(fd, out, len - 1, strtab + (off_t)at);

	if (got <= 0)
		return false;
	out[got] = 0;
	return memchr(out, 0, (size_t)got) != NULL;
}

/* The span of one object; its libraries not loaded yet are queued. */
static size_t one(const char *path)
{
	static ElfW(Dyn) dyn[512];
	static char rpath[4096], runpath[4096], name[NAME_MAX_LEN];
	ElfW(Ehdr) eh;
	ElfW(Phdr) ph[64];
	uintptr_t lo = UINTPTR_MAX, hi = 0, align = PAGE;
	size_t total = 0, ndyn = 0;
	ElfW(Addr) str = 0;
	off_t strtab = -1;
	bool has_rpath = false, has_runpath = false;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC), nph;

	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_phentsize != sizeof(ph[0]) || eh.e_phnum > 64 ||
	    pread(fd, ph, eh.e_phnum * sizeof(ph[0]), eh.e_phoff) !=
		(ssize_t)(eh.e_phnum * sizeof(ph[0]))) {
		close(fd);
		return 0;
	}
	nph = eh.e_phnum;
	for (int i = 0; i < nph; i++) {
		if (ph[i].p_type == PT_LOAD) {
			lo = ph[i].p_vaddr < lo ? ph[i].p_vaddr : lo;
			hi =
			    ph[i].p_vaddr + ph[i].p_memsz > hi ? ph[i].p_vaddr + ph[i].p_memsz : hi;
			align = ph[i].p_align > align ? ph[i].p_align : align;
		} else if (ph[i].p_type == PT_DYNAMIC) {
			size_t want = ph[i].p_filesz < sizeof(dyn) ? ph[i].p_filesz : sizeof(dyn);

			got = pread(fd, dyn, want, ph[i].p_offset);
			ndyn = got > 0 ? (size_t)got / sizeof(dyn[0]) : 0;
		}
	}
	if (hi > lo)
		total = ((hi - lo + PAGE - 1) & ~(PAGE - 1)) + align;
	for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++)
		if (dyn[i].d_tag == DT_STRTAB)
			str = dyn[i].d_un.d_ptr;
	if (str)
		strtab = offset_of(ph, nph, str);
	for (size_t i = 0; strtab >= 0 && i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
		if (dyn[i].d_tag == DT_RPATH)
			has_rpath = read_str(fd, strtab, dyn[i].d_un.d_val, rpath, sizeof(rpath));
		else if (dyn[i].d_tag == DT_RUNPATH)
			has_runpath =
			    read_str(fd, strtab, dyn[i].d_un.d_val, runpath, sizeof(runpath));
	}
	for (size_t i = 0; strtab >= 0 && i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
		if (dyn[i].d_tag != DT_NEEDED ||
		    !read_str(fd, strtab, dyn[i].d_un.d_val, name, sizeof(name)) ||
		    is_loaded(name) || mark_seen(name) || nqueue == MAX_SEEN)
			continue;
		if (!find(name, path, has_rpath ? rpath : NULL, has_runpath ? runpath : NULL,
			  queue[nqueue], sizeof(queue[0])))
			pr_debug("%s, needed by %s, not found", name, path);
		else
			nqueue++;
	}
	close(fd);
	return total;
}

size_t closure_bytes(const char *path)
{
	size_t total;

	nseen = 0;
	nqueue = 0;
	total = one(path);
	for (int i = 0; i < nqueue; i++)
		total += one(queue[i]);
	return total;
}
