/* The on-disk format of stasis checkpoint files. This header owns it: the
 * writer, the reader and stasis-inspect use these structs and nothing else.
 * All integers little-endian (x86_64 native). Checksums are ISA-L
 * crc64_ecma_refl(0, buf, len).
 *
 * Image file  <dir>/ckpt-<id>.r<rank>.img :
 *   [0, 4096)                struct image_header (zero padded)
 *   [4096, ...)              struct region_record[nregions]
 *   page-aligned offsets     each region's data: for a full region
 *                            `length` bytes; for an incremental region a
 *                            page bitmap (ceil(npages/64) u64 words, at
 *                            bitmap_offset) and the saved pages in order.
 * Version 3 added sections, entries that are not memory (SECTION_MPI): a
 * reader of version 2 would have written them into memory, so it must
 * refuse the file.
 * Version 4: the saved state lost a counter; the MPI section carries
 * pending requests and drained messages, so that a checkpoint can be taken
 * while messages are in flight (mpi/drain.h); SECTION_CALLSTACK holds the
 * program's call stack at the checkpoint, for stasis-inspect; stasis_hash
 * names the build of libstasis.so (the saved stack returns into its code,
 * so a restart needs the same build).
 * Version 5, the rest of a process: SECTION_FILES (open files, stdio
 * streams), SECTION_SIGNALS (signals, timers), SECTION_MAPPINGS
 * (protections, mapping kinds), SECTION_TLS (thread-local storage, pthread
 * keys), SECTION_THREADS (the program's threads) and SECTION_LIBRARIES
 * (libraries it loaded with dlopen()).
 * Version 6: pages of zeros are not stored (REGION_ZEROS): a region's zero
 * bitmap names them, they take no bytes. A reader of version 5 would read
 * the pages after them from the wrong place, so it must refuse the file;
 * this reader takes version 5 files as they are (they have no such region),
 * and commit records, unchanged, of either version.
 * Version 7: memory regions may be compressed (REGION_PACKED, the image's
 * codec in the header): a reader of version 6 would take the frames for
 * pages. This reader takes versions 5 and 6 as they are.
 */
#ifndef STASIS_FORMAT_H
#define STASIS_FORMAT_H

#include <stdint.h>

#define STASIS_IMAGE_MAGIC "STASISIM" /* 8 bytes, no NUL stored */
#define STASIS_COMMIT_MAGIC "STASISOK"
#define STASIS_FORMAT_VERSION 7u
#define STASIS_FORMAT_OLDEST 5u /* the oldest version this stasis still reads */
#define STASIS_PAGE 4096u
#define STASIS_STATE_MAX 3072u /* opaque saved state (registers, counters) */

enum image_kind {
	IMAGE_FULL = 1,
	IMAGE_INCREMENTAL = 2, /* regions hold only the pages written since parent_id */
};

/* What an entry of an image's region table holds. Memory regions are
 * written back into the address space; sections are not memory but data
 * the image carries for one part of the process (session/part.h), never
 * written into the address space, never incremental. One number space,
 * because both are entries of the same on-disk table. */
enum region_kind {
	REGION_DATA = 1,  /* writable segment of the executable or an application library */
	REGION_ARENA = 2, /* committed part of the application arena */
	REGION_STACK = 3, /* main thread's stack, saved whole */
};

enum section_kind {
	SECTION_MPI = 4,	/* the program's MPI objects (mpi/section.h); addr is 0 */
	SECTION_CALLSTACK = 5,	/* where the checkpoint was taken: struct where_record */
	SECTION_FILES = 6,	/* the program's descriptors and streams: struct files_header */
	SECTION_SIGNALS = 7,	/* signal dispositions and timers: struct signals_record */
	SECTION_MAPPINGS = 8,	/* protections, mapping kinds: struct maps_record */
	SECTION_TLS = 9,	/* thread-local storage and pthread keys: struct tls_record */
	SECTION_THREADS = 10,	/* application threads: struct threads_record */
	SECTION_LIBRARIES = 11, /* libraries loaded with dlopen(): struct libraries_record */
	SECTION_TIMERS = 12,	/* POSIX timers (timer_create): struct timers_record */
	SECTION_EXITS = 13,	/* exit handlers registered after MPI_Init: struct exits_record */
	SECTION_SHARED_WINDOWS = 14, /* this rank's parts of shared windows: struct shwin_record */
	SECTION_WORKDIR = 15,	/* working directory and umask: struct workdir_record */
	SECTION_STDIN = 16,	/* what the program read of its standard input: struct stdin_record */
	SECTION_NAMES = 17,	/* directories made, files removed, to make again: struct names_record */
};

