/* SPDX-License-Identifier: MIT */
#include "volume.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/config.h"
#include "diskerr.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "req.h"
#include "volume_int.h"

#define ZERO_CHUNK (1u << 20)

/* Shared by every volume for the write-zeroes fallback; never written to. */
static void *zero_buf;

enum { ST_MAIN = 0, ST_RETRY_ZERO, ST_WRITE_ZEROES, ST_FUA_SYNC };

/*
 * A buffered volume also gets an O_DIRECT descriptor for the resync target's runs: written
 * through the page cache, each GiB of resync cost the target's CPU a copy plus the writeback
 * (1-2 s of CPU per GiB here), where a direct write hands the pages to the device. A backing
 * store that cannot do O_DIRECT (tmpfs before Linux 6.6, some FUSE filesystems) keeps every
 * write buffered.
 */
static int vol_open_bulk(const struct hak_volume_cfg *cfg)
{
	if (cfg->direct_io || cfg->read_only)
		return -1;
	int fd = open(cfg->backing, O_RDWR | O_CLOEXEC | O_DIRECT);
	if (fd < 0)
		log_vol(LOG_LVL_INFO, cfg->name, NULL,
		        "Resync writes to %s go through the page cache: it cannot be opened with "
		        "O_DIRECT (%s).",
		        cfg->backing, strerror(errno));
	return fd;
}

