/* SPDX-License-Identifier: MIT */
/*
 * Bitmap exchange and bitmap-driven resync.
 *
 * After the handshake both sides send their bitmaps and OR in the peer's, so each holds the union
 * of what either side may lack. The source then walks the bitmap in disk order, reads runs of
 * dirty blocks and pushes them on the data stream (RS_DATA); holes at the source travel as a flag
 * without payload. The target writes them through the same ordered apply path as application
 * writes and acknowledges; only then does the source clear the bits.
 *
 * Ordering: the DATA stream is one TCP stream, so what is queued first arrives first. A resync run
 * is read only when no application write to the same blocks is in flight locally, and an
 * application write that arrives while a run is being read waits (ship_submit) until the run is
 * queued. So a resync never carries data older than a write the peer already has.
 */
#include "resync.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "csum.h"
#include "ctl/events.h"
#include "lib/buf.h"
#include "lib/crc32c.h"
#include "lib/endian.h"
#include "lib/log.h"
#include "meta/bitmap.h"
#include "repl_int.h"
#include "ship.h"
#include "volume/volume.h"

static void resync_send_pause(struct repl *r);

static void rs_free(struct rs_op *op)
{
	if (op->buf)
		buf_put(op->buf, op->len);
	free(op->hashes);
	free(op);
}

void resync_free_op(struct rs_op *op)
{
	rs_free(op);
}

static bool is_source(const struct repl *r)
{
	return r->link == LINK_SYNC_SOURCE;
}

/* Send every non-zero run of bitmap words, then BITMAP_DONE. */
static void send_bitmap(struct repl *r)
{
	size_t nwords;
	const uint64_t *w = bitmap_words(r->bm, &nwords);
	size_t i = 0;
	while (i < nwords) {
		while (i < nwords && w[i] == 0)
			i++;
		if (i == nwords)
			break;
		size_t n = 0;
		while (i + n < nwords && n < WIRE_BITMAP_WORDS && w[i + n] != 0)
			n++;
		struct outq_item *it = calloc(1, sizeof(*it));
		uint8_t *buf = malloc(8 + 8 * n);
		if (!it || !buf) {
			free(it);
			free(buf);
			repl_drop_connection(r, "out of memory while sending the bitmap");
			return;
		}
		wire_put_id(buf, i);
		for (size_t k = 0; k < n; k++) { /* words travel little-endian, as on disk */
			uint64_t le = htole64(w[i + k]);
			memcpy(buf + 8 + 8 * k, &le, 8);
		}
		wire_hdr_encode(it->hdr, WIRE_BITMAP, 0, (uint32_t)(8 + 8 * n));
		it->hdr_len = WIRE_HDR_SIZE;
		it->data = buf;
		it->data_len = 8 + 8 * n;
		it->sent = outq_free_item_and_data;
		tstream_send(r->data, it);
		i += n;
	}
	uint8_t id[8] = {0};
	tstream_send_small(r->data, WIRE_BITMAP_DONE, 0, id, sizeof(id));
	r->bm_sent = true;
}

