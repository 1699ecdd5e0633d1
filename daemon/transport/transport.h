/* SPDX-License-Identifier: MIT */
/*
 * Replication transport: a framed, non-blocking byte stream to the peer. TCP today; TLS and RDMA
 * will sit behind the same calls. A stream parses frames (validated by wire.c) and hands each to
 * its owner with the payload in a buffer the owner then owns (buf_put(payload, hdr->len)).
 */
#ifndef HAK_TRANSPORT_H
#define HAK_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/outq.h"
#include "wire.h"

struct ev_loop;
struct tstream;

struct tstream_ops {
	/* One validated frame; payload is NULL when hdr->len == 0. */
	void (*frame)(void *ctx, struct tstream *s, const struct wire_hdr *hdr, uint8_t *payload);
	/* The stream failed (peer closed, bad frame, socket error); why is a sentence fragment. The
	 * owner must call tstream_close(). */
	void (*error)(void *ctx, struct tstream *s, const char *why);
};

int tstream_create(struct ev_loop *loop, int fd, const struct tstream_ops *ops, void *ctx,
                   struct tstream **out);
/* Queue an item; it is written before the loop sleeps next. */
void tstream_send(struct tstream *s, struct outq_item *it);
/* Convenience: a frame whose whole payload fits the inline header (≤ 36 bytes); allocated and
 * freed by the stream. -1 with errno=ENOMEM. */
int tstream_send_small(struct tstream *s, uint16_t type, uint16_t flags, const void *payload,
                       uint32_t len);
/*
 * Coalescing for traffic nobody waits on (async mode's data and acks): an item queued with
 * tstream_send_lazy may wait up to `delay` seconds, until `bytes` are queued, or until the next
 * tstream_send, so a stream of small frames leaves as a few large packets. Every packet crossing
 * between two machines costs an interrupt, a softirq and a wake-up on each side, which at one
 * frame per packet cost more CPU than the writes themselves. A delay of 0 (the default) makes
 * lazy sends ordinary ones.
 */
void tstream_set_lazy(struct tstream *s, double delay, size_t bytes);
void tstream_send_lazy(struct tstream *s, struct outq_item *it);
int tstream_send_small_lazy(struct tstream *s, uint16_t type, uint16_t flags, const void *payload,
                            uint32_t len);
size_t tstream_queued(const struct tstream *s);
/* Stop or resume reading (backpressure). */
void tstream_pause(struct tstream *s, bool paused);
/* Seconds since the last byte arrived. */
double tstream_idle(const struct tstream *s);
/* Try once, without blocking, to write what is queued (a last word before closing). */
void tstream_try_flush(struct tstream *s);
/* Drop queued output (callbacks see ECANCELED), close the socket, free. Safe inside callbacks. */
void tstream_close(struct tstream *s);

/* TCP helpers: "HOST:PORT" / "[V6]:PORT". Both return a non-blocking fd or -1 with errno. */
int tcp_listen_addr(const char *addr, unsigned port_offset);
/* Starts a non-blocking connect; completion is signalled by writability (check SO_ERROR). */
int tcp_connect_addr(const char *addr, unsigned port_offset, const char *bind_host);
/* Socket options for a replication stream: no Nagle, keepalive, short user timeout. */
void tcp_tune(int fd);

#endif
