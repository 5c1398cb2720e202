/* Unit test of format/store.c: STASIS_DIR expansion, directory creation and
 * refusal, file names, commit records, list and remove. Exit 0 pass, 1 fail,
 * 77 skip. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "store.h"

/* One struct why reused by the checks below, cleared before each call: the
 * first cause set is kept, and each check wants the call's own. */
static struct why *fresh(struct why *w)
{
	why_clear(w);
	return w;
}

static char base[] = "/tmp/test_store.XXXXXX";

static unsigned mode_of(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_mode & 07777 : 0xffff;
}

static void touch(const struct store *st, const char *name)
{
	char path[8192];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", st->dir, name);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	close(fd);
}

static bool exists(const struct store *st, const char *name)
{
	char path[8192];

	snprintf(path, sizeof(path), "%s/%s", st->dir, name);
	return access(path, F_OK) == 0;
}

static void test_expand(void)
{
	char out[64];

	CHECK(store_expand("/a/%n/b%r%%c", 3, 15, out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "/a/3/b15%c"));
	CHECK(store_expand("/plain", 3, 15, out, sizeof(out)) == 0 && !strcmp(out, "/plain"));
	CHECK(store_expand("%r%r%n", 0, 7, out, sizeof(out)) == 0 && !strcmp(out, "770"));
	CHECK(store_expand("/a/%x", 0, 0, out, sizeof(out)) == -EINVAL);
	CHECK(store_expand("/a/%", 0, 0, out, sizeof(out)) == -EINVAL);
	CHECK(store_expand("/a/%N", 0, 0, out, sizeof(out)) == -EINVAL);
	CHECK(store_expand("/0123456789/%r", 0, 12345, out, 16) == -ENAMETOOLONG);
	CHECK(store_expand("/0123456789/%r", 0, 1234, out, 17) == 0);
}

/* STASIS_DIR or the job directory a symbolic link, STASIS_DIR someone
 * else's or writable by others: refused, and nothing made through them. */
static void hostile(void)
{
	char real[512], link[512], pattern[600], job[700];
	struct why w = WHY_INIT;
	struct store st;
	int rc;

	snprintf(real, sizeof(real), "%s/real", base);
	snprintf(link, sizeof(link), "%s/link", base);
	CHECK(mkdir(real, 0700) == 0 && symlink(real, link) == 0);
	rc = store_open(&st, link, 0, 0, "job", true, fresh(&w));
	CHECK_ERR(rc, -ELOOP, w.msg,
		  "STASIS_DIR: %s is a symbolic link: refused (give the directory it points to, "
		  "if it is yours)",
		  link);
	snprintf(pattern, sizeof(pattern), "%s/", link); /* a slash must not follow it */
	rc = store_open(&st, pattern, 0, 0, "job", true, fresh(&w));
	CHECK(rc == -ELOOP);
	snprintf(job, sizeof(job), "%s/job", real);
	CHECK(access(job, F_OK) < 0 && errno == ENOENT);

	/* The job directory a link to a directory of ours. */
	snprintf(job, sizeof(job), "%s/j", real);
	CHECK(symlink(real, job) == 0);
	rc = store_open(&st, real, 0, 0, "j", true, fresh(&w));
	CHECK_ERR(rc, -ELOOP, w.msg, "STASIS_DIR: job directory %s is a symbolic link: refused",
		  job);

	/* Writable by others: refused, unless sticky (as /tmp). */
	CHECK(chmod(real, 0777) == 0);
	rc = store_open(&st, real, 0, 0, "job", true, fresh(&w));
	CHECK_ERR(rc, -EACCES, w.msg,
		  "STASIS_DIR: %s is writable by group or others (mode 0777): refused (chmod "
		  "go-w it, or use a directory of your own)",
		  real);
	CHECK(chmod(real, 0770) == 0);
	CHECK(store_open(&st, real, 0, 0, "job", true, fresh(&w)) == -EACCES);
	snprintf(job, sizeof(job), "%s/job", real);
	CHECK(access(job, F_OK) < 0 && errno == ENOENT);
	CHECK(chmod(real, 01777) == 0);
	rc = store_open(&st, real, 0, 0, "job", true, fresh(&w));
	CHECK_ERR(rc, 0, w.msg, "%s", w.msg);
	CHECK(chmod(real, 0700) == 0);

	/* Someone else's STASIS_DIR (needs root to make one). */
	if (geteuid() == 0) {
		CHECK(chown(real, 4321, 4321) == 0);
		rc = store_open(&st, real, 0, 0, "job", true, fresh(&w));
		CHECK_ERR(rc, -EACCES, w.msg,
			  "STASIS_DIR: %s is owned by uid 4321, not by you (uid 0): refused", real);
		CHECK(chown(real, 0, 0) == 0);
	}
}

