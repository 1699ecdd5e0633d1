/* SPDX-License-Identifier: MIT */
/*
 * transport rdma,tcp: replication over RDMA where it has a path, over TCP where it has none, and
 * back onto RDMA without a reconnect.
 *
 * The initiator tries RDMA first; a connect that fails (at once, or by an rdma_cm error or
 * timeout) goes on over TCP in the same attempt, logged once per change. The acceptor listens on
 * both (an RDMA listener that cannot bind is retried). While connected over TCP the initiator
 * tries RDMA every TSWITCH_RETRY seconds; once both new streams are up, authenticated and have
 * exchanged HELLOs flagged WIRE_F_SWITCH, each side ends each old stream with a SWITCH marker and
 * sends on the new ones from then on. A receiver reads an old stream up to the peer's marker and
 * keeps the matching new stream paused until then, so the frames of each stream stay in order
 * and the connection (its generation, its in-flight writes, its resync) goes on untouched. An old
 * stream closes once the marker went both ways. A failure of a new stream before the move closes
 * only the new streams; any other failure is an ordinary connection loss.
 */
#ifndef HAK_TSWITCH_H
#define HAK_TSWITCH_H

#include <jansson.h>
#include <stdbool.h>

#include "transport/transport.h"

struct repl;
struct wire_hello;

/* Seconds between two RDMA tries: the initiator's while connected over TCP, the acceptor's
 * RDMA listener while it cannot bind. A constant: a try costs one rdma_cm resolve, and a few
 * seconds more on TCP cost nothing but speed. */
#define TSWITCH_RETRY 2.0
/* Seconds a move may take from its first connect to its switch HELLOs (a connect that hangs
 * holds no retry back longer than this). */
#define TSWITCH_LIMIT 10.0

/* Before anything else of this file runs. */
void tswitch_init(struct repl *r);
/* The transports of the volume's configuration: r->p.transport and r->fallback. -1 with a
 * sentence in err when the build lacks the one configured. */
int tswitch_configure(struct repl *r, char *err, size_t errlen);
/* The acceptor's listeners for rdma,tcp (p as for the configured transport alone): -1 with
 * errno only when TCP cannot listen; RDMA that cannot is retried. */
int tswitch_listen(struct repl *r, const struct tlisten_params *p);
void tswitch_unlisten(struct repl *r);
/* The initiator's connect over r->conn_t failed with err: true when it should go on over the
 * fallback (r->conn_t is then the fallback; the change is logged once). */
bool tswitch_fall_back(struct repl *r, int err);
/* The handshake completed: says so in the log when the transport changed. */
void tswitch_connected(struct repl *r);
/* From the connection timer: the listener and the connection's RDMA retries. */
void tswitch_tick(struct repl *r);

/* Stream events of the move (repl.c routes them here). tswitch_hello takes a HELLO flagged
 * WIRE_F_SWITCH, or any HELLO on a new stream (bad: why it failed the checks, else NULL; pi: its
 * pending accept slot, or -1). tswitch_error: true when it handled the error of s. */
bool tswitch_is_new(const struct repl *r, const struct tstream *s);
void tswitch_hello(struct repl *r, struct tstream *s, uint16_t flags, const struct wire_hello *h,
                   const char *bad, int pi);
bool tswitch_error(struct repl *r, struct tstream *s, const char *why);
/* A SWITCH frame on s. */
void tswitch_marker(struct repl *r, struct tstream *s);
/* An old stream whose frames still belong to the connection. */
bool tswitch_draining(const struct repl *r, const struct tstream *s);
/* Backpressure on the data the peer sends (apply.c): pauses whichever stream carries it now. */
void tswitch_data_pause(struct repl *r, bool paused);
/* The connection is gone: every stream and connect of a move with it. */
void tswitch_drop(struct repl *r);
void tswitch_status(const struct repl *r, json_t *o);

#endif
