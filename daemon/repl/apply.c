/* SPDX-License-Identifier: MIT */
/*
 * The secondary's apply side: writes, trims, zeroes and resync runs received from the peer are
 * applied concurrently, except that a request overlapping one in flight (or one waiting before
 * it) waits, so overlapping writes land in arrival order. A BARRIER is answered once every
 * write received before it is done and an fdatasync made them stable. Reading from the peer
 * pauses while too much is in flight, so a fast primary cannot grow this side without bound.
 */
#include "apply.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "ctl/events.h"
#include "lib/buf.h"
#include "lib/crc32c.h"
#include "lib/clock.h"
#include "lib/endian.h"
#include "lib/log.h"
#include "lib/testhook.h"
#include "meta/bitmap.h"
#include "repl_int.h"
#include "tswitch.h"
#include "verify.h"
#include "volume/volume.h"

/* A request received before `before` (NULL: any) overlaps [off, off+len) and is not applied yet:
 * being applied, or waiting. */
static bool apply_blocked(const struct repl *r, uint64_t off, uint64_t len,
                          const struct range *before)
{
	return rangelock_overlaps(&r->applying, off, len) ||
	       rangelock_find(&r->apply_waiting, off, len, before) != NULL;
}

bool apply_overlaps(const struct repl *r, uint64_t off, uint64_t len)
{
	return apply_blocked(r, off, len, NULL);
}

static void send_ack(struct repl *r, uint16_t type, uint64_t id, uint32_t status)
{
	uint8_t b[WIRE_ACK_SIZE];
	if (!r->meta_s)
		return;
	wire_put_id(b, id);
	be_put32(b + WIRE_ID_SIZE, status);
	uint32_t len = type == WIRE_WRITE_ACK || type == WIRE_RS_ACK ? WIRE_ACK_SIZE : WIRE_ID_SIZE;
	/* An async primary answered its client long ago: its write acks may share packets. */
	if (type == WIRE_WRITE_ACK && r->mode == MODE_ASYNC)
		tstream_send_small_lazy(r->meta_s, type, 0, b, len);
	else
		tstream_send_small(r->meta_s, type, 0, b, len);
}

static void barriers_progress(struct repl *r);
static void apply_start(struct repl *r, struct apply *a);
static void apply_write_io(struct repl *r, struct apply *a, bool bulk);

static void rs_sync_progress(struct repl *r);

/* Gives back the payload and the room it took; the struct itself stays with the caller. */
static void apply_release(struct repl *r, struct apply *a)
{
	r->apply_count--;
	r->apply_bytes -= a->frame_len;
	if (a->resync)
		r->rs_apply_bytes -= a->frame_len;
	buf_put(a->frame, a->frame_len);
	a->frame = NULL;
	a->frame_len = 0;
	if (r->data_paused && r->apply_count < APPLY_MAX / 2 &&
	    r->apply_bytes < APPLY_MAX_BYTES / 2 && r->rs_apply_bytes < RS_APPLY_MAX_BYTES / 2 &&
	    r->data) {
		tswitch_data_pause(r, false);
	}
}

static void apply_free(struct repl *r, struct apply *a)
{
	apply_release(r, a);
	free(a);
}

static void apply_done(struct io_req *req);

/* a->io cleared and aimed at a's range of the volume (op), completing in apply_done(). */
static void apply_io_init(struct repl *r, struct apply *a, enum io_op op)
{
	volume_io_prep(r->p.vol, &a->io, op, a->off, a->len, NULL, apply_done, a);
}

/* Stages of an apply after its first I/O. */
enum { AS_FIRST = 0, AS_FLUSH = 1, AS_ZEROES = 2 };

/*
 * The store cannot punch or zero a range (a block device without discard, a file system without
 * fallocate modes): for a ZERO, and a resync run that is a hole at the source, write zeroes
 * instead, so both copies still read the same. A TRIM stays advisory. a->zero_pos is the next
 * byte; false once the whole range is written.
 */
static bool apply_zeroes_next(struct repl *r, struct apply *a)
{
	size_t chunk;
	const void *z = volume_zeroes(&chunk);
	uint64_t end = a->off + a->len;
	if (a->zero_pos >= end)
		return false;
	uint64_t n = end - a->zero_pos < chunk ? end - a->zero_pos : chunk;
	volume_io_prep(r->p.vol, &a->io, IO_OP_WRITE, a->zero_pos, n, (void *)z, apply_done, a);
	if (!r->p.vcfg->direct_io)
		a->io.flags |= IO_F_BUFFERED;
	a->zero_pos += n;
	io_submit(r->p.io, &a->io);
	return true;
}