static void test_open(void)
{
	char pattern[256], dir[512];
	struct why w = WHY_INIT;
	struct store st;
	int rc;

	/* Creation: every new component exactly 0700 whatever the umask. */
	umask(0);
	snprintf(pattern, sizeof(pattern), "%s/n%%n/r%%r/", base);
	rc = store_open(&st, pattern, 2, 5, "job-1", true, fresh(&w));
	CHECK_ERR(rc, 0, w.msg, "%s", w.msg);
	snprintf(dir, sizeof(dir), "%s/n2/r5/job-1", base);
	CHECK(!strcmp(st.dir, dir) && st.rank == 5);
	CHECK(mode_of(dir) == 0700);
	snprintf(dir, sizeof(dir), "%s/n2", base);
	CHECK(mode_of(dir) == 0700);
	snprintf(dir, sizeof(dir), "%s/n2/r5", base);
	CHECK(mode_of(dir) == 0700);
	umask(022);

	/* Again: exists, fine; create == false: fine too. */
	rc = store_open(&st, pattern, 2, 5, "job-1", true, fresh(&w));
	CHECK(rc == 0);
	rc = store_open(&st, pattern, 2, 5, "job-1", false, fresh(&w));
	CHECK(rc == 0);
	rc = store_open(&st, pattern, 2, 6, "job-1", false, fresh(&w));
	snprintf(dir, sizeof(dir), "%s/n2/r6", base);
	CHECK_ERR(rc, -ENOENT, w.msg, "STASIS_DIR: %s: missing", dir);
	rc = store_open(&st, pattern, 2, 5, "job-2", false, fresh(&w));
	snprintf(dir, sizeof(dir), "%s/n2/r5/job-2", base);
	CHECK_ERR(rc, -ENOENT, w.msg, "STASIS_DIR: job directory %s: missing", dir);

	rc = store_open(&st, "/tmp/%q/x", 0, 0, "j", true, fresh(&w));
	CHECK_ERR(rc, -EINVAL, w.msg, "STASIS_DIR: unknown %%q in /tmp/%%q/x");
	rc = store_open(&st, "/tmp/x%", 0, 0, "j", true, fresh(&w));
	CHECK(rc == -EINVAL);
	rc = store_open(&st, pattern, 0, 0, "../up", true, fresh(&w));
	CHECK(rc == -EINVAL);

	/* An existing directory with a loose mode is refused, not fixed. */
	snprintf(dir, sizeof(dir), "%s/loose/job", base);
	CHECK(mkdir(dir, 0755) < 0 && errno == ENOENT);
	snprintf(dir, sizeof(dir), "%s/loose", base);
	CHECK(mkdir(dir, 0700) == 0);
	snprintf(dir, sizeof(dir), "%s/loose/job", base);
	CHECK(mkdir(dir, 0755) == 0 && chmod(dir, 0755) == 0);
	snprintf(pattern, sizeof(pattern), "%s/loose", base);
	rc = store_open(&st, pattern, 0, 0, "job", true, fresh(&w));
	CHECK_ERR(rc, -EACCES, w.msg,
		  "STASIS_DIR: job directory %s must be owned by you and mode 0700 (is 0755, owner "
		  "uid %u): refused",
		  dir, (unsigned)geteuid());
	CHECK(mode_of(dir) == 0755);
	CHECK(chmod(dir, 0710) == 0);
	rc = store_open(&st, pattern, 0, 0, "job", false, fresh(&w));
	CHECK_ERR(rc, -EACCES, w.msg,
		  "STASIS_DIR: job directory %s must be owned by you and mode 0700 (is 0710, owner "
		  "uid %u): refused",
		  dir, (unsigned)geteuid());

	/* Someone else's directory (needs root to make one). */
	if (geteuid() == 0) {
		CHECK(chmod(dir, 0700) == 0 && chown(dir, 4321, 4321) == 0);
		rc = store_open(&st, pattern, 0, 0, "job", true, fresh(&w));
		CHECK_ERR(rc, -EACCES, w.msg,
			  "STASIS_DIR: job directory %s must be owned by you and mode 0700 (is "
			  "0700, owner uid 4321): refused",
			  dir);
	}
	hostile();

	/* A file where the directory should be. */
	snprintf(dir, sizeof(dir), "%s/file", base);
	CHECK(close(open(dir, O_CREAT | O_WRONLY, 0600)) == 0);
	rc = store_open(&st, dir, 0, 0, "job", true, fresh(&w));
	CHECK(rc == -ENOTDIR);

	/* A relative pattern becomes absolute. */
	CHECK(chdir(base) == 0);
	rc = store_open(&st, "rel/%r", 0, 4, "job", true, fresh(&w));
	snprintf(dir, sizeof(dir), "%s/rel/4/job", base);
	CHECK(rc == 0 && !strcmp(st.dir, dir));
	CHECK(chdir("/") == 0);
}

