/* SPDX-License-Identifier: MIT */
/*
 * The primary's send side: every write, trim, zero and flush of a primary goes to the peer
 * (or into the bitmap while it is away) through a slot of the pend table, in parallel with the
 * local I/O, and completes by mode when the acks come back. Writes wait here for a free slot, for
 * the activity log, and behind resync reads of the same blocks.
 *
 * Invariant (docs/architecture.md, the write path): a block the peer may not have is always
 * either in flight with an ack still to come (a pend slot) or set in the bitmap. On disconnect
 * every slot that has no WRITE_ACK goes into the bitmap before its request completes
 * (ship_fail_all).
 *
 * A WRITE_ACK is not the end of it: the peer wrote through its page cache, and a power cut there
 * loses what its disk was not told to flush. So every write sent stays in the transfer log
 * (tlog.h) until a barrier sent after it is acknowledged (the peer flushed), and a lost
 * connection puts what is still there into the bitmap too (ship_unstable_lost). Epochs close
 * with a barrier of their own (ship_epoch_close) so the log stays short even when the client
 * never flushes; DRBD does the same with max-epoch-size and its transfer log.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ship.h"

#include "conf/config.h"
#include "lib/buf.h"
#include "lib/clock.h"
#include "lib/crc32c.h"
#include "lib/endian.h"
#include "lib/log.h"
#include "meta/al_io.h"
#include "meta/bitmap.h"
#include "repl_int.h"
#include "resync.h"
#include "verify.h"
#include "volume/req.h"

static struct pend *pend_of(struct repl *r, uint64_t id)
{
	struct pend *p = &r->pend[id % PEND_SLOTS];
	return p->used && p->id == id ? p : NULL;
}

static bool replicating(const struct repl *r)
{
	return r->connected && r->peer_disk != DISK_DISKLESS;
}

static void ship_epoch_close(struct repl *r);
static void ship_log_range(struct repl *r, uint64_t off, uint64_t len);
static void pend_release(struct repl *r, struct pend *p);

/* The open epoch is full: it should end with a barrier now. */
static bool epoch_due(const struct repl *r)
{
	return r->tl.epoch_writes >= r->p.vcfg->max_epoch_size ||
	       r->tl.epoch_bytes >= EPOCH_MAX_BYTES;
}

static void async_copy_sent(struct outq_item *it, int err)
{
	struct pend *p = it->ctx;
	(void)err;
	if (p && p->copy) {
		buf_put(p->copy, p->len);
		p->copy = NULL;
	}
	free(it);
}

/* Queue the frame for pend p (id) on the data stream. */
static int pend_send(struct repl *r, struct pend *p, uint64_t id, struct vol_io *vio)
{
	struct outq_item *it = calloc(1, sizeof(*it));
	uint16_t flags = 0;
	if (!it)
		return -1;
	if (vio && (vio->flags & VOL_F_FUA))
		flags |= WIRE_F_FUA;
	if (r->mode == MODE_MEMSYNC)
		flags |= WIRE_F_RECV_ACK;
	if (p->type == WIRE_BARRIER) {
		wire_hdr_encode(it->hdr, WIRE_BARRIER, 0, WIRE_ID_SIZE);
		wire_put_id(it->hdr + WIRE_HDR_SIZE, id);
		it->hdr_len = WIRE_HDR_SIZE + WIRE_ID_SIZE;
		it->sent = outq_free_item;
		tstream_send(r->data, it);
		return 0;
	}
	if (p->type == WIRE_ZERO && vio && (vio->flags & VOL_F_NO_HOLE))
		flags |= WIRE_F_NO_HOLE;
	struct wire_io io = {.id = id, .off = p->off, .len = p->len};
	uint32_t plen = p->type == WIRE_DATA ? p->len : 0;
	const uint8_t *data = p->type == WIRE_DATA ? (p->copy ? p->copy : vio->buf) : NULL;
	uint32_t crc_len = data && r->p.vcfg->data_integrity ? WIRE_CRC_SIZE : 0;
	if (crc_len)
		flags |= WIRE_F_CRC;
	wire_hdr_encode(it->hdr, p->type, flags, WIRE_IO_SIZE + crc_len + plen);
	wire_io_encode(it->hdr + WIRE_HDR_SIZE, &io);
	if (crc_len)
		be_put32(it->hdr + WIRE_HDR_SIZE + WIRE_IO_SIZE, crc32c_update(0, data, p->len));
	it->hdr_len = WIRE_HDR_SIZE + WIRE_IO_SIZE + crc_len;
	it->sent = outq_free_item;
	if (data) {
		it->data = data;
		it->data_len = p->len;
		if (p->copy) {
			it->sent = async_copy_sent;
			it->ctx = p;
		}
	}
	if (!p->vio)
		tstream_send_lazy(r->data, it); /* async: already answered, nobody waits */
	else
		tstream_send(r->data, it);
	r->shipped_bytes += plen;
	return 0;
}