static bool fallocate_unsupported(int err)
{
	return err == EOPNOTSUPP || err == ENOTSUP || err == EINVAL;
}

static void apply_done(struct io_req *req)
{
	struct apply *a = req->data;
	struct repl *r = a->r;
	int err = req->res < 0 ? (int)-req->res : 0;

	if (a->stage == AS_FIRST && a->type != WIRE_TRIM && fallocate_unsupported(err) &&
	    (a->io.op == IO_OP_PUNCH || a->io.op == IO_OP_ZERO)) {
		if (!r->zero_fallback_logged) {
			r->zero_fallback_logged = true;
			repl_log(r, LOG_LVL_NOTICE,
			         "The backing store cannot %s a range (%s): zeroed ranges from the "
			         "peer are written as zeroes from now on.",
			         a->io.op == IO_OP_PUNCH ? "punch" : "zero", strerror(err));
		}
		a->stage = AS_ZEROES;
		a->zero_pos = a->off;
		apply_zeroes_next(r, a);
		return;
	}
	if (a->stage == AS_ZEROES && !err && apply_zeroes_next(r, a))
		return;

	if (err == EINVAL && a->bulk) {
		/* Aligned and still refused (a device with larger sectors, a filesystem without
		 * direct I/O for this file): write it, and every later run, through the cache. */
		volume_bulk_refused(r->p.vol, err);
		apply_io_init(r, a, IO_OP_WRITE);
		apply_write_io(r, a, false);
		io_submit(r->p.io, &a->io);
		return;
	}
	if (!err && a->stage != AS_FLUSH && (a->flags & WIRE_F_FUA) &&
	    (a->io.op != IO_OP_WRITE || a->stage == AS_ZEROES)) {
		/* TRIM/ZERO with FUA: make it durable before the ack. */
		a->stage = AS_FLUSH;
		volume_io_prep(r->p.vol, &a->io, IO_OP_FDATASYNC, 0, 0, NULL, apply_done, a);
		io_submit(r->p.io, &a->io);
		return;
	}
	if (err == EOPNOTSUPP && a->type == WIRE_TRIM)
		err = 0; /* TRIM is advisory */
	rangelock_del(&a->range);
	if (err)
		repl_log(r, LOG_LVL_ERR, "Applying %s of %u bytes at %llu failed: %s.",
		         wire_type_name(a->type), a->len, (unsigned long long)a->off,
		         strerror(err));
	bool unsynced = false;
	if (a->resync)
		r->rs_applying--;
	if (a->conn != r->conn_seq) {
		/* Received on a connection that is gone: its ids mean nothing on the new one (the
		 * peer would take the ack for one of its new requests). */
	} else if (a->resync && !err) {
		unsynced = true; /* acknowledged by rs_synced() */
	} else if (a->resync) {
		send_ack(r, WIRE_RS_ACK, a->id, (uint32_t)err);
		r->rs_done_bytes += a->len;
	} else {
		send_ack(r, WIRE_WRITE_ACK, a->id, (uint32_t)err);
	}
	for (unsigned i = 0; i < r->nbarriers; i++)
		if (r->barriers[i].epoch >= a->epoch && r->barriers[i].pending &&
		    --r->barriers[i].pending == 0)
			r->barriers[i].ready_ns = clock_mono_ns();
	if (unsynced) {
		/* The acks may go in any order: the source finds each run by its id. */
		apply_release(r, a);
		a->next = r->rs_unsynced;
		r->rs_unsynced = a;
		r->rs_unsynced_bytes += a->len;
	} else {
		apply_free(r, a);
	}
	/* Start waiters that no longer overlap anything, in arrival order. */
	struct range *e = r->apply_waiting.head;
	while (e) {
		struct range *next = e->next;
		if (!apply_blocked(r, e->off, e->len, e)) {
			rangelock_del(e);
			apply_start(r, range_entry(e, struct apply, range));
			/* a test hook completes a start at once, which may have started next too */
			if (next && next->owner != &r->apply_waiting)
				next = r->apply_waiting.head;
		}
		e = next;
	}
	barriers_progress(r);
	rs_sync_progress(r);
	hooks_run(&r->on_apply_done);
}