#define SECTION_FIRST SECTION_MPI
#define SECTION_LAST SECTION_NAMES

enum region_flags {
	REGION_PARTIAL = 1u << 0, /* incremental: bitmap + dirty pages only */
	/* Version 6, memory regions of kind REGION_DATA or REGION_ARENA only:
	 * a zero bitmap (one bit per page, padded to a page like the page
	 * bitmap) follows the page bitmap (or starts the region's data when it
	 * is not partial); a set bit names a saved page (every page, or the
	 * page bitmap's) that was all zeros and is not stored: it is put back
	 * as zeros. The stored pages are the saved ones without them, in
	 * order. */
	REGION_ZEROS = 1u << 1,
	/* Version 7, memory regions of kind REGION_DATA or REGION_ARENA only:
	 * the stored pages (after the bitmaps) are frames of the header's
	 * codec (format/codec.h): each a struct packed_frame, its packed
	 * bytes, zeros up to a page. stored_bytes is then what the frames
	 * take, not a count of pages. */
	REGION_PACKED = 1u << 2,
};

/* How an image's packed regions are compressed (image_header.codec). */
enum image_codec {
	CODEC_NONE = 0,
	CODEC_LZ4 = 1,
	CODEC_ZSTD = 2,
};

/* The head of a frame of a REGION_PACKED region. */
struct packed_frame {
	uint32_t raw_bytes;    /* page multiple, at most 1 MiB */
	uint32_t packed_bytes; /* <= raw_bytes; equal: the raw bytes as they are */
};

struct image_header {
	char magic[8];        /* STASIS_IMAGE_MAGIC */
	uint32_t version;     /* STASIS_FORMAT_VERSION */
	uint32_t header_size; /* sizeof(struct image_header) */
	uint64_t ckpt_id;     /* 1, 2, ... per job */
	uint64_t parent_id;   /* 0 for a full image */
	uint32_t kind;        /* enum image_kind */
	uint32_t rank;
	uint32_t nranks;
	uint32_t uid; /* owner: must equal getuid() of the reader */
	uint64_t exe_hash; /* crc64 of the executable file */
	uint64_t args_hash; /* crc64 of the program's arguments after argv[0] */
	uint64_t stasis_hash; /* crc64 of libstasis.so: the saved stack returns into it */
	uint64_t nregions;
	uint64_t data_bytes; /* region payload bytes (bitmaps and pages) */
	uint64_t created_ns; /* CLOCK_REALTIME */
	uint32_t state_size; /* bytes used in state[] */
	uint32_t codec;      /* enum image_codec of its REGION_PACKED regions (version 7; 0 before) */
	uint8_t state[STASIS_STATE_MAX]; /* opaque to the storage layer */
	uint64_t table_crc;  /* crc64 of region_record[nregions] */
	uint64_t header_crc; /* crc64 of this struct with header_crc = 0 */
};

struct region_record {
	uint64_t addr;   /* page aligned */
	uint64_t length; /* page multiple */
	uint32_t kind;   /* enum region_kind */
	uint32_t flags;  /* enum region_flags */
	uint64_t file_offset;   /* page aligned: start of this region's data */
	uint64_t stored_bytes;  /* bytes at file_offset (bitmap + pages, or length) */
	uint64_t bitmap_offset; /* REGION_PARTIAL: offset of the page bitmap, else 0 (the
				 * zero bitmap of REGION_ZEROS is found from the flags) */
	uint64_t data_crc;      /* crc64 of the stored_bytes at file_offset */
};

/* SECTION_CALLSTACK: the application's call stack when the checkpoint was
 * taken, innermost first: the frames above stasis's MPI wrapper, as
 * libunwind found them on the main thread. stasis-inspect --where
 * symbolises them (file and line from the objects' debug information). */
#define STASIS_WHERE_MAGIC "STASISWH"
#define STASIS_WHERE_FRAMES 64

struct where_frame {
	uint64_t ip;            /* return address into the frame's function */
	uint64_t object_bias;   /* load bias of the object holding ip */
	uint64_t symbol_offset; /* ip - start of `function` */
	char function[128];     /* symbol name, "" when there is none */
	char object[256];       /* path of the executable or library, "" unknown */
};