/* Take a slot and send vio to the peer; false when no slot is free. */
static bool pend_start(struct repl *r, struct vol_io *vio)
{
	uint64_t id = r->next_id;
	struct pend *p = &r->pend[id % PEND_SLOTS];
	static const uint16_t types[] = {[VOL_WRITE] = WIRE_DATA,
	                                 [VOL_TRIM] = WIRE_TRIM,
	                                 [VOL_ZERO] = WIRE_ZERO,
	                                 [VOL_FLUSH] = WIRE_BARRIER};
	if (p->used)
		return false;
	if (vio->op != VOL_FLUSH && tlog_used(&r->tl) >= TLOG_SLOTS) {
		/* Wait for the peer to flush what it has (ship_ack runs the waiters again). */
		ship_epoch_close(r);
		return false;
	}
	memset(p, 0, sizeof(*p));
	p->id = id;
	p->used = true;
	p->type = types[vio->op];
	p->off = vio->off;
	p->len = (uint32_t)vio->len;
	p->sent_at = ev_now(r->p.loop);
	p->sent_ns = clock_mono_ns();
	r->next_id++;
	r->pend_count++;
	vio->rid = id;
	/* Until the peer has it, the block belongs to the crash tail: its extent stays hot. */
	if (r->alio && p->type != WIRE_BARRIER)
		al_io_ref(r->alio, p->off, p->len);
	if (r->mode == MODE_ASYNC && p->type != WIRE_BARRIER)
		r->async_bytes += p->len;
	/* A diskless primary has no local copy: even in async mode the write waits for the peer. */
	bool local_copy = r->mode == MODE_ASYNC && p->type != WIRE_BARRIER && !req_remote_only(vio);
	if (local_copy) {
		/* The client is answered before the peer has the data: keep our own copy. */
		if (p->type == WIRE_DATA) {
			p->copy = buf_get(p->len);
			if (p->copy)
				memcpy(p->copy, vio->buf, p->len);
		}
		p->vio = NULL;
	} else {
		p->vio = vio;
	}
	if (p->type == WIRE_BARRIER)
		p->tl_seq = tlog_barrier(&r->tl);
	if ((p->type == WIRE_DATA && local_copy && !p->copy) || pend_send(r, p, id, vio) < 0) {
		/* Out of memory: the bitmap remembers the block; the request must not wait. No
		 * frame went out, so no ack will free the slot: free it now. */
		if (p->type != WIRE_BARRIER)
			bitmap_set_range(r->bm, p->off, p->len);
		p->vio = NULL;
		pend_release(r, p);
		return true;
	}
	if (p->vio)
		req_mod(vio, REQ_SENT, 0);
	if (p->type != WIRE_BARRIER && !(vio->flags & VOL_F_FUA) && !req_remote_only(vio)) {
		/* A FUA write is on the peer's disk when acknowledged; a diskless primary's writes
		 * exist only on the peer, so no bitmap here could bring them back. */
		ship_log_range(r, p->off, p->len);
	}
	return true;
}

/* Send a barrier of our own that ends the open epoch, if it has writes and a slot is free;
 * otherwise a later ack or the epoch timer tries again. */
