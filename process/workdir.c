/* The working directory and umask (workdir.h). */
#define LOG_PREFIX "workdir: "
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "log.h"
#include "workdir.h"

static struct section_buf out;
static char path[PATH_MAX];
static unsigned restored_umask;
static bool have;

/* The umask, read without changing it (Linux 4.7's "Umask:" line; no
 * stdio: nothing of libc's may change while the image is made), or by
 * setting it back at once: every other thread of the program is parked. */
static unsigned current_umask(void)
{
	char buf[4096], *line;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	unsigned m;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	line = strstr(buf, "\nUmask:");
	if (line)
		return (unsigned)strtoul(line + 7, NULL, 8);
	m = umask(022);
	umask(m);
	return m;
}

static int workdir_save(uint64_t id, struct section_list *l, struct why *why)
{
	char buf[sizeof(struct workdir_record) + PATH_MAX];
	struct workdir_record *h = (struct workdir_record *)buf;
	size_t len;

	(void)id;
	if (!getcwd(buf + sizeof(*h), PATH_MAX))
		return why_set(why, -errno, "cannot read the working directory: %s",
			       strerror(errno));
	memcpy(h->magic, STASIS_WORKDIR_MAGIC, 8);
	h->umask = current_umask();
	h->path_len = (uint32_t)strlen(buf + sizeof(*h)) + 1;
	if (section_buf_fill(&out, buf, sizeof(*h) + h->path_len, &len))
		return why_set(why, -ENOMEM, "no memory for the working directory's record");
	return section_add(l, SECTION_WORKDIR, out.data, len, why);
}

/* CHECK: the record is sound and the directory is still there. */
static int workdir_check(const struct restart_input *in, struct why *why)
{
	const struct section *sec = restart_section(in, SECTION_WORKDIR);
	const struct workdir_record *h = sec->data;
	const char *p = (const char *)(h + 1);
	struct stat st;

	have = false;
	if (!h)
		return 0;
	if (sec->len < sizeof(*h) || memcmp(h->magic, STASIS_WORKDIR_MAGIC, 8) ||
	    h->path_len < 2 || h->path_len > PATH_MAX ||
	    sec->len < sizeof(*h) + h->path_len || p[h->path_len - 1] || p[0] != '/' ||
	    strlen(p) + 1 != h->path_len || h->umask > 0777)
		return why_set(why, -EBADMSG, "the record of the working directory is damaged");
	if (stat(p, &st) || !S_ISDIR(st.st_mode))
		return why_set(why, -ENOENT,
			       "the program's working directory %s is gone (%s): its relative "
			       "paths would lead elsewhere",
			       p, errno ? strerror(errno) : "not a directory");
	memcpy(path, p, h->path_len);
	restored_umask = h->umask;
	have = true;
	return 0;
}

/* REATTACH: the memory is back; the program's directory and mask are too. */
static int workdir_reattach(const struct restart_input *in, struct why *why)
{
	(void)in;
	if (!have)
		return 0;
	have = false;
	umask(restored_umask);
	if (chdir(path))
		return why_set(why, -errno, "cannot go back to the working directory %s: %s",
			       path, strerror(errno));
	return 0;
}

const struct part_ops workdir_part = {
    .name = "workdir",
    .save = workdir_save,
    .check = workdir_check,
    .reattach = workdir_reattach,
};
