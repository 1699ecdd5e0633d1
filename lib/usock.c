/* SPDX-License-Identifier: MIT */
#include "usock.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int usock_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa->sun_path, path);
	return 0;
}

static int usock_fail(int fd)
{
	int e = errno;

	close(fd);
	errno = e;
	return -1;
}

int usock_listen(const char *path, int backlog)
{
	struct sockaddr_un sa;
	int fd;

	if (usock_addr(path, &sa) < 0)
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* Linux gives the socket file the mode of the socket's inode: set before bind, no client
	 * can connect in between, and no thread's files are affected as they would be by umask. */
	if (fchmod(fd, 0600) < 0)
		return usock_fail(fd);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, backlog) < 0)
		return usock_fail(fd);
	return fd;
}

int usock_connect(const char *path)
{
	struct sockaddr_un sa;
	int fd;

	if (usock_addr(path, &sa) < 0)
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return usock_fail(fd);
	return fd;
}