static void ship_epoch_close(struct repl *r)
{
	uint64_t id = r->next_id;
	struct pend *p = &r->pend[id % PEND_SLOTS];
	if (r->tl.epoch_writes == 0 || !replicating(r) || p->used ||
	    r->auto_barriers >= AUTO_BARRIERS_MAX)
		return;
	memset(p, 0, sizeof(*p));
	p->id = id;
	p->used = true;
	p->auto_barrier = true;
	p->type = WIRE_BARRIER;
	p->sent_at = ev_now(r->p.loop);
	p->tl_seq = tlog_barrier(&r->tl);
	r->next_id++;
	r->pend_count++;
	if (pend_send(r, p, id, NULL) < 0) {
		/* Out of memory: the entries stay in the log for a later barrier. */
		pend_release(r, p);
		return;
	}
	r->auto_barriers++;
	ev_timer_stop(r->p.loop, &r->epoch_timer);
}

/* A write goes to the peer now: keep it until a barrier covers it (pend_start checked room). */
static void ship_log_range(struct repl *r, uint64_t off, uint64_t len)
{
	bool was_empty = r->tl.epoch_writes == 0;
	if (tlog_add(&r->tl, off, len) < 0)
		return;
	if (r->alio)
		al_io_pin(r->alio, off, len, r->tl.head - 1);
	if (epoch_due(r))
		ship_epoch_close(r);
	else if (was_empty && !ev_is_active(&r->epoch_timer)) {
		ev_timer_set(&r->epoch_timer, EPOCH_MAX_AGE, 0.);
		ev_timer_start(r->p.loop, &r->epoch_timer);
	}
}

static void ship_epoch_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct repl *r = w->data;
	(void)revents;
	ship_epoch_close(r);
	if (r->tl.epoch_writes && replicating(r)) {
		/* No slot, or too many barriers unanswered: try again. */
		ev_timer_set(w, EPOCH_MAX_AGE, 0.);
		ev_timer_start(loop, w);
	}
}

struct unstable_sum {
	struct repl *r;
	uint64_t ranges, bytes;
};

static void unstable_mark(void *ctx, uint64_t off, uint64_t len)
{
	struct unstable_sum *u = ctx;
	bitmap_set_range(u->r->bm, off, len);
	u->ranges++;
	u->bytes += len;
}

/* The peer is gone: whatever it may not have flushed goes into the bitmap. */
static void ship_unstable_lost(struct repl *r)
{
	struct unstable_sum u = {.r = r};
	tlog_drain(&r->tl, unstable_mark, &u);
	/* In the bitmap now, which the log persists before it lets any of these extents go. */
	if (r->alio)
		al_io_stable(r->alio, r->tl.tail);
	ev_timer_stop(r->p.loop, &r->epoch_timer);
	if (u.ranges)
		repl_log(r, LOG_LVL_INFO,
		         "Marked %llu bytes in %llu ranges out of sync: %s acknowledged them but "
		         "had not confirmed them on its disk with a barrier.",
		         (unsigned long long)u.bytes, (unsigned long long)u.ranges,
		         r->p.peer->name);
}

static void pend_release(struct repl *r, struct pend *p)
{
	if (r->alio && p->type != WIRE_BARRIER)
		al_io_put(r->alio, p->off, p->len);
	if (r->mode == MODE_ASYNC && p->type != WIRE_BARRIER)
		r->async_bytes -= p->len;
	if (p->copy) {
		buf_put(p->copy, p->len);
		p->copy = NULL;
	}
	p->used = false;
	r->pend_count--;
}

/* Requests that waited for a free slot may take one now (or, with the peer gone, go into the
 * bitmap). */
static void ship_slot_pump(struct repl *r)
{
	while (r->slot_wait.head) {
		struct range *e = r->slot_wait.head;
		struct vol_io *vio = range_entry(e, struct vol_io, range);
		if (replicating(r) && !pend_start(r, vio))
			return;
		rangelock_del(e);
		if (!replicating(r)) {
			if (vio->op != VOL_FLUSH)
				bitmap_set_range(r->bm, vio->off, vio->len);
		} else if (vio->op != VOL_FLUSH) {
			/* Its local write starts now: resync and verify reads must wait for it. */
			rangelock_add(&r->writes_active, e, vio->off, vio->len);
			verify_note_write(r, vio->off, vio->len);
		}
		req_mod(vio, REQ_RESUME, 0);
	}
}

