/* SPDX-License-Identifier: MIT */
/*
 * Disk failure and the Diskless state (on-io-error detach, DRBD's default).
 *
 * When the backing store of a primary fails a request, volume.c detaches it: the disk becomes
 * Diskless, the metadata stops calling it consistent (it can never be promoted from, nor be a
 * resync source), the peer learns it through WIRE_STATE, and the volume goes on through the peer:
 *   - writes complete once the peer confirmed them on its disk (WRITE_ACK, in every mode: with
 *     the local copy gone, a write only the peer's memory holds would not survive a peer crash);
 *   - reads travel to the peer as READ_REQ and come back as READ_REPLY (at most RREAD_SLOTS
 *     chunks of WIRE_READ_MAX in flight, the rest queued);
 *   - with no connected UpToDate peer, every request fails with EIO: there is no copy left.
 * "hakctl attach" reopens the backing store and resyncs all of it from the peer.
 *
 * The secondary serves READ_REQ: a read waits for applies of overlapping writes received
 * before it, so it never returns data older than a write the primary already sent.
 */
#ifndef HAK_DISKLESS_H
#define HAK_DISKLESS_H

#include <stdbool.h>
#include <stdint.h>

struct repl;
struct wire_hdr;

/*
 * The handshake when either side is Diskless (self/peer: enum repl_disk values; gens: the
 * current generation IDs). There is nothing to resync; the diskful side must be UpToDate and of
 * the same generation, so that it can serve for both.
 */
enum diskless_verdict {
	DL_NONE = 0,      /* neither side is Diskless: the generation IDs decide as usual */
	DL_ACCEPT,        /* connect without a resync */
	DL_BOTH_DISKLESS, /* refuse: no disk attached anywhere */
	DL_NO_GOOD_COPY,  /* refuse: the diskful side is not UpToDate or of another generation */
};
enum diskless_verdict diskless_handshake(int self_disk, int peer_disk, uint64_t self_gen,
                                         uint64_t peer_gen);

struct vol_io;

/* Register the hooks (repl_create): a lost connection fails forwarded reads and drops served
 * ones; a finished apply lets served reads waiting behind it start. */
void diskless_init(struct repl *r);
/* The volume's door (ctx is the repl): the local disk was detached; a read goes to the peer. */
void diskless_detached(void *ctx, const char *reason);
int diskless_remote_read(void *ctx, struct vol_io *vio);
void diskless_read_req(struct repl *r, const struct wire_hdr *h, uint8_t *payload);
void diskless_read_reply(struct repl *r, const struct wire_hdr *h, uint8_t *payload);
/* Free everything (shutdown, after the I/O engine drained). */
void diskless_destroy(struct repl *r);

#endif
