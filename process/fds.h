/* The program's open descriptors (DESIGN.md section 10 "the rest of a
 * process"): which descriptors are the program's, where they live, and
 * what a checkpoint must know to open them again.
 *
 * A restart is a new process whose MPI_Init opens dozens of descriptors of
 * its own (sockets, shared memory, PMIx), lazily and through libc-internal
 * calls nobody can interpose: a number the program held in the first run
 * may be the runtime's in the restart. So the numbers are split, as memory
 * is: when libstasis.so loads, before anything else runs, every free
 * descriptor in [3, range) is filled with a placeholder (a duplicate of
 * a read-only /dev/null). The kernel hands out the lowest free number, so from then on
 * every descriptor the runtime opens lands at range or above, in the first
 * run and in the restart alike; every descriptor the program opens (the
 * calls of preload/files.c, decided as for allocations: main thread,
 * outside stasis's wrappers, called from application code) is moved onto a
 * placeholder's number, the lowest one free, and a close puts the
 * placeholder back (atomically, with dup3, so that a runtime thread can
 * never be handed the number in between). Descriptors 0, 1, 2 are the
 * launcher's and stay so.
 *
 * All of this runs on the program's main thread only (the interposed calls
 * of other threads are the runtime's and pass through): no lock. */
#ifndef STASIS_FDS_H
#define STASIS_FDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "part.h"

struct session;

#define FDS_RANGE_MAX 256

/* When libstasis.so loads in an MPI rank (after the arena): fill the
 * range with placeholders. 0 or -errno (then nothing is tracked). */
int fds_init(void);
/* Descriptors [3, fds_range()) are the program's; 0 before fds_init. */
int fds_range(void);
/* A restart's program before its checkpoint is put back: its opens must
 * not truncate or exclude (the files are the checkpoint's, and will be
 * cut back to their lengths there). */
bool fds_before_restore(void);

/* The table is the program's threads' to share: every call of the
 * program's side below holds this lock (recursive), marked busy, so that
 * no thread is stopped for a checkpoint while it holds it. */
int fds_lock(void);
void fds_unlock(int *unused);
#define FDS_LOCKED() int fds_locked_ __attribute__((cleanup(fds_unlock), unused)) = fds_lock()

/* The program's side (preload/files.c), each on the result of the real
 * call, returning the descriptor the program gets: */
/* fd is a new open file description (open, creat, fopen, mkstemp,
 * opendir); flags are its open flags, O_TRUNC at least when known. */
int fds_opened(int fd, int flags, const char *call);
/* fd is a new pipe end, eventfd, timerfd, signalfd or epoll instance
 * (fds_event.c makes them again at a restart): placed like a file. */
int fds_made(int fd, const char *call);
/* newfd, which the kernel chose, is a duplicate of oldfd (dup, fcntl
 * F_DUPFD): moved to the lowest free number >= min in the range. */
int fds_duplicated(int oldfd, int newfd, int min, const char *call);
/* Before dup2/dup3(oldfd, newfd): refuses what cannot be restored (a
 * standard descriptor replaced, a number above the range). After it
 * succeeded: fds_duplicated_to. */
void fds_dup_to_check(int oldfd, int newfd, const char *call);
void fds_duplicated_to(int oldfd, int newfd);
/* The program closes fd: true when handled here (*ret is close's result),
 * false to call the real close. */
bool fds_close(int fd, int *ret);
/* Take fd out of the program's hands before libc closes it internally
 * (fclose, closedir): the number gets its placeholder back now, and the
 * returned descriptor (a duplicate above the range, or fd itself when it
 * is not the program's) is the one libc may close. */
int fds_release(int fd);
/* Something closed the program's fd behind stasis's back (a failed
 * freopen, fcloseall): put the placeholder back if the number is free. */
void fds_reclaim(int fd);
/* fd (the program's) now names another file (freopen kept its number). */
void fds_reopened(int fd, int flags, const char *call);