void resync_begin(struct repl *r, enum gen_decision d, int rule, bool peer_resumable,
                  bool self_resumable)
{
	bool source = d == GEN_SYNC_SOURCE || d == GEN_FULL_SOURCE;
	bool full = d == GEN_FULL_SOURCE || d == GEN_FULL_TARGET;
	/* An initial full sync the target already started resumes from the target's bitmap. Not
	 * a full resync owed to a crashed primary: its unreplicated writes are in no bitmap. */
	bool initial = rule == GEN_RULE_SELF_FRESH || rule == GEN_RULE_PEER_FRESH;
	if (full && initial && ((source && peer_resumable) || (!source && self_resumable)))
		full = false;
	r->resync_full = full;
	r->rs_after_crash = rule == GEN_RULE_CRASHED_SELF || rule == GEN_RULE_CRASHED_PEER ||
	                    rule == GEN_RULE_BITMAP_SELF_CRASHED_PEER ||
	                    rule == GEN_RULE_BITMAP_SELF_CRASHED_SELF ||
	                    rule == GEN_RULE_BITMAP_PEER_CRASHED_SELF ||
	                    rule == GEN_RULE_BITMAP_PEER_CRASHED_PEER;
	r->rs_csums = source && csum_wanted(r);
	r->rs_payload_bytes = r->rs_equal_bytes = 0;
	if (full && !(source ? false : self_resumable))
		bitmap_set_all(r->bm);
	r->link = source ? LINK_SYNC_SOURCE : LINK_SYNC_TARGET;
	r->bm_done_rcvd = false;
	r->rs_cursor = 0;
	r->rs_data_lo = r->rs_data_hi = 0;
	r->rs_inflight = r->rs_unsent = 0;
	r->rs_done_bytes = r->rs_sent_bytes = r->rs_hole_bytes = 0;
	r->rs_start = ev_now(r->p.loop);
	r->rs_rate = 0;
	rsctl_start(&r->rsctl, ev_now(r->p.loop));
	if (r->rsctl.paused_local)
		resync_send_pause(r);
	if (!source) {
		r->disk = DISK_INCONSISTENT;
		/* The peer's data overwrites the forced copy from here on: it is no longer the
		 * reference, so the record of how it came to be one goes (the bitmap write of
		 * bitmaps_merged persists both flags). */
		r->sb.flags = (r->sb.flags | META_F_RESYNC_TARGET) & ~META_F_FORCED;
		repl_send_state(r);
	}
	repl_log(r, LOG_LVL_NOTICE, "Starting a %s resync as %s (%llu blocks marked locally)%s.",
	         full ? "full" : "bitmap-based", source ? "source" : "target",
	         (unsigned long long)bitmap_count(r->bm),
	         r->rs_csums ? ", comparing checksums first" : "");
	send_bitmap(r);
}

/* Both bitmaps are in: the target persists what it still needs, the source starts pushing. */
static void bitmaps_merged(struct repl *r)
{
	r->rs_total = bitmap_count(r->bm) * (uint64_t)r->sb.bitmap_block_size;
	events_emit("resync-start", "volume:%s peer:%s direction:%s full:%s bytes:%llu", r->name,
	            r->p.peer->name, is_source(r) ? "source" : "target",
	            r->resync_full ? "yes" : "no", (unsigned long long)r->rs_total);
	if (!is_source(r)) {
		if (meta_flush_bitmap(r->meta, r->bm) < 0 || repl_write_sb(r) < 0) {
			repl_drop_connection(r, "persisting the resync bitmap failed");
			return;
		}
		return;
	}
	r->resync_running = true;
	resync_pump(r);
}

static void resync_finish_source(struct repl *r)
{
	struct gen_ids g = repl_gen_local(r);
	double dt = ev_now(r->p.loop) - r->rs_start;
	gen_resync_done_source(&g);
	repl_gen_store(r, &g);
	r->crashed_primary = false;
	r->resync_running = false;
	r->link = LINK_CONNECTED;
	r->bytes_resynced_total += r->rs_done_bytes;
	r->resyncs_completed++;
	r->rs_finishing = false;
	r->last_rs.valid = true;
	r->last_rs.csums = r->rs_csums;
	r->last_rs.full = r->resync_full;
	r->last_rs.marked = r->rs_total;
	r->last_rs.sent = r->rs_payload_bytes;
	r->last_rs.equal = r->rs_equal_bytes;
	r->last_rs.holes = r->rs_hole_bytes;
	r->last_rs.seconds = dt;
	meta_flush_bitmap(r->meta, r->bm);
	repl_write_sb(r);
	repl_log(r, LOG_LVL_NOTICE,
	         "Resync finished as source: %llu bytes marked, %llu bytes of data sent, %llu as "
	         "holes, %llu found equal by checksum, in %.1f s (%.1f MiB/s).",
	         (unsigned long long)r->rs_total, (unsigned long long)r->rs_payload_bytes,
	         (unsigned long long)r->rs_hole_bytes, (unsigned long long)r->rs_equal_bytes, dt,
	         dt > 0 ? (double)r->rs_done_bytes / dt / 1048576.0 : 0.0);
	events_emit("resync-end", "volume:%s peer:%s direction:source bytes:%llu seconds:%.3f",
	            r->name, r->p.peer->name, (unsigned long long)r->rs_done_bytes, dt);
}

