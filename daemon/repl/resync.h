/* SPDX-License-Identifier: MIT */
/* Bitmap exchange and the resync that follows (resync.c): see there. Private to daemon/repl/
 * but for resync_pause(), an operator command. */
#ifndef HAK_RESYNC_H
#define HAK_RESYNC_H

#include <ev.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta/gen.h"

struct repl;
struct rs_op;
struct wire_hdr;

/* Register the resync's hooks and timer (repl_create). */
void resync_init(struct repl *r);
void resync_begin(struct repl *r, enum gen_decision d, int rule, bool peer_resumable,
                  bool self_resumable);
void resync_frame(struct repl *r, const struct wire_hdr *h, uint8_t *payload);
void resync_pump(struct repl *r);
void resync_stop(struct repl *r);
void resync_rs_ack(struct repl *r, uint64_t id, uint32_t status);
json_t *resync_status_json(const struct repl *r);
void resync_send_op(struct repl *r, struct rs_op *op);
void resync_free_op(struct rs_op *op);
/* A local write of the primary to [off, off+len) is in flight: a run there must wait. */
bool resync_overlaps_write(const struct repl *r, uint64_t off, uint64_t len);
/* The peer paused (true) or resumed its resyncs (WIRE_RS_PAUSE). */
void resync_peer_pause(struct repl *r, bool paused);
/* hakctl pause-sync / resume-sync: hold (pause) or release resyncs on this node; the peer is
 * told, so either side may ask. 0, or -1 with a sentence in err. */
int resync_pause(struct repl *r, bool pause, char *err, size_t errlen);

#endif
