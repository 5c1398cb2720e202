/* stasis-inspect: finding job directories and reading what each checkpoint
 * is (image headers, commit records). A job of the node-local level may
 * span several directories (one per node, STASIS_DIR=.../node%n): they
 * are one job when they have the same name and level. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "inspect.h"
#include "store.h"

#define MARKER "flush-level" /* engine/flush.c */

static void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size);
	if (!p) {
		fprintf(stderr, "stasis-inspect: out of memory\n");
		exit(1);
	}
	return p;
}

void inspect_problem(struct inspect *in, const char *fmt, ...)
{
	va_list ap;

	in->problems = true;
	fputs("stasis-inspect: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* "ckpt-<id>.r<rank>.<img|red|done>" (not the .tmp/.rebuild of a write
 * under way). */
static bool parse_name(const char *name, uint64_t *id, int *rank, char *ext)
{
	const char *rest;

	if (!store_parse_name(name, id, rank, &rest) ||
	    (strcmp(rest, "img") && strcmp(rest, "red") && strcmp(rest, "done")))
		return false;
	*ext = rest[0];
	return true;
}

/* A job directory: checkpoint files, a rank's lock file, the flush
 * level's marker (a job that started but has no checkpoint yet is one) or
 * libfenix's fenix/ directory. */
static bool is_job_dir(const char *dir)
{
	struct dirent *de;
	bool yes = false;
	DIR *d = opendir(dir);
	uint64_t id;
	int rank;
	char ext;

	if (!d)
		return false;
	while (!yes && (de = readdir(d)))
		yes = parse_name(de->d_name, &id, &rank, &ext) || !strncmp(de->d_name, "lock.r", 6) ||
		      !strcmp(de->d_name, MARKER) || !strcmp(de->d_name, "fenix");
	closedir(d);
	return yes;
}

struct ckpt *inspect_find(struct job *j, uint64_t id)
{
	for (int i = 0; i < j->nck; i++)
		if (j->ck[i].id == id)
			return &j->ck[i];
	return NULL;
}

static struct ckpt *ckpt_get(struct job *j, uint64_t id)
{
	struct ckpt *c = inspect_find(j, id);
	int at = 0;

	if (c)
		return c;
	while (at < j->nck && j->ck[at].id < id)
		at++;
	j->ck = xrealloc(j->ck, (j->nck + 1) * sizeof(*j->ck));
	memmove(&j->ck[at + 1], &j->ck[at], (j->nck - at) * sizeof(*j->ck));
	j->nck++;
	j->ck[at] = (struct ckpt){.id = id};
	return &j->ck[at];
}

static struct rank_files *rank_get(struct ckpt *c, int rank)
{
	if (rank >= c->cap) {
		int cap = rank + 1 > 2 * c->cap ? rank + 1 : 2 * c->cap;

		c->r = xrealloc(c->r, cap * sizeof(*c->r));
		memset(&c->r[c->cap], 0, (cap - c->cap) * sizeof(*c->r));
		c->cap = cap;
	}
	return &c->r[rank];
}

static void add_job_dir(struct inspect *in, const char *dir)
{
	char marker[PATH_MAX + 16], path[PATH_MAX + 80];
	const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
	struct stat st;
	struct job *j = NULL;
	struct dirent *de;
	DIR *d;
	bool flush;

	snprintf(marker, sizeof(marker), "%s/" MARKER, dir);
	flush = stat(marker, &st) == 0;
	for (int i = 0; i < in->njobs && !j; i++)
		if (!strcmp(in->jobs[i].name, base) && in->jobs[i].flush == flush)
			j = &in->jobs[i];
	for (int i = 0; j && i < j->ndirs; i++)
		if (!strcmp(j->dirs[i], dir))
			return; /* found twice (two roots) */
	if (!j) {
		in->jobs = xrealloc(in->jobs, (in->njobs + 1) * sizeof(*in->jobs));
		j = &in->jobs[in->njobs++];
		*j = (struct job){.flush = flush};
		snprintf(j->name, sizeof(j->name), "%s", base);
	}
	j->dirs = xrealloc(j->dirs, (j->ndirs + 1) * sizeof(*j->dirs));
	j->dirs[j->ndirs++] = strdup(dir);
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		struct rank_files *rf;
		uint64_t id;
		int rank;
		char ext, **slot;

		if (!parse_name(de->d_name, &id, &rank, &ext))
			continue;
		rf = rank_get(ckpt_get(j, id), rank);
		slot = ext == 'i' ? &rf->img : ext == 'r' ? &rf->red : &rf->done;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (*slot) /* the same file in two node directories */
			inspect_problem(in, "%s: also in %s; the first is read", path, *slot);
		else
			*slot = strdup(path);
	}
	if (d)
		closedir(d);
}

/* Checkpoints hold a program's whole memory: stasis reads only the
 * caller's, as it writes them (0700 directories it owns). */
