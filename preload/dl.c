/* The program's calls to dlopen() and the other dl* functions
 * (process/libraries.h). A library the program loads itself belongs to
 * the application: it is placed at an address where a restart can load it
 * again, and the handle the program holds for it is the same in every run.
 * ld.so's own loads, the MPI library's components, libc's modules (which
 * call ld.so directly), calls made inside a wrapper and lookups of what is
 * already loaded (RTLD_NOLOAD) go to libc unchanged: dl_stubs.S jumps
 * there with the caller's return address. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "libraries.h"
#include "interpose.h"
#include "regions.h"

/* libc's functions, for dl_stubs.S. */
void *stasis_libc_dlopen, *stasis_libc_dlmopen, *stasis_libc_dlsym, *stasis_libc_dlvsym;

/* ld.so relocates most d_ptr entries of the dynamic section in place; an
 * entry still below the load base was left as a link-time address. */
static uintptr_t dyn_ptr(const struct link_map *l, uintptr_t p)
{
	return p < l->l_addr ? l->l_addr + p : p;
}

/* The default version of libc's symbol `name`, from its .dynsym (sized by
 * its GNU hash table): dlsym would be stasis's own. */
static void *libc_symbol(const struct link_map *l, const char *name)
{
	const ElfW(Sym) *syms = NULL;
	const ElfW(Half) *versym = NULL;
	const uint32_t *gnu = NULL;
	const char *strtab = NULL;
	uint32_t count = 0;

	for (const ElfW(Dyn) *d = l->l_ld; d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_SYMTAB)
			syms = (const ElfW(Sym) *)dyn_ptr(l, d->d_un.d_ptr);
		else if (d->d_tag == DT_STRTAB)
			strtab = (const char *)dyn_ptr(l, d->d_un.d_ptr);
		else if (d->d_tag == DT_GNU_HASH)
			gnu = (const uint32_t *)dyn_ptr(l, d->d_un.d_ptr);
		else if (d->d_tag == DT_VERSYM)
			versym = (const ElfW(Half) *)dyn_ptr(l, d->d_un.d_ptr);
	}
	if (!syms || !strtab || !gnu)
		return NULL;
	{
		/* nbuckets, symoffset, bloom words, shift; bloom; buckets; chains */
		const uint32_t *buckets = gnu + 4 + gnu[2] * (sizeof(ElfW(Addr)) / 4);
		const uint32_t *chains = buckets + gnu[0];

		for (uint32_t b = 0; b < gnu[0]; b++)
			if (buckets[b] >= count)
				count = buckets[b] + 1;
		if (count > gnu[1])
			while (!(chains[count - 1 - gnu[1]] & 1))
				count++;
	}
	for (uint32_t i = 0; i < count; i++)
		if (syms[i].st_shndx != SHN_UNDEF && ELF64_ST_TYPE(syms[i].st_info) == STT_FUNC &&
		    (!versym || !(versym[i] & 0x8000)) && !strcmp(strtab + syms[i].st_name, name))
			return (void *)(l->l_addr + syms[i].st_value);
	return NULL;
}

void stasis_dl_resolve(void)
{
	for (struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
		const char *slash = l->l_name ? strrchr(l->l_name, '/') : NULL;

		if (!slash || strcmp(slash + 1, "libc.so.6"))
			continue;
		stasis_libc_dlopen = libc_symbol(l, "dlopen");
		stasis_libc_dlmopen = libc_symbol(l, "dlmopen");
		stasis_libc_dlsym = libc_symbol(l, "dlsym");
		stasis_libc_dlvsym = libc_symbol(l, "dlvsym");
	}
	if (!stasis_libc_dlopen || !stasis_libc_dlmopen || !stasis_libc_dlsym ||
	    !stasis_libc_dlvsym)
		abort(); /* no libc to go on to: nothing can work */
}

static bool program_call(uintptr_t caller)
{
	return stasis_active && stasis_depth == 0 && regions_ready() && regions_app_code(caller);
}

/* Called by the dlopen stub: whether stasis_dlopen takes this call. */
int stasis_dlopen_wanted(const char *file, int mode, uintptr_t caller)
{
	(void)mode;
	return file && program_call(caller);
}

void *stasis_dlopen(const char *file, int mode, uintptr_t caller)
{
	if (!(mode & RTLD_NOLOAD))
		return libraries_handle(libraries_dlopen(file, mode, caller));
	REAL(dlopen);
	return libraries_handle(real(file, mode));
}

/* Another namespace than the program's own: nothing stasis could load
 * again the same way. */
void stasis_dlmopen_seen(uintptr_t caller)
{
	if (program_call(caller))
		session_unsupported("dlmopen() (a library in a namespace of its own)");
}

void *stasis_dl_real(void *handle)
{
	void *real = libraries_real(handle);

	return real ? real : handle;
}

/* The program's libraries are never unloaded (process/libraries.h). */
EXPORT int dlclose(void *handle)
{
	if (libraries_is_program_handle(handle))
		return 0;
	REAL(dlclose);
	return real(handle);
}

EXPORT int dlinfo(void *handle, int request, void *arg)
{
	REAL(dlinfo);
	return real(stasis_dl_real(handle), request, arg);
}
