/* SPDX-License-Identifier: MIT */
/*
 * The data path of one volume: NBD requests become volume operations here, and this module
 * decides how they complete. Today that is the local backing store only; replication hooks in
 * here, so nbd.c never needs to know whether a write is replicated.
 */
#ifndef HAK_VOLUME_H
#define HAK_VOLUME_H

#include <stdbool.h>
#include <stdint.h>

#include "io/io.h"

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

	/* Private to volume.c and repl.c. */
	struct volume *vol;
	struct io_req io;
	int stage;
	uint64_t zero_pos;
	bool local_done; /* the backing store finished (local_err holds its result) */
	bool peer_wait;  /* completion also waits for the peer (volume_peer_done) */
	bool al_held;    /* holds activity-log references on its extents (repl.c) */
	int local_err;
	uint64_t rid;         /* replication id while tracked by repl.c */
	struct vol_io *rnext; /* repl.c's lists */
	/* The local disk failed this request or is detached: the result is the peer's. */
	bool remote_only;
	bool peer_acked; /* the peer confirmed this write (or barrier) on its disk */
	/* A read forwarded to the peer (diskless.c): chunks outstanding, next offset, result. */
	unsigned rr_pending;
	uint64_t rr_next;
	int rr_err;
	struct vol_io *fnext; /* volume.c's queue of writes held while frozen */
};

struct vol_stats {
	uint64_t ops[VOL_OP__COUNT];
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t errors;
	uint64_t in_flight;
};

/* Open the backing store of cfg. 0 or -1 with errno (and a log line saying what failed). */
int volume_open(const struct hak_volume_cfg *cfg, struct io_engine *io, struct volume **out);
/* fdatasync and close; the caller has drained every operation. */
int volume_close(struct volume *vol);

int volume_submit(struct volume *vol, struct vol_io *vio);

/* Replication hooks (repl.c). */
struct repl;
void volume_set_repl(struct volume *vol, struct repl *r);
struct repl *volume_repl(const struct volume *vol);
int volume_fd(const struct volume *vol);
/* The O_DIRECT twin of a buffered volume's descriptor, for large aligned writes (4 KiB-aligned
 * offset, length and buffer); -1 on a direct-io volume (its own fd is direct) or when there is
 * none. */
int volume_bulk_fd(const struct volume *vol);
/* A write on volume_bulk_fd() failed with err although aligned: stop using it (logged once). */
void volume_bulk_refused(struct volume *vol, int err);
/* The peer side of vio is settled (acked, or recorded in the bitmap); completes it if the local
 * side is done too. */
void volume_peer_done(struct vol_io *vio);
/* Start the local I/O of a request repl_submit() deferred. */
void volume_resume(struct vol_io *vio);
/* Complete a request repl_submit() deferred without starting it (err: positive errno). */
void volume_fail(struct vol_io *vio, int err);
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
/* A read the peer served for a diskless volume (repl.c / diskless.c): err 0 or an errno. */
void volume_remote_read_done(struct vol_io *vio, int err);

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
const char *volume_name(const struct volume *vol);
uint64_t volume_size(const struct volume *vol);
bool volume_is_blockdev(const struct volume *vol);
const struct hak_volume_cfg *volume_cfg(const struct volume *vol);
void volume_stats(const struct volume *vol, struct vol_stats *out);

#endif
