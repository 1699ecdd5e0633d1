/* SPDX-License-Identifier: MIT */
#include "verify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "meta/bitmap.h"
#include "lib/buf.h"
#include "conf/config.h"
#include "ctl/events.h"
#include "transport/hashrun.h"
#include "lib/log.h"
#include "apply.h"
#include "repl_int.h"
#include "volume/volume.h"

enum { RUN_WAIT = 0, RUN_READING, RUN_HASHED };

/* Driver: one run being compared. */
struct vrun {
	struct vrun *next;
	struct verify *v;
	uint64_t id, off;
	uint32_t len, nblocks;
	int stage;
	bool peer_done, orphan;
	uint64_t touched; /* blocks written while the run was in flight */
	bool scanned;     /* the hole scan ran: the next step reads */
	uint8_t *buf;
	struct io_req io;
	struct io_extent map[1];
	uint8_t lh[HASHRUN_MAX_BLOCKS * HASHRUN_MAX_HASH];
	uint8_t ph[HASHRUN_MAX_BLOCKS * HASHRUN_MAX_HASH];
};

/* Responder: one VERIFY_REQ or CSUM_REQ of the peer. */
struct hreq {
	struct hreq *next;
	struct verify *v;
	uint16_t type;
	struct hashrun run;
	bool reading, orphan, scanned;
	uint8_t *buf;
	struct io_req io;
	struct io_extent map[1];
	struct outq_item item;
	uint8_t hashes[HASHRUN_MAX_BLOCKS * HASHRUN_MAX_HASH];
};

struct verify {
	struct repl *r;
	/* Driver. */
	bool ran, running, interrupted;
	unsigned alg;
	uint32_t run_len;
	uint64_t cursor, total, done_bytes, next_id;
	uint64_t differing, skipped;
	uint64_t hole_bytes; /* compared by a hole scan here, without reading */
	struct hashrun_ranges ranges;
	double start, end;
	unsigned inflight;
	struct vrun *runs;
	/* Responder. */
	struct hreq *hreqs;
	unsigned nhreq;
	/* Both: the hash of one all-zero block, per algorithm (hole_hashes). */
	uint8_t zero_hash[HASH_ALG_COUNT][HASHRUN_MAX_HASH];
	bool zero_known[HASH_ALG_COUNT];
};

/*
 * Holes are compared without reading them: before a run is read, one SEEK_DATA/SEEK_HOLE scan
 * asks whether all of it is a hole, and if so its hashes are those of zero blocks. A sparse
 * volume of a terabyte is then verified in the time its data takes, not in the time reading and
 * hashing a terabyte of zeroes takes. A run whose length is not whole blocks (the volume's end)
 * is always read.
 */
static bool hole_scan_worth(const struct repl *r, uint32_t len)
{
	return len % r->sb.bitmap_block_size == 0;
}

static void hole_scan(struct repl *r, struct io_req *io, struct io_extent *map, uint64_t off,
                      uint32_t len, void (*done)(struct io_req *), void *data)
{
	volume_io_prep(r->p.vol, io, IO_OP_SEEKMAP, off, len, NULL, done, data);
	io->map = map;
	io->map_max = 1;
	io_submit(r->p.io, io);
}

static bool hole_scan_found(const struct io_req *io, uint32_t len)
{
	return io->res >= 0 && io->map_count >= 1 && io->map[0].hole && io->map[0].len >= len;
}

/* out: the hashes of len bytes of zeroes (whole blocks) under alg; -1 when hashing failed. */
static int hole_hashes(struct verify *v, unsigned alg, uint32_t len, uint8_t *out)
{
	uint32_t bs = v->r->sb.bitmap_block_size;
	size_t hs = hash_alg_size(alg);
	if (alg >= HASH_ALG_COUNT)
		return -1;
	if (!v->zero_known[alg]) {
		uint8_t *zero = buf_get(bs);
		if (!zero)
			return -1;
		memset(zero, 0, bs);
		int rc = hashrun_compute(alg, zero, bs, bs, v->zero_hash[alg]);
		buf_put(zero, bs);
		if (rc < 0)
			return -1;
		v->zero_known[alg] = true;
	}
	for (uint32_t i = 0; i < hashrun_blocks(len, bs); i++)
		memcpy(out + i * hs, v->zero_hash[alg], hs);
	return 0;
}

