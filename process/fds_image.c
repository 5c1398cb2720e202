/* The program's descriptors and stdio streams in a checkpoint, and put
 * back by a restart (fds.h, format.h SECTION_FILES).
 *
 * What a restart checks before it touches anything (after CRIU, which
 * checks a regular file's size and mode when it opens it again, and
 * DMTCP's file plugin, which reopens by path and seeks): the file at the
 * path is the same file (its inode: the device number is not compared, a
 * network file system may come back under another one after a reboot); a
 * file the program only read has the size and modification time it had
 * (anything else would feed the resumed program other input than the
 * uninterrupted run's); a file it wrote is no shorter than it was (what
 * the killed run wrote after the checkpoint is cut off; less would be a
 * hole). A directory must be the same directory, a device the same
 * device. */
#define LOG_PREFIX "files: "
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "fds.h"
#include "format.h"
#include "log.h"
#include "part.h"
#include "session.h"
#include "undo.h"

/* glibc's list of open streams and its helpers (exported, libio.h): a
 * restored stream is linked in again so that exit() and fflush(NULL) see
 * it. _IO_LINKED marks a stream that is in the list. */
extern FILE *_IO_list_all;
extern void _IO_link_in(FILE *fp);
extern void _IO_un_link(FILE *fp);
extern void _IO_list_lock(void);
extern void _IO_list_unlock(void);
#define STDIO_LINKED 0x0080

#define MAX_STREAMS 1024

/* --- saving ---------------------------------------------------------------------- */

struct buf {
	char *data;
	size_t len, cap;
	bool failed;
};

