/* SPDX-License-Identifier: MIT */
/*
 * Checksum-based resync (config `csums yes | after-crash`), the source side. The pump (resync.c)
 * walks the dirty bitmap as usual, but instead of reading a run and pushing it, it asks the
 * target for the hashes of its copy (CSUM_REQ). The target answers RS_REQUEST (verify.c's hash
 * responder); the source then reads its own copy and compares block by block: blocks that differ
 * go out as RS_DATA and are cleared when the target acknowledges them, exactly like a push;
 * equal blocks are cleared on both sides (RS_IN_SYNC) without sending data.
 *
 * The push resync's ordering rules still hold: the source's read of a run starts only when no
 * application write to it is in flight, and writes arriving during the read wait until the run's
 * RS_DATA is queued (the run sits on rs_reading), so no RS_DATA is ever older than a write the
 * target already has. A target's hash taken before a later write arrived only makes blocks look
 * different, never equal. Interrupted, the resync resumes from the bitmaps like any other.
 */
#include "csum.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "meta/bitmap.h"
#include "repl_int.h"
#include "resync.h"
#include "ship.h"
#include "transport/hashrun.h"
#include "verify.h"
#include "volume/volume.h"

/* Half the target's limit: answers in flight back to us still count on its side. */
#define CSUM_MAX_REQUESTS (VERIFY_PEER_MAX / 2)

bool csum_wanted(const struct repl *r)
{
	switch (r->p.vcfg->csums) {
	case HAK_CSUMS_YES:
		return true;
	case HAK_CSUMS_AFTER_CRASH:
		return r->rs_after_crash;
	default:
		return false;
	}
}

static uint32_t max_run(const struct repl *r)
{
	return hashrun_max_len(r->sb.bitmap_block_size, RS_CHUNK);
}

int csum_start_run(struct repl *r, uint64_t off, uint32_t len)
{
	struct rs_op *op;
	uint8_t hdr[HASHRUN_HDR_SIZE];
	/* Short runs would put thousands of requests in the byte window; the target answers
	 * at most VERIFY_PEER_MAX at a time. Retried when an answer comes back. */
	if (r->rs_csum_count >= CSUM_MAX_REQUESTS)
		return -1;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -1;
	op->r = r;
	op->id = ++r->rs_next_id;
	op->off = off;
	op->len = len;
	struct hashrun hr = {
	    .id = op->id, .off = off, .len = len, .alg = (uint8_t)r->p.vcfg->verify_alg};
	hashrun_hdr_encode(hdr, &hr);
	if (tstream_send_small(r->data, WIRE_CSUM_REQ, 0, hdr, sizeof(hdr)) < 0) {
		free(op);
		return -1;
	}
	op->next = r->rs_csum;
	r->rs_csum = op;
	r->rs_csum_count++;
	r->rs_inflight += len;
	return 0;
}

struct cmp_ctx {
	struct repl *r;
	struct rs_op *op;
};

static void send_in_sync(void *ctx, uint64_t off, uint64_t len)
{
	struct cmp_ctx *c = ctx;
	struct repl *r = c->r;
	uint8_t b[WIRE_IO_SIZE];
	struct wire_io io = {.id = c->op->id, .off = off, .len = (uint32_t)len};
	wire_io_encode(b, &io);
	if (tstream_send_small(r->data, WIRE_RS_IN_SYNC, 0, b, sizeof(b)) < 0)
		return; /* the bits stay set: the next pass over the bitmap retries */
	bitmap_clear_range(r->bm, off, len);
	r->rs_equal_bytes += len;
	r->rs_done_bytes += len;
}

static void send_differing(void *ctx, uint64_t off, uint64_t len)
{
	struct cmp_ctx *c = ctx;
	struct repl *r = c->r;
	struct rs_op *d = calloc(1, sizeof(*d));
	if (!d || !(d->buf = buf_get(len))) {
		free(d);
		return; /* the bits stay set: the next pass over the bitmap retries */
	}
	d->r = r;
	d->id = ++r->rs_next_id;
	d->off = off;
	d->len = (uint32_t)len;
	memcpy(d->buf, c->op->buf + (off - c->op->off), len);
	r->rs_inflight += len;
	resync_send_op(r, d);
}