static void test_names(void)
{
	struct store st = {.dir = "/d", .rank = 12};
	char buf[256];

	store_name(3, 42, STORE_IMAGE, buf, sizeof(buf));
	CHECK(!strcmp(buf, "ckpt-42.r3.img"));
	store_name(3, 18446744073709551615ull, STORE_REDUNDANCY, buf, sizeof(buf));
	CHECK(!strcmp(buf, "ckpt-18446744073709551615.r3.red"));
	store_path(&st, 7, STORE_COMMIT, buf, sizeof(buf));
	CHECK(!strcmp(buf, "/d/ckpt-7.r12.done"));
}

static void test_commit(struct store *st)
{
	struct commit_record rec = {0}, back;
	char path[8192];
	struct why w = WHY_INIT;
	int rc, fd;

	rec.nranks = 16;
	rec.ckpt_id = 9;
	rec.parent_id = 8;
	rec.image_bytes = 123456789;
	rec.image_crc = 0xfeedfacecafebeefull;
	rc = store_commit(st, &rec, fresh(&w));
	CHECK(rc == 0);
	store_path(st, 9, STORE_COMMIT, path, sizeof(path));
	CHECK(mode_of(path) == 0600);
	CHECK(!exists(st, "ckpt-9.r5.done.tmp"));
	memset(&back, 0, sizeof(back));
	rc = store_read_commit(st, 9, &back, fresh(&w));
	CHECK(rc == 0);
	CHECK(!memcmp(back.magic, STASIS_COMMIT_MAGIC, 8) && back.version == STASIS_FORMAT_VERSION);
	CHECK(back.nranks == 16 && back.ckpt_id == 9 && back.parent_id == 8);
	CHECK(back.image_bytes == 123456789 && back.image_crc == rec.image_crc && back.crc != 0);

	/* Each byte of the record matters. */
	for (size_t off = 0; off < sizeof(rec); off++) {
		unsigned char b;

		fd = open(path, O_RDWR);
		CHECK(fd >= 0 && pread(fd, &b, 1, off) == 1);
		b ^= 0x10;
		CHECK(pwrite(fd, &b, 1, off) == 1);
		rc = store_read_commit(st, 9, &back, fresh(&w));
		if (off < 8)
			CHECK_ERR(rc, -EBADMSG, w.msg, "%s: not a stasis commit record (bad magic)",
				  path);
		else if (off < 12)
			CHECK_ERR(rc, -EBADMSG, w.msg,
				  "%s: format version %u, this stasis reads %u", path,
				  STASIS_FORMAT_VERSION ^ (0x10u << 8 * (off - 8)),
				  STASIS_FORMAT_VERSION);
		else
			CHECK_ERR(rc, -EBADMSG, w.msg, "%s: checksum mismatch", path);
		b ^= 0x10;
		CHECK(pwrite(fd, &b, 1, off) == 1);
		close(fd);
	}
	CHECK(store_read_commit(st, 9, &back, fresh(&w)) == 0);

	CHECK(truncate(path, 20) == 0);
	rc = store_read_commit(st, 9, &back, fresh(&w));
	CHECK_ERR(rc, -EBADMSG, w.msg, "%s: truncated (20 bytes)", path);
	CHECK(unlink(path) == 0);
	rc = store_read_commit(st, 9, &back, fresh(&w));
	CHECK_ERR(rc, -ENOENT, w.msg, "%s: missing", path);
}