static void run_pump(struct verify *v);
static void hreq_read(struct hreq *q);
static void run_read(struct vrun *run);
static void driver_stop(struct verify *v);

static void verify_conn_lost(void *ctx)
{
	verify_stop(ctx);
}

static void verify_pump_hook(void *ctx)
{
	verify_pump(ctx);
}

int verify_create(struct repl *r)
{
	r->vf = calloc(1, sizeof(*r->vf));
	if (!r->vf)
		return -1;
	r->vf->r = r;
	hooks_add(&r->on_conn_lost, CONN_LOST_VERIFY, verify_conn_lost, r, "verify");
	hooks_add(&r->on_write_done, RANGE_FREE_VERIFY, verify_pump_hook, r, "verify");
	hooks_add(&r->on_apply_done, RANGE_FREE_VERIFY, verify_pump_hook, r, "verify");
	return 0;
}

void verify_destroy(struct repl *r)
{
	if (!r->vf)
		return;
	verify_stop(r);
	free(r->vf);
	r->vf = NULL;
}

bool verify_running(const struct repl *r)
{
	return r->vf && r->vf->running;
}

/* A write to these blocks is in flight on this node: a read now could see half of it. */
static bool writes_in_flight(const struct repl *r, uint64_t off, uint64_t len)
{
	return rangelock_overlaps(&r->writes_active, off, len) || apply_overlaps(r, off, len);
}

static uint64_t block_mask(uint32_t n)
{
	return n >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1;
}

/* ---- driver ------------------------------------------------------------------------------ */

static void run_unlink(struct verify *v, struct vrun *run)
{
	for (struct vrun **pp = &v->runs; *pp; pp = &(*pp)->next) {
		if (*pp == run) {
			*pp = run->next;
			break;
		}
	}
	v->inflight--;
}

static void run_free(struct vrun *run)
{
	if (run->buf)
		buf_put(run->buf, run->len);
	free(run);
}

static void verify_finish(struct verify *v)
{
	struct repl *r = v->r;
	double dt;
	v->running = false;
	v->end = ev_now(r->p.loop);
	dt = v->end - v->start;
	if (v->differing) {
		repl_log(r, LOG_LVL_WARN,
		         "Verify of %s found %llu differing blocks (%llu skipped while being "
		         "written) in %.1f s, first at offset %llu; they are marked out of sync, "
		         "'hakctl resync %s' repairs them.",
		         r->name, (unsigned long long)v->differing, (unsigned long long)v->skipped,
		         dt, (unsigned long long)v->ranges.r[0].off, r->name);
		if (meta_flush_bitmap(r->meta, r->bm) < 0)
			repl_log(r, LOG_LVL_ERR, "Persisting the bitmap after verify failed: %s.",
			         strerror(errno));
	} else {
		repl_log(r, LOG_LVL_NOTICE,
		         "Verify of %s found no differing blocks (%llu skipped while being "
		         "written) in %.1f s (%.1f MiB/s).",
		         r->name, (unsigned long long)v->skipped, dt,
		         dt > 0 ? (double)v->done_bytes / dt / 1048576.0 : 0.0);
	}
	events_emit("verify-done",
	            "volume:%s differing_blocks:%llu skipped_blocks:%llu bytes:%llu alg:%s "
	            "seconds:%.1f",
	            r->name, (unsigned long long)v->differing, (unsigned long long)v->skipped,
	            (unsigned long long)v->done_bytes, hash_alg_name(v->alg), dt);
}

static void mark_range(void *ctx, uint64_t off, uint64_t len)
{
	struct verify *v = ctx;
	bitmap_set_range(v->r->bm, off, len);
	hashrun_ranges_add(&v->ranges, off, len);
}

