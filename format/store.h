/* The checkpoint directory of one rank: <STASIS_DIR expanded>/<job key>/.
 * STASIS_DIR may hold %n (failure-domain index) and %r (rank). Directories
 * are created 0700 and must be owned by the caller; files are 0600.
 *
 * Files of checkpoint <id> for rank <r>:
 *   ckpt-<id>.r<r>.img   image (image.h)
 *   ckpt-<id>.r<r>.red   redundancy data (redundancy/)
 *   ckpt-<id>.r<r>.done  commit record (format.h), written last
 *   ckpt-<id>.r<r>.undo  bytes of the program's files the interval after
 *                        the checkpoint overwrote (process/undo.h)
 * Functions return 0 or -errno; why (if not NULL) gets one line. */
#ifndef STASIS_STORE_H
#define STASIS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "why.h"

struct store {
	char dir[4096]; /* absolute path of this rank's job directory */
	int rank;
};

/* Expand pattern (%n -> node, %r -> rank, %% -> %), append "/<job_key>",
 * create missing directories 0700, refuse a directory not owned by us or
 * accessible by group/others. create == false only checks it exists. */
int store_open(struct store *st, const char *pattern, int node, int rank, const char *job_key,
	       bool create, struct why *why);
/* Hold this rank's place in the directory for the life of the process
 * (flock on lock.r<rank>): a second job on the same checkpoints, such as a
 * rank left over from a killed run, fails with -EBUSY and why set. */
int store_lock(const struct store *st, struct why *why);
/* Expand the pattern only (for tools). */
int store_expand(const char *pattern, int node, int rank, char *out, size_t outlen);

enum store_file { STORE_IMAGE, STORE_REDUNDANCY, STORE_COMMIT, STORE_UNDO };
/* Path of a file of checkpoint id for st->rank. */
void store_path(const struct store *st, uint64_t id, enum store_file what, char *buf, size_t len);
/* File name only (no directory). */
void store_name(int rank, uint64_t id, enum store_file what, char *buf, size_t len);

/* "ckpt-<id>.r<rank>.<rest>": true with id, rank and *rest pointing after
 * the dot ("img", "img.tmp", ...). */
bool store_parse_name(const char *name, uint64_t *id, int *rank, const char **rest);

/* Write the commit record (tmp + fsync + rename + fsync dir). */
int store_commit(const struct store *st, const struct commit_record *rec, struct why *why);
/* Read and check the commit record of id: 0, -ENOENT, or -EBADMSG. */
int store_read_commit(const struct store *st, uint64_t id, struct commit_record *rec,
		      struct why *why);
/* Checkpoint ids that have any file of this rank, ascending; returns count
 * or -errno. Beyond max ids, the newest max of them. */
int store_list(const struct store *st, uint64_t *ids, int max);
/* Remove this rank's files of checkpoint id (image, redundancy, commit, undo;
 * the commit record first, so a half-removed checkpoint is never complete). */
int store_remove(const struct store *st, uint64_t id);

#endif
