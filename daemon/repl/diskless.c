/* SPDX-License-Identifier: MIT */
#include "diskless.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "conf/config.h"
#include "ctl/events.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "meta/bitmap.h"
#include "pull.h"
#include "repl_int.h"
#include "volume/req.h"

enum diskless_verdict diskless_handshake(int self_disk, int peer_disk, uint64_t self_gen,
                                         uint64_t peer_gen)
{
	bool self_less = self_disk == DISK_DISKLESS, peer_less = peer_disk == DISK_DISKLESS;
	if (!self_less && !peer_less)
		return DL_NONE;
	if (self_less && peer_less)
		return DL_BOTH_DISKLESS;
	int full = self_less ? peer_disk : self_disk;
	if (full != DISK_UPTODATE || self_gen != peer_gen || self_gen == 0)
		return DL_NO_GOOD_COPY;
	return DL_ACCEPT;
}

/* ---- detach ----------------------------------------------------------------------------- */

void diskless_detached(void *ctx, const char *reason)
{
	struct repl *r = ctx;
	enum repl_disk was = r->disk;
	pull_abort(r);
	snprintf(r->detach_reason, sizeof(r->detach_reason), "%s", reason);
	r->disk = DISK_DISKLESS;
	/* A resync this node sources reads the failed disk: nothing good can come of it. */
	if (r->link == LINK_SYNC_SOURCE)
		repl_drop_connection(r, "the local disk failed while it was the resync source");
	/* The superblock stops calling the disk consistent, so it can never be promoted from or
	 * serve as a resync source after a restart. Metadata on a separate device usually
	 * survives the data disk; if it fails too, say so loudly. */
	if (meta_flush_bitmap(r->meta, r->bm) < 0 || repl_write_sb(r) < 0)
		repl_log(r, LOG_LVL_ERR,
		         "Recording the detach in the metadata failed: after a restart this "
		         "node may take its stale disk for %s. Run 'hakctl attach %s' only "
		         "after a full resync is possible.",
		         repl_disk_name(was), r->name);
	repl_send_state(r);
	repl_log(r, LOG_LVL_ERR, "Detached the backing store (%s): the disk is Diskless, %s.",
	         reason,
	         r->connected && r->peer_disk == DISK_UPTODATE
	             ? "reads and writes go to the peer"
	             : "and no UpToDate peer is connected, so requests fail with EIO");
	char ev_reason[sizeof(r->detach_reason)];
	snprintf(ev_reason, sizeof(ev_reason), "%s", reason);
	for (char *p = ev_reason; *p; p++)
		if (*p == ' ')
			*p = '-';
	events_emit("detach", "volume:%s disk:%s->Diskless reason:%s peer:%s", r->name,
	            repl_disk_name(was), ev_reason,
	            r->connected ? repl_disk_name(r->peer_disk) : "none");
}

/* ---- primary: forwarded reads ----------------------------------------------------------- */

static void rread_chunk_done(struct vol_io *vio, int err)
{
	if (err && !vio->rr_err)
		vio->rr_err = err;
	vio->rr_pending--;
	if (vio->rr_pending == 0 && vio->rr_next >= vio->off + vio->len)
		req_mod(vio, REQ_LOCAL_DONE, vio->rr_err);
}

static void rread_pump(struct repl *r)
{
	while (r->rread_wait.head && r->connected) {
		struct vol_io *vio = range_entry(r->rread_wait.head, struct vol_io, range);
		uint64_t end = vio->off + vio->len;
		while (vio->rr_next < end) {
			uint64_t id = r->rread_next_id;
			struct rread *s = &r->rread[id % RREAD_SLOTS];
			if (s->vio)
				return; /* all slots busy: the next reply continues */
			uint32_t n = end - vio->rr_next < WIRE_READ_MAX
			                 ? (uint32_t)(end - vio->rr_next)
			                 : WIRE_READ_MAX;
			struct wire_io io = {.id = id, .off = vio->rr_next, .len = n};
			uint8_t b[WIRE_IO_SIZE];
			wire_io_encode(b, &io);
			if (tstream_send_small(r->data, WIRE_READ_REQ, 0, b, sizeof(b)) < 0) {
				repl_drop_connection(r, "queueing a forwarded read failed");
				return;
			}
			s->id = id;
			s->vio = vio;
			s->len = n;
			s->dst = (uint8_t *)vio->buf + (vio->rr_next - vio->off);
			r->rread_next_id++;
			r->rread_count++;
			vio->rr_pending++;
			vio->rr_next += n;
		}
		rangelock_del(&vio->range);
	}
}