/*
 * Resync runs go to the device directly when they can (volume_bulk_fd()): the target writes
 * a whole volume of them, and through the page cache each GiB cost a copy and the writeback on
 * top of the receive. Application writes stay buffered, as the primary writes them: their ack
 * latency is the page cache's, as hak's WRITE_ACK promises.
 */
static void apply_write_io(struct repl *r, struct apply *a, bool bulk)
{
	uint8_t *buf = a->frame + a->data_off;
	int fd = bulk ? volume_bulk_fd(r->p.vol) : -1;

	a->io.buf = buf;
	a->io.flags = (a->flags & WIRE_F_FUA) ? IO_F_FUA : 0;
	a->bulk = fd >= 0 && ((a->off | a->len) & 4095) == 0 && ((uintptr_t)buf & 4095) == 0;
	if (a->bulk)
		a->io.fd = fd;
	else if (!r->p.vcfg->direct_io)
		a->io.flags |= IO_F_BUFFERED;
}

static void apply_start(struct repl *r, struct apply *a)
{
	rangelock_add(&r->applying, &a->range, a->off, a->len);
	a->active = true;
	apply_io_init(r, a, IO_OP_WRITE);
	switch (a->type) {
	case WIRE_DATA:
	case WIRE_RS_DATA:
		if (a->type == WIRE_RS_DATA && (a->flags & WIRE_F_HOLE)) {
			a->io.op = IO_OP_PUNCH;
			break;
		}
		apply_write_io(r, a, a->type == WIRE_RS_DATA);
		if (a->bulk && testhook_refuse_direct()) {
			/* As a store that refuses the direct write before writing anything. */
			a->io.res = -EINVAL;
			apply_done(&a->io);
			return;
		}
		break;
	case WIRE_TRIM:
		a->io.op = IO_OP_PUNCH;
		break;
	default:
		a->io.op = (a->flags & WIRE_F_NO_HOLE) ? IO_OP_ZERO : IO_OP_PUNCH;
		break;
	}
	if ((a->io.op == IO_OP_PUNCH || a->io.op == IO_OP_ZERO) && testhook_refuse_fallocate()) {
		a->io.res = -EOPNOTSUPP; /* as a store without fallocate modes */
		apply_done(&a->io);
		return;
	}
	io_submit(r->p.io, &a->io);
}

/*
 * data-integrity: the payload must match the checksum the sender computed before anything of it
 * is written. A mismatch costs the connection; the sender marked the range out of sync when the
 * connection dropped without an ack, so the block comes again after the reconnection.
 */
static int integrity_check(struct repl *r, const struct wire_hdr *h, const struct wire_io *io,
                           uint8_t *payload)
{
	uint8_t *data = payload + WIRE_IO_SIZE + WIRE_CRC_SIZE;
	uint32_t want = be_get32(payload + WIRE_IO_SIZE);
	testhook_corrupt(data, io->len);
	uint32_t got = crc32c_update(0, data, io->len);
	if (got == want)
		return 0;
	r->integrity_errors++;
	repl_log(r, LOG_LVL_ERR,
	         "Integrity error in %s from %s: %u bytes at offset %llu have crc32c 0x%08x, the "
	         "sender computed 0x%08x; nothing is written and the connection is reset (%llu "
	         "integrity errors so far).",
	         wire_type_name(h->type), r->p.peer->name, io->len, (unsigned long long)io->off,
	         got, want, (unsigned long long)r->integrity_errors);
	events_emit("integrity-error",
	            "volume:%s peer:%s offset:%llu len:%u expected:0x%08x got:0x%08x", r->name,
	            r->p.peer->name, (unsigned long long)io->off, io->len, want, got);
	return -1;
}

