/* SPDX-License-Identifier: MIT */
/*
 * The data path of one volume: NBD requests become volume requests here (struct vol_io), and
 * this folder moves each one through its life until it is answered (req.h). The local backing
 * store is the volume's own business; replication plugs in through one small interface that it
 * fills in (struct vol_repl_ops), so nbd/ never knows whether a write is replicated and volume/
 * never includes anything of repl/.
 */
#ifndef HAK_VOLUME_H
#define HAK_VOLUME_H

#include <stdbool.h>
#include <stdint.h>

#include "io/io.h"
#include "lib/lathist.h"
#include "lib/rangelock.h"

struct volume;
struct hak_volume_cfg;

enum vol_op {
	VOL_READ = 0,
	VOL_WRITE,
	VOL_FLUSH,
	VOL_TRIM,
	VOL_ZERO,
	VOL_CACHE,
	VOL_BLOCK_STATUS,
	VOL_OP__COUNT
};

#define VOL_F_FUA       (1u << 0)
#define VOL_F_NO_HOLE   (1u << 1) /* ZERO: the range must stay allocated */
#define VOL_F_FAST_ZERO (1u << 2) /* ZERO: fail with ENOTSUP rather than write zeroes slowly */

struct vol_io {
	enum vol_op op;
	unsigned flags;
	uint64_t off;
	uint64_t len;
	void *buf;             /* READ / WRITE */
	struct io_extent *map; /* BLOCK_STATUS (and structured READ hole detection) */
	unsigned map_max;
	unsigned map_count;
	int err; /* 0 or a positive errno, set before done() */
	void (*done)(struct vol_io *vio);
	void *data;

	/* Private to volume/ (the request's life: req.c) and replication. */
	struct volume *vol;
	unsigned rq;   /* RQ_* state bits (req.h), changed only by req_mod() */
	int local_err; /* the local side's result once RQ_LOCAL_DONE */
	struct io_req io;
	int stage; /* volume.c: which step of a multi-step TRIM/ZERO/FUA runs */
	uint64_t zero_pos;
	/*
	 * The one queue or range lock the request is in at a time, if any: frozen (volume.c),
	 * waiting for the activity log, for a send slot, behind an overlapping write, in flight
	 * locally (repl/ship.c), waiting for a forwarded read (repl/diskless.c). range.owner says
	 * which, so a request can never sit in two by mistake.
	 */
	struct range range;
	/* Replication's own: the send slot's id (UINT64_MAX: never sent), whether the request
	 * holds activity-log references on its extents, and a read forwarded to the peer in
	 * chunks (outstanding, next offset, first error). */
	uint64_t rid;
	bool al_held;
	unsigned rr_pending;
	uint64_t rr_next;
	int rr_err;
	/* Writes and flushes: when the request arrived (CLOCK_MONOTONIC ns), for vol_stats.lat. */
	int64_t t_start;
	struct vol_io *fence_next; /* parked while the volume fences (req.c) */
};

/*
 * Where a request's time goes, from its arrival: until the local side finished, until the peer
 * answered (ack, receipt or loss), and until the client was answered; peer_last counts the
 * requests whose peer answered after the local side had finished (the peer set the pace).
 */
struct vol_lat {
	struct lathist total, local, peer;
	uint64_t peer_last;
};

enum vol_lat_kind { VOL_LAT_WRITE = 0, VOL_LAT_FLUSH, VOL_LAT__COUNT };

struct vol_stats {
	uint64_t ops[VOL_OP__COUNT];
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t errors;
	uint64_t in_flight;
	struct vol_lat lat[VOL_LAT__COUNT]; /* writes (WRITE only) and flushes */
};

/*
 * The door between the volume and replication: replication fills these in (volume_set_repl)
 * and the volume calls nothing else of it. Every callback gets the ctx given with them.
 */