/* Every run was acknowledged once on disk (apply.c flushes before RS_ACK): UpToDate is true. */
static void resync_finish_target(struct repl *r)
{
	const struct wire_hello *h = &r->peer_hello;
	struct gen_ids g = repl_gen_local(r), src = {.current = h->gen[0],
	                                             .bitmap = h->gen[1],
	                                             .history = {h->gen[2], h->gen[3]}};
	double dt = ev_now(r->p.loop) - r->rs_start;
	if (bitmap_count(r->bm) != 0) {
		repl_log(r, LOG_LVL_ERR,
		         "The source finished the resync but %llu blocks are still "
		         "marked out of sync here; staying Inconsistent.",
		         (unsigned long long)bitmap_count(r->bm));
		return;
	}
	gen_resync_done_target(&g, &src);
	repl_gen_store(r, &g);
	r->crashed_primary = false;
	r->disk = DISK_UPTODATE;
	r->sb.flags &= ~META_F_RESYNC_TARGET;
	r->link = LINK_CONNECTED;
	r->bytes_resynced_total += r->rs_done_bytes;
	r->resyncs_completed++;
	meta_flush_bitmap(r->meta, r->bm);
	repl_write_sb(r);
	uint8_t id[8] = {0};
	tstream_send_small(r->data, WIRE_RS_DONE, 0, id, sizeof(id));
	repl_send_state(r);
	repl_log(r, LOG_LVL_NOTICE,
	         "Resync finished as target: %llu bytes received in %.1f s; the "
	         "disk is UpToDate.",
	         (unsigned long long)r->rs_done_bytes, dt);
	events_emit("resync-end", "volume:%s peer:%s direction:target bytes:%llu seconds:%.3f",
	            r->name, r->p.peer->name, (unsigned long long)r->rs_done_bytes, dt);
}

void resync_frame(struct repl *r, const struct wire_hdr *h, uint8_t *payload)
{
	switch (h->type) {
	case WIRE_BITMAP: {
		uint64_t first = wire_get_id(payload);
		size_t n = (h->len - 8) / 8;
		uint64_t *words = malloc(n > 0 ? n * 8 : 8);
		if (!words) {
			buf_put(payload, h->len);
			repl_drop_connection(r, "out of memory for the peer's bitmap");
			return;
		}
		memcpy(words, payload + 8, n * 8);
		buf_put(payload, h->len);
		int rc = (r->link == LINK_SYNC_SOURCE || r->link == LINK_SYNC_TARGET)
		             ? bitmap_merge_words(r->bm, first, words, n)
		             : -1;
		free(words);
		if (rc < 0)
			repl_drop_connection(r, "the peer sent bitmap words outside the volume or "
			                        "outside a resync");
		return;
	}
	case WIRE_BITMAP_DONE:
		buf_put(payload, h->len);
		if (r->link != LINK_SYNC_SOURCE && r->link != LINK_SYNC_TARGET) {
			repl_drop_connection(r,
			                     "the peer ended a bitmap exchange that did not start");
			return;
		}
		r->bm_done_rcvd = true;
		bitmaps_merged(r);
		return;
	case WIRE_RS_DONE:
		buf_put(payload, h->len);
		if (r->link == LINK_SYNC_SOURCE && r->rs_finishing) {
			resync_finish_source(r);
			return;
		}
		if (r->link != LINK_SYNC_TARGET) {
			repl_drop_connection(r, "the peer sent RS_DONE outside a resync");
			return;
		}
		resync_finish_target(r);
		return;
	default:
		buf_put(payload, h->len);
		return;
	}
}