/* DATA, TRIM, ZERO or RS_DATA from the peer. */
void apply_frame(struct repl *r, const struct wire_hdr *h, uint8_t *payload)
{
	char why[200];
	struct wire_io io;
	if (r->role == ROLE_PRIMARY) {
		buf_put(payload, h->len);
		repl_drop_connection(r, "the peer sent writes to a primary");
		return;
	}
	if (wire_io_decode(h, payload, volume_size(r->p.vol), 512, &io, why, sizeof(why)) < 0) {
		buf_put(payload, h->len);
		repl_drop_connection(r, why);
		return;
	}
	if ((h->flags & WIRE_F_CRC) && integrity_check(r, h, &io, payload) < 0) {
		buf_put(payload, h->len);
		repl_drop_connection(r, "a payload failed its integrity check");
		return;
	}
	verify_note_write(r, io.off, io.len);
	struct apply *a = calloc(1, sizeof(*a));
	if (!a) {
		buf_put(payload, h->len);
		repl_drop_connection(r, "out of memory for an incoming write");
		return;
	}
	a->r = r;
	a->type = h->type;
	a->flags = h->flags;
	a->id = io.id;
	a->off = io.off;
	a->len = io.len;
	a->frame = payload;
	a->frame_len = h->len;
	a->data_off = wire_io_data_off(h);
	a->epoch = r->epoch;
	a->resync = h->type == WIRE_RS_DATA;
	r->rs_applying += a->resync;
	a->conn = r->conn_seq;
	r->apply_count++;
	r->apply_bytes += h->len;
	if (a->resync)
		r->rs_apply_bytes += h->len;
	if (h->flags & WIRE_F_RECV_ACK)
		send_ack(r, WIRE_RECV_ACK, io.id, 0);
	if (apply_blocked(r, a->off, a->len, NULL))
		rangelock_add(&r->apply_waiting, &a->range, a->off, a->len);
	else
		apply_start(r, a);
	if (!r->data_paused && (r->apply_count >= APPLY_MAX || r->apply_bytes >= APPLY_MAX_BYTES ||
	                        r->rs_apply_bytes >= RS_APPLY_MAX_BYTES)) {
		tswitch_data_pause(r, true);
	}
}

/* A flush tagged with the connection that asked for it. */
struct conn_flush {
	struct io_req req;
	struct repl *r;
	uint64_t conn;
	void (*then)(struct repl *r, int err);
};

static void conn_flushed(struct io_req *req)
{
	struct conn_flush *f = req->data;
	struct repl *r = f->r;
	void (*then)(struct repl *, int) = f->then;
	int err = req->res < 0 ? (int)-req->res : 0;
	bool stale = f->conn != r->conn_seq;

	free(f);
	/* The connection dropped while the flush ran: what it was for is gone with it (a barrier
	 * of a new connection is not covered by this flush). */
	if (!stale)
		then(r, err);
}

/* fdatasync the volume off the loop; then() runs when it is done, unless the connection that
 * asked is gone by then. 0, or -1 when out of memory. */
static int apply_flush(struct repl *r, void (*then)(struct repl *r, int err))
{
	struct conn_flush *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	f->r = r;
	f->conn = r->conn_seq;
	f->then = then;
	volume_io_prep(r->p.vol, &f->req, IO_OP_FDATASYNC, 0, 0, NULL, conn_flushed, f);
	io_submit(r->p.io, &f->req);
	return 0;
}

/*
 * A resync run is acknowledged only once it is on disk: the source clears its bits on the
 * RS_ACK, and a power cut here must not take back what the ack promised. One fdatasync covers
 * every run written since the last one (group commit), so a run costs neither a flush of its
 * own nor, as application writes do, a barrier from the source: the source clears its bits
 * for good at every flush, so a resync makes progress even on a link that keeps resetting.
 */
static void rs_synced(struct repl *r, int err)
{
	struct apply *list = r->rs_syncing;
	r->rs_syncing = NULL;
	if (err)
		repl_log(r, LOG_LVL_ERR,
		         "Flushing resynced blocks to disk failed (%s): they stay out of sync and "
		         "come again.",
		         strerror(err));
	while (list) {
		struct apply *a = list;
		list = a->next;
		if (!err)
			bitmap_clear_range(r->bm, a->off, a->len);
		send_ack(r, WIRE_RS_ACK, a->id, (uint32_t)err);
		r->rs_done_bytes += a->len;
		free(a);
	}
	rs_sync_progress(r);
}

/* Flush now if nothing flushes yet and either enough waits or no other run is being written
 * (the source's window may be full of runs waiting for their acks). */
static void rs_sync_progress(struct repl *r)
{
	if (r->rs_syncing || !r->rs_unsynced)
		return;
	if (r->rs_unsynced_bytes < RS_SYNC_BATCH && r->rs_applying)
		return;
	if (apply_flush(r, rs_synced) < 0) {
		repl_drop_connection(r, "out of memory for flushing resynced blocks");
		return;
	}
	r->rs_syncing = r->rs_unsynced;
	r->rs_unsynced = NULL;
	r->rs_unsynced_bytes = 0;
}