static void run_compare(struct verify *v, struct vrun *run)
{
	if (run->stage != RUN_HASHED || !run->peer_done)
		return;
	uint64_t valid = block_mask(run->nblocks), skip = run->touched & valid;
	uint64_t diff = hashrun_diff(v->alg, run->nblocks, run->lh, run->ph, skip);
	v->skipped += (uint64_t)__builtin_popcountll(skip);
	v->differing += (uint64_t)__builtin_popcountll(diff);
	hashrun_mask_ranges(diff, run->nblocks, run->off, run->len, v->r->sb.bitmap_block_size,
	                    mark_range, v);
	v->done_bytes += run->len;
	run_unlink(v, run);
	run_free(run);
	run_pump(v);
}

static void run_read_done(struct io_req *req)
{
	struct vrun *run = req->data;
	struct verify *v = run->v;
	if (run->orphan) {
		run_free(run);
		return;
	}
	if (!run->scanned) {
		run->scanned = true;
		if (!hole_scan_found(req, run->len) ||
		    hole_hashes(v, v->alg, run->len, run->lh) < 0) {
			/* data: read it once no write overlaps (the pump retries otherwise) */
			run->stage = RUN_WAIT;
			if (!writes_in_flight(v->r, run->off, run->len))
				run_read(run);
			return;
		}
		v->hole_bytes += run->len;
	} else if (req->res < 0 || hashrun_compute(v->alg, run->buf, run->len,
	                                           v->r->sb.bitmap_block_size, run->lh) < 0) {
		repl_log(v->r, LOG_LVL_ERR,
		         "Verify stopped: reading or hashing %u bytes at offset %llu failed (%s).",
		         run->len, (unsigned long long)run->off,
		         req->res < 0 ? strerror((int)-req->res) : "hash error");
		v->interrupted = true;
		run_unlink(v, run);
		run_free(run);
		driver_stop(v);
		return;
	}
	if (run->buf)
		buf_put(run->buf, run->len);
	run->buf = NULL;
	run->stage = RUN_HASHED;
	run_compare(v, run);
}

static void run_read(struct vrun *run)
{
	struct repl *r = run->v->r;
	if (!run->scanned && hole_scan_worth(r, run->len)) {
		run->stage = RUN_READING;
		hole_scan(r, &run->io, run->map, run->off, run->len, run_read_done, run);
		return;
	}
	run->scanned = true;
	run->buf = buf_get(run->len);
	if (!run->buf) {
		/* Retried by the next pump. */
		return;
	}
	run->stage = RUN_READING;
	volume_io_prep(r->p.vol, &run->io, IO_OP_READ, run->off, run->len, run->buf, run_read_done,
	               run);
	io_submit(r->p.io, &run->io);
}

static int run_start(struct verify *v)
{
	struct repl *r = v->r;
	struct vrun *run = calloc(1, sizeof(*run));
	uint8_t hdr[HASHRUN_HDR_SIZE];
	if (!run)
		return -1;
	run->v = v;
	run->id = ++v->next_id;
	run->off = v->cursor;
	run->len =
	    (uint32_t)(v->total - v->cursor < v->run_len ? v->total - v->cursor : v->run_len);
	run->nblocks = hashrun_blocks(run->len, r->sb.bitmap_block_size);
	struct hashrun hr = {
	    .id = run->id, .off = run->off, .len = run->len, .alg = (uint8_t)v->alg};
	hashrun_hdr_encode(hdr, &hr);
	if (tstream_send_small(r->data, WIRE_VERIFY_REQ, 0, hdr, sizeof(hdr)) < 0) {
		free(run);
		return -1;
	}
	v->cursor += run->len;
	run->next = v->runs;
	v->runs = run;
	v->inflight++;
	if (!writes_in_flight(r, run->off, run->len))
		run_read(run);
	return 0;
}

static void run_pump(struct verify *v)
{
	if (!v->running)
		return;
	for (struct vrun *run = v->runs; run; run = run->next)
		if (run->stage == RUN_WAIT && !writes_in_flight(v->r, run->off, run->len))
			run_read(run);
	while (v->running && v->inflight < VERIFY_WINDOW && v->cursor < v->total)
		if (run_start(v) < 0)
			break;
	if (v->running && v->cursor >= v->total && v->inflight == 0)
		verify_finish(v);
}

