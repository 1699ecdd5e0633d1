/* SPDX-License-Identifier: MIT */
#include "net.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int net_resolve(const char *addr, unsigned port_offset, int passive, struct addrinfo **ai)
{
	char host[256], port[16];
	const char *colon;
	size_t n;
	if (addr[0] == '[') {
		const char *rb = strchr(addr, ']');
		if (!rb || rb[1] != ':')
			goto bad;
		n = (size_t)(rb - addr - 1);
		if (n >= sizeof(host))
			goto bad;
		memcpy(host, addr + 1, n);
		colon = rb + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon)
			goto bad;
		n = (size_t)(colon - addr);
		if (n >= sizeof(host))
			goto bad;
		memcpy(host, addr, n);
	}
	host[n] = '\0';
	long p = strtol(colon + 1, NULL, 10) + (long)port_offset;
	if (p < 1 || p > 65535)
		goto bad;
	snprintf(port, sizeof(port), "%ld", p);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)};
	if (getaddrinfo(host, port, &hints, ai) != 0) {
		errno = EADDRNOTAVAIL;
		return -1;
	}
	return 0;
bad:
	errno = EINVAL;
	return -1;
}

/* Close fd after a failure, keeping the failure's errno: -1. */
static int net_fail(int fd)
{
	int saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

/* A non-blocking TCP socket for addr, resolved into *ai (freed by the caller): fd, or -1. */
static int net_socket(const char *addr, unsigned port_offset, int passive, struct addrinfo **ai)
{
	if (net_resolve(addr, port_offset, passive, ai) < 0) {
		*ai = NULL;
		return -1;
	}
	return socket((*ai)->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

int net_listen(const char *addr, unsigned port_offset)
{
	struct addrinfo *ai;
	int one = 1, fd = net_socket(addr, port_offset, 1, &ai);
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 16) < 0)
			fd = net_fail(fd);
	}
	if (ai)
		freeaddrinfo(ai);
	return fd;
}

int net_connect(const char *addr, unsigned port_offset, const char *bind_host,
                void (*prepare)(int fd))
{
	struct addrinfo *ai, *bai = NULL;
	int fd = net_socket(addr, port_offset, 0, &ai);
	if (fd >= 0 && bind_host) {
		/* Leave from our own address so the peer can check who we are and the traffic
		 * follows the configured path. */
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = ai->ai_family};
		if (getaddrinfo(bind_host, NULL, &hints, &bai) == 0)
			(void)!bind(fd, bai->ai_addr, bai->ai_addrlen);
	}
	if (fd >= 0 && prepare)
		prepare(fd);
	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS)
		fd = net_fail(fd);
	if (ai)
		freeaddrinfo(ai);
	if (bai)
		freeaddrinfo(bai);
	return fd;
}

int net_addr_resolve(const char *addr, unsigned port_offset, int passive,
                     struct sockaddr_storage *sa, socklen_t *salen)
{
	struct addrinfo *ai;
	if (net_resolve(addr, port_offset, passive, &ai) < 0)
		return -1;
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	*salen = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

int net_addr_name(const struct sockaddr *sa, socklen_t salen, char *buf, size_t len)
{
	char host[NI_MAXHOST], port[NI_MAXSERV];
	int rc = getnameinfo(sa, salen, host, sizeof(host), port, sizeof(port),
	                     NI_NUMERICHOST | NI_NUMERICSERV);
	if (rc != 0) {
		errno = rc == EAI_SYSTEM ? errno : EINVAL;
		return -1;
	}
	snprintf(buf, len, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
	return 0;
}

int net_peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage sa;
	socklen_t salen = sizeof(sa);

	if (getpeername(fd, (struct sockaddr *)&sa, &salen) < 0)
		return -1;
	return net_addr_name((struct sockaddr *)&sa, salen, buf, len);
}