static bool owned(struct inspect *in, const char *dir, const struct stat *st)
{
	if (st->st_uid == geteuid())
		return true;
	inspect_problem(in,
			"%s: owned by uid %u, not by you (uid %u): checkpoints hold a program's "
			"whole memory, stasis-inspect reads only your own",
			dir, (unsigned)st->st_uid, (unsigned)geteuid());
	return false;
}

static int scan_dir(struct inspect *in, const char *dir, int depth, bool named)
{
	char sub[PATH_MAX];
	struct dirent *de;
	struct stat st;
	int found = 0;
	DIR *d;

	if (stat(dir, &st)) {
		if (named)
			inspect_problem(in, "%s: %s", dir, strerror(errno));
		return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (named)
			inspect_problem(in, "%s: not a directory", dir);
		return 0;
	}
	if (is_job_dir(dir)) {
		if (!owned(in, dir, &st))
			return -1;
		add_job_dir(in, dir);
		return 1;
	}
	if (named && !owned(in, dir, &st))
		return -1;
	if (depth == 2 || !(d = opendir(dir)))
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name) >= (int)sizeof(sub))
			continue;
		if (!stat(sub, &st) && S_ISDIR(st.st_mode)) {
			int n = scan_dir(in, sub, depth + 1, false);

			if (n < 0)
				found = found ? found : -1;
			else
				found += n;
		}
	}
	closedir(d);
	return found;
}

bool inspect_scan(struct inspect *in, const char *root)
{
	int n = scan_dir(in, root, 0, true);
	struct stat st;

	if (n == 0 && !stat(root, &st) && S_ISDIR(st.st_mode))
		inspect_problem(in,
				"%s: not a stasis checkpoint directory (no job directory with "
				"ckpt-<id>.r<rank>.* files or a fenix/ directory in it or two levels below)",
				root);
	return n > 0;
}

static void read_rank(struct ckpt *c, int rank)
{
	struct rank_files *rf = &c->r[rank];
	struct image *img;
	struct stat st;

	if (rf->img && !image_open(rf->img, &img, NULL)) {
		const struct image_header *h = image_header(img);

		rf->header_ok = h->ckpt_id == c->id && h->rank == (uint32_t)rank;
		rf->hdr = *h;
		image_close(img);
		if (rf->header_ok && !stat(rf->img, &st))
			rf->img_bytes = st.st_size;
	}
	if (rf->header_ok) {
		if ((int)rf->hdr.nranks > c->nranks)
			c->nranks = rf->hdr.nranks;
		if (!c->have_header || rf->hdr.created_ns < c->created_ns)
			c->created_ns = rf->hdr.created_ns;
		if (!c->have_header) {
			c->kind = rf->hdr.kind;
			c->parent = rf->hdr.parent_id;
			c->codec = rf->hdr.codec;
		}
		c->have_header = true;
	}
	if (rf->done) {
		struct store st_ = {.rank = rank};
		struct commit_record rec;
		const char *slash = strrchr(rf->done, '/');

		snprintf(st_.dir, sizeof(st_.dir), "%.*s", (int)(slash - rf->done), rf->done);
		rf->record_ok = store_read_commit(&st_, c->id, &rec, NULL) == 0;
		if (rf->record_ok) {
			c->records++;
			if ((int)rec.nranks > c->nranks)
				c->nranks = rec.nranks;
			if (!c->have_header)
				c->parent = rec.parent_id;
		}
	}
}

void inspect_read(struct inspect *in)
{
	for (int i = 0; i < in->njobs; i++) {
		struct job *j = &in->jobs[i];

		/* The flush level keeps images only: the shared file system is
		 * its redundancy. */
		j->scheme = j->flush ? "none" : "single";
		for (int k = 0; k < j->nck; k++) {
			struct ckpt *c = &j->ck[k];

			for (int r = 0; r < c->cap; r++)
				read_rank(c, r);
			if (c->nranks > c->cap)
				rank_get(c, c->nranks - 1);
			/* Node-local: any rank's record proves all ranks complete
			 * (two-phase commit); flush level: every rank's own. */
			c->complete = j->flush ? c->nranks > 0 && c->records == c->nranks
					       : c->records > 0;
			if (c->nranks > j->nranks)
				j->nranks = c->nranks;
		}
		/* The scheme, from the newest redundancy file that reads whole. */
		for (int k = j->nck - 1; k >= 0 && !j->flush && !strcmp(j->scheme, "single"); k--)
			for (int r = 0; r < j->ck[k].cap; r++) {
				struct redundancy_info info;

				if (!j->ck[k].r[r].red ||
				    redundancy_info_read(j->ck[k].r[r].red, &info, NULL))
					continue;
				j->scheme = info.scheme;
				j->set_size = info.p;
				j->tolerance = info.tolerance;
				redundancy_info_free(&info);
				break;
			}
	}
}

uint64_t inspect_newest_complete(const struct job *j)
{
	for (int k = j->nck - 1; k >= 0; k--)
		if (j->ck[k].complete)
			return j->ck[k].id;
	return 0;
}
