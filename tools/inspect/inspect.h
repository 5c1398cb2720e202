/* stasis-inspect: what is on disk, read through the format's own readers
 * (format.h, image.h, store.h, redundancy_read.h). Nothing is written:
 * --verify is a dry run of what a restart would check and rebuild. */
#ifndef STASIS_INSPECT_H
#define STASIS_INSPECT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "format.h"
#include "redundancy_read.h"

enum file_state { FILE_ABSENT, FILE_OK, FILE_BAD };

/* One rank's files of one checkpoint. */
struct rank_files {
	char *img, *red, *done; /* paths, NULL when absent */
	bool header_ok;
	struct image_header hdr; /* when header_ok */
	uint64_t img_bytes;
	bool record_ok;
	/* --verify */
	enum file_state image, redundancy;
	char *image_err, *red_err;
	bool in_set; /* some valid redundancy file names this rank's set */
	struct redundancy_info red_info; /* when redundancy == FILE_OK */
};

/* A redundancy set of one checkpoint, as its members' files describe it. */
struct set_verdict {
	int set_id, p, tolerance;
	const char *scheme;
	int *world;
	bool *data_lost, *red_lost;
	bool feasible;
};

struct ckpt {
	uint64_t id;
	struct rank_files *r; /* [cap], by rank */
	int cap;
	int nranks; /* from headers and commit records */
	int records;
	bool complete;
	bool have_header; /* kind, parent, created from some rank's header */
	uint32_t kind;
	uint32_t codec; /* enum image_codec of its images (STASIS_COMPRESS) */
	uint64_t parent;
	uint64_t created_ns;
	/* --verify */
	bool verified, whole, rebuildable, restorable;
	struct set_verdict *sets;
	int nsets;
};

struct job {
	char name[256];
	bool flush; /* the flush level (STASIS_FLUSH_DIR) */
	char **dirs;
	int ndirs;
	struct ckpt *ck; /* ascending ids */
	int nck;
	int nranks;
	const char *scheme; /* from a redundancy file, "single" without any */
	int set_size, tolerance;
	char *verdicts; /* --verify's lines, printed after the listing */
};

struct inspect {
	struct job *jobs;
	int njobs;
	bool problems; /* something found wrong: exit 1 */
	bool json;
	FILE *text; /* human lines: stdout, or stderr under --json */
};

/* scan.c */
void inspect_problem(struct inspect *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Find the job directories under root (itself, or up to two levels
 * below); false (with a problem line) when there are none. */
bool inspect_scan(struct inspect *in, const char *root);
/* Read the headers and commit records of every job found. */
void inspect_read(struct inspect *in);
struct ckpt *inspect_find(struct job *j, uint64_t id);
/* Newest complete checkpoint of the job (0: none). */
uint64_t inspect_newest_complete(const struct job *j);

/* verify.c: check every file and judge every set, writing nothing. */
void inspect_verify(struct inspect *in, struct job *j);
/* Newest checkpoint a restart could use, over both levels of a job name
 * (after inspect_verify); *flush set when it comes from the flush level. */
uint64_t inspect_restart_from(const struct inspect *in, const char *name, bool *flush);

/* where.c: one rank's stack at checkpoint id, symbolised; the frames as
 * printable lines (malloc'd) into *lines, their count returned, -1 with
 * *lines = NULL and why set when the image has none. */
struct where_line {
	char *function, *file, *object;
	int line;
	uint64_t ip;
};
int inspect_where(const struct rank_files *rf, struct where_line **lines, struct why *why);
void inspect_where_free(struct where_line *lines, int n);

/* fenix.c: list (and with verify check) the job's Fenix groups and
 * snapshots, text only; problems through inspect_problem. */
struct json;
/* The job's Fenix groups: as text, or into js ("fenix_groups") when given. */
void inspect_fenix(struct inspect *in, const struct job *j, bool verify, struct json *js);

/* json.c: a small writer for one document. */
struct json {
	FILE *f;
	int depth;
	bool first[32];
};
void json_begin(struct json *js, FILE *f);
void json_open(struct json *js, const char *key, char bracket); /* '{' or '[' */
void json_close(struct json *js, char bracket);
void json_str(struct json *js, const char *key, const char *v); /* NULL: null */
void json_u64(struct json *js, const char *key, uint64_t v);
void json_int(struct json *js, const char *key, long long v);
void json_bool(struct json *js, const char *key, bool v);
void json_null(struct json *js, const char *key);
void json_end(struct json *js);
/* One redundancy set's verdict as a JSON object, its members under the
 * key members ("ranks" for checkpoints, "slots" for Fenix snapshots). */
void inspect_set_json(struct json *js, const struct set_verdict *v, const char *members);

#endif