int diskless_remote_read(void *ctx, struct vol_io *vio)
{
	struct repl *r = ctx;
	if (!r->connected || r->peer_disk != DISK_UPTODATE || !r->data ||
	    repl_range_dirty(r->bm, vio->off, vio->len)) {
		errno = EIO;
		return -1;
	}
	vio->rr_next = vio->off;
	vio->rr_pending = 0;
	vio->rr_err = 0;
	rangelock_add(&r->rread_wait, &vio->range, vio->off, vio->len);
	rread_pump(r);
	return 0;
}

void diskless_read_reply(struct repl *r, const struct wire_hdr *h, uint8_t *payload)
{
	char why[200];
	uint64_t id = wire_get_id(payload);
	uint32_t status;
	if (id & ATTACH_ID_BIT) {
		pull_read_reply(r, h, payload);
		return;
	}
	struct rread *s = &r->rread[id % RREAD_SLOTS];
	if (r->role != ROLE_PRIMARY || !s->vio || s->id != id) {
		buf_put(payload, h->len);
		snprintf(why, sizeof(why), "the peer answered read %llu that was never asked",
		         (unsigned long long)id);
		repl_drop_connection(r, why);
		return;
	}
	if (wire_rreply_decode(h, payload, s->len, &id, &status, why, sizeof(why)) < 0) {
		buf_put(payload, h->len);
		repl_drop_connection(r, why);
		return;
	}
	struct vol_io *vio = s->vio;
	if (status == 0)
		memcpy(s->dst, payload + WIRE_RREPLY_SIZE, s->len);
	else
		repl_log(r, LOG_LVL_ERR,
		         "The peer failed a forwarded read of %u bytes at %llu (error %u).", s->len,
		         (unsigned long long)(vio->off + (uint64_t)(s->dst - (uint8_t *)vio->buf)),
		         status);
	buf_put(payload, h->len);
	s->vio = NULL;
	r->rread_count--;
	r->remote_reads++;
	rread_chunk_done(vio, status ? EIO : 0);
	rread_pump(r);
}

static void rread_fail_all(struct repl *r)
{
	/* Queued requests first, so none of them gets a slot while the slots are failed. */
	while (r->rread_wait.head) {
		struct vol_io *vio = range_entry(r->rread_wait.head, struct vol_io, range);
		rangelock_del(&vio->range);
		vio->rr_next = vio->off + vio->len;
		vio->rr_pending++;
		rread_chunk_done(vio, EIO);
	}
	for (unsigned i = 0; i < RREAD_SLOTS; i++) {
		struct rread *s = &r->rread[i];
		if (!s->vio)
			continue;
		struct vol_io *vio = s->vio;
		s->vio = NULL;
		r->rread_count--;
		rread_chunk_done(vio, EIO);
	}
}

/* ---- secondary: serving reads ----------------------------------------------------------- */

static void rserve_free(struct rserve *sv)
{
	sv->r->rserve_count--;
	buf_put(sv->buf, sv->len);
	free(sv);
}

static void rserve_sent(struct outq_item *it, int err)
{
	(void)err;
	rserve_free(it->ctx);
}

static void rserve_reply(struct rserve *sv)
{
	struct repl *r = sv->r;
	if (sv->conn_seq != r->conn_seq || !r->connected || !r->data) {
		rserve_free(sv);
		return;
	}
	if (sv->status)
		repl_log(r, LOG_LVL_ERR, "Serving the peer's read of %u bytes at %llu failed: %s.",
		         sv->len, (unsigned long long)sv->off, strerror(sv->status));
	struct outq_item *it = &sv->item;
	memset(it, 0, sizeof(*it));
	uint32_t dlen = sv->status ? 0 : sv->len;
	wire_hdr_encode(it->hdr, WIRE_READ_REPLY, 0, WIRE_RREPLY_SIZE + dlen);
	wire_rreply_encode(it->hdr + WIRE_HDR_SIZE, sv->id, (uint32_t)sv->status);
	it->hdr_len = WIRE_HDR_SIZE + WIRE_RREPLY_SIZE;
	it->data = dlen ? sv->buf : NULL;
	it->data_len = dlen;
	it->sent = rserve_sent;
	it->ctx = sv;
	tstream_send(r->data, it);
}