struct where_record {
	char magic[8]; /* STASIS_WHERE_MAGIC */
	uint32_t nframes;    /* <= STASIS_WHERE_FRAMES */
	uint32_t frame_size; /* sizeof(struct where_frame) */
	struct where_frame frame[];
};

/* SECTION_SIGNALS: what the kernel keeps of the program's signals
 * (process/sigstate.h). Signal sets are 64-bit masks, signal s as bit s - 1. */
#define STASIS_SIGNALS_MAGIC "STASISSG"
#define STASIS_SIGNALS_MAX 65 /* signals 1..64, index = signal number */

struct signal_action {
	uint64_t handler; /* SIG_DFL 0, SIG_IGN 1, else the function's address */
	uint64_t flags;	  /* sa_flags, SA_RESTORER cleared */
	uint64_t mask;	  /* sa_mask */
	uint32_t saved;	  /* 1: the program's disposition, put back by a restart */
	uint32_t reserved;
};

struct signal_itimer {
	uint64_t value_us;    /* time left when the checkpoint was taken, 0: disarmed */
	uint64_t interval_us; /* period */
};

struct signals_record {
	char magic[8];	      /* STASIS_SIGNALS_MAGIC */
	uint32_t record_size; /* sizeof(struct signals_record) */
	uint32_t nsig;	      /* STASIS_SIGNALS_MAX */
	struct signal_action action[STASIS_SIGNALS_MAX];
	struct signal_itimer itimer[3]; /* ITIMER_REAL, ITIMER_VIRTUAL, ITIMER_PROF */
	uint64_t altstack_sp;		/* the main thread's sigaltstack() */
	uint64_t altstack_size;
	uint32_t altstack_flags; /* SS_DISABLE when there is none */
	uint32_t pdeathsig;	 /* prctl(PR_SET_PDEATHSIG), 0 none */
	uint64_t pending;	 /* signals pending for the main thread (blocked) */
};

/* SECTION_TIMERS: the program's POSIX timers (process/ptimers.h): a struct
 * timers_record and ntimers struct ptimer_record. */
#define STASIS_TIMERS_MAGIC "STASISPT"

struct ptimer_record {
	int32_t id;	  /* the kernel's timer id, which the program holds */
	int32_t clockid;  /* CLOCK_MONOTONIC, ... */
	int32_t notify;	  /* SIGEV_SIGNAL or SIGEV_NONE */
	int32_t signo;	  /* its signal */
	uint64_t value;	  /* sigev_value */
	int64_t value_sec, value_nsec;	     /* time left, 0: disarmed */
	int64_t interval_sec, interval_nsec; /* its interval */
};

struct timers_record {
	char magic[8]; /* STASIS_TIMERS_MAGIC */
	uint32_t record_size; /* sizeof(struct ptimer_record) */
	uint32_t ntimers;
};

/* SECTION_EXITS: the exit handlers the program registered after MPI_Init
 * (process/exits.h), in the order it registered them: a struct exits_record
 * and nexits struct exit_record. */
#define STASIS_EXITS_MAGIC "STASISEX"

enum exit_kind {
	EXIT_CXA = 1,	  /* __cxa_atexit(fn, arg, dso); atexit() is one */
	EXIT_ON_EXIT = 2, /* on_exit(fn, arg) */
	EXIT_THREAD = 3,  /* __cxa_thread_atexit_impl(fn, arg, dso), main thread */
};

struct exit_record {
	uint32_t kind; /* enum exit_kind */
	uint32_t reserved;
	uint64_t fn, arg, dso;
};

struct exits_record {
	char magic[8]; /* STASIS_EXITS_MAGIC */
	uint32_t record_size; /* sizeof(struct exit_record) */
	uint32_t nexits;
};

/* SECTION_WORKDIR: the process's working directory and file mode creation
 * mask (process/workdir.h): a struct workdir_record, then path_len bytes of
 * the absolute path, NUL included. */
#define STASIS_WORKDIR_MAGIC "STASISWD"

struct workdir_record {
	char magic[8]; /* STASIS_WORKDIR_MAGIC */
	uint32_t umask;
	uint32_t path_len;
};

/* SECTION_NAMES: what a killed run did to names after the checkpoint a
 * restart resumed from, that the restarted program has not done again yet
 * (process/names.h): a struct names_record, then nnames entries, each a
 * struct name_entry and its absolute path (path_len bytes, NUL included,
 * padded to 8). */
#define STASIS_NAMES_MAGIC "STASISNM"