int verify_start(struct repl *r, char *err, size_t errlen)
{
	struct verify *v = r->vf;
	if (!r->connected || r->link != LINK_CONNECTED) {
		snprintf(err, errlen,
		         "Volume %s cannot be verified now: the link is %s; verify needs a "
		         "Connected peer and no resync running.",
		         r->name, repl_link_name(r->link));
		return -1;
	}
	if (r->disk != DISK_UPTODATE || r->peer_disk != DISK_UPTODATE) {
		snprintf(err, errlen,
		         "Volume %s cannot be verified: both disks must be UpToDate (here %s, "
		         "peer %s).",
		         r->name, repl_disk_name(r->disk), repl_disk_name(r->peer_disk));
		return -1;
	}
	if (v->running) {
		snprintf(err, errlen, "A verify of volume %s is already running (%.1f%% done).",
		         r->name,
		         v->total ? 100.0 * (double)v->done_bytes / (double)v->total : 0.0);
		return -1;
	}
	v->ran = v->running = true;
	v->interrupted = false;
	v->alg = r->p.vcfg->verify_alg;
	v->run_len = hashrun_max_len(r->sb.bitmap_block_size, VERIFY_RUN_BYTES);
	v->cursor = v->done_bytes = v->differing = v->skipped = v->hole_bytes = 0;
	v->total = r->sb.size;
	memset(&v->ranges, 0, sizeof(v->ranges));
	v->start = ev_now(r->p.loop);
	repl_log(r, LOG_LVL_NOTICE, "Verify of %s started: %llu bytes, %s hashes, driven by %s.",
	         r->name, (unsigned long long)v->total, hash_alg_name(v->alg), r->p.self->name);
	events_emit("verify-start", "volume:%s bytes:%llu alg:%s", r->name,
	            (unsigned long long)v->total, hash_alg_name(v->alg));
	run_pump(v);
	return 0;
}

static void reply_frame(struct repl *r, const struct wire_hdr *h, const uint8_t *payload)
{
	struct verify *v = r->vf;
	struct hashrun hr;
	const uint8_t *hashes = NULL;
	char why[256];
	if (hashrun_decode(h, payload, r->sb.size, r->sb.bitmap_block_size,
	                   hashrun_max_len(r->sb.bitmap_block_size, VERIFY_RUN_BYTES), &hr, &hashes,
	                   why, sizeof(why)) < 0) {
		repl_drop_connection(r, why);
		return;
	}
	struct vrun *run = v->runs;
	while (run && run->id != hr.id)
		run = run->next;
	if (!run && !v->running && hr.id >= 1 && hr.id <= v->next_id)
		return; /* a late answer for a verify that was stopped */
	if (!v->running || !run || run->peer_done || run->off != hr.off || run->len != hr.len ||
	    hr.alg != v->alg) {
		snprintf(why, sizeof(why),
		         "the peer answered verify run %llu (%llu+%u, %s) that was never asked for",
		         (unsigned long long)hr.id, (unsigned long long)hr.off, hr.len,
		         hash_alg_name(hr.alg));
		repl_drop_connection(r, why);
		return;
	}
	memcpy(run->ph, hashes, (size_t)run->nblocks * hash_alg_size(hr.alg));
	run->peer_done = true;
	run_compare(v, run);
}

/* ---- responder --------------------------------------------------------------------------- */

static void hreq_unlink(struct verify *v, struct hreq *q)
{
	for (struct hreq **pp = &v->hreqs; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			return;
		}
	}
}

static void hreq_free(struct hreq *q)
{
	if (q->buf)
		buf_put(q->buf, q->run.len);
	free(q);
}

static void hreq_sent(struct outq_item *it, int err)
{
	struct hreq *q = it->ctx;
	(void)err;
	/* Counted until the reply left: a peer that asks without reading stays bounded. */
	if (q->v->nhreq)
		q->v->nhreq--;
	hreq_free(q);
}

