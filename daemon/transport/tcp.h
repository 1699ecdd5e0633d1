/* SPDX-License-Identifier: MIT */
/*
 * The TCP transport: plain sockets, frames written with one sendmsg per batch (outq) and read
 * through a 256 KiB buffer, bulk payloads straight into their own buffer. Replication finds it
 * with transport_find("tcp"); only tests and sibling transports include this header.
 */
#ifndef HAK_TCP_H
#define HAK_TCP_H

#include <ev.h>
#include <sys/types.h>

#include "transport.h"

extern const struct transport_ops transport_tcp;

/*
 * A stream over a connected, non-blocking stream socket (a socketpair in the tests, or a socket
 * whose kernel TLS a sibling transport set up). The stream takes the fd and closes it; on -1
 * (errno=ENOMEM) the fd is left to the caller.
 */
int tcp_stream_create(struct ev_loop *loop, int fd, const struct tstream_ops *ops, void *ctx,
                      struct tstream **out);

/*
 * A layer between a stream's frames and its socket (the TLS transport's records). The stream
 * keeps every semantic of a TCP stream (outq, lazy sends, pause, close inside callbacks) and calls
 * the layer instead of read() and outq_flush(); a NULL read or flush means plain syscalls.
 */
struct tcp_io {
	/* The streams' transport (its stream members TCP_STREAM_OPS); NULL: transport_tcp. */
	const struct transport_ops *transport;
	/* Up to len bytes into buf: their count, 0 at the end of the stream, or -1 with errno
	 * EAGAIN (wait until readable), EINPROGRESS (wait until writable) or another error, then
	 * with a sentence fragment in why. */
	ssize_t (*read)(void *ctx, void *buf, size_t len, char *why, size_t whylen);
	/* Write what q holds through the layer (outq_iov, outq_advance): 0 when empty, 1 when
	 * blocked until writable, 2 until readable, -1 with errno and why. */
	int (*flush)(void *ctx, struct outq *q, char *why, size_t whylen);
	/* Bytes already received by the layer, which the socket will not signal again. */
	bool (*pending)(void *ctx);
	/* The stream is closing: release ctx (the stream then closes the fd). */
	void (*free)(void *ctx);
};

/* tcp_stream_create with a layer; io_ctx is the layer's, freed by io->free with the stream (not
 * on -1). */
int tcp_stream_create_io(struct ev_loop *loop, int fd, const struct tcp_io *io, void *io_ctx,
                         const struct tstream_ops *ops, void *ctx, struct tstream **out);
/* The layer context of s when s is a TCP stream over io, else NULL. */
void *tcp_stream_io(const struct tstream *s, const struct tcp_io *io);

/* Payload bytes s copied out of its input buffer: those not read straight into their frame's own
 * buffer (a bulk payload should almost never be). */
uint64_t tcp_stream_copied(const struct tstream *s);

/* Socket options for a replication connection: no Nagle, keepalive, a short user timeout. */
void tcp_tune(int fd);

/* The socket side of listen, for siblings that do more before a connection is a stream (TLS's
 * handshake): take() gets every accepted socket, tuned and non-blocking, and owns it. */
struct tcp_acceptor {
	struct ev_loop *loop;
	int fd;
	ev_io io;
	void (*take)(struct tcp_acceptor *a, int fd);
	void *owner;
};
/* Listen on addr (+port_offset): 0, or -1 with errno as tlistener_open. */
int tcp_acceptor_open(struct tcp_acceptor *a, struct ev_loop *loop, const char *addr,
                      unsigned port_offset, void (*take)(struct tcp_acceptor *a, int fd),
                      void *owner);
void tcp_acceptor_close(struct tcp_acceptor *a);

/* The socket side of connect: done() runs once, from the loop, with the connected socket (the
 * hook's) or fd -1 and the socket's error. */
struct tcp_connector {
	struct ev_loop *loop;
	int fd;
	ev_io io;
	void (*done)(struct tcp_connector *k, int fd, int err);
	void *owner;
};
/* Start connecting to p->addr from p->bind_host: 0, or -1 with errno as tconnect_start. */
int tcp_connector_start(struct tcp_connector *k, const struct tconnect_params *p,
                        void (*done)(struct tcp_connector *k, int fd, int err), void *owner);
/* Before done() ran: stop and close. */
void tcp_connector_cancel(struct tcp_connector *k);

/* The stream members of transport_tcp, shared by siblings whose streams are TCP streams with a
 * layer (tcp_stream_create_io): ".send = tcp_send, ..." in a struct transport_ops initializer. */
void tcp_send(struct tstream *s, struct outq_item *it);
void tcp_send_lazy(struct tstream *s, struct outq_item *it);
int tcp_send_small(struct tstream *s, uint16_t type, uint16_t flags, const void *payload,
                   uint32_t len, bool lazy);
void tcp_set_lazy(struct tstream *s, double delay, size_t bytes);
size_t tcp_queued(const struct tstream *s);
void tcp_pause(struct tstream *s, bool paused);
double tcp_idle(const struct tstream *s);
void tcp_try_flush(struct tstream *s);
void tcp_close(struct tstream *s);
int tcp_peer_name(const struct tstream *s, char *buf, size_t len);
#define TCP_STREAM_OPS                                                                             \
	.send = tcp_send, .send_lazy = tcp_send_lazy, .send_small = tcp_send_small,                \
	.set_lazy = tcp_set_lazy, .queued = tcp_queued, .pause = tcp_pause, .idle = tcp_idle,      \
	.try_flush = tcp_try_flush, .close = tcp_close, .peer_name = tcp_peer_name

#endif
