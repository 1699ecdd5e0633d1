/* SPDX-License-Identifier: MIT */
/* Private to volume/: the volume itself, shared by volume.c (the backing store and its I/O) and
 * req.c (the requests' life). */
#ifndef HAK_VOLUME_INT_H
#define HAK_VOLUME_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/rangelock.h"
#include "volume.h"

struct volume {
	const struct hak_volume_cfg *cfg;
	struct io_engine *io;
	int fd;
	uint64_t size;
	struct vol_stats st;
	const struct vol_repl_ops *repl; /* NULL: a standalone export */
	void *repl_ctx;
	bool diskless;             /* detached: no local I/O, everything through the peer */
	int stale_fd;              /* the detached backing store's fd, closed at attach or close */
	int bulk_fd;               /* O_DIRECT twin of fd for resync writes, or -1 */
	int stale_bulk_fd;         /* bulk_fd of the detached backing store, as stale_fd */
	bool bulk_off;             /* the backing store refused an aligned direct write */
	double passon_log;         /* rate limit of pass-on error lines */
	bool frozen;               /* the cluster manager holds new writes (lost quorum) */
	bool failing;              /* ... or fails them: volume_fail_writes() */
	struct rangelock frozen_q; /* held writes, in arrival order */
	bool fencing;              /* replication's fence: volume_fence() */
	struct vol_io *fence_head, *fence_tail; /* writes whose answer the fence holds */
	unsigned fence_parked;
};

/* req.c: answer the writes the fence parked (their result as req_result() finds it now). */
void req_fence_release(struct volume *v);

/* volume.c: start the local side of vio: its I/O on the backing store, or through the peer when
 * the disk is gone or does not hold the range yet. Ends in REQ_LOCAL_DONE. */
void vol_local_start(struct vol_io *vio);
/* volume.c: the local side failed with err. true when the volume detached (or was detached) and
 * vio goes on through the peer; false when the error is the request's result. */
bool vol_disk_error(struct vol_io *vio, int err);

#endif
