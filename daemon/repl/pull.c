/* SPDX-License-Identifier: MIT */
/*
 * hakctl attach on a Diskless primary: the backing store comes back, Inconsistent, and is filled
 * from the peer while the volume keeps serving.
 *
 * The push resync of resync.c cannot do this: it writes through the secondary's apply path,
 * and here the target is the primary, whose clients write the same blocks. So the primary pulls:
 * it walks its own "still stale" bitmap (all set at attach), asks the peer for runs with
 * READ_REQ (ids carry ATTACH_ID_BIT) and writes the replies locally. Ordering, as in resync.c:
 * no run is requested while a client write to its blocks is in flight locally, and a client
 * write to a run being pulled waits (ship_submit) until the run is written. The peer answers a
 * READ_REQ only after the writes it received before it, so a pulled run never carries data
 * older than a write of the primary.
 *
 * Meanwhile reads of stale blocks go to the peer, and every write succeeds only once the peer
 * confirmed it (the local disk is not a copy yet). When the link drops or the disk fails again
 * the attach ends and the disk is detached again: the peer's copy stays the only one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pull.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "ctl/events.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "meta/bitmap.h"
#include "repl_int.h"
#include "ship.h"
#include "volume/volume.h"

static void pull_free(struct pull_op *op)
{
	buf_put(op->buf, op->len);
	free(op);
}

bool pull_attaching(void *ctx)
{
	const struct repl *r = ctx;
	return r->pull_bm != NULL;
}

bool pull_local_stale(void *ctx, uint64_t off, uint64_t len)
{
	const struct repl *r = ctx;
	return r->pull_bm && len > 0 && repl_range_dirty(r->pull_bm, off, len);
}

static void pull_finish(struct repl *r)
{
	double dt = ev_now(r->p.loop) - r->pull_start;
	bitmap_free(r->pull_bm);
	r->pull_bm = NULL;
	r->disk = DISK_UPTODATE;
	r->link = LINK_CONNECTED;
	r->detach_reason[0] = '\0';
	r->bytes_resynced_total += r->pull_done_bytes;
	r->resyncs_completed++;
	meta_flush_bitmap(r->meta, r->bm);
	repl_write_sb(r);
	repl_send_state(r);
	repl_log(r, LOG_LVL_NOTICE,
	         "The attached disk is UpToDate: %llu bytes pulled from %s in %.1f s.",
	         (unsigned long long)r->pull_done_bytes, r->p.peer->name, dt);
	events_emit("attach-done", "volume:%s disk:Inconsistent->UpToDate bytes:%llu", r->name,
	            (unsigned long long)r->pull_done_bytes);
}

/* Next run of stale blocks from the cursor that no local write touches; false if none. */
static bool next_run(struct repl *r, uint64_t *off, uint32_t *len)
{
	uint64_t nbits = bitmap_nbits(r->pull_bm);
	uint32_t bs = r->sb.bitmap_block_size;
	uint64_t max_bits = WIRE_READ_MAX / bs ? WIRE_READ_MAX / bs : 1;
	for (int pass = 0; pass < 2; pass++) {
		uint64_t bit = bitmap_find_next_set(r->pull_bm, r->pull_cursor);
		while (bit < nbits) {
			uint64_t end =
			    bitmap_find_next_clear_before(r->pull_bm, bit, bit + max_bits);
			uint64_t o = bitmap_bit_offset(r->pull_bm, bit);
			uint64_t l = bitmap_bit_offset(r->pull_bm, end - 1) +
			             bitmap_bit_length(r->pull_bm, end - 1) - o;
			r->pull_cursor = end;
			if (!rangelock_overlaps(&r->pulling, o, l) &&
			    !rangelock_overlaps(&r->writes_active, o, l)) {
				*off = o;
				*len = (uint32_t)l;
				return true;
			}
			bit = bitmap_find_next_set(r->pull_bm, end);
		}
		r->pull_cursor = 0;
	}
	return false;
}

static void pull_pump(struct repl *r)
{
	if (!r->pull_bm || !r->connected)
		return;
	while (r->pulling.count < ATTACH_WINDOW) {
		uint64_t off;
		uint32_t len;
		if (!next_run(r, &off, &len))
			break;
		struct pull_op *op = calloc(1, sizeof(*op));
		uint8_t *buf = op ? buf_get(len) : NULL;
		if (!op || !buf) {
			free(op);
			break; /* retried at the next completion */
		}
		op->r = r;
		op->id = ATTACH_ID_BIT | r->pull_next_id++;
		op->off = off;
		op->len = len;
		op->buf = buf;
		struct wire_io io = {.id = op->id, .off = off, .len = len};
		uint8_t b[WIRE_IO_SIZE];
		wire_io_encode(b, &io);
		rangelock_add(&r->pulling, &op->range, off, len);
		if (tstream_send_small(r->data, WIRE_READ_REQ, 0, b, sizeof(b)) < 0) {
			repl_drop_connection(r, "queueing a read of the attach resync failed");
			return;
		}
	}
	if (rangelock_empty(&r->pulling) && bitmap_count(r->pull_bm) == 0)
		pull_finish(r);
}