static void rs_sent(struct outq_item *it, int err)
{
	struct rs_op *op = it->ctx;
	struct repl *r = op->r;
	(void)err;
	/* The payload is on the wire (or dropped); the op itself waits for the RS_ACK. */
	if (op->buf) {
		buf_put(op->buf, op->len);
		op->buf = NULL;
		/* Never below zero, whatever order a lost connection tears things down in. */
		r->rs_unsent -= op->len < r->rs_unsent ? op->len : r->rs_unsent;
		/* Room for more reads; not from here, inside the transport's flush. */
		if (r->resync_running && !ev_is_active(&r->rs_timer)) {
			ev_timer_set(&r->rs_timer, 0., 0.);
			ev_timer_start(r->p.loop, &r->rs_timer);
		}
	}
}

static bool all_zero(const uint8_t *p, size_t n)
{
	static const uint8_t zero[4096];
	for (size_t i = 0; i < n; i += sizeof(zero)) {
		size_t k = n - i < sizeof(zero) ? n - i : sizeof(zero);
		if (memcmp(p + i, zero, k) != 0)
			return false;
	}
	return true;
}

void resync_send_op(struct repl *r, struct rs_op *op)
{
	struct wire_io io = {.id = op->id, .off = op->off, .len = op->len};
	struct outq_item *it = &op->item;
	memset(it, 0, sizeof(*it));
	if (!op->hole && op->buf && all_zero(op->buf, op->len))
		op->hole = true;
	uint16_t flags = op->hole ? WIRE_F_HOLE : 0;
	uint32_t crc_len = !op->hole && r->p.vcfg->data_integrity ? WIRE_CRC_SIZE : 0;
	if (crc_len)
		flags |= WIRE_F_CRC;
	wire_hdr_encode(it->hdr, WIRE_RS_DATA, flags,
	                WIRE_IO_SIZE + crc_len + (op->hole ? 0 : op->len));
	wire_io_encode(it->hdr + WIRE_HDR_SIZE, &io);
	if (crc_len)
		be_put32(it->hdr + WIRE_HDR_SIZE + WIRE_IO_SIZE,
		         crc32c_update(0, op->buf, op->len));
	it->hdr_len = WIRE_HDR_SIZE + WIRE_IO_SIZE + crc_len;
	if (!op->hole) {
		it->data = op->buf;
		it->data_len = op->len;
		r->rs_payload_bytes += op->len;
	} else {
		r->rs_hole_bytes += op->len;
	}
	it->sent = rs_sent;
	it->ctx = op;
	if (op->buf)
		r->rs_unsent += op->len;
	r->rs_sent_bytes += op->len;
	op->stage = 2;
	op->next = r->rs_sent;
	r->rs_sent = op;
	tstream_send(r->data, it);
}

static void rs_io_done(struct io_req *req);

/* Stage 1 of a run: read it. -1 when it could not start (the connection is dropped). */
static int rs_read(struct repl *r, struct rs_op *op)
{
	op->stage = 1;
	op->buf = buf_get(op->len);
	if (!op->buf) {
		rangelock_del(&op->range);
		r->rs_inflight -= op->len;
		rs_free(op);
		repl_drop_connection(r, "out of memory for a resync read");
		return -1;
	}
	volume_io_prep(r->p.vol, &op->io, IO_OP_READ, op->off, op->len, op->buf, rs_io_done, op);
	io_submit(r->p.io, &op->io);
	return 0;
}