void ship_al_want_stable(void *ctx)
{
	ship_epoch_close(ctx);
}

/* An activity-log transaction made vio's extents hot (or failed). */
void ship_al_resume(void *ctx, struct range *w, int err)
{
	struct vol_io *vio = range_entry(w, struct vol_io, range);
	if (err) {
		req_mod(vio, REQ_FAIL, err);
		return;
	}
	vio->al_held = true;
	if (ship_submit(ctx, vio) == 0)
		req_mod(vio, REQ_RESUME, 0);
}

/*
 * A write must wait when a resync read of its blocks is in flight (that data must reach the peer
 * first, or the peer would end with the older copy), and when it overlaps an older write still
 * in flight here or held back: two overlapping writes in flight at once may land in either
 * order on the local disk, while the peer applies them in arrival order, so the copies could
 * silently differ (DRBD waits for conflicting writes the same way).
 */
static bool submit_blocked(struct repl *r, uint64_t off, uint64_t len)
{
	return rangelock_overlaps(&r->rs_reading, off, len) ||
	       rangelock_overlaps(&r->pulling, off, len) ||
	       (replicating(r) && rangelock_overlaps(&r->writes_active, off, len)) ||
	       rangelock_overlaps(&r->writes_held, off, len);
}

int ship_submit(void *ctx, struct vol_io *vio)
{
	struct repl *r = ctx;
	vio->rid = UINT64_MAX;
	if (r->alio && vio->op != VOL_FLUSH && !vio->al_held) {
		if (al_io_gate(r->alio, &vio->range, vio->off, vio->len) == 0)
			return 1;
		vio->al_held = true;
	}
	if (vio->op != VOL_FLUSH)
		verify_note_write(r, vio->off, vio->len);
	if (vio->op != VOL_FLUSH && submit_blocked(r, vio->off, vio->len)) {
		rangelock_add(&r->writes_held, &vio->range, vio->off, vio->len);
		return 1;
	}
	if (vio->op != VOL_FLUSH) {
		rangelock_add(&r->writes_active, &vio->range, vio->off, vio->len);
		rsctl_app_write(&r->rsctl, ev_now(r->p.loop));
	}
	if (r->mode == MODE_ASYNC && replicating(r) && r->async_bytes >= r->p.vcfg->async_buffer) {
		/* The peer falls behind (DRBD's pull-ahead): rather than grow without bound, end
		 * this connection. Everything unacknowledged goes into the bitmap, the peer keeps a
		 * consistent older copy, and the reconnection resyncs the difference. */
		char why[160];
		snprintf(
		    why, sizeof(why),
		    "the async send buffer is full (%llu bytes not yet acknowledged); tracking "
		    "writes in the bitmap and resyncing after reconnecting",
		    (unsigned long long)r->async_bytes);
		repl_drop_connection(r, why);
	}
	if (!replicating(r)) {
		if (vio->op != VOL_FLUSH)
			bitmap_set_range(r->bm, vio->off, vio->len);
		return 0;
	}
	if (vio->op == VOL_FLUSH && r->mode != MODE_SYNC && !req_remote_only(vio)) {
		/*
		 * async and memsync promise that the peer has, or will get, every write, not that
		 * its disk does: the flush makes our own copy durable and asks nothing of the peer,
		 * as QEMU's mirror does. Waiting for the peer's fdatasync made a memsync commit
		 * cost what a sync one does (fio, 4 KiB write + fsync: 0.50 of standalone in both).
		 * In memsync an epoch barrier goes out now, so the peer's copy becomes stable soon
		 * and the transfer log stays short; async's wait for the epoch timer.
		 */
		if (r->mode == MODE_MEMSYNC)
			ship_epoch_close(r);
		return 0;
	}
	if (r->slot_wait.head || !pend_start(r, vio)) {
		/* Out of slots: backpressure on the client. Keep it off the active list until it
		 * is really started. */
		rangelock_del(&vio->range);
		rangelock_add(&r->slot_wait, &vio->range, vio->off, vio->len);
		return 1;
	}
	return 0;
}