/* Forget resync runs written but not yet acknowledged: the bits stay set on both sides. */
static void apply_drop_unsynced(struct repl *r)
{
	struct apply *lists[2] = {r->rs_unsynced, r->rs_syncing};
	for (int i = 0; i < 2; i++) {
		while (lists[i]) {
			struct apply *a = lists[i];
			lists[i] = a->next;
			free(a);
		}
	}
	r->rs_unsynced = r->rs_syncing = NULL;
	r->rs_unsynced_bytes = 0;
}

static void barrier_flushed(struct repl *r, int err)
{
	unsigned n = r->barriers_flushing;
	r->barriers_flushing = 0;
	if (err) {
		/* Acknowledging would tell the primary that the writes before the barrier are on
		 * this disk. Without the ack, the lost connection puts them into its bitmap. */
		char why[200];
		snprintf(why, sizeof(why),
		         "flushing the disk for barrier %llu failed (%s), so the writes before it "
		         "may not be stable",
		         (unsigned long long)r->barriers[0].id, strerror(err));
		repl_drop_connection(r, why);
		return;
	}
	int64_t now = clock_mono_ns();
	lathist_add(&r->bar_lat.fsync, now - r->bar_lat.fsync_start);
	for (unsigned i = 0; i < n; i++) {
		send_ack(r, WIRE_BARRIER_ACK, r->barriers[i].id, 0);
		lathist_add(&r->bar_lat.total, now - r->barriers[i].recv_ns);
	}
	r->barrier_flushes++;
	r->barriers_acked += n;
	memmove(&r->barriers[0], &r->barriers[n], (r->nbarriers - n) * sizeof(r->barriers[0]));
	r->nbarriers -= n;
	barriers_progress(r);
}

/*
 * Group commit (as jbd2 and the block layer's flush machinery do): one flush answers every
 * barrier whose writes were all done when it started, and barriers that become ready while it
 * runs share the next one. Many clients committing at once used to cost one flush each, in
 * turn. A barrier's writes are the applies received before it, so a barrier's pending count is
 * never smaller than an older one's: the ready barriers are always a prefix.
 */
static void barriers_progress(struct repl *r)
{
	unsigned n = 0;
	if (r->barriers_flushing)
		return;
	while (n < r->nbarriers && r->barriers[n].pending == 0)
		n++;
	if (!n || apply_flush(r, barrier_flushed) < 0)
		return;
	r->barriers_flushing = n;
	int64_t now = clock_mono_ns();
	r->bar_lat.fsync_start = now;
	for (unsigned i = 0; i < n; i++) {
		const struct barrier_wait *b = &r->barriers[i];
		lathist_add(&r->bar_lat.writes, b->ready_ns - b->recv_ns);
		lathist_add(&r->bar_lat.queue, now - b->ready_ns);
	}
}

void apply_barrier(struct repl *r, uint64_t id)
{
	if (r->nbarriers == BARRIERS_MAX) {
		repl_drop_connection(r, "the peer sent more unanswered barriers than allowed");
		return;
	}
	struct barrier_wait *b = &r->barriers[r->nbarriers++];
	b->id = id;
	b->epoch = r->epoch++;
	b->pending = r->apply_count;
	b->recv_ns = clock_mono_ns();
	b->ready_ns = b->pending ? 0 : b->recv_ns;
	barriers_progress(r);
}

/* Forget writes that were waiting to be applied: the primary tracks them in its bitmap. */
static void apply_drop_waiting(struct repl *r)
{
	while (r->apply_waiting.head) {
		struct apply *a = range_entry(r->apply_waiting.head, struct apply, range);
		rangelock_del(&a->range);
		r->rs_applying -= a->resync;
		apply_free(r, a);
	}
	r->nbarriers = 0;
}

static void apply_conn_lost(void *ctx)
{
	struct repl *r = ctx;
	/* a flush in progress reports to nobody (conn_flushed): its barriers are gone too */
	r->barriers_flushing = 0;
	apply_drop_unsynced(r);
	if (r->role != ROLE_PRIMARY)
		apply_drop_waiting(r);
}

void apply_init(struct repl *r)
{
	rangelock_init(&r->applying);
	rangelock_init(&r->apply_waiting);
	hooks_add(&r->on_conn_lost, CONN_LOST_APPLY, apply_conn_lost, r, "apply");
}
