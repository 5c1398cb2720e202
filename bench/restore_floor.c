/* restore_floor: the least a restore of these files must cost one rank
 * (bench/restart_perf.sh): reading them from a cold page cache, and writing
 * as many bytes into memory populated as huge pages first. Nothing of
 * stasis is used: plain liburing and memcpy.
 *
 *   restore_floor --evict FILE...   drop the files from the page cache
 *   restore_floor FILE...           time both steps, print
 *       cold_read_s <s> <GB/s>
 *       populated_copy_s <s> <GB/s>   (populate <s>, copy <s>)
 *
 * The read: 4 MiB at a time, four in flight, into buffers reused (what
 * stasis's restore does, and the fastest here). The copy: MADV_HUGEPAGE and
 * MADV_POPULATE_WRITE over a fresh mapping of the files' total size, then
 * memcpy from a warm 4 MiB buffer over all of it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#define CHUNK ((size_t)4 << 20)
#define DEPTH 4
#define HUGE ((size_t)2 << 20)

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int die(const char *what, const char *path)
{
	fprintf(stderr, "restore_floor: %s %s: %s\n", what, path ? path : "", strerror(errno));
	return 1;
}

static int evict(int n, char **paths)
{
	for (int i = 0; i < n; i++) {
		int fd = open(paths[i], O_RDONLY);

		if (fd < 0 || fdatasync(fd) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
			return die("cannot evict", paths[i]);
		close(fd);
	}
	return 0;
}

/* Read one file whole through the ring; returns bytes read or -1. */
static long long read_file(struct io_uring *ring, char *buf, const char *path)
{
	struct io_uring_cqe *cqe;
	long long size, off = 0, done = 0;
	unsigned inflight = 0, slot = 0;
	struct stat st;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st))
		return -1;
	size = st.st_size;
	while (done < size) {
		while (inflight < DEPTH && off < size) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

			io_uring_prep_read(sqe, fd, buf + (slot++ % DEPTH) * CHUNK, CHUNK, off);
			off += CHUNK;
			inflight++;
		}
		io_uring_submit(ring);
		if (io_uring_wait_cqe(ring, &cqe))
			return -1;
		if (cqe->res <= 0) {
			errno = cqe->res ? -cqe->res : EIO;
			return -1;
		}
		done += cqe->res;
		inflight--;
		io_uring_cqe_seen(ring, cqe);
	}
	close(fd);
	return done;
}

int main(int argc, char **argv)
{
	struct io_uring ring;
	long long total = 0, got;
	double t0, t1, t2, t3;
	char *buf, *raw, *dst;

	if (argc > 2 && !strcmp(argv[1], "--evict"))
		return evict(argc - 2, argv + 2);
	if (argc < 2) {
		fprintf(stderr, "usage: restore_floor [--evict] FILE...\n");
		return 2;
	}
	buf = mmap(NULL, DEPTH * CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED || io_uring_queue_init(DEPTH, &ring, 0))
		return die("cannot set up", NULL);
	memset(buf, 1, DEPTH * CHUNK);

	t0 = now();
	for (int i = 1; i < argc; i++) {
		got = read_file(&ring, buf, argv[i]);
		if (got < 0)
			return die("cannot read", argv[i]);
		total += got;
	}
	t1 = now();

	raw = mmap(NULL, total + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return die("cannot map", NULL);
	dst = (char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
	madvise(dst, total, MADV_HUGEPAGE);
	madvise(dst, total, MADV_POPULATE_WRITE);
	t2 = now();
	for (long long off = 0; off < total; off += CHUNK)
		memcpy(dst + off, buf,
		       total - off < (long long)CHUNK ? total - off : (long long)CHUNK);
	t3 = now();
	printf("cold_read_s %.3f %.2f\n", t1 - t0, total / (t1 - t0) / 1e9);
	printf("populated_copy_s %.3f %.2f (populate %.3f, copy %.3f)\n", t3 - t1,
	       total / (t3 - t1) / 1e9, t2 - t1, t3 - t2);
	return 0;
}