static void hreq_read_done(struct io_req *req)
{
	struct hreq *q = req->data;
	struct verify *v = q->v;
	struct repl *r = v->r;
	if (q->orphan) {
		hreq_free(q);
		return;
	}
	if (!q->scanned) {
		q->scanned = true;
		if (!hole_scan_found(req, q->run.len) ||
		    hole_hashes(v, q->run.alg, q->run.len, q->hashes) < 0) {
			q->reading = false;
			if (!writes_in_flight(r, q->run.off, q->run.len))
				hreq_read(q);
			return;
		}
	}
	hreq_unlink(v, q);
	if (q->buf && (req->res < 0 || hashrun_compute(q->run.alg, q->buf, q->run.len,
	                                               r->sb.bitmap_block_size, q->hashes) < 0)) {
		repl_log(r, LOG_LVL_ERR,
		         "Reading or hashing %u bytes at offset %llu for the peer "
		         "failed (%s).",
		         q->run.len, (unsigned long long)q->run.off,
		         req->res < 0 ? strerror((int)-req->res) : "hash error");
		hreq_free(q);
		if (v->nhreq)
			v->nhreq--;
		repl_drop_connection(r, "this node cannot hash its copy for the peer");
		return;
	}
	if (q->buf)
		buf_put(q->buf, q->run.len);
	q->buf = NULL;
	struct outq_item *it = &q->item;
	size_t n =
	    (size_t)hashrun_blocks(q->run.len, r->sb.bitmap_block_size) * hash_alg_size(q->run.alg);
	uint16_t type = q->type == WIRE_CSUM_REQ ? WIRE_RS_REQUEST : WIRE_VERIFY_REPLY;
	memset(it, 0, sizeof(*it));
	wire_hdr_encode(it->hdr, type, 0, (uint32_t)(HASHRUN_HDR_SIZE + n));
	hashrun_hdr_encode(it->hdr + WIRE_HDR_SIZE, &q->run);
	it->hdr_len = WIRE_HDR_SIZE + HASHRUN_HDR_SIZE;
	it->data = q->hashes;
	it->data_len = n;
	it->sent = hreq_sent;
	it->ctx = q;
	tstream_send(r->data, it);
}

static void hreq_read(struct hreq *q)
{
	struct repl *r = q->v->r;
	if (!q->scanned && hole_scan_worth(r, q->run.len)) {
		q->reading = true;
		hole_scan(r, &q->io, q->map, q->run.off, q->run.len, hreq_read_done, q);
		return;
	}
	q->scanned = true;
	q->buf = buf_get(q->run.len);
	if (!q->buf)
		return; /* retried by the next pump */
	q->reading = true;
	volume_io_prep(r->p.vol, &q->io, IO_OP_READ, q->run.off, q->run.len, q->buf, hreq_read_done,
	               q);
	io_submit(r->p.io, &q->io);
}

static void request_frame(struct repl *r, const struct wire_hdr *h, const uint8_t *payload)
{
	struct verify *v = r->vf;
	struct hashrun hr;
	char why[256];
	bool csum = h->type == WIRE_CSUM_REQ;
	if (csum ? r->link != LINK_SYNC_TARGET : r->link != LINK_CONNECTED) {
		snprintf(why, sizeof(why), "the peer sent %s while this node is %s",
		         wire_type_name(h->type), repl_link_name(r->link));
		repl_drop_connection(r, why);
		return;
	}
	if (hashrun_decode(h, payload, r->sb.size, r->sb.bitmap_block_size,
	                   hashrun_max_len(r->sb.bitmap_block_size, VERIFY_RUN_BYTES), &hr, NULL,
	                   why, sizeof(why)) < 0) {
		repl_drop_connection(r, why);
		return;
	}
	if (v->nhreq >= VERIFY_PEER_MAX) {
		snprintf(why, sizeof(why), "the peer has more than %u hash requests outstanding",
		         VERIFY_PEER_MAX);
		repl_drop_connection(r, why);
		return;
	}
	struct hreq *q = calloc(1, sizeof(*q));
	if (!q) {
		repl_drop_connection(r, "out of memory for a hash request of the peer");
		return;
	}
	q->v = v;
	q->type = h->type;
	q->run = hr;
	q->next = v->hreqs;
	v->hreqs = q;
	v->nhreq++;
	if (!writes_in_flight(r, hr.off, hr.len))
		hreq_read(q);
}

