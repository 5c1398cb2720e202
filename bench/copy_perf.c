/* copy_perf BYTES DIR: the reference costs a checkpoint is compared with,
 * measured on the same bytes: a memcpy of them, and a plain write() + fsync
 * of them to a new file in DIR (the checkpoint directory). Prints
 * "memcpy_ms <x>" and "write_ms <y>" (best of 5), for bench/ckpt_perf.sh. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	size_t bytes;
	char *src, *dst, path[4096];
	double best_copy = 1e30, best_write = 1e30;

	if (argc != 3) {
		fprintf(stderr, "usage: copy_perf BYTES DIR\n");
		return 2;
	}
	bytes = strtoull(argv[1], NULL, 10);
	src = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	dst = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (src == MAP_FAILED || dst == MAP_FAILED)
		return 1;
	memset(src, 0x5a, bytes);
	memset(dst, 0, bytes); /* both warm, as a running program's memory is */
	snprintf(path, sizeof(path), "%s/copy_perf.%d", argv[2], getpid());
	for (int i = 0; i < 5; i++) {
		double t0 = now_ms(), t1;
		int fd;
		size_t done = 0;

		memcpy(dst, src, bytes);
		t1 = now_ms();
		if (t1 - t0 < best_copy)
			best_copy = t1 - t0;
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0)
			return 1;
		t0 = now_ms();
		while (done < bytes) {
			ssize_t n = write(fd, src + done, bytes - done);
			if (n <= 0)
				return 1;
			done += n;
		}
		fsync(fd);
		t1 = now_ms();
		close(fd);
		unlink(path);
		if (t1 - t0 < best_write)
			best_write = t1 - t0;
	}
	printf("memcpy_ms %.3f\nwrite_ms %.3f\n", best_copy, best_write);
	return 0;
}