static void rs_io_done(struct io_req *req)
{
	struct rs_op *op = req->data;
	struct repl *r = op->r;
	if (op->orphan) {
		rs_free(op);
		return;
	}
	if (req->res < 0) {
		repl_log(r, LOG_LVL_ERR, "Reading %u bytes at %llu for the resync failed: %s.",
		         op->len, (unsigned long long)op->off, strerror((int)-req->res));
		rangelock_del(&op->range);
		r->rs_inflight -= op->len;
		rs_free(op);
		repl_drop_connection(r, "the resync source cannot read its disk");
		return;
	}
	if (op->stage == 0) {
		/* Hole scan (it looks past the run): a run that is all hole at the source needs no
		 * read, and the data found ahead spares the next runs their scans. */
		if (req->map_count >= 1 && op->map[0].hole && op->map[0].len >= op->len) {
			op->hole = true;
		} else {
			if (req->map_count >= 1 && !op->map[0].hole) {
				r->rs_data_lo = op->off;
				r->rs_data_hi = op->off + op->map[0].len;
			}
			rs_read(r, op);
			return;
		}
	}
	rangelock_del(&op->range);
	resync_send_op(r, op);
	ship_held_pump(r);
	resync_pump(r);
}

bool resync_overlaps_write(const struct repl *r, uint64_t off, uint64_t len)
{
	return rangelock_overlaps(&r->writes_active, off, len);
}

static void resync_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	resync_pump(w->data);
}

/* Bytes the rate controller lets the pump start now; arms the timer when it says later. */
static uint64_t pump_budget(struct repl *r)
{
	double retry;
	uint64_t budget = rsctl_allow(&r->rsctl, ev_now(r->p.loop), r->rs_inflight, &retry);
	if (!budget && retry > 0 && !ev_is_active(&r->rs_timer)) {
		ev_timer_set(&r->rs_timer, retry, 0.);
		ev_timer_start(r->p.loop, &r->rs_timer);
	}
	return budget;
}

void resync_pump(struct repl *r)
{
	uint64_t nbits = bitmap_nbits(r->bm);
	uint32_t bs = r->sb.bitmap_block_size;
	if (!r->resync_running || !r->data)
		return;
	uint64_t budget = pump_budget(r);
	for (unsigned guard = 0; guard < 1024 && budget > 0; guard++) {
		if (r->rs_reading.count >= RS_READS_MAX || r->rs_unsent >= RS_UNSENT_MAX)
			return; /* pumped again as a read completes or a run is sent */
		uint64_t bit = bitmap_find_next_set(r->bm, r->rs_cursor);
		if (bit >= nbits) {
			if (r->rs_inflight == 0 && rangelock_empty(&r->rs_reading) && !r->rs_sent) {
				if (bitmap_count(r->bm) == 0) {
					/* The target records the end first (gen.h: target before
					 * source), then confirms with its own RS_DONE. */
					if (!r->rs_finishing) {
						uint8_t id[8] = {0};
						r->rs_finishing = true;
						tstream_send_small(r->data, WIRE_RS_DONE, 0, id,
						                   sizeof(id));
					}
					return;
				}
				r->rs_cursor = 0; /* blocks the target failed to write: go again */
				continue;
			}
			return;
		}
		uint64_t end = bitmap_find_next_clear_before(r->bm, bit, bit + RS_CHUNK / bs);
		uint64_t off = bitmap_bit_offset(r->bm, bit);
		uint64_t last =
		    bitmap_bit_offset(r->bm, end - 1) + bitmap_bit_length(r->bm, end - 1);
		if (resync_overlaps_write(r, off, last - off)) {
			/* Retried when that write completes (repl.on_write_done). */
			return;
		}
		if (r->rs_csums) {
			/* The target hashes its copy first (csum.c). */
			if (csum_start_run(r, off, (uint32_t)(last - off)) < 0)
				return;
			r->rs_cursor = end;
			continue;
		}
		struct rs_op *op = calloc(1, sizeof(*op));
		if (!op)
			return;
		op->r = r;
		op->id = ++r->rs_next_id;
		op->off = off;
		op->len = (uint32_t)(last - off);
		rangelock_add(&r->rs_reading, &op->range, op->off, op->len);
		r->rs_inflight += op->len;
		r->rs_cursor = end;
		rsctl_consume(&r->rsctl, op->len);
		budget = budget > op->len ? budget - op->len : 0;
		if (off >= r->rs_data_lo && last <= r->rs_data_hi) {
			if (rs_read(r, op) < 0)
				return;
			continue;
		}
		uint64_t size = volume_size(r->p.vol);
		volume_io_prep(r->p.vol, &op->io, IO_OP_SEEKMAP, off,
		               size - off > RS_SCAN_AHEAD ? RS_SCAN_AHEAD : size - off, NULL,
		               rs_io_done, op);
		op->io.map = op->map;
		op->io.map_max = 1;
		io_submit(r->p.io, &op->io);
	}
}

