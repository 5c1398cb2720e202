/* Small file helpers shared by the modules that write checkpoint files. */
#ifndef STASIS_FILES_H
#define STASIS_FILES_H

/* fsync() a directory, so that a rename or unlink in it is durable.
 * Returns 0 or -errno. */
int files_sync_dir(const char *dir);
/* The same for the directory that holds path. */
int files_sync_parent(const char *path);

#endif