enum name_op {
	NAME_MKDIR = 1,	 /* a directory made (mkdir) */
	NAME_UNLINK = 2, /* a file removed (unlink) */
	NAME_RMDIR = 3,	 /* a directory removed (rmdir) */
	NAME_CREATE = 4, /* a file made with O_CREAT | O_EXCL */
};

struct names_record {
	char magic[8]; /* STASIS_NAMES_MAGIC */
	uint32_t nnames;
	uint32_t reserved;
	uint64_t bytes; /* this struct included */
};

struct name_entry {
	uint32_t op; /* enum name_op */
	uint32_t path_len;
};

/* SECTION_STDIN: how much of its standard input (a pipe: the launcher's
 * forwarding) the program had read (process/stdin_relay.h), and enough of
 * those bytes to recognise the same input at a restart: the crc64 of the
 * first head_len of them and the last tail_len themselves. */
#define STASIS_STDIN_MAGIC "STASISIN"
#define STDIN_HEAD 65536
#define STDIN_TAIL 4096

struct stdin_record {
	char magic[8]; /* STASIS_STDIN_MAGIC */
	uint64_t consumed;
	uint64_t head_crc;
	uint32_t head_len, tail_len;
	uint32_t eof; /* the whole input had been read: nothing more comes */
	uint32_t reserved;
	unsigned char tail[STDIN_TAIL];
};

/* SECTION_SHARED_WINDOWS: this rank's parts of the shared-memory windows
 * (MPI_Win_allocate_shared, mpi/windows_shared.c), which are not in the
 * memory regions: a struct shwin_record, nwindows struct shwin_entry, then
 * each part's bytes in that order, each padded to 8. */
#define STASIS_SHWIN_MAGIC "STASISSW"

struct shwin_entry {
	uint64_t base; /* the part's address (in the shared segment) */
	uint64_t len;  /* its bytes */
};

struct shwin_record {
	char magic[8]; /* STASIS_SHWIN_MAGIC */
	uint32_t entry_size; /* sizeof(struct shwin_entry) */
	uint32_t nwindows;
};

/* SECTION_MAPPINGS: what the image expects of the address space it is put back
 * into (process/maps.h): the application libraries, by load address and file
 * contents, the top of the main stack, and the memory of the image whose
 * protection or kind is not the default (read-write, private). A
 * struct maps_record, then nobjects struct maps_object, then nranges
 * struct maps_range sorted by address, without overlaps. */
#define STASIS_MAPS_MAGIC "STASISMP"

enum maps_flags {
	MAPS_SHARED = 1u << 0,	   /* an anonymous MAP_SHARED mapping */
	MAPS_DONTFORK = 1u << 1,   /* madvise(MADV_DONTFORK) */
	MAPS_WIPEONFORK = 1u << 2, /* madvise(MADV_WIPEONFORK) */
	MAPS_DONTDUMP = 1u << 3,   /* madvise(MADV_DONTDUMP) */
	MAPS_FILE_COPY = 1u << 4,  /* a MAP_PRIVATE mapping of a file, its bytes copied */
};

struct maps_object {
	uint64_t base;	    /* load address (bias) */
	uint64_t file_crc;  /* crc64 of the file, 0 when it could not be read */
	uint64_t file_size; /* bytes */
	char path[232];	    /* as the dynamic linker found it */
};

struct maps_range {
	uint64_t start, end; /* page aligned */
	uint32_t prot;	     /* PROT_READ | PROT_WRITE | PROT_EXEC, or PROT_NONE */
	uint32_t flags;	     /* enum maps_flags */
};

struct maps_record {
	char magic[8]; /* STASIS_MAPS_MAGIC */
	uint32_t record_size, object_size, range_size, reserved;
	uint32_t nobjects, nranges;
	uint64_t stack_top; /* end of the [stack] mapping */
};

/* SECTION_FILES: the program's open descriptors (process/fds.h): a struct
 * files_header, nfiles struct file_record, nstreams u64 addresses of the
 * program's stdio streams (FILE structures in the arena, in libc's list
 * order), then the paths the records point into. */
#define STASIS_FILES_MAGIC "STASISFD"
#define STASIS_FILES_VERSION 1u