static void test_list_remove(struct store *st)
{
	uint64_t ids[8];
	struct commit_record rec = {.nranks = 1, .ckpt_id = 3};
	int n;

	n = store_list(st, ids, 8);
	CHECK(n == 0);
	touch(st, "ckpt-3.r5.img");
	touch(st, "ckpt-3.r5.red");
	CHECK(store_commit(st, &rec, NULL) == 0);
	touch(st, "ckpt-10.r5.img");
	touch(st, "ckpt-1.r5.red");
	touch(st, "ckpt-12.r5.img.tmp"); /* a write that was interrupted */
	touch(st, "ckpt-2.r6.img");	 /* another rank's */
	touch(st, "ckpt-4.r55.img");
	touch(st, "ckpt-x.r5.img");
	touch(st, "ckpt-5.r5");
	touch(st, "ckpt--6.r5.img");
	touch(st, "notes.txt");

	n = store_list(st, ids, 8);
	CHECK(n == 4 && ids[0] == 1 && ids[1] == 3 && ids[2] == 10 && ids[3] == 12);
	n = store_list(st, ids, 2); /* beyond max: the newest */
	CHECK(n == 2 && ids[0] == 10 && ids[1] == 12);
	CHECK(store_list(st, NULL, 0) == 4);

	CHECK(store_remove(st, 3) == 0);
	CHECK(!exists(st, "ckpt-3.r5.img") && !exists(st, "ckpt-3.r5.red"));
	CHECK(!exists(st, "ckpt-3.r5.done"));
	CHECK(exists(st, "ckpt-2.r6.img") && exists(st, "ckpt-10.r5.img"));
	CHECK(store_remove(st, 12) == 0);
	CHECK(store_remove(st, 99) == 0);
	n = store_list(st, ids, 8);
	CHECK(n == 2 && ids[0] == 1 && ids[1] == 10);

	struct store gone = *st;

	strcat(gone.dir, "/nonexistent");
	CHECK(store_list(&gone, ids, 8) == -ENOENT);
}

int main(void)
{
	char pattern[256];
	struct why w = WHY_INIT;
	struct store st;

	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 77;
	}
	test_expand();
	test_open();
	test_names();

	snprintf(pattern, sizeof(pattern), "%s/files", base);
	if (store_open(&st, pattern, 0, 5, "job", true, fresh(&w))) {
		fprintf(stderr, "%s\n", w.msg);
		return 1;
	}
	test_commit(&st);
	test_list_remove(&st);

	snprintf(w.msg, sizeof(w.msg), "rm -rf '%s'", base);
	if (system(w.msg))
		(void)0;
	if (failures) {
		fprintf(stderr, "test_store: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_store: ok\n");
	return 0;
}