/* Whether a checkpoint holds written files (else no write needs a look). */
bool fds_watching(void);
/* Writes that would change bytes a checkpoint holds (below the length the
 * file had at the newest checkpoint): the bytes are saved first in the
 * checkpoint's undo record (undo.h), or, when they cannot be, checkpoints
 * stop and the checkpoints before are marked unusable. offset < 0: at the
 * descriptor's position; len bytes from there (UINT64_MAX: unknown). */
void fds_will_write(int fd, int64_t offset, uint64_t len);
/* ftruncate / fallocate that cut or punch below that length. */
void fds_will_cut(int fd, int64_t from);
void fds_will_cut_path(const char *path, int64_t from);
/* The program is about to change bytes below the length its file path had
 * at checkpoint id (at byte at), and no undo record holds them (cause):
 * that checkpoint, and the ones before, can no longer be put back as they
 * were. Says so, stops checkpoints, and leaves a mark the restart reads
 * (fds_restart_check); once. */
void fds_mark_overwritten(const char *path, int64_t at, uint64_t size, uint64_t id,
			  const char *cause);
/* A stdio stream open for writing was positioned (fseek, rewind, ...):
 * its later writes land there, unseen. */
void fds_stream_positioned(FILE *fp);

/* The length of the file (dev, ino) at the newest checkpoint and that
 * checkpoint's id, for a file the program writes (MPI-IO's too): from the
 * files the checkpoint held open for writing, or, for a file it did not
 * (a program that closes and reopens its files every step), its length
 * size_now when the program first opens it again, listed from then on (a
 * write of the program's since would have listed it). False when there is
 * no committed checkpoint or the file is empty (no write can be in place).
 * path (or, when NULL, descriptor fd's) names the file if it is refused. */
bool fds_written_size(uint64_t dev, uint64_t ino, uint64_t size_now, uint64_t *size, uint64_t *id,
		      int fd, const char *path);

/* Pipes to other processes the program has open (popen): while one is,
 * no checkpoint is taken, as the process at its other end is not the
 * program's to restore; once closed, nothing of it is left. delta +1 with
 * the command at popen(), -1 at pclose(). Returns how many are open and
 * the command of the newest one. */
void fds_child_pipe(int delta, const char *command);
int fds_child_pipes(const char **command);

/* Refuse, once, state the program made that stasis cannot restore
 * (session_unsupported with a formatted name). */
void fds_refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --- checkpoint and restart (fds_image.c) ------------------------------- */

/* At a checkpoint (checkpoint id): the program's descriptors and stdio
 * streams, serialised into page-aligned runtime memory kept until the next
 * call (*len a page multiple). 0, or -errno with why naming what cannot
 * be restored (a deleted file, a stream on a descriptor stasis did not
 * see opened): that checkpoint fails, the run goes on. */
int fds_save(uint64_t id, void **data, size_t *len, struct why *why);

/* Right after the memory is back (on the temporary stack): the program's
 * stdio streams go back into libc's list of open streams, so that
 * fflush(NULL) and exit() flush them. */
void fds_relink_streams(void);

/* The files part (session/part.h): saved as SECTION_FILES; checked before a
 * restart changes anything, put back once the memory is. */
extern const struct part_ops files_part;

/* fds_image.c's access to the table (fds.c). */
enum fds_slot_state { SLOT_OTHER = 0, SLOT_RESERVED, SLOT_PROGRAM };
struct fds_slot {
	uint8_t state;	   /* enum fds_slot_state */
	int8_t std_of;	   /* a duplicate of descriptor 0, 1 or 2; -1 if not */
	uint32_t desc;	   /* open file description: shared by duplicates */
	uint64_t dev, ino; /* of the file, when it was opened */
};
const struct fds_slot *fds_slot(int fd);
/* The path fd names now (/proc/self/fd), "" when unknown. */
void fds_path_of(int fd, char *path, size_t len);
/* Install a restored descriptor: k (open, above the range) becomes fd; k
 * is closed. 0 or -errno. */