void verify_frame(struct repl *r, const struct wire_hdr *h, uint8_t *payload)
{
	if (h->type == WIRE_VERIFY_REPLY)
		reply_frame(r, h, payload);
	else
		request_frame(r, h, payload);
	buf_put(payload, h->len);
}

/* ---- shared ------------------------------------------------------------------------------- */

void verify_note_write(struct repl *r, uint64_t off, uint64_t len)
{
	struct verify *v = r->vf;
	uint32_t bs = r->sb.bitmap_block_size;
	if (!v || !v->running)
		return;
	for (struct vrun *run = v->runs; run; run = run->next) {
		if (!range_overlaps(run->off, run->len, off, len))
			continue;
		uint64_t a = off > run->off ? off : run->off;
		uint64_t e = off + len < run->off + run->len ? off + len : run->off + run->len;
		for (uint64_t b = (a - run->off) / bs; b <= (e - 1 - run->off) / bs; b++)
			run->touched |= UINT64_C(1) << b;
	}
}

void verify_pump(struct repl *r)
{
	struct verify *v = r->vf;
	if (!v)
		return;
	for (struct hreq *q = v->hreqs; q; q = q->next)
		if (!q->reading && !writes_in_flight(r, q->run.off, q->run.len))
			hreq_read(q);
	run_pump(v);
}

static void driver_stop(struct verify *v)
{
	struct repl *r = v->r;
	if (v->running) {
		v->running = false;
		v->interrupted = true;
		v->end = ev_now(r->p.loop);
		repl_log(r, LOG_LVL_WARN,
		         "Verify of %s was interrupted after %llu of %llu bytes (%llu differing "
		         "blocks so far).",
		         r->name, (unsigned long long)v->done_bytes, (unsigned long long)v->total,
		         (unsigned long long)v->differing);
		events_emit("verify-interrupted", "volume:%s done_bytes:%llu differing_blocks:%llu",
		            r->name, (unsigned long long)v->done_bytes,
		            (unsigned long long)v->differing);
	}
	while (v->runs) {
		struct vrun *run = v->runs;
		v->runs = run->next;
		if (run->stage == RUN_READING)
			run->orphan = true; /* freed when its read completes */
		else
			run_free(run);
	}
	v->inflight = 0;
}

void verify_stop(struct repl *r)
{
	struct verify *v = r->vf;
	if (!v)
		return;
	driver_stop(v);
	/* Replies already queued were dropped with the stream (hreq_sent). */
	while (v->hreqs) {
		struct hreq *q = v->hreqs;
		v->hreqs = q->next;
		if (q->reading)
			q->orphan = true;
		else
			hreq_free(q);
	}
	v->nhreq = 0;
}

json_t *verify_status_json(const struct repl *r)
{
	const struct verify *v = r->vf;
	if (!v || !v->ran)
		return NULL;
	double now = v->running ? ev_now(r->p.loop) : v->end;
	double dt = now - v->start, rate = dt > 0 ? (double)v->done_bytes / dt : 0;
	double eta = v->running && rate > 0 ? (double)(v->total - v->done_bytes) / rate
	                                    : (v->running ? -1 : 0);
	json_t *ranges = json_array();
	for (unsigned i = 0; ranges && i < v->ranges.n; i++)
		json_array_append_new(ranges, json_pack("{s:I, s:I}", "offset",
		                                        (json_int_t)v->ranges.r[i].off, "length",
		                                        (json_int_t)v->ranges.r[i].len));
	return json_pack(
	    "{s:b, s:b, s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:I, s:I, s:o?}", "running", v->running,
	    "interrupted", v->interrupted, "alg", hash_alg_name(v->alg), "total_bytes",
	    (json_int_t)v->total, "done_bytes", (json_int_t)v->done_bytes, "hole_bytes",
	    (json_int_t)v->hole_bytes, "percent",
	    v->total ? 100.0 * (double)v->done_bytes / (double)v->total : 0.0, "rate_mbps",
	    rate / 1048576.0, "eta_s", eta, "differing_blocks", (json_int_t)v->differing,
	    "skipped_blocks", (json_int_t)v->skipped, "first_ranges", ranges);
}