static void csum_read_done(struct io_req *req)
{
	struct rs_op *op = req->data;
	struct repl *r = op->r;
	uint8_t lh[HASHRUN_MAX_BLOCKS * HASHRUN_MAX_HASH];
	uint32_t bs = r->sb.bitmap_block_size, n = hashrun_blocks(op->len, bs);
	unsigned alg = r->p.vcfg->verify_alg;
	if (op->orphan) {
		resync_free_op(op);
		return;
	}
	rangelock_del(&op->range);
	r->rs_inflight -= op->len;
	if (req->res < 0 || hashrun_compute(alg, op->buf, op->len, bs, lh) < 0) {
		repl_log(r, LOG_LVL_ERR,
		         "Reading or hashing %u bytes at %llu for the checksum resync failed (%s).",
		         op->len, (unsigned long long)op->off,
		         req->res < 0 ? strerror((int)-req->res) : "hash error");
		resync_free_op(op);
		repl_drop_connection(r, "the resync source cannot read its disk");
		return;
	}
	uint64_t valid = n >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1;
	uint64_t diff = hashrun_diff(alg, n, lh, op->hashes, 0);
	struct cmp_ctx c = {r, op};
	hashrun_mask_ranges(~diff & valid, n, op->off, op->len, bs, send_in_sync, &c);
	hashrun_mask_ranges(diff, n, op->off, op->len, bs, send_differing, &c);
	resync_free_op(op);
	ship_held_pump(r);
	resync_pump(r);
}

/* RS_REQUEST at the source: the target's hashes of a run it was asked about. */
static void hashes_frame(struct repl *r, const struct wire_hdr *h, const uint8_t *payload)
{
	struct hashrun hr;
	const uint8_t *hashes;
	char why[256];
	if (r->link != LINK_SYNC_SOURCE || !r->resync_running) {
		repl_drop_connection(r, "the peer sent RS_REQUEST outside a resync it receives");
		return;
	}
	if (hashrun_decode(h, payload, r->sb.size, r->sb.bitmap_block_size, max_run(r), &hr,
	                   &hashes, why, sizeof(why)) < 0) {
		repl_drop_connection(r, why);
		return;
	}
	struct rs_op **pp = &r->rs_csum, *op = NULL;
	for (; *pp; pp = &(*pp)->next) {
		if ((*pp)->id == hr.id) {
			op = *pp;
			break;
		}
	}
	if (!op || op->off != hr.off || op->len != hr.len || hr.alg != r->p.vcfg->verify_alg) {
		snprintf(why, sizeof(why),
		         "the peer sent hashes for resync run %llu (%llu+%u, %s) that was never "
		         "asked for",
		         (unsigned long long)hr.id, (unsigned long long)hr.off, hr.len,
		         hash_alg_name(hr.alg));
		repl_drop_connection(r, why);
		return;
	}
	*pp = op->next;
	op->next = NULL;
	r->rs_csum_count--;
	size_t n = (size_t)hashrun_blocks(op->len, r->sb.bitmap_block_size) * hash_alg_size(hr.alg);
	op->hashes = malloc(n);
	op->buf = op->hashes ? buf_get(op->len) : NULL;
	if (!op->buf || resync_overlaps_write(r, op->off, op->len)) {
		/* A write to the run is in flight, so a read now could see half of it. Its bits
		 * stay set and the pump's next pass over the bitmap asks again (rewinding the
		 * cursor here would duplicate runs still in flight behind it). */
		r->rs_inflight -= op->len;
		resync_free_op(op);
		resync_pump(r);
		return;
	}
	memcpy(op->hashes, hashes, n);
	op->stage = 1;
	rangelock_add(&r->rs_reading, &op->range, op->off, op->len);
	volume_io_prep(r->p.vol, &op->io, IO_OP_READ, op->off, op->len, op->buf, csum_read_done,
	               op);
	io_submit(r->p.io, &op->io);
}

/* RS_IN_SYNC at the target: the source found these blocks equal. */
static void in_sync_frame(struct repl *r, const struct wire_hdr *h, const uint8_t *payload)
{
	struct wire_io io;
	char why[256];
	if (r->link != LINK_SYNC_TARGET) {
		repl_drop_connection(r, "the peer sent RS_IN_SYNC outside a resync");
		return;
	}
	if (wire_io_decode(h, payload, r->sb.size, 512, &io, why, sizeof(why)) < 0) {
		repl_drop_connection(r, why);
		return;
	}
	bitmap_clear_range(r->bm, io.off, io.len);
	r->rs_done_bytes += io.len;
	r->rs_equal_bytes += io.len;
}

void csum_frame(struct repl *r, const struct wire_hdr *h, uint8_t *payload)
{
	if (h->type == WIRE_RS_REQUEST)
		hashes_frame(r, h, payload);
	else
		in_sync_frame(r, h, payload);
	buf_put(payload, h->len);
}

void csum_stop(struct repl *r)
{
	while (r->rs_csum) {
		struct rs_op *op = r->rs_csum;
		r->rs_csum = op->next;
		resync_free_op(op);
	}
	r->rs_csum_count = 0;
}
