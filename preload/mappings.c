/* The application's mappings (DESIGN.md section 2, "The application heap",
 * and section 10): where its mmap()s go, and every call that changes
 * mapping state a restart must put back, recorded by process/maps.c or
 * refused.
 *
 * - Anonymous mmap()s (of /dev/zero too), private or MAP_SHARED, at an
 *   address the kernel picks (a hint is only a hint), come from the arena,
 *   whose addresses a restart's runtime can never take. A MAP_SHARED one is private memory
 *   until the program forks: then it is made truly shared, so that the
 *   child shares it as without stasis, and checkpoints stop (the child is
 *   not part of the image).
 * - MAP_FIXED over the program's own arena mappings gives it fresh pages in
 *   place. MAP_FIXED_NOREPLACE inside the arena fails with EEXIST, as for
 *   any address something is mapped at (stasis's reservation is).
 * - The program's mprotect() and madvise() of saved memory are recorded
 *   (maps.h).
 * - A MAP_PRIVATE mapping of a regular file (Guile's compiled .go files,
 *   read-only tables, an input mmap()ed to be read) is the file's bytes in
 *   memory only the program changes (mmap(2)). It gets arena pages filled
 *   from the file, saved and restored as any other memory: a restart needs
 *   neither the file nor its address. What differs from the kernel's
 *   mapping: the bytes are read at the mmap() (a later change to the file
 *   is not seen, which POSIX leaves unspecified for private mappings),
 *   whole pages past the file's end read as zero instead of raising
 *   SIGBUS, /proc/self/maps names no file, MADV_DONTNEED keeps the copy
 *   (maps.c), and the copy is the process's memory, not the page cache:
 *   bounded by FILE_COPY_MAX.
 *   A MAP_SHARED mapping that can never write its file (not writable, its
 *   descriptor read-only) is served so too.
 * - Refused, checkpoints switched off with a warning naming it, the call
 *   done as asked: writable shared file mappings, other file mappings (devices,
 *   /proc, past FILE_COPY_MAX), fixed mappings elsewhere, MAP_HUGETLB,
 *   MAP_GROWSDOWN, MAP_32BIT, System V shared memory, memory protection
 *   keys, brk()/sbrk() (the brk heap is the runtime's), personality()
 *   changes, prctl(PR_SET_MM, PR_SET_SECCOMP, PR_SET_MDWE), munmap() or
 *   mremap() of the program's static data or stack.
 *
 * Meson builds with 64-bit off_t, which renames mmap to mmap64 in the
 * headers; both names are defined here, the second as an alias. */
#undef _FILE_OFFSET_BITS
#define LOG_PREFIX "mappings: "
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime.h"
#include "arena.h"
#include "maps.h"
#include "interpose.h"
#include "threads.h"

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65 /* Linux 6.3, include/uapi/linux/prctl.h */
#endif

/* Any thread: protections and advice are the program's whoever calls. */
static inline bool from_program(uintptr_t caller)
{
	return __builtin_expect(stasis_active, 0) && regions_app_code(caller) &&
	       !stasis_in_vfork_child();
}

static bool in_arena(const void *addr, size_t len)
{
	return arena_contains(addr) &&
	       len <= STASIS_ARENA_SIZE - ((uintptr_t)addr - STASIS_ARENA_BASE);
}

static void *raw_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
	return (void *)syscall(SYS_mmap, addr, length, prot, flags, fd, offset);
}

/* /dev/zero is anonymous memory, private or shared, the way it was asked
 * for before MAP_ANONYMOUS (mem(4)). */
static bool is_dev_zero(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 5);
}

/* The largest private file mapping copied into memory (above). */
#define FILE_COPY_MAX (1UL << 30)

/* Checkpoints off for a file mapping, naming the file (session_unsupported
 * keeps the text: filled once, the first refusal is the one it keeps). */
static void refuse_file_mapping(const char *what, int fd)
{
	static char text[PATH_MAX + 128];
	char link[32], path[PATH_MAX];
	ssize_t n;

	if (!text[0]) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, path, sizeof(path) - 1);
		path[n > 0 ? n : 0] = 0;
		snprintf(text, sizeof(text), "%s (%s)", what, n > 0 ? path : "unknown file");
	}
	session_unsupported(text);
}

/* Whether a MAP_SHARED mapping can never write its file: not writable,
 * and its descriptor read-only, so that no mprotect() can make it so
 * (mmap(2): EACCES). numpy.load(mmap_mode='r') and Python's mmap with
 * ACCESS_READ map their input so. */