enum file_kind {
	FILE_REGULAR = 1,   /* opened again by path, cut back or checked */
	FILE_DIRECTORY = 2, /* opened again by path, the same directory */
	FILE_DEVICE = 3,    /* /dev/null and the like: opened again by path */
	FILE_STANDARD = 4,  /* a duplicate of descriptor 0, 1 or 2 (rdev) */
	/* Made again, not opened (process/fds_event.c); their payload, where
	 * a path would be: */
	FILE_PIPE = 5,	   /* an end of a pipe whose both ends are the program's:
			    * ino the pipe's; size its capacity; the read end's
			    * payload the bytes it held */
	FILE_EVENTFD = 6,  /* offset the counter; rdev 1 if EFD_SEMAPHORE */
	FILE_TIMERFD = 7,  /* payload a struct timerfd_record */
	FILE_SIGNALFD = 8, /* offset the signal mask (bit n-1: signal n) */
	FILE_EPOLL = 9,	   /* payload struct epoll_watch[]: its registrations */
	FILE_SOCKETPAIR = 10, /* an end of an AF_UNIX socketpair whose both ends are
			       * the program's: ino its inode, rdev its peer's,
			       * size its type (SOCK_STREAM ...), mtime_sec and
			       * mtime_nsec its SO_SNDBUF and SO_RCVBUF; payload
			       * what waited in its receive queue: messages, each a
			       * u32 length and its bytes */
	FILE_INOTIFY = 11,    /* payload struct inotify_watch[], each followed by
			       * its path (path_len bytes, padded to 8) */
	FILE_DELETED = 12,    /* a regular file without a name (deleted while open,
			       * tmpfile(), O_TMPFILE): offset its position, size
			       * its length, rdev its st_mode; payload the
			       * directory it was in (NUL-terminated), then its
			       * bytes (none when a lower descriptor's record is
			       * the same inode: opened again from that one) */
};

struct inotify_watch {
	int32_t wd;	   /* the watch descriptor the program holds */
	uint32_t mask;	   /* IN_MODIFY, ..., IN_ONESHOT, IN_DONT_FOLLOW ... */
	uint32_t path_len; /* the absolute path it was added with */
	uint32_t reserved;
	uint64_t ino; /* of the watched file, checked at the restart */
};

struct timerfd_record {
	int64_t value_sec, value_nsec;	     /* time left, 0: disarmed */
	int64_t interval_sec, interval_nsec; /* its interval */
	uint64_t ticks;			     /* expirations not read yet */
	int32_t clockid;
	uint32_t reserved;
};

struct epoll_watch {
	int32_t fd;	 /* the descriptor watched (the program's) */
	uint32_t events; /* EPOLLIN, EPOLLET, ... */
	uint64_t data;	 /* what epoll_wait hands back */
};

struct files_header {
	char magic[8]; /* STASIS_FILES_MAGIC */
	uint32_t version;
	uint32_t range; /* descriptors [3, range) were the program's */
	uint32_t nfiles;
	uint32_t nstreams;
	uint64_t bytes; /* used, this header included */
};

struct file_record {
	int32_t fd;	   /* the descriptor */
	uint32_t desc;	   /* open file description: shared by duplicates */
	uint32_t kind;	   /* enum file_kind */
	uint32_t flags;	   /* fcntl F_GETFL: access mode, O_APPEND, ... */
	uint32_t fd_flags; /* fcntl F_GETFD: FD_CLOEXEC */
	uint32_t path_len;    /* or the payload's length (FILE_PIPE ...) */
	uint64_t path_offset; /* from the header's start */
	uint64_t offset;      /* the description's position */
	uint64_t size;	      /* st_size */
	uint64_t dev, ino, rdev;
	int64_t mtime_sec, mtime_nsec;
};

/* SECTION_TLS: the application's thread-local storage (process/tls.h). Its
 * pthread keys first (the keys the program made, in key order), then one
 * section per thread: a struct tls_thread, the thread's value of every key
 * (nkeys uint64_t, in the same order), and its blocks, each a struct
 * tls_block followed by `size` bytes padded to a multiple of 8. Blocks are
 * those of the executable and of the application's libraries (never libc's
 * or stasis's, which the restart's runtime owns). */
#define STASIS_TLS_MAGIC "STASISTL"

struct tls_record {
	char magic[8];	   /* STASIS_TLS_MAGIC */
	uint32_t nkeys;	   /* struct tls_key follow */
	uint32_t nthreads; /* thread sections follow the keys */
	uint64_t bytes;	   /* bytes used from the start of this struct */
};

struct tls_key {
	uint32_t key; /* pthread_key_t */
	uint32_t reserved;
	uint64_t destructor; /* address of its destructor, 0 for none */
};