struct vol_repl_ops {
	/* A WRITE, TRIM, ZERO or FLUSH of a primary, before its local I/O: send it to the peer or
	 * record it in the bitmap. 0: the local I/O may start now; 1: replication holds it and
	 * later moves it on with REQ_RESUME (or REQ_FAIL). */
	int (*submit)(void *ctx, struct vol_io *vio);
	/* The local side of a request finished (every op; the result is in vio->local_err). */
	void (*local_done)(void *ctx, struct vol_io *vio);
	/* The local disk no longer counts for vio (it failed, or is detached): its completion
	 * must wait for the peer's write acknowledgement instead. */
	void (*adopt)(void *ctx, struct vol_io *vio);
	/* A read of a Diskless volume, forwarded to the peer: 0 and REQ_LOCAL_DONE follows, or -1
	 * when the peer cannot serve it. */
	int (*remote_read)(void *ctx, struct vol_io *vio);
	/* A re-attached disk is being filled from the peer: its writes count once the peer has
	 * them, and reads of blocks not filled yet (local_stale) go to the peer. */
	bool (*attaching)(void *ctx);
	bool (*local_stale)(void *ctx, uint64_t off, uint64_t len);
	/* The local disk was detached (why: a sentence fragment). */
	void (*detached)(void *ctx, const char *why);
};

/* Open the backing store of cfg. 0 or -1 with errno (and a log line saying what failed). */
int volume_open(const struct hak_volume_cfg *cfg, struct io_engine *io, struct volume **out);
/* fdatasync and close; the caller has drained every operation. */
int volume_close(struct volume *vol);

/* A new request from a client: it completes through vio->done(), never inside this call. 0, or
 * -1 with errno EINVAL for an unknown op. */
int volume_submit(struct volume *vol, struct vol_io *vio);

void volume_set_repl(struct volume *vol, const struct vol_repl_ops *ops, void *ctx);
/* Clear req and aim it at the backing store (io_req_prep on its descriptor, buffered when the
 * store is not opened O_DIRECT): replication's own reads, writes and flushes of the volume. */
void volume_io_prep(const struct volume *vol, struct io_req *req, enum io_op op, uint64_t off,
                    uint64_t len, void *buf, void (*done)(struct io_req *req), void *data);
/* The O_DIRECT twin of a buffered volume's descriptor, for large aligned writes (4 KiB-aligned
 * offset, length and buffer); -1 on a direct-io volume (its own fd is direct) or when there is
 * none. */
int volume_bulk_fd(const struct volume *vol);
/* A page-aligned buffer of zeroes, *len bytes (1 MiB), valid while any volume exists: what a
 * store that cannot punch or zero a range gets written instead. */
const void *volume_zeroes(size_t *len);
/* A write on volume_bulk_fd() failed with err although aligned: stop using it (logged once). */
void volume_bulk_refused(struct volume *vol, int err);
/* Limit the exported size (internal metadata occupies the tail of the backing store). */
void volume_set_size(struct volume *vol, uint64_t size);

/*
 * Disk failure (on-io-error detach). volume_detach stops local I/O (every request goes through
 * the peer from now on); the operator's "hakctl detach" and a failed request both end here.
 * volume_attach opens the backing store again (the caller then resyncs it from the peer).
 * 0, or -1 with errno.
 */
int volume_detach(struct volume *vol, int err, const char *why);
int volume_attach(struct volume *vol);
bool volume_diskless(const struct volume *vol);

/*
 * The cluster manager's freeze: while frozen, new writes, trims, zeroes and flushes wait in
 * arrival order (reads go on); unfreezing submits them as if they arrived then. In-flight
 * requests complete normally.
 */
void volume_freeze(struct volume *vol, bool frozen);
bool volume_frozen(const struct volume *vol);
/*
 * The cluster manager's step-down without quorum: writes fail with EIO instead of waiting (the
 * held ones at once, new ones on arrival), and so does every write still in flight that the
 * peer never confirmed, whose data exists only here. Reads go on. volume_frozen() is true
 * meanwhile; volume_freeze(vol, false) ends it.
 */
void volume_fail_writes(struct volume *vol);
bool volume_failing(const struct volume *vol);
/*
 * Replication's fence (fencing resource-only): the peer was lost and is not yet known to be
 * Outdated, so no write may be acknowledged. While on, a write whose peer was lost is parked,
 * neither answered nor failed, and new writes wait as in a freeze; off answers the parked ones
 * (they are in the bitmap) and lets the waiting ones go, unless the cluster manager's freeze
 * still holds them. volume_fail_writes() ends it too: the parked writes fail with EIO.
 */
void volume_fence(struct volume *vol, bool on);
bool volume_fencing(const struct volume *vol);
/* Writes parked by the fence now. */
unsigned volume_fence_parked(const struct volume *vol);
const char *volume_name(const struct volume *vol);
uint64_t volume_size(const struct volume *vol);
const struct hak_volume_cfg *volume_cfg(const struct volume *vol);
void volume_stats(const struct volume *vol, struct vol_stats *out);

#endif