int volume_open(const struct hak_volume_cfg *cfg, struct io_engine *io, struct volume **out)
{
	struct volume *v = NULL;
	struct stat sb;
	int flags = (cfg->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	int rc = -1, saved;

	if (cfg->direct_io)
		flags |= O_DIRECT;
	if (!zero_buf && posix_memalign(&zero_buf, 4096, ZERO_CHUNK) != 0) {
		errno = ENOMEM;
		goto out;
	}
	memset(zero_buf, 0, ZERO_CHUNK);
	v = calloc(1, sizeof(*v));
	if (!v)
		goto out;
	v->cfg = cfg;
	v->io = io;
	v->stale_fd = -1;
	v->bulk_fd = v->stale_bulk_fd = -1;
	v->fd = open(cfg->backing, flags);
	if (v->fd < 0) {
		log_vol(LOG_LVL_ERR, cfg->name, NULL, "Cannot open backing store %s: %s.",
		        cfg->backing, strerror(errno));
		goto out;
	}
	if (fstat(v->fd, &sb) < 0)
		goto out;
	if (S_ISBLK(sb.st_mode)) {
		if (ioctl(v->fd, BLKGETSIZE64, &v->size) < 0) {
			log_vol(LOG_LVL_ERR, cfg->name, NULL,
			        "Cannot read the size of block device %s: %s.", cfg->backing,
			        strerror(errno));
			goto out;
		}
	} else if (S_ISREG(sb.st_mode)) {
		v->size = (uint64_t)sb.st_size;
	} else {
		log_vol(LOG_LVL_ERR, cfg->name, NULL,
		        "Backing store %s is neither a regular file nor a block device.",
		        cfg->backing);
		errno = EINVAL;
		goto out;
	}
	v->bulk_fd = vol_open_bulk(cfg);
	rangelock_init(&v->frozen_q);
	*out = v;
	v = NULL;
	rc = 0;
out:
	saved = errno;
	if (v) {
		if (v->fd >= 0)
			close(v->fd);
		free(v);
	}
	errno = saved;
	return rc;
}

int volume_close(struct volume *vol)
{
	int rc = 0;
	if (!vol)
		return 0;
	if (!vol->cfg->read_only && !vol->diskless && fdatasync(vol->fd) < 0) {
		log_vol(LOG_LVL_ERR, vol->cfg->name, NULL, "Final fdatasync of %s failed: %s.",
		        vol->cfg->backing, strerror(errno));
		rc = -1;
	}
	close(vol->fd);
	if (vol->stale_fd >= 0)
		close(vol->stale_fd);
	if (vol->bulk_fd >= 0)
		close(vol->bulk_fd);
	if (vol->stale_bulk_fd >= 0)
		close(vol->stale_bulk_fd);
	free(vol);
	return rc;
}

static void vol_issue(struct vol_io *vio, enum io_op op, uint64_t off, uint64_t len, void *buf,
                      unsigned flags);

static void vol_fua_or_done(struct vol_io *vio)
{
	if (vio->flags & VOL_F_FUA) {
		vio->stage = ST_FUA_SYNC;
		vol_issue(vio, IO_OP_FDATASYNC, 0, 0, NULL, 0);
		return;
	}
	req_mod(vio, REQ_LOCAL_DONE, 0);
}

static void vol_write_zeroes_next(struct vol_io *vio)
{
	uint64_t end = vio->off + vio->len;
	if (vio->zero_pos >= end) {
		vol_fua_or_done(vio);
		return;
	}
	uint64_t n = end - vio->zero_pos < ZERO_CHUNK ? end - vio->zero_pos : ZERO_CHUNK;
	vio->stage = ST_WRITE_ZEROES;
	vol_issue(vio, IO_OP_WRITE, vio->zero_pos, n, zero_buf, 0);
	vio->zero_pos += n;
}

const void *volume_zeroes(size_t *len)
{
	*len = ZERO_CHUNK;
	return zero_buf;
}

/* TRIM and WRITE_ZEROES: fallocate first, fall back as the request's flags allow. */
static void vol_zero_done(struct vol_io *vio, int64_t res)
{
	bool unsupported = res == -EOPNOTSUPP || res == -ENOTSUP || res == -EINVAL;

	if (vio->stage == ST_WRITE_ZEROES) {
		if (res < 0)
			req_mod(vio, REQ_LOCAL_DONE, (int)-res);
		else
			vol_write_zeroes_next(vio);
		return;
	}
	if (res >= 0) {
		vol_fua_or_done(vio);
		return;
	}
	if (!unsupported) {
		req_mod(vio, REQ_LOCAL_DONE, (int)-res);
		return;
	}
	if (vio->op == VOL_TRIM) {
		/* TRIM is advisory: a store that cannot punch holes simply keeps the data. */
		vol_fua_or_done(vio);
		return;
	}
	if (vio->stage == ST_MAIN && !(vio->flags & VOL_F_NO_HOLE)) {
		vio->stage = ST_RETRY_ZERO;
		vol_issue(vio, IO_OP_ZERO, vio->off, vio->len, NULL, 0);
		return;
	}
	if (vio->flags & VOL_F_FAST_ZERO) {
		req_mod(vio, REQ_LOCAL_DONE, ENOTSUP);
		return;
	}
	vio->zero_pos = vio->off;
	vol_write_zeroes_next(vio);
}

static void vol_io_done(struct io_req *req)
{
	struct vol_io *vio = req->data;

	if (vio->stage == ST_FUA_SYNC) {
		req_mod(vio, REQ_LOCAL_DONE, req->res < 0 ? (int)-req->res : 0);
		return;
	}
	switch (vio->op) {
	case VOL_TRIM:
	case VOL_ZERO:
		vol_zero_done(vio, req->res);
		return;
	case VOL_BLOCK_STATUS:
		vio->map_count = req->map_count;
		break;
	default:
		break;
	}
	req_mod(vio, REQ_LOCAL_DONE, req->res < 0 ? (int)-req->res : 0);
}

static void vol_issue(struct vol_io *vio, enum io_op op, uint64_t off, uint64_t len, void *buf,
                      unsigned flags)
{
	struct io_req *r = &vio->io;
	volume_io_prep(vio->vol, r, op, off, len, buf, vol_io_done, vio);
	r->flags |= flags;
	r->map = vio->map;
	r->map_max = vio->map_max;
	if (io_submit(vio->vol->io, r) < 0) {
		/* io_submit only fails on a programming error (bad op); report it as EIO. */
		log_vol(LOG_LVL_ERR, vio->vol->cfg->name, NULL,
		        "The I/O engine refused operation %d: %s.", (int)op, strerror(errno));
		r->res = -EIO;
		req_mod(vio, REQ_LOCAL_DONE, EIO);
	}
}

/* The request of a detached volume, or a read of blocks a re-attached disk lacks: no local I/O.
 */
static void vol_redirect(struct vol_io *vio)
{
	struct volume *v = vio->vol;
	vio->rq |= RQ_REMOTE | RQ_LOCAL;
	switch (vio->op) {
	case VOL_READ:
		if (v->repl->remote_read(v->repl_ctx, vio) < 0)
			req_mod(vio, REQ_LOCAL_DONE, EIO);
		return;
	case VOL_BLOCK_STATUS:
		/* The peer's allocation is unknown here: report data, never a false hole. */
		if (vio->map_max) {
			vio->map[0].len = vio->len;
			vio->map[0].hole = 0;
		}
		vio->map_count = vio->map_max ? 1 : 0;
		req_mod(vio, REQ_LOCAL_DONE, 0);
		return;
	case VOL_CACHE:
		req_mod(vio, REQ_LOCAL_DONE, 0);
		return;
	default:
		v->repl->adopt(v->repl_ctx, vio);
		req_mod(vio, REQ_LOCAL_DONE, 0);
		return;
	}
}

void vol_local_start(struct vol_io *vio)
{
	struct volume *v = vio->vol;
	if (v->diskless || ((vio->op == VOL_READ || vio->op == VOL_BLOCK_STATUS) && v->repl &&
	                    v->repl->local_stale(v->repl_ctx, vio->off, vio->len))) {
		vol_redirect(vio);
		return;
	}
	vio->rq |= RQ_LOCAL;
	switch (vio->op) {
	case VOL_READ:
		vol_issue(vio, IO_OP_READ, vio->off, vio->len, vio->buf, 0);
		break;
	case VOL_WRITE:
		vol_issue(vio, IO_OP_WRITE, vio->off, vio->len, vio->buf,
		          (vio->flags & VOL_F_FUA) ? IO_F_FUA : 0);
		break;
	case VOL_FLUSH:
		vol_issue(vio, IO_OP_FDATASYNC, 0, 0, NULL, 0);
		break;
	case VOL_TRIM:
		vol_issue(vio, IO_OP_PUNCH, vio->off, vio->len, NULL, 0);
		break;
	case VOL_ZERO:
		vol_issue(vio, (vio->flags & VOL_F_NO_HOLE) ? IO_OP_ZERO : IO_OP_PUNCH, vio->off,
		          vio->len, NULL, 0);
		break;
	case VOL_CACHE:
		vol_issue(vio, IO_OP_CACHE, vio->off, vio->len, NULL, 0);
		break;
	case VOL_BLOCK_STATUS:
		vol_issue(vio, IO_OP_SEEKMAP, vio->off, vio->len, NULL, 0);
		break;
	default:
		break;
	}
}

int volume_submit(struct volume *vol, struct vol_io *vio)
{
	if ((unsigned)vio->op >= VOL_OP__COUNT) {
		errno = EINVAL;
		return -1;
	}
	vio->vol = vol;
	req_mod(vio, REQ_SUBMIT, 0);
	return 0;
}

/* Each held write goes on exactly as if it had arrived now, once nothing holds them. */
static void vol_thaw(struct volume *vol)
{
	while (!vol->frozen && !vol->fencing && vol->frozen_q.head) {
		struct range *e = vol->frozen_q.head;
		rangelock_del(e);
		req_mod(range_entry(e, struct vol_io, range), REQ_UNFREEZE, 0);
	}
}

void volume_freeze(struct volume *vol, bool frozen)
{
	vol->frozen = frozen;
	vol->failing = false;
	vol_thaw(vol);
}

void volume_fence(struct volume *vol, bool on)
{
	vol->fencing = on;
	if (on)
		return;
	req_fence_release(vol);
	vol_thaw(vol);
}

bool volume_fencing(const struct volume *vol)
{
	return vol->fencing;
}

unsigned volume_fence_parked(const struct volume *vol)
{
	return vol->fence_parked;
}

bool volume_frozen(const struct volume *vol)
{
	return vol->frozen;
}

void volume_fail_writes(struct volume *vol)
{
	vol->frozen = vol->failing = true;
	/* the parked writes' peer never confirmed them: req_result() now fails them */
	vol->fencing = false;
	req_fence_release(vol);
	while (vol->frozen_q.head) {
		struct range *e = vol->frozen_q.head;
		rangelock_del(e);
		req_mod(range_entry(e, struct vol_io, range), REQ_FAIL, EIO);
	}
}

bool volume_failing(const struct volume *vol)
{
	return vol->failing;
}

/*
 * A request of the backing store failed with err. Returns true when the volume detached (or was
 * detached already) and the request goes on through the peer; false when the error goes to the
 * client (pass-on, no peer, or not a disk failure).
 */
bool vol_disk_error(struct vol_io *vio, int err)
{
	struct volume *v = vio->vol;
	const struct hak_volume_cfg *c = v->cfg;
	static const char *const ops[] = {"read", "write", "flush",       "trim",
	                                  "zero", "cache", "block-status"};
	if (!diskerr_is_disk_error(err))
		return false;
	bool detach = v->repl && c->on_io_error == HAK_IOERR_DETACH;
	if (!v->diskless) {
		double now = clock_mono();
		if (detach || now - v->passon_log >= 1.0) {
			log_vol(LOG_LVL_ERR, c->name, NULL,
			        "The backing store %s failed a %s of %llu bytes at %llu: %s; %s.",
			        c->backing, ops[vio->op], (unsigned long long)vio->len,
			        (unsigned long long)vio->off, strerror(err),
			        detach ? "detaching it (on-io-error detach)"
			               : "returning the error to the client (on-io-error pass-on)");
			v->passon_log = now;
			diskerr_hook_run(c, ops[vio->op], err, detach ? "detach" : "pass-on");
		}
		if (!detach)
			return false;
		char why[160];
		snprintf(why, sizeof(why), "%s error %s at offset %llu", ops[vio->op],
		         diskerr_errno_name(err), (unsigned long long)vio->off);
		volume_detach(v, err, why);
	}
	vol_redirect(vio);
	return true;
}

int volume_detach(struct volume *vol, int err, const char *why)
{
	(void)err;
	if (vol->diskless)
		return 0;
	if (!vol->repl) {
		errno = ENOTSUP;
		return -1;
	}
	vol->diskless = true;
	vol->repl->detached(vol->repl_ctx, why);
	return 0;
}

int volume_attach(struct volume *vol)
{
	int flags = (vol->cfg->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	if (!vol->diskless)
		return 0;
	if (vol->cfg->direct_io)
		flags |= O_DIRECT;
	int fd = open(vol->cfg->backing, flags);
	if (fd < 0)
		return -1;
	/* Requests in flight at the detach may still hold the old descriptor: it stays open until
	 * the next attach or the close, never reused under them. */
	if (vol->stale_fd >= 0)
		close(vol->stale_fd);
	vol->stale_fd = vol->fd;
	vol->fd = fd;
	if (vol->stale_bulk_fd >= 0)
		close(vol->stale_bulk_fd);
	vol->stale_bulk_fd = vol->bulk_fd;
	vol->bulk_fd = vol_open_bulk(vol->cfg);
	vol->bulk_off = false;
	vol->diskless = false;
	return 0;
}

bool volume_diskless(const struct volume *vol)
{
	return vol->diskless;
}

void volume_set_repl(struct volume *vol, const struct vol_repl_ops *ops, void *ctx)
{
	vol->repl = ops;
	vol->repl_ctx = ctx;
}

void volume_io_prep(const struct volume *vol, struct io_req *req, enum io_op op, uint64_t off,
                    uint64_t len, void *buf, void (*done)(struct io_req *req), void *data)
{
	io_req_prep(req, op, vol->fd, off, len, buf, done, data);
	if (!vol->cfg->direct_io)
		req->flags |= IO_F_BUFFERED;
}

int volume_bulk_fd(const struct volume *vol)
{
	return vol->bulk_off ? -1 : vol->bulk_fd;
}

void volume_bulk_refused(struct volume *vol, int err)
{
	if (vol->bulk_off)
		return;
	vol->bulk_off = true;
	log_vol(LOG_LVL_WARN, vol->cfg->name, NULL,
	        "Direct resync writes to %s failed (%s); resync writes go through the page cache "
	        "from now on.",
	        vol->cfg->backing, strerror(err));
}

void volume_set_size(struct volume *vol, uint64_t size)
{
	vol->size = size;
}

const char *volume_name(const struct volume *vol)
{
	return vol->cfg->name;
}

uint64_t volume_size(const struct volume *vol)
{
	return vol->size;
}

const struct hak_volume_cfg *volume_cfg(const struct volume *vol)
{
	return vol->cfg;
}

void volume_stats(const struct volume *vol, struct vol_stats *out)
{
	*out = vol->st;
}