static size_t put(struct buf *b, const void *p, size_t n)
{
	size_t at = b->len;

	if (b->failed)
		return at;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		char *d;

		while (cap < b->len + n)
			cap *= 2;
		d = realloc(b->data, cap);
		if (!d) {
			b->failed = true;
			return at;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return at;
}

/* The program's streams: FILE structures in the arena, in libc's list. */
static int program_streams(FILE **out, int max)
{
	int n = 0;

	_IO_list_lock();
	for (FILE *fp = _IO_list_all; fp; fp = fp->_chain)
		if (arena_contains(fp) && n < max)
			out[n++] = fp;
	_IO_list_unlock();
	return n;
}

/* One record for descriptor fd, its path appended to paths. */
static int describe(int fd, const struct fds_slot *sl, struct file_record *r, struct buf *paths,
		    struct why *why)
{
	char path[PATH_MAX];
	struct stat st;
	int fl = fcntl(fd, F_GETFL), fdfl = fcntl(fd, F_GETFD);

	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->desc = sl->desc;
	if (fl < 0 || fdfl < 0 || fstat(fd, &st)) {
		return why_set(why, -errno, "descriptor %d: %s", fd, strerror(errno));
	}
	r->flags = (uint32_t)fl;
	r->fd_flags = (uint32_t)fdfl;
	fds_path_of(fd, path, sizeof(path));
	if (sl->std_of >= 0) {
		r->kind = FILE_STANDARD;
		r->rdev = (uint64_t)sl->std_of;
		return 0;
	}
	{
		const void *data;
		size_t len;
		int made = fds_event_describe(fd, &st, path, r, &data, &len, why);

		if (made < 0)
			return made;
		if (made) {
			r->path_len = (uint32_t)len;
			r->path_offset = put(paths, data, len);
			return 0;
		}
	}
	if (S_ISREG(st.st_mode))
		r->kind = FILE_REGULAR;
	else if (S_ISDIR(st.st_mode))
		r->kind = FILE_DIRECTORY;
	else
		r->kind = FILE_DEVICE;
	if (r->kind == FILE_REGULAR && st.st_nlink == 0) {
		const void *data;
		size_t len;
		int ret = fds_deleted_describe(fd, &st, path, r, &data, &len, why);

		if (ret < 0)
			return ret;
		r->path_len = (uint32_t)len;
		r->path_offset = put(paths, data, len);
		return 0;
	}
	if (r->kind != FILE_DEVICE) {
		off_t off = lseek(fd, 0, SEEK_CUR);

		r->offset = off < 0 ? 0 : (uint64_t)off;
	}
	r->size = (uint64_t)st.st_size;
	r->dev = st.st_dev;
	r->ino = st.st_ino;
	r->rdev = st.st_rdev;
	r->mtime_sec = st.st_mtim.tv_sec;
	r->mtime_nsec = st.st_mtim.tv_nsec;
	r->path_len = (uint32_t)strlen(path);
	r->path_offset = put(paths, path, r->path_len);
	return 0;
}

static struct section_buf out;

int fds_save(uint64_t id, void **data, size_t *len, struct why *why)
{
	static FILE *streams[MAX_STREAMS];
	static struct file_record recs[FDS_RANGE_MAX];
	static uint64_t dev[FDS_RANGE_MAX], ino[FDS_RANGE_MAX], size[FDS_RANGE_MAX];
	struct files_header h = {0};
	struct buf b = {0}, paths = {0};
	int nrec = 0, nstreams, nwritten = 0, ret = 0;
	size_t at;

	fds_deleted_begin();
	for (int fd = 3; fd < fds_range(); fd++) {
		const struct fds_slot *sl = fds_slot(fd);

		if (sl->state != SLOT_PROGRAM)
			continue;
		ret = describe(fd, sl, &recs[nrec], &paths, why);
		if (ret)
			goto out;
		if (recs[nrec].kind == FILE_REGULAR && (recs[nrec].flags & O_ACCMODE) != O_RDONLY) {
			dev[nwritten] = recs[nrec].dev;
			ino[nwritten] = recs[nrec].ino;
			size[nwritten++] = recs[nrec].size;
		}
		nrec++;
	}
	nstreams = program_streams(streams, MAX_STREAMS);
	for (int i = 0; i < nstreams; i++) {
		int fd = streams[i]->_fileno;
		const struct fds_slot *sl = fds_slot(fd);

		if (fd < 3 || (sl && sl->state == SLOT_PROGRAM))
			continue;
		ret =
		    why_set(why, -EBADF,
			    "a stdio stream of the program is open on descriptor %d, which stasis "
			    "did not see the program open; this checkpoint is skipped",
			    fd);
		goto out;
	}
	if (nstreams == MAX_STREAMS) {
		ret = why_set(why, -ENOSPC, "more than %d stdio streams open", MAX_STREAMS - 1);
		goto out;
	}
	memcpy(h.magic, STASIS_FILES_MAGIC, 8);
	h.version = STASIS_FILES_VERSION;
	h.range = (uint32_t)fds_range();
	h.nfiles = (uint32_t)nrec;
	h.nstreams = (uint32_t)nstreams;
	put(&b, &h, sizeof(h));
	at = sizeof(h) + sizeof(*recs) * nrec + sizeof(uint64_t) * nstreams;
	for (int i = 0; i < nrec; i++)
		recs[i].path_offset += at;
	put(&b, recs, sizeof(*recs) * nrec);
	for (int i = 0; i < nstreams; i++) {
		uint64_t a = (uintptr_t)streams[i];

		put(&b, &a, sizeof(a));
	}
	if (paths.len)
		put(&b, paths.data, paths.len);
	if (b.failed || paths.failed) {
		ret = why_set(why, -ENOMEM, "out of memory recording open files");
		goto out;
	}
	((struct files_header *)b.data)->bytes = b.len;
	if (section_buf_fill(&out, b.data, b.len, len)) {
		ret = why_set(why, -ENOMEM, "out of memory recording open files");
		goto out;
	}
	*data = out.data;
	fds_checkpoint_sizes(id, dev, ino, size, nwritten);
out:
	free(b.data);
	free(paths.data);
	return ret;
}

/* --- the restart ------------------------------------------------------------------- */

/* What fds_restart_check read and opened, for fds_restart_apply. Runtime
 * memory: the image's pages are about to be overwritten. */
static struct file_record *recs;
static char **rec_paths;
static char **payloads; /* per record made again (fds_event.c): its payload */
static size_t *payload_lens;
static int *opened;	   /* per record: the file opened again (first of its description) */
static int *first;	   /* per record: the first record of its description */
static uint32_t *new_desc; /* per record: its description in this process */
static int nrecs;
static FILE **saved_streams;
static int nsaved_streams;
static uint64_t restored_id;

static void forget(void)
{
	for (int i = 0; i < nrecs; i++) {
		if (opened && opened[i] >= 0)
			close(opened[i]);
		if (rec_paths)
			free(rec_paths[i]);
		if (payloads)
			free(payloads[i]);
	}
	free(payloads);
	free(payload_lens);
	payloads = NULL;
	payload_lens = NULL;
	free(recs);
	free(rec_paths);
	free(opened);
	free(saved_streams);
	free(first);
	free(new_desc);
	first = NULL;
	new_desc = NULL;
	recs = NULL;
	rec_paths = NULL;
	opened = NULL;
	saved_streams = NULL;
	nrecs = nsaved_streams = 0;
}

/* The first record of i's description. */
static int first_of(int i)
{
	for (int j = 0; j < i; j++)
		if (recs[j].desc == recs[i].desc)
			return j;
	return i;
}

/* Copy the region's contents into runtime memory, checking every bound
 * (its crc was checked, its sense was not). */
static int parse(const void *data, size_t len, struct why *why)
{
	const struct files_header *h = data;
	const char *base = data;
	const uint64_t *addrs;

	if (len < sizeof(*h) || memcmp(h->magic, STASIS_FILES_MAGIC, 8) ||
	    h->version != STASIS_FILES_VERSION || h->bytes > len || h->nfiles > FDS_RANGE_MAX ||
	    h->nstreams > MAX_STREAMS ||
	    sizeof(*h) + sizeof(*recs) * h->nfiles + sizeof(uint64_t) * h->nstreams > h->bytes) {
		return why_set(why, -EBADMSG, "the record of open files in the image is damaged");
	}
	nrecs = (int)h->nfiles;
	recs = calloc(nrecs + 1, sizeof(*recs));
	rec_paths = calloc(nrecs + 1, sizeof(*rec_paths));
	opened = calloc(nrecs + 1, sizeof(*opened));
	saved_streams = calloc(h->nstreams + 1, sizeof(*saved_streams));
	first = calloc(nrecs + 1, sizeof(*first));
	new_desc = calloc(nrecs + 1, sizeof(*new_desc));
	payloads = calloc(nrecs + 1, sizeof(*payloads));
	payload_lens = calloc(nrecs + 1, sizeof(*payload_lens));
	if (!payloads || !payload_lens ||
	    !recs || !rec_paths || !opened || !saved_streams || !first || !new_desc) {
		return why_set(why, -ENOMEM, "out of memory reading the open files");
	}
	memcpy(recs, base + sizeof(*h), sizeof(*recs) * nrecs);
	addrs = (const uint64_t *)(base + sizeof(*h) + sizeof(*recs) * nrecs);
	for (uint32_t i = 0; i < h->nstreams; i++) {
		if (!arena_contains((void *)(uintptr_t)addrs[i])) {
			return why_set(why, -EBADMSG,
				       "the record of open files in the image is damaged");
		}
		saved_streams[nsaved_streams++] = (FILE *)(uintptr_t)addrs[i];
	}
	for (int i = 0; i < nrecs; i++) {
		struct file_record *r = &recs[i];

		const char *made = fds_event_name(r->kind);

		opened[i] = -1;
		if (r->path_offset > h->bytes || r->path_len > h->bytes - r->path_offset ||
		    (!made && r->path_len >= PATH_MAX) || r->fd < 3 || r->kind < FILE_REGULAR ||
		    r->kind > FILE_DELETED || (r->kind == FILE_STANDARD && r->rdev > 2)) {
			return why_set(why, -EBADMSG,
				       "the record of open files in the image is damaged");
		}
		first[i] = first_of(i);
		if (made) {
			/* Its payload, not a path: the name says what it is. */
			payloads[i] = malloc(r->path_len + 1);
			if (!payloads[i])
				return why_set(why, -ENOMEM, "out of memory reading the open files");
			memcpy(payloads[i], base + r->path_offset, r->path_len);
			payload_lens[i] = r->path_len;
			rec_paths[i] = strdup(made);
		} else {
			rec_paths[i] = strndup(base + r->path_offset, r->path_len);
		}
		if (!rec_paths[i]) {
			return why_set(why, -ENOMEM, "out of memory reading the open files");
		}
	}
	return 0;
}

/* A checkpoint taken before the program overwrote one of its files in
 * place cannot be put back (fds.c overwritten()). */
static int check_overwritten(struct session *s, uint64_t id, struct why *why)
{
	char mark[4200], line[PATH_MAX + 32];
	FILE *f;
	int ret = 0;

	snprintf(mark, sizeof(mark), "%s/overwritten.r%d", s->store.dir, s->rank);
	f = fopen(mark, "re");
	if (!f)
		return 0;
	while (!ret && fgets(line, sizeof(line), f)) {
		char *tab = strchr(line, '\t'), *nl = strchr(line, '\n');
		unsigned long long after = strtoull(line, NULL, 10);

		if (!tab || after < id)
			continue;
		if (nl)
			*nl = 0;
		ret = why_set(
		    why, -ESTALE,
		    "%s was written in place after checkpoint %llu was taken, and a restart "
		    "cannot undo that (%s): start the run again from its beginning",
		    tab + 1, after, mark);
	}
	fclose(f);
	return ret;
}

static bool written_elsewhere(int i)
{
	for (int j = 0; j < nrecs; j++)
		if (recs[j].kind == FILE_REGULAR && recs[j].ino == recs[i].ino &&
		    (recs[j].flags & O_ACCMODE) != O_RDONLY)
			return true;
	return false;
}

int fds_reopen_flags(const struct file_record *r)
{
	int keep = O_ACCMODE | O_APPEND | O_NONBLOCK | O_DSYNC | O_SYNC | O_DIRECT | O_PATH;

	return (int)(r->flags & (uint32_t)keep) | O_CLOEXEC | O_NOCTTY |
	       (r->kind == FILE_DIRECTORY ? O_DIRECTORY : 0);
}

/* Open record i's file again and compare it with the record. */
static int open_again(int i, struct why *why)
{
	const struct file_record *r = &recs[i];
	const char *p = rec_paths[i];
	struct stat st;
	int k = open(p, fds_reopen_flags(r));

	if (k < 0) {
		if (errno == ENOENT)
			return why_set(why, -errno, "%s (descriptor %d) is missing", p, r->fd);
		return why_set(why, -errno, "%s (descriptor %d): %s", p, r->fd, strerror(errno));
	}
	opened[i] = k;
	if (fstat(k, &st)) {
		return why_set(why, -errno, "%s: %s", p, strerror(errno));
	}
	if (r->kind == FILE_DEVICE) {
		if (st.st_rdev != r->rdev || !S_ISCHR(st.st_mode)) {
			return why_set(why, -ENODEV, "%s (descriptor %d) is not the device it was",
				       p, r->fd);
		}
		return 0;
	}
	if (st.st_ino != r->ino) {
		return why_set(
		    why, -ESTALE,
		    "%s (descriptor %d) is not the %s the program had open: it was replaced "
		    "after the checkpoint",
		    p, r->fd, r->kind == FILE_DIRECTORY ? "directory" : "file");
	}
	if (r->kind != FILE_REGULAR)
		return 0;
	if ((r->flags & O_ACCMODE) != O_RDONLY || written_elsewhere(i)) {
		if (session_get() && session_get()->images_rebuilt)
			pr_warn("%s (descriptor %d): if the program overwrote bytes of it in "
				"place since the checkpoint, they cannot be put back: its undo "
				"record was lost with this rank's node",
				p, r->fd);
		/* Cut shorter after the checkpoint, its undo record puts the
		 * length back. */
		if ((uint64_t)st.st_size < r->size && !undo_restores(r->dev, r->ino)) {
			return why_set(
			    why, -ESTALE,
			    "%s (descriptor %d) is shorter than at the checkpoint (%lld bytes, "
			    "was %llu): what the program wrote before it is lost",
			    p, r->fd, (long long)st.st_size, (unsigned long long)r->size);
		}
		return 0;
	}
	if ((uint64_t)st.st_size != r->size || st.st_mtim.tv_sec != r->mtime_sec ||
	    st.st_mtim.tv_nsec != r->mtime_nsec) {
		if ((uint64_t)st.st_size != r->size)
			return why_set(
			    why, -ESTALE,
			    "%s (descriptor %d, read-only) changed after the checkpoint: "
			    "%lld bytes, was %llu",
			    p, r->fd, (long long)st.st_size, (unsigned long long)r->size);
		return why_set(why, -ESTALE,
			       "%s (descriptor %d, read-only) changed after the checkpoint: "
			       "modified at %lld.%09ld, was %lld.%09lld",
			       p, r->fd, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
			       (long long)r->mtime_sec, (long long)r->mtime_nsec);
	}
	return 0;
}

/* The number must be the program's in this process too: reserved, or
 * held by the restarted program's own opens before MPI_Init. */
static int number_free(int i, struct why *why)
{
	const struct fds_slot *sl = fds_slot(recs[i].fd);
	char holder[PATH_MAX];

	if (sl && sl->state != SLOT_OTHER)
		return 0;
	if (!sl) {
		return why_set(
		    why, -EMFILE,
		    "descriptor %d (%s) is above the %d this process keeps for the program",
		    recs[i].fd, rec_paths[i], fds_range() - 1);
	}
	fds_path_of(recs[i].fd, holder, sizeof(holder));
	return why_set(
	    why, -EBUSY,
	    "descriptor %d (%s) is held by the restarted process already (%s, open before "
	    "stasis loaded)",
	    recs[i].fd, rec_paths[i], holder[0] ? holder : "unknown");
}

static int check(struct session *s, uint64_t id, const void *data, size_t len, struct why *why)
{
	int ret = check_overwritten(s, id, why);

	if (!ret)
		ret = undo_restart_check(s, id, why);
	if (ret || !data)
		return ret;
	if (!fds_range()) {
		return why_set(why, -EMFILE, "this process keeps no descriptors for the program");
	}
	ret = parse(data, len, why);
	for (int i = 0; !ret && i < nrecs; i++) {
		ret = number_free(i, why);
		if (ret || recs[i].kind == FILE_STANDARD || first[i] != i || opened[i] >= 0)
			continue;
		if (fds_event_name(recs[i].kind))
			ret = fds_event_make(recs, payloads, payload_lens, opened, nrecs, i, why);
		else
			ret = open_again(i, why);
	}
	return ret;
}

/* CHECK: every file the image names is there, no shorter, the same file,
 * its number free; each opened, nothing touched. Local: the engine agrees. */
static int files_part_check(const struct restart_input *in, struct why *why)
{
	const struct section *sec = restart_section(in, SECTION_FILES);
	int ret;

	forget();
	restored_id = in->id;
	ret = check(session_get(), in->id, sec->data, sec->len, why);
	if (ret) {
		forget();
		/* A failure that said nothing still names its errno. */
		return why_set(why, ret, "%s", strerror(-ret));
	}
	return 0;
}

/* The restarted program's own streams (opened before MPI_Init) are about
 * to be overwritten by the checkpoint's memory: out of libc's list. */
static void unlink_own_streams(void)
{
	static FILE *own[MAX_STREAMS];
	int n = program_streams(own, MAX_STREAMS);

	for (int i = 0; i < n; i++)
		_IO_un_link(own[i]);
}

static int apply(struct why *why)
{
	static uint64_t dev[FDS_RANGE_MAX], ino[FDS_RANGE_MAX], size[FDS_RANGE_MAX];
	int nwritten = 0;

	/* The files written in place go back to the checkpoint's content
	 * first: what follows compares and cuts lengths. */
	int ret0 = undo_restart_apply(session_get(), restored_id, why);

	if (ret0)
		return ret0;
	unlink_own_streams();
	fds_release_all();
	for (int i = 0; i < nrecs; i++) {
		struct file_record *r = &recs[i];
		int f = first[i], k = r->kind == FILE_STANDARD ? (int)r->rdev : opened[f], ret;

		if (f == i && r->kind == FILE_REGULAR && (r->flags & O_ACCMODE) != O_RDONLY) {
			struct stat st;

			if (!fstat(k, &st) && (uint64_t)st.st_size > r->size &&
			    ftruncate(k, r->size)) {
				return why_set(why, -errno, "cannot cut %s back to %llu bytes: %s",
					       rec_paths[i], (unsigned long long)r->size,
					       strerror(errno));
			}
			dev[nwritten] = r->dev;
			ino[nwritten] = r->ino;
			size[nwritten++] = r->size;
		}
		if (f == i && (r->kind == FILE_REGULAR || r->kind == FILE_DIRECTORY) &&
		    lseek(k, (off_t)r->offset, SEEK_SET) < 0) {
			return why_set(why, -errno, "cannot seek %s to %llu: %s", rec_paths[i],
				       (unsigned long long)r->offset, strerror(errno));
		}
		new_desc[i] = f == i ? fds_new_desc() : new_desc[f];
		ret =
		    fds_install(k, r->fd, new_desc[i], r->kind == FILE_STANDARD ? (int)r->rdev : -1,
				(r->fd_flags & FD_CLOEXEC) != 0);
		if (ret) {
			return why_set(why, ret, "cannot put %s back as descriptor %d: %s",
				       rec_paths[i], r->fd, strerror(-ret));
		}
	}
	/* Every descriptor at its number: what epoll instances watched. */
	for (int i = 0; i < nrecs; i++) {
		int ret = first[i] == i ? fds_event_register(&recs[i], payloads[i],
							     payload_lens[i], why)
					: 0;

		if (ret)
			return ret;
	}
	fds_checkpoint_sizes(restored_id, dev, ino, size, nwritten);
	fds_set_restored();
	return 0;
}

/* REATTACH: after the memory is back, cut written files back to their
 * lengths, put every descriptor at its number with its offset, and take the
 * restart's own streams out of libc's list. */
static int files_part_reattach(const struct restart_input *in, struct why *why)
{
	int ret = apply(why);

	(void)in;
	for (int i = 0; i < nrecs; i++)
		if (opened[i] >= 0) {
			close(opened[i]);
			opened[i] = -1;
		}
	/* A failure that said nothing still names its errno. */
	return ret ? why_set(why, ret, "%s", strerror(-ret)) : 0;
}

void fds_relink_streams(void)
{
	/* Oldest first: each goes to the head of the list, as when opened. */
	for (int i = nsaved_streams - 1; i >= 0; i--) {
		saved_streams[i]->_flags &= ~STDIO_LINKED;
		_IO_link_in(saved_streams[i]);
	}
}

/* --- the files part (session/part.h) -------------------------------------------------- */

static int files_part_save(uint64_t id, struct section_list *out, struct why *why)
{
	void *data;
	size_t len;
	int ret = fds_save(id, &data, &len, why);

	if (ret)
		return ret;
	return section_add(out, SECTION_FILES, data, len, why);
}

const struct part_ops files_part = {
    .name = "files",
    .save = files_part_save,
    .save_early = true,
    .check = files_part_check,
    .reattach = files_part_reattach,
    .on_temp_stack = fds_relink_streams,
};
