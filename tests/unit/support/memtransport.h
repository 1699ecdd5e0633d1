/* SPDX-License-Identifier: MIT */
/*
 * An in-memory replication transport for the unit tests: streams without sockets, driven by the
 * test. It lets a Check suite run the primary's ship path or the secondary's apply path and look
 * at every frame either sends.
 *
 *   - What the owner sends stays queued (tstream_queued counts it) until the test calls
 *     memwire_flush(): then the items' sent() callbacks run, as the loop would run them (never
 *     inside tstream_send), and their bytes are decoded, with wire.c, into frames the test reads
 *     in memwire.frames.
 *   - memwire_inject() hands a frame to the owner's frame callback (held while the owner paused
 *     the stream, delivered when it resumes), memwire_inject_error() fails the stream.
 *   - Listeners and connects complete when the test says: memlistener_accept(),
 *     memconnect_finish().
 *
 * Everything a stream did is recorded in a struct memwire the test owns, so the record outlives
 * the stream (its owner may close it inside a callback). Nothing here uses the event loop.
 */
#ifndef HAK_MEMTRANSPORT_H
#define HAK_MEMTRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

extern const struct transport_ops memtransport;

/* A frame the owner sent. */
struct mem_frame {
	struct wire_hdr hdr;
	uint8_t *payload; /* a malloc'ed copy; NULL when hdr.len is 0 */
	bool lazy;        /* sent with tstream_send_lazy or tstream_send_small_lazy */
};

/* One stream's record; zero it before use, memwire_free() it after. */
struct memwire {
	struct tstream *s; /* NULL once the owner closed it */
	struct mem_frame *frames;
	size_t n_frames, cap_frames;
	/* Why the bytes sent do not decode (what a receiver would fail the stream with); empty
	 * while they all did. */
	char bad[200];
	bool paused;       /* the owner's last tstream_pause */
	bool failed;       /* the stream failed (injected error, or a bad injected frame) */
	bool closed;       /* the owner closed it */
	size_t cancelled;  /* queued items dropped (ECANCELED) by the close */
	size_t held;       /* injected frames waiting for the owner to resume reading */
	double lazy_delay; /* the owner's last tstream_set_lazy */
	size_t lazy_bytes;
	double idle; /* what tstream_idle reports; the test sets it */
};

/* A stream recorded in w, of ops/ctx. -1 with errno=ENOMEM. */
int memstream_create(struct memwire *w, const struct tstream_ops *ops, void *ctx,
                     struct tstream **out);
/* Write everything queued: decode it into w->frames, then run each item's sent(it, 0). Nothing
 * once the stream is closed or failed. */
void memwire_flush(struct memwire *w);
/*
 * The peer sends a frame: its header goes through wire_hdr_decode (a bad one fails the stream,
 * as a real receiver would) and its payload is copied into a buffer the owner then owns. -1 with
 * errno=EPIPE when the stream is closed or failed.
 */
int memwire_inject(struct memwire *w, uint16_t type, uint16_t flags, const void *payload,
                   uint32_t len);
/* The connection fails: the owner's error callback hears why (a sentence fragment). */
void memwire_inject_error(struct memwire *w, const char *why);
/* Forget the frames recorded so far (the stream goes on). */
void memwire_clear(struct memwire *w);
/* Free the record. A stream still open is detached from it and records nothing more. */
void memwire_free(struct memwire *w);

/* The open listener on addr (as the owner passed it to tlistener_open), or NULL. */
struct tlistener *memtransport_listener(const char *addr);
/* A connection arrives at l: a stream recorded in w goes to the listener's accepted(). -1 with
 * errno=ENOMEM. */
int memlistener_accept(struct tlistener *l, struct memwire *w);
/* The oldest connect that has not finished, or NULL. */
struct tconnect *memtransport_connecting(void);
/* The address and port offset a connect was started with. */
const char *memconnect_addr(const struct tconnect *c, unsigned *port_offset);
/*
 * Finish c: with err 0 a stream recorded in w goes to the owner's done(), otherwise done() hears
 * err. c is gone afterwards. -1 with errno=ENOMEM (c is then still pending).
 */
int memconnect_finish(struct tconnect *c, struct memwire *w, int err);

#endif