void ship_local_done(void *ctx, struct vol_io *vio)
{
	struct repl *r = ctx;
	if (vio->al_held) {
		vio->al_held = false;
		al_io_put(r->alio, vio->off, vio->len);
	}
	if (vio->op == VOL_WRITE || vio->op == VOL_TRIM || vio->op == VOL_ZERO) {
		rangelock_del(&vio->range); /* writes_active, if it got there */
		hooks_run(&r->on_write_done);
	}
}

/* Requests held back may go now if nothing overlaps any more, in arrival order. */
void ship_held_pump(struct repl *r)
{
	struct rangelock list;

	if (rangelock_empty(&r->writes_held))
		return;
	/* Taken out first: ship_submit may end the connection, whose hooks run this pump again,
	 * and that inner run must see only the ones kept so far. */
	rangelock_init(&list);
	while (r->writes_held.head) {
		struct range *e = r->writes_held.head;
		rangelock_del(e);
		rangelock_add(&list, e, e->off, e->len);
	}
	while (list.head) {
		struct range *e = list.head;
		struct vol_io *vio = range_entry(e, struct vol_io, range);
		rangelock_del(e);
		/* the ones kept so far are back in writes_held: a later overlapping write stays
		 * behind them */
		if (submit_blocked(r, vio->off, vio->len)) {
			rangelock_add(&r->writes_held, e, vio->off, vio->len);
			continue;
		}
		if (ship_submit(r, vio) == 0)
			req_mod(vio, REQ_RESUME, 0);
	}
}

static void ship_held_pump_hook(void *ctx)
{
	ship_held_pump(ctx);
}

static void ack_latency_add(struct repl *r, double lat)
{
	double now = ev_now(r->p.loop);
	if (r->ack_win_n && now - r->ack_win_start >= ACK_LAT_WINDOW) {
		r->ack_latency = r->ack_win_sum / (double)r->ack_win_n;
		r->ack_latency_max = r->ack_win_max;
		r->ack_win_n = 0;
	}
	if (r->ack_win_n == 0) {
		r->ack_win_start = now;
		r->ack_win_sum = r->ack_win_max = 0;
	}
	r->ack_win_n++;
	r->ack_win_sum += lat;
	if (lat > r->ack_win_max)
		r->ack_win_max = lat;
}

double ship_ack_latency(const struct repl *r, bool max)
{
	if (r->ack_latency == 0 && r->ack_win_n)
		return max ? r->ack_win_max : r->ack_win_sum / (double)r->ack_win_n;
	return max ? r->ack_latency_max : r->ack_latency;
}

void ship_ack(struct repl *r, uint16_t type, uint64_t id, uint32_t status)
{
	struct pend *p = pend_of(r, id);
	if (!p) {
		repl_log(r, LOG_LVL_WARN,
		         "The peer acknowledged unknown request %llu (%s); ignoring it.",
		         (unsigned long long)id, wire_type_name(type));
		return;
	}
	/* A barrier is answered by BARRIER_ACK only, a write by WRITE_ACK (and RECV_ACK): an ack of
	 * the other kind would count a write as flushed, or a barrier as written, on the peer's
	 * word for something it was not asked. */
	bool barrier = p->type == WIRE_BARRIER;
	if (barrier != (type == WIRE_BARRIER_ACK)) {
		char why[160];
		snprintf(why, sizeof(why), "the peer answered %s %llu with %s",
		         wire_type_name(p->type), (unsigned long long)id, wire_type_name(type));
		repl_drop_connection(r, why);
		return;
	}
	if (type == WIRE_RECV_ACK) {
		if (r->mode == MODE_MEMSYNC && p->vio && !req_remote_only(p->vio)) {
			struct vol_io *vio = p->vio;
			p->vio = NULL;
			req_mod(vio, REQ_RECEIVED, 0);
		}
		return;
	}
	if (status != 0) {
		/* The peer could not write it: the bitmap keeps the block for a later resync. */
		repl_log(r, LOG_LVL_WARN,
		         "The peer failed to write %u bytes at %llu (error %u); "
		         "marking them out of sync.",
		         p->len, (unsigned long long)p->off, status);
		bitmap_set_range(r->bm, p->off, p->len);
	}
	double lat = ev_now(r->p.loop) - p->sent_at;
	if (!p->auto_barrier) /* ours wait for a flush nobody waits for: not the client's latency */
		ack_latency_add(r, lat);
	if (p->type == WIRE_DATA || (barrier && !p->auto_barrier))
		lathist_add(barrier ? &r->rtt_flush : &r->rtt_write, clock_mono_ns() - p->sent_ns);
	if (!barrier)
		rsctl_app_latency(&r->rsctl, ev_now(r->p.loop), lat, r->resync_running);
	if (barrier) {
		tlog_stable(&r->tl, p->tl_seq);
		if (r->alio)
			al_io_stable(r->alio, r->tl.tail);
		if (p->auto_barrier)
			r->auto_barriers--;
	}
	p->write_acked = true;
	struct vol_io *vio = p->vio;
	p->vio = NULL;
	pend_release(r, p);
	if (vio)
		req_mod(vio, REQ_ACKED, status ? EIO : 0);
	ship_slot_pump(r);
	if (epoch_due(r))
		ship_epoch_close(r); /* it found no slot when the epoch filled up */
}