void resync_rs_ack(struct repl *r, uint64_t id, uint32_t status)
{
	struct rs_op **pp = &r->rs_sent, *op = NULL;
	for (; *pp; pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			op = *pp;
			*pp = op->next;
			break;
		}
	}
	if (!op) {
		repl_drop_connection(r, "the peer acknowledged a resync run that was never sent");
		return;
	}
	r->rs_inflight -= op->len;
	if (status == 0) {
		bitmap_clear_range(r->bm, op->off, op->len);
		r->rs_done_bytes += op->len;
	} else {
		repl_log(r, LOG_LVL_WARN,
		         "The peer failed to write resync run %llu+%u (error %u); it "
		         "stays out of sync.",
		         (unsigned long long)op->off, op->len, status);
	}
	rs_free(op);
	resync_pump(r);
}

void resync_stop(struct repl *r)
{
	while (r->rs_reading.head) {
		struct rs_op *op = range_entry(r->rs_reading.head, struct rs_op, range);
		rangelock_del(&op->range);
		op->orphan = true; /* freed when its read completes */
	}
	while (r->rs_sent) {
		struct rs_op *op = r->rs_sent;
		r->rs_sent = op->next;
		/* Its frame was dropped or is in the kernel: the item is no longer referenced. */
		rs_free(op);
	}
	csum_stop(r);
	if (r->resync_running || r->link == LINK_SYNC_SOURCE || r->link == LINK_SYNC_TARGET) {
		repl_log(r, LOG_LVL_WARN,
		         "The resync was interrupted with %llu blocks left; it "
		         "resumes on the next connection.",
		         (unsigned long long)bitmap_count(r->bm));
		/* Paired with resync-start, which comes once both bitmaps are in. */
		if (r->bm_done_rcvd)
			events_emit(
			    "resync-interrupt",
			    "volume:%s peer:%s direction:%s bytes:%llu left-bytes:%llu", r->name,
			    r->p.peer->name, r->link == LINK_SYNC_SOURCE ? "source" : "target",
			    (unsigned long long)r->rs_done_bytes,
			    (unsigned long long)bitmap_count(r->bm) * r->sb.bitmap_block_size);
	}
	r->resync_running = false;
	r->rs_finishing = false;
	r->rs_inflight = 0;
	r->rs_unsent = 0;
	r->bm_done_rcvd = false;
	r->bm_sent = false;
	r->rsctl.paused_peer = false; /* the peer tells again on the next connection */
	ev_timer_stop(r->p.loop, &r->rs_timer);
}

/* Tell the peer whether this node holds resyncs paused. */
static void resync_send_pause(struct repl *r)
{
	uint8_t b[WIRE_ID_SIZE] = {r->rsctl.paused_local ? 1 : 0};
	if (r->connected && r->meta_s)
		tstream_send_small(r->meta_s, WIRE_RS_PAUSE, 0, b, sizeof(b));
}