static bool shared_read_only(int prot, int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return !(prot & PROT_WRITE) && fl >= 0 && (fl & O_ACCMODE) == O_RDONLY;
}

/* How a file mapping is served: 1 copied in, 0 refused (named), -errno the
 * mmap() fails. A shared mapping that can never write its file is served
 * as a private one: only another process's change to the file would show
 * the difference. */
static int file_mapping(size_t length, bool shared, int prot, int fd, off_t offset)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (shared && !shared_read_only(prot, fd))
		refuse_file_mapping("mmap(MAP_SHARED) of a file, writable", fd);
	else if (!S_ISREG(st.st_mode))
		refuse_file_mapping("mmap() of a device or special file", fd);
	else if (length > FILE_COPY_MAX)
		refuse_file_mapping("mmap() of more than 1 GiB of a file (stasis copies a "
				    "private file mapping into memory)",
				    fd);
	else if (offset < 0 || (offset & (STASIS_PAGE - 1)) || !length)
		return -EINVAL;
	else
		return 1;
	return 0;
}

/* The file's bytes from offset into [p, p + length), fresh zeroed pages. */
static int copy_file(char *p, size_t length, int fd, off_t offset)
{
	size_t done = 0;

	while (done < length) {
		ssize_t n = pread(fd, p + done, length - done, offset + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) /* not open for reading: mmap() says EACCES */
			return errno == EBADF ? -EACCES : -errno;
		if (!n)
			break;
		done += (size_t)n;
	}
	return 0;
}

static void *program_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
	int type = flags & MAP_TYPE;
	bool shared = type == MAP_SHARED || type == MAP_SHARED_VALIDATE;
	const char *refused = NULL;
	int copy = 0, err;
	void *p;

	if (!(flags & MAP_ANONYMOUS) && is_dev_zero(fd))
		flags |= MAP_ANONYMOUS;
	if (!(flags & MAP_ANONYMOUS)) {
		copy = file_mapping(length, shared, prot, fd, offset);
		if (copy < 0) {
			errno = -copy;
			return MAP_FAILED;
		}
		if (!copy)
			return raw_mmap(addr, length, prot, flags, fd, offset);
		shared = false;
	}
	if (flags & MAP_HUGETLB)
		refused = "mmap(MAP_HUGETLB)";
	else if (flags & (MAP_GROWSDOWN | MAP_32BIT))
		refused = "mmap(MAP_GROWSDOWN or MAP_32BIT)";
	else if ((flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && !in_arena(addr, length))
		refused = copy ? "fixed mmap() of a file outside stasis's arena"
			       : "fixed anonymous mmap() outside stasis's arena";
	if (refused) {
		session_unsupported(refused);
		return raw_mmap(addr, length, prot, flags, fd, offset);
	}
	if (flags & MAP_FIXED) {
		/* Over its own mappings only: elsewhere in the arena are the
		 * heap and the allocator's own pages. */
		if (arena_remap(addr, length)) {
			session_unsupported("fixed mmap() over arena memory that is not the "
					    "program's mapping");
			errno = ENOMEM;
			return MAP_FAILED;
		}
		maps_unmapping(addr, length);
		p = addr;
	} else if (flags & MAP_FIXED_NOREPLACE) {
		errno = EEXIST;
		return MAP_FAILED;
	} else {
		p = arena_map(length);
		if (!p)
			return MAP_FAILED;
	}
	err = copy ? copy_file(p, length, fd, offset) : 0;
	if (!err && maps_new_mapping(p, length, prot,
				     copy ? MAPS_FILE_COPY : shared ? MAPS_SHARED : 0))
		err = -ENOMEM;
	if (err) {
		arena_unmap(p, length);
		errno = -err;
		return MAP_FAILED;
	}
	return p;
}

/* An application thread is never stopped for a checkpoint while it holds
 * the arena's lock or the mapping table's (stasis_busy, threads.h). */
EXPORT void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
	void *p;

	if (!for_application(CALLER))
		return raw_mmap(addr, length, prot, flags, fd, offset);
	stasis_busy_enter();
	p = program_mmap(addr, length, prot, flags, fd, offset);
	stasis_busy_leave();
	return p;
}

