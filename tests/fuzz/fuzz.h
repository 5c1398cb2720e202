/* Shared by the libFuzzer targets of tests/fuzz/: a private scratch
 * directory, the input written to a file there (the readers under test
 * take paths), and the seeds each target writes when asked
 * (STASIS_FUZZ_SEEDS=<dir>: LLVMFuzzerInitialize writes valid files made by
 * stasis's own writers there and exits).
 *
 * The first byte of every input is a set of flags; the rest is the file.
 * A flag asks the harness to recompute one of the file's checksums before
 * the reader sees it, so that mutations get past the crc checks to the
 * code behind them (what a writer bug, rather than a flipped bit, would
 * produce). */
#ifndef STASIS_FUZZ_H
#define STASIS_FUZZ_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fuzz_dir[256];

static void fuzz_die(const char *what)
{
	perror(what);
	exit(2);
}

/* Make the scratch directory (0700, as stasis's own) once. */
static void fuzz_scratch(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/stasis-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(fuzz_dir))
		fuzz_die("mkdtemp");
}

/* Replace the file at path with len bytes (0600). */
static void fuzz_put(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || (len && write(fd, buf, len) != (ssize_t)len))
		fuzz_die(path);
	close(fd);
}

/* One seed: flags byte + the file at path, into dir/name. */
static void fuzz_seed(const char *dir, const char *name, uint8_t flags, const char *path)
{
	char out[512];
	struct stat st;
	unsigned char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st))
		fuzz_die(path);
	buf = malloc(st.st_size + 1);
	if (!buf || pread(fd, buf + 1, st.st_size, 0) != st.st_size)
		fuzz_die(path);
	close(fd);
	buf[0] = flags;
	snprintf(out, sizeof(out), "%s/%s", dir, name);
	fuzz_put(out, buf, st.st_size + 1);
	free(buf);
}

#endif
