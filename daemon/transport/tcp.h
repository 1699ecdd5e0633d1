/* SPDX-License-Identifier: MIT */
/*
 * The TCP transport: plain sockets, frames written with one sendmsg per batch (outq) and read
 * through a 256 KiB buffer, bulk payloads straight into their own buffer. Replication finds it
 * with transport_find("tcp"); only tests and sibling transports include this header.
 */
#ifndef HAK_TCP_H
#define HAK_TCP_H

#include "transport.h"

extern const struct transport_ops transport_tcp;

/*
 * A stream over a connected, non-blocking stream socket (a socketpair in the tests, or a socket
 * whose kernel TLS a sibling transport set up). The stream takes the fd and closes it; on -1
 * (errno=ENOMEM) the fd is left to the caller.
 */
int tcp_stream_create(struct ev_loop *loop, int fd, const struct tstream_ops *ops, void *ctx,
                      struct tstream **out);

#endif
