/* Small file helpers shared by the modules that write checkpoint files. */
#ifndef STASIS_FSUTIL_H
#define STASIS_FSUTIL_H

/* fsync() a directory, so that a rename or unlink in it is durable.
 * Returns 0 or -errno. */
int fsutil_sync_dir(const char *dir);
/* The same for the directory that holds path. */
int fsutil_sync_parent(const char *path);

#include <stddef.h>

#include "why.h"

/* Open a checkpoint file (flags: O_RDONLY or O_RDWR) as stasis trusts
 * one: not through a symbolic link (O_NOFOLLOW), a regular file, owned by
 * us and with no access for group or others (it holds a program's memory,
 * and a file someone else may write is no evidence of what we wrote).
 * Returns the descriptor, or -errno with why holding one line:
 * "<path>: missing", "<path> is a symbolic link: refused" (-ELOOP),
 * "<path> is not a regular file: refused" (-EBADMSG), "<path> is owned by
 * uid N, not by you: refused" or "<path> has mode 0644, stasis writes 0600:
 * refused" (-EPERM). */
int fsutil_open_private(const char *path, int flags, struct why *why);
/* Write all n bytes of p to fd, again after EINTR and short writes.
 * Returns 0 or -errno (-EIO for a write of nothing). */
int fsutil_write_all(int fd, const void *p, size_t n);

#endif