int fds_install(int k, int fd, uint32_t desc, int std_of, bool cloexec);
/* Give back every number the program holds (a restart's own opens before
 * its checkpoint is put back). */
void fds_release_all(void);
uint32_t fds_new_desc(void);
void fds_set_restored(void);

/* --- descriptors made again, not opened (fds_event.c) ------------------ */

struct file_record;
struct stat;
/* fd (the program's, at path, fstat st): 1 when it is a pipe end, eventfd,
 * timerfd, signalfd or epoll instance, r's kind and fields filled and its
 * payload in *data, *len (module storage, valid until the next call); 0
 * when it is none of them; -errno with why when it cannot be restored (a
 * pipe to another process, an epoll instance watching a descriptor not the
 * program's: refused as well, named). */
int fds_event_describe(int fd, const struct stat *st, const char *path, struct file_record *r,
		       const void **data, size_t *len, struct why *why);
/* What record kind makes again ("a pipe"), NULL for files opened by path. */
const char *fds_event_name(uint32_t kind);
/* A restart's CHECK: make record i's object again into made[i] (made[]
 * -1 where nothing is made yet; a pipe fills both its ends' entries), its
 * payload data[i] of len[i] bytes put back. 0 or -errno with why. */
int fds_event_make(const struct file_record *recs, char *const *data, const size_t *len,
		   int *made, int n, int i, struct why *why);
/* Once every descriptor is at its number: an epoll instance's
 * registrations (a no-op for the other kinds). */
int fds_event_register(const struct file_record *r, const char *data, size_t len,
		       struct why *why);

/* The payload storage every describe above and below fills (one: a
 * payload is valid until the next describe), grown to at least n bytes
 * with its contents kept; NULL when out of memory. */
char *fds_payload(size_t n);

/* Whether fd is the first descriptor of its description in the range. */
bool fds_event_first_of_desc(int fd);

/* socketpairs (fds_socket.c), their both ends the program's. paired: the
 * preload layer's socketpair() made a and b (both the program's). describe
 * and make as fds_event_describe and fds_event_make (which call them). */
void fds_socket_paired(int a, int b);
int fds_socket_describe(int fd, const struct stat *st, const char *path, struct file_record *r,
			const void **data, size_t *len, struct why *why);
int fds_socket_make(const struct file_record *recs, char *const *data, const size_t *len,
		    int *made, int n, int i, struct why *why);

/* inotify instances (fds_inotify.c). added: the program's
 * inotify_add_watch(fd, path, mask) returned wd. describe: fdinfo is fd's
 * /proc/self/fdinfo text. make: the instance into *made with its watches.
 * drain: the events a restart caused read away, before the program runs. */
void fds_inotify_added(int fd, int wd, const char *path, uint32_t mask);
int fds_inotify_describe(int fd, const struct stat *st, const char *path, const char *fdinfo,
			 struct file_record *r, const void **data, size_t *len, struct why *why);
int fds_inotify_make(const char *data, size_t len, int *made,
		     struct why *why);
void fds_inotify_drain(int fd);

/* Regular files without a name (fds_deleted.c): their bytes recorded,
 * bounded by STASIS_DELETED_MAX per checkpoint (begin: a checkpoint's
 * first), and made again at a restart. describe and make as
 * fds_event_describe and fds_event_make. */
void fds_deleted_begin(void);
int fds_deleted_describe(int fd, const struct stat *st, const char *path, struct file_record *r,
			 const void **data, size_t *len, struct why *why);
int fds_deleted_make(const struct file_record *recs, char *const *data, const size_t *len,
		     int *made, int n, int i, struct why *why);
/* Flags to open a recorded file again with: what F_GETFL kept of the first
 * open, without what would create or truncate it. */
int fds_reopen_flags(const struct file_record *r);

/* The lengths the program's written files had at a checkpoint, to see
 * writes below them (the newest two checkpoints: one may not commit). */
void fds_checkpoint_sizes(uint64_t id, const uint64_t *dev, const uint64_t *ino,
			  const uint64_t *size, int n);

#endif
