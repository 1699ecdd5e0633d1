/* SPDX-License-Identifier: MIT */
/*
 * Replication transports: one operations interface, implementations chosen by name (like DRBD's
 * drbd_transport_ops and hastd's proto_*.c). A transport listens and connects, and each
 * connection is a framed, non-blocking stream to the peer. A stream parses frames (validated by
 * wire.c, shared by every implementation) and hands each to its owner with the payload in a
 * buffer the owner then owns (buf_put(payload, hdr->len)).
 *
 * Implementations: tcp (tcp.c), tls (tls.c, TCP streams with a TLS 1.3 layer) and, where the
 * build found rdma-core, rdma (rdma.c, RC queue pairs). The unit tests add an in-memory one
 * (tests/unit/support/memtransport.h).
 *
 * Callers use the tstream_* / tlistener_* / tconnect_* calls below, which dispatch through the
 * object's transport (one indirect call). Implementations embed struct tstream, struct tlistener
 * and struct tconnect as the first member of their own objects.
 */
#ifndef HAK_TRANSPORT_H
#define HAK_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/outq.h"
#include "wire.h"

struct ev_loop;
struct transport_ops;

/* The owner (ops, ctx) lives in the base so a layer above the transport (peerauth) can run a
 * stream's first frames itself and then hand it over. */
struct tstream {
	const struct transport_ops *t;
	const struct tstream_ops *ops;
	void *ctx;
	/* A frame announcing a longer payload fails the stream before anything is allocated for
	 * it (0: the wire's maximum). Kept small while a connection has not authenticated, so a
	 * stranger cannot make this node reserve 32 MiB per connection. */
	uint32_t max_payload;
};
struct tlistener {
	const struct transport_ops *t;
};
struct tconnect {
	const struct transport_ops *t;
};

/* What the owner of a stream hears. */
struct tstream_ops {
	/* One validated frame; payload is NULL when hdr->len == 0. */
	void (*frame)(void *ctx, struct tstream *s, const struct wire_hdr *hdr, uint8_t *payload);
	/* The stream failed (peer closed, bad frame, socket error); why is a sentence fragment. The
	 * owner must call tstream_close(). */
	void (*error)(void *ctx, struct tstream *s, const char *why);
};

/* A listener: every accepted connection becomes a stream of ops/ctx, handed to accepted(), which
 * owns it from then on (tstream_close() refuses it). */
struct tauth;
struct tlisten_params {
	struct ev_loop *loop;
	/* Authenticate every connection first (peerauth.h); NULL: hand them over as they come.
	 * Kept by the caller as long as the listener. */
	struct tauth *auth;
	const char *addr;     /* "HOST:PORT" or "[V6]:PORT" */
	unsigned port_offset; /* added to PORT */
	const struct tstream_ops *ops;
	void *ctx;
	void (*accepted)(void *ctx, struct tlistener *l, struct tstream *s);
	void *topts; /* the transport's own options (tls: a struct tls_ctx); NULL for tcp */
};

/* An outgoing connection: done() runs once, from the loop, with the stream (of ops/ctx, owned by
 * the caller) or with s NULL and err the errno of the failure. The tconnect is gone after it. */
struct tconnect_params {
	struct ev_loop *loop;
	struct tauth *auth; /* as for tlisten_params: done() gets only an authenticated stream */
	const char *addr;   /* "HOST:PORT" or "[V6]:PORT" */
	unsigned port_offset;
	const char *bind_host; /* leave from this address; NULL: the kernel picks */
	const struct tstream_ops *ops;
	void *ctx;
	void (*done)(void *ctx, struct tconnect *c, struct tstream *s, int err);
	void *topts; /* as in tlisten_params */
};

/* One implementation. Every member is required but peer_name (peerauth.c's wrapper, which only
 * stands for listeners and connect attempts, has just their two close calls); the semantics are
 * those of the public calls below, which check nothing but NULL handles. */
struct transport_ops {
	const char *name; /* as the configuration names it: "tcp" */
	int (*listen)(const struct tlisten_params *p, struct tlistener **out);
	void (*listener_close)(struct tlistener *l);
	int (*connect)(const struct tconnect_params *p, struct tconnect **out);
	void (*connect_cancel)(struct tconnect *c);

	void (*send)(struct tstream *s, struct outq_item *it);
	void (*send_lazy)(struct tstream *s, struct outq_item *it);
	/* A frame whose payload fits the inline header, eager or lazy: an implementation may post
	 * it without an outq_item (tstream_small_item() builds one for those that do not). */
	int (*send_small)(struct tstream *s, uint16_t type, uint16_t flags, const void *payload,
	                  uint32_t len, bool lazy);
	void (*set_lazy)(struct tstream *s, double delay, size_t bytes);
	size_t (*queued)(const struct tstream *s);
	void (*pause)(struct tstream *s, bool paused);
	double (*idle)(const struct tstream *s);
	void (*try_flush)(struct tstream *s);
	void (*close)(struct tstream *s);
	/* Optional (NULL: the transport cannot tell, as for an in-memory one). */
	int (*peer_name)(const struct tstream *s, char *buf, size_t len);
};

/* The transport built under this name ("tcp"), or NULL with errno=ENOENT. */
const struct transport_ops *transport_find(const char *name);

/* Listen on p->addr. -1 with errno (EINVAL for a malformed address, or the socket's error). */
int tlistener_open(const struct transport_ops *t, const struct tlisten_params *p,
                   struct tlistener **out);
/* Stop accepting and free; streams already handed over stay open. NULL is ignored. */
void tlistener_close(struct tlistener *l);
/* Start connecting to p->addr. -1 with errno when it fails at once (done() is then not called).
 */
int tconnect_start(const struct transport_ops *t, const struct tconnect_params *p,
                   struct tconnect **out);
/* Abandon a connect whose done() has not run (it never will). NULL is ignored. */
void tconnect_cancel(struct tconnect *c);

/* Queue an item; it is written before the loop sleeps next. The item's sent() runs once it is
 * written or dropped, never inside this call unless the stream already failed (ECONNRESET). */
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
/* Stop or resume reading (backpressure). Frames already received are delivered on resume. */
void tstream_pause(struct tstream *s, bool paused);
/* Seconds since the last byte arrived. */
double tstream_idle(const struct tstream *s);
/* Try once, without blocking, to write what is queued (a last word before closing). NULL is
 * ignored. */
void tstream_try_flush(struct tstream *s);
/* The remote end of s as "HOST:PORT" or "[V6]:PORT", for log lines. -1 when the transport cannot
 * tell (buf then says "an unknown address"). */
int tstream_peer_name(const struct tstream *s, char *buf, size_t len);
/* Give the stream's callbacks to another owner; frames after this call go to ops/ctx. */
void tstream_set_owner(struct tstream *s, const struct tstream_ops *ops, void *ctx);
/* Drop queued output (callbacks see ECANCELED), close the connection, free. Safe inside the
 * stream's callbacks. NULL is ignored. */
void tstream_close(struct tstream *s);

/* For implementations: a heap item carrying one small frame, freed by its sent(); NULL with
 * errno=ENOMEM (also when len does not fit). */
struct outq_item *tstream_small_item(uint16_t type, uint16_t flags, const void *payload,
                                     uint32_t len);

#endif
