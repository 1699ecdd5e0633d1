/* SPDX-License-Identifier: MIT */
/*
 * UNIX stream sockets by path: hakd listens on its control socket and on each volume's NBD
 * socket; hakctl, hak-attach and the test tools connect to them.
 */
#ifndef HAK_USOCK_H
#define HAK_USOCK_H

/*
 * A non-blocking, close-on-exec socket listening at path, replacing whatever was there. Only its
 * owner may connect (mode 0600 & ~umask): both sockets let their client control hakd or its data.
 * The fd, or -1 with errno (ENAMETOOLONG when path does not fit a sockaddr_un).
 */
int usock_listen(const char *path, int backlog);
/* A blocking, close-on-exec socket connected to path. The fd, or -1 with errno (ENAMETOOLONG as
 * above). */
int usock_connect(const char *path);

#endif
