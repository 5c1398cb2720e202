/* A restarted rank shows its own command line and environment in
 * /proc/PID/cmdline and /proc/PID/environ (ps, pgrep, top, batch systems
 * that find ranks by them).
 *
 * The kernel shows the bytes between the addresses it wrote the argument
 * and environment strings at when the process started (mm->arg_start ...
 * env_end), at the top of the stack. A restart puts the first run's stack
 * back over them, where the first run's strings sit at other offsets (its
 * environment was another): /proc then shows the tail of one string and
 * the start of the next. So the restart copies its own strings before the
 * memory comes back (runtime memory, which a restart never overwrites) and
 * points the kernel at the copy afterwards with PR_SET_MM_MAP, the one
 * form of PR_SET_MM an unprivileged process may use (the single-field
 * PR_SET_MM_ARG_START ... need CAP_SYS_RESOURCE; PR_SET_MM_MAP needs a
 * kernel built with CONFIG_CHECKPOINT_RESTORE, and a capability only to
 * change the executable's file, left alone here).
 *
 * The program's own `environ` (and argv) are its memory: what it had at the
 * checkpoint. /proc shows the restarted job's. */
#define LOG_PREFIX "procname: "
#include <errno.h>
#include <fcntl.h>
#include <linux/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "part.h"
#include "procname.h"

static char *copy; /* the restart's argument strings, then its environment's */
static size_t args_len, env_len;

/* The whole of a /proc file appended to copy. */
static int append(const char *path, size_t *len)
{
	char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*len = 0;
	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		size_t have = args_len + env_len + *len;
		char *p = realloc(copy, have + (size_t)n + 1);

		if (!p) {
			close(fd);
			return -ENOMEM;
		}
		copy = p;
		memcpy(copy + have, buf, (size_t)n);
		*len += (size_t)n;
	}
	close(fd);
	return n < 0 ? -errno : 0;
}

/* CHECK: nothing has changed yet; the strings are still the restart's. */
static int procname_check(const struct restart_input *in, struct why *why)
{
	(void)in;
	(void)why;
	free(copy);
	copy = NULL;
	args_len = env_len = 0;
	if (append("/proc/self/cmdline", &args_len) || append("/proc/self/environ", &env_len)) {
		free(copy);
		copy = NULL;
	}
	return 0;
}

/* The fields of /proc/self/stat from 1 on, n of them. */
static int stat_fields(unsigned long long *f, int n)
{
	char buf[4096], *p;
	ssize_t len;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), i;

	if (fd < 0)
		return -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -EIO;
	buf[len] = 0;
	p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	p += 2; /* field 3 */
	for (i = 3; i <= n && *p; i++) {
		f[i] = strtoull(p, &p, 10);
		if (*p == ' ')
			p++;
		else if (*p && *p != '\n')
			p = strchr(p, ' ') ? strchr(p, ' ') + 1 : p + strlen(p);
	}
	return i > n ? 0 : -EIO;
}

/* REATTACH: the memory is back; the kernel is pointed at the copy. */
static int procname_reattach(const struct restart_input *in, struct why *why)
{
	unsigned long long f[52] = {0};
	struct prctl_mm_map map;

	(void)in;
	(void)why;
	if (!copy || !args_len)
		return 0;
	if (stat_fields(f, 51)) {
		pr_warn("cannot read /proc/self/stat: /proc shows the first run's command line");
		return 0;
	}
	map = (struct prctl_mm_map){
	    .start_code = f[26],
	    .end_code = f[27],
	    .start_data = f[45],
	    .end_data = f[46],
	    .start_brk = f[47],
	    .brk = (unsigned long)syscall(SYS_brk, 0),
	    .start_stack = f[28],
	    .arg_start = (uintptr_t)copy,
	    .arg_end = (uintptr_t)copy + args_len,
	    .env_start = (uintptr_t)copy + args_len,
	    .env_end = (uintptr_t)copy + args_len + env_len,
	    .auxv = NULL,
	    .auxv_size = 0,
	    .exe_fd = (unsigned int)-1,
	};
	if (prctl(PR_SET_MM, PR_SET_MM_MAP, &map, sizeof(map), 0))
		pr_warn("cannot show the restarted command line in /proc (prctl PR_SET_MM_MAP: "
			"%s): ps shows garbage for this rank",
			strerror(errno));
	return 0;
}

const struct part_ops procname_part = {
    .name = "procname",
    .check = procname_check,
    .reattach = procname_reattach,
};
