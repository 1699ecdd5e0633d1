/* SPDX-License-Identifier: MIT */
/*
 * TCP sockets for the addresses the configuration writes, "HOST:PORT" or "[V6]:PORT": the NBD
 * server's TCP listener and the replication transports share them, and each adds its own socket
 * options and protocol on top.
 */
#ifndef HAK_NET_H
#define HAK_NET_H

#include <stddef.h>
#include <sys/socket.h>

/*
 * The stream readers (the NBD server and the replication transport's TCP streams) read headers
 * and small messages through an input buffer, and a payload of NET_BULK_MIN bytes or more
 * straight into its own buffer. After such a payload the next read into the input buffer takes
 * at most NET_BULK_PEEK: enough for a header and a batch of small messages, little enough that
 * the next large payload is not read there and then copied into its buffer. Filling the input
 * buffer each time passed almost every byte of a stream of large writes or resync runs through
 * a user-space copy (11 % of a resync target's CPU, 21 % of a file copy's payload, measured).
 */
#define NET_BULK_MIN  (64u * 1024u)
#define NET_BULK_PEEK 4096u

/*
 * A non-blocking listening socket on addr, at its port plus port_offset. Returns the fd, or -1
 * with errno (EINVAL for a malformed address or port, EADDRNOTAVAIL when the host does not
 * resolve).
 */
int net_listen(const char *addr, unsigned port_offset);
/*
 * Starts a non-blocking connect to addr, at its port plus port_offset, leaving from bind_host
 * when it is not NULL (if binding fails the kernel picks the source address). prepare, when not
 * NULL, sets the socket options that must be in place before the first packet leaves. Completion
 * is signalled by writability (then check SO_ERROR). Returns the fd, or -1 with errno.
 */
int net_connect(const char *addr, unsigned port_offset, const char *bind_host,
                void (*prepare)(int fd));

/* The remote end of a connected socket as "HOST:PORT" or "[V6]:PORT", numeric; -1 with errno. */
int net_peer_name(int fd, char *buf, size_t len);

/* addr (at its port plus port_offset) as a socket address, for transports that do not use
 * sockets (RDMA's connection manager): 0, or -1 with errno as net_listen. */
int net_addr_resolve(const char *addr, unsigned port_offset, int passive,
                     struct sockaddr_storage *sa, socklen_t *salen);
/* sa as "HOST:PORT" or "[V6]:PORT", numeric; -1 with errno. */
int net_addr_name(const struct sockaddr *sa, socklen_t salen, char *buf, size_t len);

#endif
