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
struct hak_volume_cfg;

/* Forwarded read chunks in flight (at most WIRE_READ_MAX each: 64 MiB of buffers); the attach
 * pull keeps ATTACH_WINDOW more. The serving side accepts no more than both together. */
#define RREAD_SLOTS   64u
#define ATTACH_WINDOW 8u

/*
 * Whether a failed request means the disk is failing (EIO, ENXIO, ENODEV, ENOMEDIUM, EROFS,
 * EREMOTEIO, EBADF, EUCLEAN...), as opposed to a request the store merely cannot do (ENOSPC,
 * ENOTSUP, EINVAL, EFBIG): those go to the client and leave the disk attached.
 */
bool diskless_is_disk_error(int err);
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

/* "EIO", "ENODEV": the symbolic name (events take no spaces). */
const char *diskless_errno_name(int err);
double diskless_now(void);

/*
 * Run local-io-error-hook (if configured) as "HOOK VOLUME ERRNO-NAME OP POLICY" with the same in
 * HAK_VOLUME, HAK_ERROR, HAK_OP, HAK_POLICY; never waits for it (ev_child reaps it and logs
 * the exit status). At most a few run at once; more are skipped with a log line.
 */
void diskless_hook_run(const struct hak_volume_cfg *vc, const char *op, int err,
                       const char *policy);

/* repl.c hooks. */
void diskless_read_req(struct repl *r, const struct wire_hdr *h, uint8_t *payload);
void diskless_read_reply(struct repl *r, const struct wire_hdr *h, uint8_t *payload);
/* The connection ended: forwarded reads fail with EIO, served reads are dropped. */
void diskless_conn_lost(struct repl *r);
/* An apply finished on the secondary: reads waiting behind it may start. */
void diskless_apply_progress(struct repl *r);
/* Free everything (shutdown, after the I/O engine drained). */
void diskless_destroy(struct repl *r);

#endif