EXPORT void *mmap64(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
    __attribute__((alias("mmap")));

EXPORT int mprotect(void *addr, size_t length, int prot)
{
	int ret;

	if (!from_program(CALLER))
		return syscall(SYS_mprotect, addr, length, prot);
	stasis_busy_enter();
	ret = maps_mprotect(addr, length, prot);
	stasis_busy_leave();
	return ret;
}

EXPORT int madvise(void *addr, size_t length, int advice)
{
	int ret;

	if (!from_program(CALLER))
		return syscall(SYS_madvise, addr, length, advice);
	stasis_busy_enter();
	ret = maps_madvise(addr, length, advice);
	stasis_busy_leave();
	return ret;
}

EXPORT int munmap(void *addr, size_t length)
{
	if (arena_contains(addr)) {
		int ret;

		stasis_busy_enter();
		maps_unmapping(addr, length);
		ret = arena_unmap(addr, length);
		stasis_busy_leave();
		return ret ? (errno = EINVAL, -1) : 0;
	}
	if (from_program(CALLER) && maps_in_image((uintptr_t)addr, length))
		session_unsupported("munmap() of the program's static data or stack");
	return syscall(SYS_munmap, addr, length);
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL;

	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	if (arena_contains(old)) {
		void *p;

		stasis_busy_enter();
		p = maps_arena_mremap(old, old_len, new_len, flags);
		stasis_busy_leave();
		return p;
	}
	if (from_program(CALLER)) {
		if (maps_in_image((uintptr_t)old, old_len))
			session_unsupported("mremap() of the program's static data or stack");
		if ((flags & MREMAP_FIXED) && arena_contains(new_addr)) {
			/* It would land on stasis's reservation. */
			errno = EINVAL;
			return MAP_FAILED;
		}
	}
	return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}

EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	if (pkey == -1) /* the default key: mprotect() (pkey_mprotect(2)) */
		return from_program(CALLER) ? maps_mprotect(addr, len, prot)
					    : syscall(SYS_mprotect, addr, len, prot);
	if (from_program(CALLER))
		session_unsupported("memory protection keys (pkey_mprotect)");
	return syscall(SYS_pkey_mprotect, addr, len, prot, pkey);
}

EXPORT int pkey_alloc(unsigned int flags, unsigned int access)
{
	if (from_program(CALLER))
		session_unsupported("memory protection keys (pkey_alloc)");
	REAL(pkey_alloc);
	return real(flags, access);
}

EXPORT void *shmat(int id, const void *addr, int flags)
{
	if (from_program(CALLER))
		session_unsupported("System V shared memory (shmat)");
	REAL(shmat);
	return real(id, addr, flags);
}

/* The brk heap serves the runtime (libc's malloc): what the program put
 * there would not be saved. sbrk(0) only asks where the break is. */
EXPORT int brk(void *addr)
{
	if (from_program(CALLER))
		session_unsupported("brk() (the brk heap is the MPI library's)");
	REAL(brk);
	return real(addr);
}

EXPORT void *sbrk(intptr_t increment)
{
	if (increment && from_program(CALLER))
		session_unsupported("sbrk() (the brk heap is the MPI library's)");
	REAL(sbrk);
	return real(increment);
}

/* A restart runs with stasis's layout (address randomisation off) and no
 * other: READ_IMPLIES_EXEC and the like would be lost. */
EXPORT int personality(unsigned long persona)
{
	long now = syscall(SYS_personality, 0xffffffffUL);

	if (persona != 0xffffffffUL && (long)persona != now && from_program(CALLER))
		session_unsupported("personality()");
	return syscall(SYS_personality, persona);
}

EXPORT int prctl(int option, ...)
{
	unsigned long a[4];
	va_list ap;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (from_program(CALLER)) {
		/* The memory layout, system call filters and W^X state of the
		 * process would not come back with a restart. */
		if (option == PR_SET_MM)
			session_unsupported("prctl(PR_SET_MM)");
		else if (option == PR_SET_SECCOMP)
			session_unsupported("prctl(PR_SET_SECCOMP)");
		else if (option == PR_SET_MDWE)
			session_unsupported("prctl(PR_SET_MDWE)");
	}
	return syscall(SYS_prctl, option, a[0], a[1], a[2], a[3]);
}

/* Called by vfork() (vfork.S) before it jumps to libc's: marks the
 * calling thread (runtime.h) and gives libc's function. */
void *stasis_vfork_prepare(void)
{
	static void *real;

	if (!real)
		real = stasis_next_symbol("vfork");
	if (stasis_active)
		stasis_vfork_tid = (int)syscall(SYS_gettid);
	return real;
}

EXPORT pid_t fork(void)
{
	if (stasis_active && maps_before_fork() > 0)
		session_unsupported("fork() of a program with anonymous MAP_SHARED mappings");
	REAL(fork);
	return real();
}
