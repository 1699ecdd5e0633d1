/* SPDX-License-Identifier: MIT */
/*
 * Online verify (`hakctl verify VOL`) and the hash side of checksum-based resync.
 *
 * The node the operator runs `hakctl verify` on drives: it walks the volume in order, in runs of
 * up to 64 bitmap blocks (256 KiB with 4 KiB blocks), at most VERIFY_WINDOW runs in flight. For
 * each run it sends VERIFY_REQ and reads and hashes its own copy; the peer reads and hashes its
 * copy and answers VERIFY_REPLY. Blocks whose hashes differ are set in the driver's bitmap
 * (the next resync, `hakctl resync VOL`, merges both bitmaps and repairs them), counted, and the
 * first ranges are kept for the status and the log.
 *
 * Application writes go on during a verify. The rule that keeps them from showing up as false
 * differences:
 *  - a run's read, on either node, starts only when no write to its blocks is in flight on that
 *    node, so both reads include every write that was sent before the VERIFY_REQ;
 *  - the driver notes every write it submits (primary) or receives (secondary) while a run is
 *    in flight; those blocks are not compared, and are counted as skipped: the write itself
 *    brings both copies to the same data, and a write that failed on the peer is already in the
 *    bitmap.
 * The same responder answers CSUM_REQ during a checksum resync (RS_REQUEST), see resync.c.
 */
#ifndef HAK_VERIFY_H
#define HAK_VERIFY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "transport/wire.h"

struct repl;

#define VERIFY_WINDOW    16u /* driver: runs in flight */
#define VERIFY_PEER_MAX  64u /* responder: requests queued before the peer is cut off */
#define VERIFY_RUN_BYTES (256u * 1024u)

int verify_create(struct repl *r);
void verify_destroy(struct repl *r);

/* Operator: start a verify driven by this node. 0, or -1 with a sentence in err. */
int verify_start(struct repl *r, char *err, size_t errlen);
bool verify_running(const struct repl *r);
/* The connection is gone: an unfinished verify is reported as interrupted, peer requests go. */
void verify_stop(struct repl *r);

/* VERIFY_REQ, VERIFY_REPLY, CSUM_REQ from the peer (takes the payload). */
void verify_frame(struct repl *r, const struct wire_hdr *h, uint8_t *payload);

/* A write to [off, off+len) was submitted (primary) or received (secondary). */
void verify_note_write(struct repl *r, uint64_t off, uint64_t len);
/* A write finished: reads waiting behind it may start. */
void verify_pump(struct repl *r);

/* The "verify" status object, NULL before the first verify. */
json_t *verify_status_json(const struct repl *r);

#endif
