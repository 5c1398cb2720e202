#define LOG_PREFIX "oob: "
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "oob.h"

#define MAX_ADDRS 16
#define CONNECT_TIMEOUT_MS 30000

/* Where rank 0 listens: every IPv4 address of its host, loopback last
 * (ranks on the same host reach it either way). */
struct oob_where {
	uint16_t port;
	uint16_t naddrs;
	uint32_t addrs[MAX_ADDRS]; /* network order */
};

static void local_addresses(struct oob_where *w)
{
	struct ifaddrs *ifs, *i;
	uint32_t loop = htonl(INADDR_LOOPBACK);

	w->naddrs = 0;
	if (!getifaddrs(&ifs)) {
		for (i = ifs; i && w->naddrs < MAX_ADDRS - 1; i = i->ifa_next) {
			uint32_t a;

			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
				continue;
			a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
			if (a != loop)
				w->addrs[w->naddrs++] = a;
		}
		freeifaddrs(ifs);
	}
	w->addrs[w->naddrs++] = loop;
}

static void no_delay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int listen_any(struct oob_where *w)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, SOMAXCONN) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len)) {
		int ret = -errno;

		close(fd);
		return ret;
	}
	w->port = ntohs(sa.sin_port);
	local_addresses(w);
	return fd;
}

/* Connect to any of rank 0's addresses, retrying while it may still be
 * starting to accept. */
static int connect_leader(const struct oob_where *w)
{
	for (int waited = 0; waited < CONNECT_TIMEOUT_MS; waited += 50) {
		for (int i = 0; i < w->naddrs; i++) {
			struct sockaddr_in sa = {.sin_family = AF_INET,
						 .sin_port = htons(w->port),
						 .sin_addr.s_addr = w->addrs[i]};
			int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

			if (fd < 0)
				return -errno;
			if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
				no_delay(fd);
				return fd;
			}
			close(fd);
		}
		usleep(50000);
	}
	return -ETIMEDOUT;
}

int oob_send(int fd, const struct oob_msg *m)
{
	const char *p = (const char *)m;
	size_t left = sizeof(*m);

	while (left) {
		ssize_t n = send(fd, p, left, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 && errno != EPIPE && errno != ECONNRESET ? -errno : -EPIPE;
		p += n;
		left -= n;
	}
	return 0;
}

int oob_recv(int fd, struct oob_msg *m)
{
	char *p = (char *)m;
	size_t left = sizeof(*m);

	while (left) {
		ssize_t n = recv(fd, p, left, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 && errno != ECONNRESET ? -errno : -EPIPE;
		p += n;
		left -= n;
	}
	return 0;
}

/* Rank 0: take a connection from every other rank; each says who it is. */
static int accept_all(int lfd, int size, int *fds)
{
	for (int got = 1; got < size;) {
		struct pollfd p = {lfd, POLLIN, 0};
		struct oob_msg hello;
		int fd;

		if (poll(&p, 1, CONNECT_TIMEOUT_MS) <= 0)
			return -ETIMEDOUT;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return -errno;
		no_delay(fd);
		if (oob_recv(fd, &hello) || hello.from == 0 || hello.from >= (uint32_t)size ||
		    fds[hello.from] >= 0) {
			close(fd);
			continue;
		}
		fds[hello.from] = fd;
		got++;
	}
	return 0;
}

int oob_start(MPI_Comm comm, int rank, int size, int **out, struct why *why)
{
	struct oob_where w = {0};
	int *fds = malloc(sizeof(int) * size), lfd = -1, ret = 0, all;

	if (!fds)
		ret = -ENOMEM;
	for (int r = 0; fds && r < size; r++)
		fds[r] = -1;
	if (rank == 0 && !ret) {
		lfd = listen_any(&w);
		ret = lfd < 0 ? lfd : 0;
	}
	/* Every rank learns whether rank 0 listens, and where. */
	all = ret;
	PMPI_Bcast(&all, 1, MPI_INT, 0, comm);
	PMPI_Bcast(&w, sizeof(w), MPI_BYTE, 0, comm);
	if (all) {
		if (rank == 0)
			why_set(why, all, "cannot listen for stasis's coordinator: %s",
				strerror(-all));
		free(fds);
		return all;
	}
	if (rank == 0) {
		ret = accept_all(lfd, size, fds);
		close(lfd);
	} else if (fds) {
		struct oob_msg hello = {.from = (uint32_t)rank};

		fds[0] = connect_leader(&w);
		ret = fds[0] < 0 ? fds[0] : oob_send(fds[0], &hello);
	}
	PMPI_Allreduce(MPI_IN_PLACE, &ret, 1, MPI_INT, MPI_MIN, comm);
	if (ret) {
		why_set(why, ret, "stasis's coordinator cannot connect its ranks: %s",
			strerror(-ret));
		for (int r = 0; fds && r < size; r++)
			if (fds[r] >= 0)
				close(fds[r]);
		free(fds);
		return ret;
	}
	*out = fds;
	return 0;
}
