/* Names the program made or removed after a checkpoint (names.h). */
#define LOG_PREFIX "names: "
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fds.h"
#include "format.h"
#include "log.h"
#include "names.h"
#include "session.h"
#include "undo.h"

struct name {
	uint32_t op;
	char *path;
};

/* Runtime memory: what the run a restart replaced did and the restarted
 * program has not done again yet; and what CHECK read of the section. */
struct names {
	struct name *v;
	int n, cap;
};
static struct names pending, loaded;

static int add(struct names *l, uint32_t op, const char *path)
{
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 16;
		struct name *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].op = op;
	if (!(l->v[l->n].path = strdup(path)))
		return -ENOMEM;
	l->n++;
	return 0;
}

static void clear(struct names *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->v[i].path);
	l->n = 0;
}

/* Take (op, path) off the list: whether it was there. */
static bool take(struct names *l, uint32_t op, const char *path)
{
	for (int i = 0; i < l->n; i++)
		if (l->v[i].op == op && !strcmp(l->v[i].path, path)) {
			free(l->v[i].path);
			l->v[i] = l->v[--l->n];
			return true;
		}
	return false;
}

/* path as an absolute one: from dirfd's directory or the working one.
 * Not normalised: the restarted program names it as the killed run did. */
static bool absolute(int dirfd, const char *path, char *out, size_t len)
{
	char base[PATH_MAX];

	if (!path || !*path)
		return false;
	if (path[0] == '/')
		return snprintf(out, len, "%s", path) < (int)len;
	if (dirfd == AT_FDCWD) {
		if (!getcwd(base, sizeof(base)))
			return false;
	} else {
		fds_path_of(dirfd, base, sizeof(base));
		if (base[0] != '/')
			return false;
	}
	return snprintf(out, len, "%s/%s", base, path) < (int)len;
}

void names_done(uint32_t op, int dirfd, const char *path)
{
	FDS_LOCKED(); /* the program's threads share the list */
	struct session *s = session_get();
	char abs[PATH_MAX];

	if (!s || !s->last_id || !absolute(dirfd, path, abs, sizeof(abs)))
		return;
	take(&pending, op, abs); /* done for real: nothing left to pass over */
	undo_note_name(op, abs, s->last_id);
}

bool names_redone(uint32_t op, int dirfd, const char *path)
{
	FDS_LOCKED();
	char abs[PATH_MAX];

	return pending.n && absolute(dirfd, path, abs, sizeof(abs)) && take(&pending, op, abs);
}

int names_pending_add(uint32_t op, const char *path)
{
	return add(&pending, op, path);
}

/* --- the part --------------------------------------------------------------------- */

static struct section_buf out;

static int names_save(uint64_t id, struct section_list *l, struct why *why)
{
	struct names_record h = {.nnames = (uint32_t)pending.n};
	size_t bytes = sizeof(h), len;
	char *buf, *at;
	int ret;

	(void)id;
	if (!pending.n)
		return 0;
	for (int i = 0; i < pending.n; i++)
		bytes += sizeof(struct name_entry) + ((strlen(pending.v[i].path) + 1 + 7) & ~7ul);
	buf = calloc(1, bytes);
	if (!buf)
		return why_set(why, -ENOMEM, "no memory for the record of names");
	memcpy(h.magic, STASIS_NAMES_MAGIC, 8);
	h.bytes = bytes;
	memcpy(buf, &h, sizeof(h));
	at = buf + sizeof(h);
	for (int i = 0; i < pending.n; i++) {
		struct name_entry e = {.op = pending.v[i].op,
				       .path_len = (uint32_t)strlen(pending.v[i].path) + 1};

		memcpy(at, &e, sizeof(e));
		memcpy(at + sizeof(e), pending.v[i].path, e.path_len);
		at += sizeof(e) + ((e.path_len + 7) & ~7u);
	}
	ret = section_buf_fill(&out, buf, bytes, &len);
	free(buf);
	if (ret)
		return why_set(why, -ENOMEM, "no memory for the record of names");
	return section_add(l, SECTION_NAMES, out.data, len, why);
}

/* CHECK: the record is sound; its names wait for the memory to be back. */
static int names_check(const struct restart_input *in, struct why *why)
{
	const struct section *sec = restart_section(in, SECTION_NAMES);
	const char *base = sec->data;
	struct names_record h;
	size_t at = sizeof(h);

	clear(&loaded);
	if (!base)
		return 0;
	if (sec->len < sizeof(h))
		goto damaged;
	memcpy(&h, base, sizeof(h));
	if (memcmp(h.magic, STASIS_NAMES_MAGIC, 8) || h.bytes > sec->len)
		goto damaged;
	for (uint32_t i = 0; i < h.nnames; i++) {
		struct name_entry e;

		if (at + sizeof(e) > h.bytes)
			goto damaged;
		memcpy(&e, base + at, sizeof(e));
		at += sizeof(e);
		if (e.path_len < 2 || e.path_len > PATH_MAX || e.path_len > h.bytes - at ||
		    base[at] != '/' || base[at + e.path_len - 1] ||
		    strlen(base + at) + 1 != e.path_len || e.op < NAME_MKDIR || e.op > NAME_CREATE)
			goto damaged;
		if (add(&loaded, e.op, base + at))
			return why_set(why, -ENOMEM, "no memory for the record of names");
		at += (e.path_len + 7) & ~7u;
	}
	return 0;
damaged:
	clear(&loaded);
	return why_set(why, -EBADMSG, "the record of names made and removed is damaged");
}

/* REATTACH: the names the checkpoint carried join those of the undo
 * records (put there as the files part applied them). */
static int names_reattach(const struct restart_input *in, struct why *why)
{
	(void)in;
	for (int i = 0; i < loaded.n; i++)
		if (add(&pending, loaded.v[i].op, loaded.v[i].path))
			return why_set(why, -ENOMEM, "no memory for the record of names");
	clear(&loaded);
	return 0;
}

const struct part_ops names_part = {
    .name = "names",
    .save = names_save,
    .check = names_check,
    .reattach = names_reattach,
};