struct tls_thread {
	uint32_t thread;  /* 0 the main thread, else 1 + its slot in SECTION_THREADS */
	uint32_t nblocks; /* struct tls_block follow the values */
	uint64_t tp;	  /* its thread pointer (%fs base) */
};

struct tls_block {
	char object[256]; /* path of the object the block belongs to, "" the executable */
	uint64_t base;	  /* load base of that object */
	uint64_t addr;	  /* where the block was */
	uint64_t size;	  /* PT_TLS memory size of the object: bytes that follow */
	uint32_t dynamic; /* 1: allocated on first use (a library loaded with dlopen()),
			   * 0: static TLS at a fixed distance from the thread pointer */
	uint32_t reserved;
};

/* SECTION_THREADS: the application's threads other than the main one
 * (process/threads.h), each a struct thread_record followed by the part of
 * its stack in use, from `low` to `top`, padded to a multiple of 8. A
 * thread that had ended but was not joined yet has no stack saved. */
#define STASIS_THREADS_MAGIC "STASISTH"
#define STASIS_CONTEXT_MAX 1024 /* a ucontext_t */

struct threads_record {
	char magic[8];	   /* STASIS_THREADS_MAGIC */
	uint32_t nthreads; /* struct thread_record follow */
	uint32_t reserved;
	uint64_t bytes; /* bytes used from the start of this struct */
};

enum thread_record_state {
	THREAD_STOPPED = 1, /* running: stopped in stasis's signal handler */
	THREAD_ENDED = 2,   /* returned, not joined yet */
};

struct thread_record {
	uint32_t slot;	  /* stasis's number for it; its TLS section is slot + 1 */
	uint32_t state;	  /* enum thread_record_state */
	uint64_t pthread; /* pthread_t: glibc's descriptor, at the top of its block */
	uint64_t block;	  /* its stack block in stasis's zone for stacks */
	uint64_t block_size;
	uint64_t top;	     /* the part saved: [low, top), top just above stasis's */
	uint64_t low;	     /* frame that called the thread's start routine */
	uint64_t retval;     /* THREAD_ENDED: what it returned */
	uint64_t canary;     /* its stack-protector value */
	int32_t errno_value; /* its errno when stopped */
	uint32_t detached;
	int32_t policy; /* scheduling policy and priority when made */
	int32_t priority;
	uint32_t inherit; /* PTHREAD_INHERIT_SCHED or PTHREAD_EXPLICIT_SCHED */
	uint32_t reserved;
	uint8_t affinity[128];		     /* cpu_set_t when stopped */
	uint8_t context[STASIS_CONTEXT_MAX]; /* ucontext_t where it stopped */
};

/* SECTION_LIBRARIES: the libraries the program loaded with dlopen(), in the
 * order it loaded them (process/libraries.h): one struct libraries_group per
 * dlopen() that loaded something, each followed by its `count` struct
 * libraries_entry (the objects that call loaded, in ld.so's order). A
 * restart loads each group again at the same addresses before the memory
 * comes back. */
#define STASIS_OBJECTS_MAGIC "STASISOB"

struct libraries_record {
	char magic[8]; /* STASIS_OBJECTS_MAGIC */
	uint32_t ngroups;
	uint32_t reserved;
	uint64_t cursor; /* the placement cursor after the last group */
	uint64_t bytes;	 /* bytes used from the start of this struct */
};

struct libraries_group {
	char path[1024]; /* the object the program asked for, as ld.so found it */
	uint64_t top;	 /* placement cursor before it: its objects lie below */
	uint32_t flags;	 /* the dlopen() mode */
	uint32_t count;	 /* struct libraries_entry follow */
};

struct libraries_entry {
	char name[1024]; /* ld.so's name (path) of the object */
	uint64_t base;	 /* its load base */
};

/* Commit record <dir>/ckpt-<id>.r<rank>.done : written after every rank has
 * synced its image (two-phase commit). Its presence on ANY rank proves that
 * checkpoint <id> was complete on all ranks. */
struct commit_record {
	char magic[8]; /* STASIS_COMMIT_MAGIC */
	uint32_t version;
	uint32_t nranks;
	uint64_t ckpt_id;
	uint64_t parent_id;
	uint64_t image_bytes; /* size of this rank's image file */
	uint64_t image_crc;   /* crc64 of the image header (identifies the file) */
	uint64_t crc;         /* crc64 of this struct with crc = 0 */
};

#endif