void resync_peer_pause(struct repl *r, bool paused)
{
	if (paused != r->rsctl.paused_peer) {
		repl_log(r, LOG_LVL_NOTICE, "The peer %s resyncs.", paused ? "paused" : "resumed");
		events_emit(paused ? "resync-pause" : "resync-resume", "volume:%s by:peer",
		            r->name);
	}
	r->rsctl.paused_peer = paused;
	resync_pump(r);
}

int resync_pause(struct repl *r, bool pause, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	if (pause != r->rsctl.paused_local)
		events_emit(pause ? "resync-pause" : "resync-resume", "volume:%s by:local",
		            r->name);
	if (pause != r->rsctl.paused_local)
		repl_log(r, LOG_LVL_NOTICE, "Resyncs %s by the operator%s.",
		         pause ? "paused" : "resumed",
		         r->link == LINK_SYNC_SOURCE || r->link == LINK_SYNC_TARGET
		             ? ""
		             : " (none is running now; the setting holds for the next one)");
	r->rsctl.paused_local = pause;
	resync_send_pause(r);
	resync_pump(r);
	return 0;
}

json_t *resync_status_json(const struct repl *r)
{
	if (r->link != LINK_SYNC_SOURCE && r->link != LINK_SYNC_TARGET)
		return NULL;
	uint64_t left = bitmap_count(r->bm) * (uint64_t)r->sb.bitmap_block_size;
	double pct = r->rs_total
	                 ? 100.0 *
	                       (double)(r->rs_total - (left < r->rs_total ? left : r->rs_total)) /
	                       (double)r->rs_total
	                 : 0.0;
	double eta = r->rs_rate > 0 ? (double)left / r->rs_rate : -1;
	double now = ev_now(r->p.loop);
	json_t *o =
	    json_pack("{s:s, s:b, s:I, s:I, s:I, s:f, s:f, s:f, s:b, s:I, s:I, s:I}", "direction",
	              is_source(r) ? "source" : "target", "full", r->resync_full, "total_bytes",
	              (json_int_t)r->rs_total, "left_bytes", (json_int_t)left, "done_bytes",
	              (json_int_t)r->rs_done_bytes, "percent", pct, "rate_mbps",
	              r->rs_rate / 1048576.0, "eta_s", eta, "csums", r->rs_csums, "bytes_marked",
	              (json_int_t)r->rs_total, "bytes_sent", (json_int_t)r->rs_payload_bytes,
	              "bytes_equal", (json_int_t)r->rs_equal_bytes);
	json_t *ctl = json_pack(
	    "{s:b, s:b, s:b, s:f, s:I}", "paused", rsctl_paused(&r->rsctl), "paused_peer",
	    r->rsctl.paused_peer, "app_busy", rsctl_busy(&r->rsctl, now), "rate_limit_mbps",
	    rsctl_rate(&r->rsctl, now) / 1048576.0, "in_flight_bytes", (json_int_t)r->rs_inflight);
	if (o && ctl)
		json_object_update(o, ctl);
	json_decref(ctl);
	return o;
}

static void resync_conn_lost(void *ctx)
{
	resync_stop(ctx);
}

static void resync_pump_hook(void *ctx)
{
	struct repl *r = ctx;
	if (r->resync_running)
		resync_pump(r);
}

void resync_init(struct repl *r)
{
	rangelock_init(&r->rs_reading);
	ev_timer_init(&r->rs_timer, resync_timer_cb, 0.1, 0.);
	r->rs_timer.data = r;
	rsctl_init(&r->rsctl, r->p.vcfg->resync_rate_max, r->p.vcfg->resync_rate_min,
	           r->p.vcfg->resync_fill);
	hooks_add(&r->on_conn_lost, CONN_LOST_RESYNC, resync_conn_lost, r, "resync");
	hooks_add(&r->on_write_done, RANGE_FREE_RESYNC, resync_pump_hook, r, "resync");
}