static void pull_written(struct io_req *req)
{
	struct pull_op *op = req->data;
	struct repl *r = op->r;
	int err = req->res < 0 ? (int)-req->res : 0;
	if (op->orphan) {
		pull_free(op);
		return;
	}
	rangelock_del(&op->range);
	if (err) {
		char why[160];
		snprintf(why, sizeof(why), "write error %s at offset %llu during the attach resync",
		         strerrorname_np(err) ? strerrorname_np(err) : "EIO",
		         (unsigned long long)op->off);
		pull_free(op);
		volume_detach(r->p.vol, err, why);
		ship_held_pump(r);
		return;
	}
	bitmap_clear_range(r->pull_bm, op->off, op->len);
	r->pull_done_bytes += op->len;
	pull_free(op);
	ship_held_pump(r);
	pull_pump(r);
}

void pull_read_reply(struct repl *r, const struct wire_hdr *h, uint8_t *payload)
{
	char why[200];
	uint64_t id = wire_get_id(payload);
	uint32_t status;
	struct pull_op *op = NULL;
	for (struct range *e = r->pulling.head; e && !op; e = e->next) {
		struct pull_op *o = range_entry(e, struct pull_op, range);
		if (o->id == id && !o->writing)
			op = o;
	}
	if (!op || wire_rreply_decode(h, payload, op->len, &id, &status, why, sizeof(why)) < 0) {
		if (!op)
			snprintf(why, sizeof(why),
			         "the peer answered attach read %llu that was never asked",
			         (unsigned long long)(id & ~ATTACH_ID_BIT));
		buf_put(payload, h->len);
		repl_drop_connection(r, why);
		return;
	}
	if (status != 0) {
		buf_put(payload, h->len);
		snprintf(
		    why, sizeof(why),
		    "the peer failed to read %u bytes at %llu for the attach resync (error %u)",
		    op->len, (unsigned long long)op->off, status);
		repl_drop_connection(r, why);
		return;
	}
	memcpy(op->buf, payload + WIRE_RREPLY_SIZE, op->len);
	buf_put(payload, h->len);
	op->writing = true;
	volume_io_prep(r->p.vol, &op->io, IO_OP_WRITE, op->off, op->len, op->buf, pull_written, op);
	if (io_submit(r->p.io, &op->io) < 0) {
		op->io.res = -EIO;
		pull_written(&op->io);
	}
}

void pull_abort(struct repl *r)
{
	if (!r->pull_bm)
		return;
	/* Runs being written finish into the void; the rest are dropped now. */
	while (r->pulling.head) {
		struct pull_op *op = range_entry(r->pulling.head, struct pull_op, range);
		rangelock_del(&op->range);
		if (op->writing)
			op->orphan = true;
		else
			pull_free(op);
	}
	repl_log(r, LOG_LVL_WARN,
	         "The attach resync stopped with %llu bytes still to pull; the disk is "
	         "detached again.",
	         (unsigned long long)bitmap_count(r->pull_bm) * r->sb.bitmap_block_size);
	bitmap_free(r->pull_bm);
	r->pull_bm = NULL;
	if (r->link == LINK_SYNC_TARGET)
		r->link = r->connected ? LINK_CONNECTED : LINK_CONNECTING;
	ship_held_pump(r);
}

int pull_attach(struct repl *r, char *err, size_t errlen)
{
	if (r->disk != DISK_DISKLESS) {
		snprintf(err, errlen, "Volume %s is not detached: its disk is %s.", r->name,
		         repl_disk_name(r->disk));
		return -1;
	}
	if (!r->connected || r->peer_disk != DISK_UPTODATE || r->link != LINK_CONNECTED) {
		snprintf(err, errlen,
		         "Volume %s cannot attach now: the disk resyncs from the peer, which "
		         "must be connected and UpToDate (it is %s).",
		         r->name, r->connected ? repl_disk_name(r->peer_disk) : "not connected");
		return -1;
	}
	r->pull_bm = bitmap_create(r->sb.size, r->sb.bitmap_block_size);
	if (!r->pull_bm) {
		snprintf(err, errlen, "Volume %s: out of memory for the attach bitmap.", r->name);
		return -1;
	}
	if (volume_attach(r->p.vol) < 0) {
		snprintf(err, errlen, "Volume %s: cannot open the backing store %s again: %s.",
		         r->name, r->p.vcfg->backing, strerror(errno));
		bitmap_free(r->pull_bm);
		r->pull_bm = NULL;
		return -1;
	}
	bitmap_set_all(r->pull_bm);
	r->disk = DISK_INCONSISTENT;
	r->link = LINK_SYNC_TARGET;
	r->pull_cursor = 0;
	r->pull_done_bytes = 0;
	r->pull_start = ev_now(r->p.loop);
	repl_write_sb(r);
	repl_send_state(r);
	repl_log(r, LOG_LVL_NOTICE,
	         "Attached the backing store %s again; pulling all %llu bytes from %s.",
	         r->p.vcfg->backing, (unsigned long long)r->sb.size, r->p.peer->name);
	events_emit("attach", "volume:%s disk:Diskless->Inconsistent resync:full bytes:%llu",
	            r->name, (unsigned long long)r->sb.size);
	pull_pump(r);
	return 0;
}

static void pull_pump_hook(void *ctx)
{
	pull_pump(ctx);
}

void pull_init(struct repl *r)
{
	rangelock_init(&r->pulling);
	hooks_add(&r->on_write_done, RANGE_FREE_PULL, pull_pump_hook, r, "pull");
}