void ship_adopt(void *ctx, struct vol_io *vio)
{
	struct repl *r = ctx;
	if (vio->rid == UINT64_MAX) {
		/* Never sent: an async flush (local only until now) gets its barrier; a write the
		 * peer never saw is lost with the disk (the peer never confirms it: EIO). */
		if (vio->op == VOL_FLUSH && replicating(r) && !r->slot_wait.head)
			pend_start(r, vio);
		return;
	}
	struct pend *p = pend_of(r, vio->rid);
	if (p) {
		/* Still unacknowledged: wait for the peer's write, not for its receipt. */
		if (p->vio != vio) {
			p->vio = vio;
			req_mod(vio, REQ_SENT, 0);
		}
		return;
	}
	/* The slot is gone: acknowledged, or failed into the bitmap when the link dropped. A
	 * clear bitmap range means the peer has it. */
	if (!req_peer_ok(vio) && vio->op != VOL_FLUSH && vio->len > 0 &&
	    !repl_range_dirty(r->bm, vio->off, vio->len))
		req_mod(vio, REQ_PEER_HAS, 0);
}

/* The peer is gone: everything it did not confirm goes into the bitmap, waiters complete, every
 * slot is free again (our own barriers' too). */
static void ship_fail_all(struct repl *r)
{
	r->auto_barriers = 0;
	for (unsigned i = 0; i < PEND_SLOTS; i++) {
		struct pend *p = &r->pend[i];
		if (!p->used)
			continue;
		if (p->type != WIRE_BARRIER && !p->write_acked)
			bitmap_set_range(r->bm, p->off, p->len);
		struct vol_io *vio = p->vio;
		p->vio = NULL;
		pend_release(r, p);
		if (vio)
			req_mod(vio, REQ_PEER_LOST, 0);
	}
	r->async_bytes = 0;
}

static void ship_conn_lost(void *ctx)
{
	struct repl *r = ctx;
	ship_unstable_lost(r);
	/* Not only a primary's: a secondary that sources a resync holds slots for its barriers. */
	ship_fail_all(r);
	if (r->role == ROLE_PRIMARY)
		ship_slot_pump(r);
}

void ship_init(struct repl *r)
{
	rangelock_init(&r->slot_wait);
	rangelock_init(&r->writes_held);
	rangelock_init(&r->writes_active);
	r->next_id = 1;
	ev_timer_init(&r->epoch_timer, ship_epoch_timer_cb, EPOCH_MAX_AGE, 0.);
	r->epoch_timer.data = r;
	hooks_add(&r->on_conn_lost, CONN_LOST_SHIP, ship_conn_lost, r, "ship");
	hooks_add(&r->on_conn_lost, CONN_LOST_HELD_WRITES, ship_held_pump_hook, r, "held writes");
	hooks_add(&r->on_write_done, RANGE_FREE_HELD_WRITES, ship_held_pump_hook, r, "held writes");
}
