/* children: a program that runs other programs while it computes, as
 * codes do to compress output, ask the system, or run a helper: every
 * few steps system() with a redirection, popen() read and write, and a
 * fork() whose child redirects its output into a pipe (dup2) and execs a
 * shell, waited for with waitpid(). Nothing of them is left once they
 * ended: checkpoints wait while a pipe to one is open, and go on after.
 * The children (shells with the rank's environment) are no ranks: they
 * must not take themselves for one. At its first step the program moves into a
 * directory of its own and sets its umask, as codes do for their output:
 * a restart must put both back (its relative paths lead there).
 *
 *   children [N [ITERS [HOLD END]]]     N: doubles per rank
 *
 * With HOLD and END (seconds), a pipe to a child (popen of cat) is also
 * held open from MPI_Init for HOLD seconds, and the run ends END seconds
 * after MPI_Init instead of after ITERS iterations.
 *
 * Output (rank 0, stdout, at the end): one line with the sum and a hash
 * of what the children printed.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hash.h"

static void fail(const char *what)
{
	perror(what);
	MPI_Abort(MPI_COMM_WORLD, 2);
}

/* What a forked child running sh -c cmd prints. */
static size_t run_forked(const char *cmd, char *out, size_t len)
{
	int fd[2], status;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(fd))
		fail("pipe");
	pid = fork();
	if (pid < 0)
		fail("fork");
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	while (got < len - 1 && (n = read(fd[0], out + got, len - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = 0;
	close(fd[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		fail("child");
	return got;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096, iters = argc > 2 ? atoi(argv[2]) : 400;
	double hold = argc > 4 ? atof(argv[3]) : 0, end = argc > 4 ? atof(argv[4]) : 0, t0;
	FILE *held = NULL;
	int rank, size;
	uint64_t h = HASH_START, all;
	double sum = 0, total;
	char dir[] = "/tmp/stasis-children.XXXXXX", path[256], cmd[512], out[256];

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	t0 = MPI_Wtime();
	if (hold > 0 && !(held = popen("cat > /dev/null", "w")))
		fail("popen held");
	if (!mkdtemp(dir))
		fail("mkdtemp");
	double *v = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++)
		v[i] = rank + i * 1e-3;
	for (int it = 0; end > 0 || it < iters; it++) {
		if (held && MPI_Wtime() - t0 >= hold) {
			if (pclose(held))
				fail("pclose held");
			held = NULL;
		}
		if (end > 0) {
			int over = MPI_Wtime() - t0 >= end;

			MPI_Allreduce(MPI_IN_PLACE, &over, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
			if (over)
				break;
		}
		if (it == 0 && (chdir(dir) || umask(027) != 022))
			fail("chdir");
		for (int r = 0; r < 50; r++)
			for (int i = 0; i < n; i++)
				v[i] = v[i] * 0.999 + 1e-3 * ((i + it + r) % 5);
		for (int i = 0; i < n; i++)
			sum += v[i];
		if (it % 10 == 0) {
			FILE *p;

			snprintf(path, sizeof(path), "step");
			snprintf(cmd, sizeof(cmd), "echo %d %d > %s", it, rank, path);
			if (system(cmd))
				fail("system");
			snprintf(cmd, sizeof(cmd), "cat %s", path);
			p = popen(cmd, "r");
			if (!p || !fgets(out, sizeof(out), p) || pclose(p))
				fail("popen r");
			h = hash_mix(h, out, strlen(out));
			/* Open across this step's collective: a checkpoint
			 * due there waits for the next one. */
			snprintf(cmd, sizeof(cmd), "wc -c > %s", path);
			p = popen(cmd, "w");
			if (!p || fprintf(p, "step %d of rank %d\n", it, rank) < 0)
				fail("popen w");
			MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			if (pclose(p))
				fail("pclose");
			snprintf(cmd, sizeof(cmd), "cat %s; echo forked %d", path, it);
			run_forked(cmd, out, sizeof(out));
			h = hash_mix(h, out, strlen(out));
		}
		MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	}
	/* Where the program is, and the mode its files get. */
	char cwd[sizeof(dir) + 1];
	struct stat st;
	int fd = open("mode", O_CREAT | O_WRONLY | O_TRUNC, 0666);

	if (fd < 0 || fstat(fd, &st))
		fail("mode");
	close(fd);
	h = hash_mix(h, (getcwd(cwd, sizeof(cwd)) && !strcmp(cwd, dir)) ? "here" : "lost", 4);
	h = hash_mix(h, &(unsigned){st.st_mode & 0777}, sizeof(unsigned));
	MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("children n=%d iters=%d ranks=%d sum %.6f hash %016llx mode %o\n", n, iters,
		       size, total, (unsigned long long)all, (unsigned)(st.st_mode & 0777));
	if (chdir("/"))
		fail("chdir /");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fail("rm");
	free(v);
	MPI_Finalize();
	return 0;
}