static void rserve_read_done(struct io_req *req)
{
	struct rserve *sv = req->data;
	if (req->res < 0)
		sv->status = (int)-req->res;
	else if ((uint64_t)req->res != sv->len)
		sv->status = EIO;
	rserve_reply(sv);
}

static void rserve_start(struct rserve *sv)
{
	struct repl *r = sv->r;
	volume_io_prep(r->p.vol, &sv->io, IO_OP_READ, sv->off, sv->len, sv->buf, rserve_read_done,
	               sv);
	if (io_submit(r->p.io, &sv->io) < 0) {
		sv->io.res = -EIO;
		rserve_read_done(&sv->io);
	}
}

void diskless_read_req(struct repl *r, const struct wire_hdr *h, uint8_t *payload)
{
	char why[200];
	struct wire_io io;
	int rc = wire_io_decode(h, payload, volume_size(r->p.vol), 512, &io, why, sizeof(why));
	buf_put(payload, h->len);
	if (rc < 0 || r->role == ROLE_PRIMARY || r->rserve_count >= RREAD_SLOTS + ATTACH_WINDOW) {
		if (rc == 0)
			snprintf(why, sizeof(why), "%s",
			         r->role == ROLE_PRIMARY
			             ? "the peer asked a primary to serve a read"
			             : "the peer has more forwarded reads in flight than allowed");
		repl_drop_connection(r, why);
		return;
	}
	struct rserve *sv = calloc(1, sizeof(*sv));
	uint8_t *buf = sv ? buf_get(io.len) : NULL;
	if (!sv || !buf) {
		free(sv);
		repl_drop_connection(r, "out of memory for a forwarded read");
		return;
	}
	sv->r = r;
	sv->id = io.id;
	sv->off = io.off;
	sv->len = io.len;
	sv->buf = buf;
	sv->conn_seq = r->conn_seq;
	r->rserve_count++;
	if (r->disk != DISK_UPTODATE) {
		/* Only an UpToDate copy may answer for the primary's lost disk. */
		sv->status = EIO;
		rserve_reply(sv);
		return;
	}
	if (apply_overlaps(r, io.off, io.len) || r->rserve_wait) {
		struct rserve **pp = &r->rserve_wait;
		while (*pp)
			pp = &(*pp)->next;
		*pp = sv;
		return;
	}
	rserve_start(sv);
}

static void diskless_apply_progress(void *ctx)
{
	struct repl *r = ctx;
	/* In arrival order: a read never overtakes an earlier one still blocked. */
	while (r->rserve_wait && !apply_overlaps(r, r->rserve_wait->off, r->rserve_wait->len)) {
		struct rserve *sv = r->rserve_wait;
		r->rserve_wait = sv->next;
		sv->next = NULL;
		rserve_start(sv);
	}
}

static void diskless_conn_lost(void *ctx)
{
	struct repl *r = ctx;
	/* repl.c bumps conn_seq on every loss: replies still being read are dropped by it. */
	while (r->rserve_wait) {
		struct rserve *sv = r->rserve_wait;
		r->rserve_wait = sv->next;
		rserve_free(sv);
	}
	rread_fail_all(r);
	if (r->pull_bm)
		volume_detach(r->p.vol, 0, "the connection to the peer was lost during the attach");
}

void diskless_destroy(struct repl *r)
{
	diskless_conn_lost(r);
}

void diskless_init(struct repl *r)
{
	rangelock_init(&r->rread_wait);
	hooks_add(&r->on_conn_lost, CONN_LOST_DISKLESS, diskless_conn_lost, r, "diskless");
	hooks_add(&r->on_apply_done, RANGE_FREE_SERVED_READS, diskless_apply_progress, r,
	          "served reads");
}
