/* SPDX-License-Identifier: MIT */
/*
 * Replication of one volume: states, the peer connection (streams, handshake, frame dispatch,
 * connect/accept, pings) and life cycle. The operator's commands are repl_cmd.c, status
 * repl_state.c; the primary's send side is ship.c, the secondary's apply side apply.c, bitmap
 * exchange and resync resync.c, the in-place move between transports tswitch.c.
 */
#include "repl.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "apply.h"
#include "conf/config.h"
#include "csum.h"
#include "ctl/events.h"
#include "diskless.h"
#include "fence.h"
#include "lib/buf.h"
#include "lib/crc32c.h"
#include "lib/endian.h"
#include "lib/log.h"
#include "meta/al.h"
#include "meta/al_io.h"
#include "meta/bitmap.h"
#include "pull.h"
#include "repl_int.h"
#include "resync.h"
#include "ship.h"
#include "splitbrain.h"
#include "transport/peerauth.h"
#include "transport/tls.h"
#include "tswitch.h"
#include "verify.h"
#include "volume/volume.h"

/* The door the volume calls replication through (volume.h). */
static const struct vol_repl_ops repl_door = {
    .submit = ship_submit,
    .local_done = ship_local_done,
    .adopt = ship_adopt,
    .remote_read = diskless_remote_read,
    .attaching = pull_attaching,
    .local_stale = pull_local_stale,
    .detached = diskless_detached,
};

static const char *const role_names[] = {"secondary", "primary"};
static const char *const disk_names[] = {"UpToDate", "Outdated", "Inconsistent", "Diskless",
                                         "Failed"};
static const char *const link_names[] = {"StandAlone", "Connecting", "Connected", "SyncSource",
                                         "SyncTarget"};

const char *repl_role_name(enum repl_role x)
{
	return role_names[x];
}
const char *repl_disk_name(enum repl_disk x)
{
	return disk_names[x];
}
const char *repl_link_name(enum repl_link x)
{
	return link_names[x];
}

enum repl_role repl_role(const struct repl *r)
{
	return r->role;
}

void repl_log(const struct repl *r, int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_vol((enum log_level)level, r->name, role_names[r->role], "%s", msg);
}

uint64_t repl_fresh_gen(void)
{
	uint64_t g = 0;
	while (g == 0)
		if (getrandom(&g, sizeof(g), 0) != sizeof(g))
			g = (uint64_t)random() << 32 | (uint64_t)random();
	return g;
}

struct gen_ids repl_gen_local(const struct repl *r)
{
	struct gen_ids g = {.current = r->sb.gen_current,
	                    .bitmap = r->sb.gen_bitmap,
	                    .history = {r->sb.gen_history[0], r->sb.gen_history[1]}};
	if (r->crashed_primary)
		g.flags |= GEN_F_CRASHED_PRIMARY;
	if (r->sb.flags & META_F_CONSISTENT)
		g.flags |= GEN_F_CONSISTENT;
	return g;
}

void repl_gen_store(struct repl *r, const struct gen_ids *g)
{
	/* META_F_FORCED describes how the current generation began: once another one replaces it
	 * (a new promotion, the peer's adopted after a resync, a discard), the record no longer
	 * applies. repl_promote sets it again after this for a forced one; a primary's connection
	 * loss keeps it (repl_conn_lost_generation). */
	if (g->current != r->sb.gen_current)
		r->sb.flags &= ~META_F_FORCED;
	r->sb.gen_current = g->current;
	r->sb.gen_bitmap = g->bitmap;
	r->sb.gen_history[0] = g->history[0];
	r->sb.gen_history[1] = g->history[1];
}

int repl_write_sb(struct repl *r)
{
	uint32_t f = r->sb.flags &
	             ~(META_F_UPTODATE | META_F_CONSISTENT | META_F_PRIMARY | META_F_SPLIT_BRAIN);
	if (r->disk == DISK_UPTODATE)
		f |= META_F_UPTODATE | META_F_CONSISTENT;
	else if (r->disk == DISK_OUTDATED)
		f |= META_F_CONSISTENT;
	/* A node that crashed as primary keeps the mark, across clean restarts too, until a resync
	 * has settled what it may hold that the peer lacks. */
	if (r->role == ROLE_PRIMARY || r->crashed_primary)
		f |= META_F_PRIMARY;
	if (r->split_brain)
		f |= META_F_SPLIT_BRAIN;
	r->sb.flags = f;
	r->sb.bits_set = bitmap_count(r->bm);
	snprintf(r->sb.node, sizeof(r->sb.node), "%s", r->p.self->name);
	struct meta_sb out = r->sb;
	/* A detached disk, or one still being pulled back, holds no generation: after a restart
	 * the handshake finds a fresh disk and resyncs all of it (rule self-fresh). In memory the
	 * generation stays, so a Diskless primary keeps matching its peer. */
	if (r->disk == DISK_DISKLESS || r->pull_bm)
		out.gen_current = 0;
	if (meta_write_sb(r->meta, &out) < 0) {
		repl_log(r, LOG_LVL_ERR, "Writing the metadata superblock failed: %s.",
		         strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- connection ------------------------------------------------------------------------- */

static void conn_timer_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void stream_frame(void *ctx, struct tstream *s, const struct wire_hdr *h, uint8_t *payload);
static void stream_error(void *ctx, struct tstream *s, const char *why);
const struct tstream_ops repl_stream_ops = {stream_frame, stream_error};

static void hello_fill(struct repl *r, struct wire_hello *h, uint8_t stream)
{
	struct gen_ids g = repl_gen_local(r);
	memset(h, 0, sizeof(*h));
	h->version = WIRE_VERSION;
	h->stream = stream;
	h->role = (uint8_t)r->role;
	h->disk = (uint8_t)r->disk;
	h->mode = (uint8_t)r->mode;
	snprintf(h->node, sizeof(h->node), "%s", r->p.self->name);
	snprintf(h->volume, sizeof(h->volume), "%s", r->name);
	memcpy(h->uuid, r->sb.volume_uuid, 16);
	h->size = r->sb.size;
	h->block_size = r->sb.bitmap_block_size;
	h->gen_flags = g.flags;
	if ((r->sb.flags & META_F_RESYNC_TARGET) && r->disk == DISK_INCONSISTENT)
		h->gen_flags |= 1u << 16; /* a resync as target can resume from my bitmap */
	if (r->crashed_primary && r->al_tail)
		h->gen_flags |= 1u << 17; /* my crash tail is in my bitmap (activity log) */
	h->gen[0] = g.current;
	h->gen[1] = g.bitmap;
	h->gen[2] = g.history[0];
	h->gen[3] = g.history[1];
	h->bits_set = bitmap_count(r->bm);
	h->sb_policy = (uint8_t)r->p.vcfg->after_sb;
	h->sb_victim =
	    r->p.vcfg->sb_discard_node
	        ? crc32c_update(0, r->p.vcfg->sb_discard_node, strlen(r->p.vcfg->sb_discard_node))
	        : 0;
	h->promoted_ms = r->promoted_ms;
}

void repl_send_hello(struct repl *r, struct tstream *s, uint8_t stream, uint16_t flags)
{
	struct wire_hello h;
	struct outq_item *it = calloc(1, sizeof(*it));
	uint8_t *buf = malloc(WIRE_HELLO_SIZE);
	if (!it || !buf) {
		free(it);
		free(buf);
		return;
	}
	hello_fill(r, &h, stream);
	wire_hello_encode(buf, &h);
	wire_hdr_encode(it->hdr, WIRE_HELLO, flags, WIRE_HELLO_SIZE);
	it->hdr_len = WIRE_HDR_SIZE;
	it->data = buf;
	it->data_len = WIRE_HELLO_SIZE;
	it->sent = outq_free_item_and_data;
	tstream_send(s, it);
	if (!flags)
		r->hello_sent[stream - 1] = true;
}

static bool all_streams_ready(const struct repl *r)
{
	return r->data && r->meta_s && r->hello_sent[0] && r->hello_sent[1] && r->hello_rcvd[0] &&
	       r->hello_rcvd[1];
}

void repl_refuse(struct repl *r, bool standalone, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Repeated refusals (the peer retries every connect-interval) are logged once. */
	if (strcmp(msg, r->last_refusal) != 0) {
		repl_log(r, LOG_LVL_ERR, "Refusing the connection with %s: %s", r->p.peer->name,
		         msg);
		snprintf(r->last_refusal, sizeof(r->last_refusal), "%s", msg);
	}
	if (standalone)
		r->want_connect = false;
	/* Our HELLOs may still be queued: the peer needs them to reach the same verdict. */
	tstream_try_flush(r->data);
	tstream_try_flush(r->meta_s);
	repl_drop_connection(r, NULL);
}

/*
 * One side is Diskless: there is nothing to resync (the diskless side has no disk to write), the
 * diskful side must hold the current generation, UpToDate, so it can serve for both. Returns true
 * when the connection may go on.
 */
static bool diskless_accept(struct repl *r, const struct wire_hello *h, const char *lg,
                            const char *pg)
{
	bool self_less = r->disk == DISK_DISKLESS;
	enum repl_disk full = self_less ? (enum repl_disk)h->disk : r->disk;
	enum diskless_verdict v =
	    diskless_handshake(r->disk, h->disk, r->sb.gen_current, h->gen[0]);
	if (v == DL_BOTH_DISKLESS) {
		repl_refuse(r, false, "both nodes are Diskless: no copy of the data is attached.");
		return false;
	}
	if (v != DL_ACCEPT) {
		repl_refuse(r, false,
		            "%s is Diskless and %s holds %s data of %s generation (local %s, peer "
		            "%s): no node can serve the volume.",
		            self_less ? "this node" : "the peer",
		            self_less ? "the peer" : "this node", disk_names[full],
		            h->gen[0] == r->sb.gen_current ? "the same" : "another", lg, pg);
		return false;
	}
	return true;
}

/*
 * Equal generations, but one side is Outdated with blocks in its bitmap: a primary that stepped
 * down before its peer was fenced went back to the generation both share (fence.c), and the
 * writes it failed are in those blocks. The other side overwrites them, so the copies end up
 * equal; both sides see the same facts and decide alike.
 *
 * Both sides Outdated at equal generations happens when that primary had the witness record its
 * peer Outdated but never heard the answer (a one-way loss), then stepped down: nobody promoted,
 * nobody acknowledged a write alone (a primary makes a new generation before it does), so the
 * side without bits holds every acknowledged write and is the newest copy there is. It becomes
 * UpToDate and the source; with no bits on either side both do. With bits on both, which copy
 * is right is the operator's call (primary --force).
 */
static enum gen_decision handshake_equal_outdated(struct repl *r, const struct wire_hello *h)
{
	uint64_t mine = bitmap_count(r->bm), theirs = h->bits_set;
	bool both = r->disk == DISK_OUTDATED && h->disk == WIRE_DISK_OUTDATED;
	enum gen_decision d = GEN_NO_SYNC;

	if (both && mine == 0) {
		repl_log(
		    r, LOG_LVL_NOTICE,
		    "Both copies are Outdated at the same generation, and this one has no blocks "
		    "out of sync (the peer has %llu): nobody wrote past it, so it is UpToDate.",
		    (unsigned long long)theirs);
		r->disk = DISK_UPTODATE;
		repl_write_sb(r);
	}
	if (r->disk == DISK_OUTDATED && mine > 0 &&
	    (h->disk == WIRE_DISK_UPTODATE || (both && theirs == 0)))
		d = GEN_SYNC_TARGET;
	else if (r->disk == DISK_UPTODATE && h->disk == WIRE_DISK_OUTDATED && theirs > 0)
		d = GEN_SYNC_SOURCE;
	if (d != GEN_NO_SYNC)
		repl_log(
		    r, LOG_LVL_INFO,
		    "Equal generations, but the Outdated side has blocks out of sync: resyncing "
		    "them from the %s side.",
		    both ? "other Outdated" : "UpToDate");
	return d;
}

static void handshake_complete(struct repl *r)
{
	const struct wire_hello *h = &r->peer_hello;
	struct gen_ids local = repl_gen_local(r), peer = {.current = h->gen[0],
	                                                  .bitmap = h->gen[1],
	                                                  .history = {h->gen[2], h->gen[3]},
	                                                  .flags = h->gen_flags & 0xffff};
	int rule = 0;
	char lg[128], pg[128];
	enum gen_decision d = gen_decide(&local, &peer, &rule);
	bool peer_resumable = (h->gen_flags >> 16) & 1;
	bool self_resumable = (r->sb.flags & META_F_RESYNC_TARGET) && r->disk == DISK_INCONSISTENT;

	if ((d == GEN_FULL_SOURCE || d == GEN_FULL_TARGET) &&
	    !al_crash_needs_full(rule, r->crashed_primary, r->al_tail,
	                         (h->gen_flags & GEN_F_CRASHED_PRIMARY) != 0,
	                         (h->gen_flags >> 17) & 1)) {
		repl_log(r, LOG_LVL_INFO,
		         "Rule %s asks for a full resync after a primary crash, but the crashed "
		         "side's activity log is in its bitmap: resyncing the bitmaps only.",
		         gen_rule_name(rule));
		d = d == GEN_FULL_SOURCE ? GEN_SYNC_SOURCE : GEN_SYNC_TARGET;
	}
	/*
	 * Equal generations, but one side is Outdated with blocks in its bitmap: a primary that
	 * stepped down before its peer was fenced went back to the generation both share
	 * (fence.c), and the writes it failed are in those blocks. The UpToDate side overwrites
	 * them, so the copies end up equal; both sides see the same facts and decide alike.
	 */
	if (d == GEN_NO_SYNC && rule == GEN_RULE_EQUAL && local.current)
		d = handshake_equal_outdated(r, h);
	r->peer_role = h->role;
	r->peer_disk = h->disk;
	gen_format(&local, lg, sizeof(lg));
	gen_format(&peer, pg, sizeof(pg));
	if (r->role == ROLE_PRIMARY && r->peer_role == ROLE_PRIMARY) {
		splitbrain_handle(r, true, "both-primary", lg, pg);
		return;
	}
	if (r->disk == DISK_DISKLESS || h->disk == WIRE_DISK_DISKLESS) {
		if (!diskless_accept(r, h, lg, pg))
			return;
		d = GEN_NO_SYNC;
		rule = GEN_RULE_EQUAL;
		local.bitmap = 0;
	}
	switch (d) {
	case GEN_SPLIT_BRAIN:
		splitbrain_handle(r, false, gen_rule_name(rule), lg, pg);
		return;
	case GEN_INCONSISTENT_SOURCE:
		repl_refuse(r, false,
		            "the node that would have to be the resync source holds no "
		            "consistent copy (rule %s; local %s, peer %s); promote the right node "
		            "with --force to make its data the reference.",
		            gen_rule_name(rule), lg, pg);
		return;
	case GEN_UNRELATED:
		repl_refuse(r, true,
		            "the data is unrelated (local %s, peer %s); recreate the metadata of "
		            "one side with 'hakctl create-md'.",
		            lg, pg);
		return;
	case GEN_SYNC_TARGET:
	case GEN_FULL_TARGET:
		if (r->role == ROLE_PRIMARY) {
			repl_refuse(r, false,
			            "the peer has newer data (%s by rule %s) but this node is "
			            "primary; demote it to let the resync run.",
			            gen_decision_name(d), gen_rule_name(rule));
			return;
		}
		break;
	case GEN_SYNC_SOURCE:
	case GEN_FULL_SOURCE:
		if (r->peer_role == ROLE_PRIMARY) {
			repl_refuse(r, false,
			            "this node has newer data (%s by rule %s) but the peer is "
			            "primary; demote the peer.",
			            gen_decision_name(d), gen_rule_name(rule));
			return;
		}
		break;
	default:
		break;
	}
	r->connected = true;
	r->connections++;
	tswitch_connected(r);
	if (r->mode == MODE_ASYNC) {
		/* Nobody waits for async data or its acks: both may leave in batches. */
		tstream_set_lazy(r->data, ASYNC_DATA_DELAY, ASYNC_DATA_BYTES);
		tstream_set_lazy(r->meta_s, ASYNC_ACK_DELAY, ASYNC_ACK_BYTES);
	}
	r->last_refusal[0] = '\0';
	r->split_brain = false;
	repl_log(r, LOG_LVL_NOTICE,
	         "Connected to %s (peer %s, %s); generation IDs local %s, peer %s: %s by rule %s.",
	         r->p.peer->name, role_names[r->peer_role], disk_names[r->peer_disk], lg, pg,
	         gen_decision_name(d), gen_rule_name(rule));
	events_emit("connect", "volume:%s peer:%s peer-role:%s peer-disk:%s decision:%s", r->name,
	            r->p.peer->name, role_names[r->peer_role], disk_names[r->peer_disk],
	            gen_decision_name(d));
	if (d == GEN_NO_SYNC) {
		r->link = LINK_CONNECTED;
		if (rule == GEN_RULE_EQUAL && local.bitmap != 0) {
			/* The last resync ended on the target but this side never recorded it. */
			gen_resync_done_source(&local);
			repl_gen_store(r, &local);
			repl_write_sb(r);
		}
		if (local.current && local.current == peer.current && r->disk == DISK_OUTDATED &&
		    r->peer_disk == DISK_UPTODATE) {
			r->disk = DISK_UPTODATE;
			repl_write_sb(r);
		}
		return;
	}
	resync_begin(r, d, rule, peer_resumable, self_resumable);
}

/* Frames that arrived before our side finished the handshake, in stream order. */
static void early_deliver(struct repl *r)
{
	for (int k = 0; k < 2; k++) {
		struct tstream *s = r->early[k].s;
		if (!s)
			continue;
		struct wire_hdr h = r->early[k].h;
		uint8_t *p = r->early[k].payload;
		r->early[k].s = NULL;
		r->early[k].payload = NULL;
		if (!r->connected || (s != r->data && s != r->meta_s)) {
			buf_put(p, h.len);
			continue;
		}
		stream_frame(r, s, &h, p);
		if (s == r->data || s == r->meta_s)
			tstream_pause(s, false);
	}
}

static int hello_check(struct repl *r, const struct wire_hello *h, char *why, size_t len)
{
	if (strcmp(h->node, r->p.peer->name) != 0)
		snprintf(why, len, "it says it is node '%s', but the peer of this node is '%s'",
		         h->node, r->p.peer->name);
	else if (strcmp(h->volume, r->name) != 0)
		snprintf(why, len, "it offers volume '%s' where '%s' was expected", h->volume,
		         r->name);
	else if (memcmp(h->uuid, r->sb.volume_uuid, 16) != 0)
		snprintf(why, len,
		         "the volume UUIDs differ: the metadata was created for another "
		         "volume (recreate it with hakctl create-md)");
	else if (h->size != r->sb.size)
		snprintf(why, len, "the volume sizes differ (local=%llu, remote=%llu bytes)",
		         (unsigned long long)r->sb.size, (unsigned long long)h->size);
	else if (h->block_size != r->sb.bitmap_block_size)
		snprintf(why, len, "the bitmap block sizes differ (local=%u, remote=%u)",
		         r->sb.bitmap_block_size, h->block_size);
	else if (h->mode != r->mode)
		snprintf(why, len, "the replication modes differ (local=%s, remote=%s)",
		         config_mode_name((enum hak_repl_mode)r->mode),
		         config_mode_name((enum hak_repl_mode)h->mode));
	else
		return 0;
	return -1;
}

static void pending_close(struct repl *r, int i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The pending accepted slot holding s, or -1. */
static int pending_find(const struct repl *r, const struct tstream *s)
{
	for (int i = 0; i < REPL_PENDING_MAX; i++)
		if (r->pending_accept[i] == s)
			return i;
	return -1;
}

static void hello_frame(struct repl *r, struct tstream *s, const struct wire_hdr *h,
                        uint8_t *payload)
{
	struct wire_hello hello;
	char why[256];
	int rc = wire_hello_decode(payload, h->len, &hello, why, sizeof(why));
	int pi = pending_find(r, s);
	bool bad = rc < 0 || hello_check(r, &hello, why, sizeof(why)) < 0;
	buf_put(payload, h->len);
	if ((h->flags & WIRE_F_SWITCH) || tswitch_is_new(r, s)) {
		tswitch_hello(r, s, h->flags, &hello, bad ? why : NULL, pi);
		return;
	}
	if (bad && pi >= 0 && r->connected) {
		/* Whoever that is, it is not the peer this node is connected to: only its own
		 * stream goes. */
		pending_close(r, pi, "Refused a replication connection from %s: %s",
		              r->pending_from[pi], why);
		return;
	}
	if (bad) {
		if (s != r->data && s != r->meta_s) {
			for (int i = 0; i < REPL_PENDING_MAX; i++)
				if (r->pending_accept[i] == s)
					r->pending_accept[i] = NULL;
			tstream_close(s);
			repl_refuse(r, false, "%s.", why);
			return;
		}
		repl_refuse(r, false, "%s.", why);
		return;
	}
	int idx = hello.stream - 1;
	if (s != r->data && s != r->meta_s) {
		/* An accepted stream names itself; a new connection replaces a stale one. */
		for (int i = 0; i < REPL_PENDING_MAX; i++)
			if (r->pending_accept[i] == s)
				r->pending_accept[i] = NULL;
		if (r->connected || (idx == 0 ? r->data : r->meta_s)) {
			/* Only the peer can get here when connections are authenticated: it
			 * lost the old connection (a reboot, a cut it noticed first). */
			char msg[160];
			snprintf(msg, sizeof(msg), "the peer reconnected from %s (%s)",
			         pi >= 0 ? r->pending_from[pi] : "an unknown address",
			         r->auth ? "authenticated" : "unauthenticated: insecure-no-auth");
			repl_drop_connection(r, msg);
		}
		/* The acceptor's handshake starts with the first stream that names itself: the
		 * conn_timer gives up on it from then on, as on the connector's side. */
		if (!r->data && !r->meta_s)
			r->handshake_start = ev_now(r->p.loop);
		if (idx == 0)
			r->data = s;
		else
			r->meta_s = s;
		repl_send_hello(r, s, hello.stream, 0);
	} else if ((s == r->data) != (idx == 0)) {
		repl_refuse(r, false, "the peer sent a %s HELLO on the %s stream.",
		            idx == 0 ? "data" : "meta", s == r->data ? "data" : "meta");
		return;
	}
	r->hello_rcvd[idx] = true;
	r->peer_hello = hello;
	if (all_streams_ready(r)) {
		handshake_complete(r);
		early_deliver(r);
	}
}

static void stream_frame(void *ctx, struct tstream *s, const struct wire_hdr *h, uint8_t *payload)
{
	struct repl *r = ctx;
	if (h->type == WIRE_HELLO) {
		hello_frame(r, s, h, payload);
		return;
	}
	if (!r->connected && (s == r->data || s == r->meta_s) &&
	    r->hello_sent[s == r->data ? 0 : 1] && r->hello_rcvd[s == r->data ? 0 : 1]) {
		int k = s == r->data ? 0 : 1;
		if (!r->early[k].s) {
			r->early[k].s = s;
			r->early[k].h = *h;
			r->early[k].payload = payload;
			tstream_pause(s, true);
			return;
		}
	}
	/* The established streams skip the search: this runs for every frame of the data path. */
	int pi = s == r->data || s == r->meta_s ? -1 : pending_find(r, s);
	if (pi >= 0) {
		/* A stream that has not named itself speaks for nobody: the connection that is
		 * up (if any) is not its business. */
		buf_put(payload, h->len);
		pending_close(r, pi,
		              "Closed a replication connection from %s: it sent a frame of type %u "
		              "before its HELLO",
		              r->pending_from[pi], (unsigned)h->type);
		return;
	}
	if (!r->connected || (s != r->data && s != r->meta_s && !tswitch_draining(r, s))) {
		buf_put(payload, h->len);
		repl_drop_connection(r, "the peer sent a frame before the handshake finished");
		return;
	}
	switch (h->type) {
	case WIRE_DATA:
	case WIRE_TRIM:
	case WIRE_ZERO:
	case WIRE_RS_DATA:
		apply_frame(r, h, payload);
		return;
	case WIRE_BARRIER:
		apply_barrier(r, wire_get_id(payload));
		break;
	case WIRE_RECV_ACK:
	case WIRE_BARRIER_ACK:
		ship_ack(r, h->type, wire_get_id(payload), 0);
		break;
	case WIRE_WRITE_ACK:
		ship_ack(r, h->type, wire_get_id(payload), be_get32(payload + WIRE_ID_SIZE));
		break;
	case WIRE_RS_ACK:
		resync_rs_ack(r, wire_get_id(payload), be_get32(payload + WIRE_ID_SIZE));
		break;
	case WIRE_PING:
		tstream_send_small(r->meta_s, WIRE_PONG, 0, payload, WIRE_ID_SIZE);
		break;
	case WIRE_PONG:
		r->ping_rtt = ev_now(r->p.loop) - r->ping_sent;
		break;
	case WIRE_RS_PAUSE:
		if (payload[0] > 1) {
			buf_put(payload, h->len);
			repl_drop_connection(r, "the peer sent an RS_PAUSE frame with a bad value");
			return;
		}
		resync_peer_pause(r, payload[0] == 1);
		break;
	case WIRE_STATE:
		if (payload[0] > ROLE_PRIMARY || payload[1] > DISK_FAILED) {
			buf_put(payload, h->len);
			repl_drop_connection(r, "the peer sent an out-of-range state");
			return;
		}
		r->peer_role = payload[0];
		r->peer_disk = payload[1];
		repl_log(r, LOG_LVL_INFO, "The peer is now %s, %s.", role_names[r->peer_role],
		         disk_names[r->peer_disk]);
		break;
	case WIRE_BITMAP:
	case WIRE_BITMAP_DONE:
	case WIRE_RS_DONE:
		resync_frame(r, h, payload);
		return;
	case WIRE_VERIFY_REQ:
	case WIRE_VERIFY_REPLY:
	case WIRE_CSUM_REQ:
		verify_frame(r, h, payload);
		return;
	case WIRE_RS_REQUEST:
	case WIRE_RS_IN_SYNC:
		csum_frame(r, h, payload);
		return;
	case WIRE_READ_REQ:
		diskless_read_req(r, h, payload);
		return;
	case WIRE_READ_REPLY:
		diskless_read_reply(r, h, payload);
		return;
	case WIRE_SWITCH:
		buf_put(payload, h->len);
		tswitch_marker(r, s);
		return;
	default:
		buf_put(payload, h->len);
		repl_drop_connection(r, "the peer sent a frame type this version does not handle");
		return;
	}
	buf_put(payload, h->len);
}

/*
 * The peer hung up during the handshake after its HELLO reached us: it probably refused. Reach
 * the same verdict from its HELLO, so split brain is reported on both sides even when its
 * second HELLO was lost with the connection.
 */
static bool verdict_on_close(struct repl *r)
{
	const struct wire_hello *h = &r->peer_hello;
	if (r->connected || (!r->hello_rcvd[0] && !r->hello_rcvd[1]))
		return false;
	struct gen_ids local = repl_gen_local(r), peer = {.current = h->gen[0],
	                                                  .bitmap = h->gen[1],
	                                                  .history = {h->gen[2], h->gen[3]},
	                                                  .flags = h->gen_flags & 0xffff};
	int rule = 0;
	enum gen_decision d = gen_decide(&local, &peer, &rule);
	bool both_primary = r->role == ROLE_PRIMARY && h->role == WIRE_ROLE_PRIMARY;
	if (d != GEN_SPLIT_BRAIN && !both_primary)
		return false;
	char lg[128], pg[128];
	gen_format(&local, lg, sizeof(lg));
	gen_format(&peer, pg, sizeof(pg));
	splitbrain_handle(r, both_primary, both_primary ? "both-primary" : gen_rule_name(rule), lg,
	                  pg);
	return true;
}

/*
 * Close pending accepted stream i with one warning, fmt (a sentence without its full stop). Four
 * lines a second at most (a peer opens two streams, each may be refused): a flood of bad
 * connections must not flood the log, but none may pass unmentioned.
 */
static void pending_close(struct repl *r, int i, const char *fmt, ...)
{
	char msg[384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	double now = ev_now(r->p.loop);
	if (now - r->reject_logged_at >= 1.0) {
		r->reject_logged_at = now;
		r->reject_logged = 0;
	}
	if (r->reject_logged < 4) {
		repl_log(r, LOG_LVL_WARN, "%s%s.", msg,
		         r->reject_suppressed ? " (and earlier ones not logged)" : "");
		r->reject_logged++;
		r->reject_suppressed = 0;
	} else {
		r->reject_suppressed++;
	}
	tstream_close(r->pending_accept[i]);
	r->pending_accept[i] = NULL;
}

/* The connector gives up on a handshake after this long (conn_timer_cb); an accepted stream gets
 * as long to send its HELLO. A few connect intervals, and no less than 2 s. */
static double handshake_limit(const struct repl *r)
{
	double limit = 3 * r->p.vcfg->connect_interval;
	return limit < 2.0 ? 2.0 : limit;
}

/* Close the accepted streams that did not name themselves in time: otherwise a connection that
 * never speaks holds its slot for ever. Runs while connected too, and touches only the slots. */
static void pending_expire(struct repl *r)
{
	double now = ev_now(r->p.loop), limit = handshake_limit(r);
	for (int i = 0; i < REPL_PENDING_MAX; i++)
		if (r->pending_accept[i] && now - r->pending_since[i] > limit)
			pending_close(r, i,
			              "Closed a replication connection from %s that sent no HELLO "
			              "within %.1f s",
			              r->pending_from[i], limit);
}

static void stream_error(void *ctx, struct tstream *s, const char *why)
{
	struct repl *r = ctx;
	for (int i = 0; i < REPL_PENDING_MAX; i++) {
		if (r->pending_accept[i] == s) {
			pending_close(
			    r, i,
			    "Dropped an incoming replication connection from %s before its "
			    "handshake: %s",
			    r->pending_from[i], why);
			return;
		}
	}
	if (tswitch_error(r, s, why) || verdict_on_close(r))
		return;
	repl_drop_connection(r, why);
}

void repl_peer_dead(struct repl *r, const char *why)
{
	repl_drop_connection(r, why); /* nothing to do without a connection */
}

void repl_drop_connection(struct repl *r, const char *why)
{
	bool was = r->connected;
	for (int i = 0; i < 2; i++) {
		tconnect_cancel(r->connecting[i]);
		r->connecting[i] = NULL;
	}
	tswitch_drop(r);
	if (!r->data && !r->meta_s && !was)
		return;
	bool handshaking = !was && (r->hello_rcvd[0] || r->hello_rcvd[1]);
	if (why && (was || handshaking))
		repl_log(r, LOG_LVL_WARN, "Lost the connection to %s%s: %s.", r->p.peer->name,
		         was ? "" : " during the handshake", why);
	else if (why)
		repl_log(r, LOG_LVL_DEBUG, "Connecting to %s failed: %s.", r->p.peer->name, why);
	if (was) {
		char reason[160];
		events_token(reason, sizeof(reason), why ? why : "shutdown");
		events_emit("disconnect", "volume:%s peer:%s reason:%s", r->name, r->p.peer->name,
		            reason);
	}
	for (int k = 0; k < 2; k++) {
		if (r->early[k].s) {
			buf_put(r->early[k].payload, r->early[k].h.len);
			r->early[k].s = NULL;
			r->early[k].payload = NULL;
		}
	}
	tstream_close(r->data);
	tstream_close(r->meta_s);
	r->data = r->meta_s = NULL;
	r->connected = false;
	r->conn_seq++;
	memset(r->hello_sent, 0, sizeof(r->hello_sent));
	memset(r->hello_rcvd, 0, sizeof(r->hello_rcvd));
	r->data_paused = false;
	r->lost_established = was;
	hooks_run(&r->on_conn_lost);
	r->link = r->want_connect ? LINK_CONNECTING : LINK_STANDALONE;
}

/* A primary that loses an established connection starts a new generation: the peer's copy ends
 * here (docs/architecture.md, generation IDs). A diskless primary writes nothing while the peer
 * is away (every write fails): the peer's copy stays current, and its generation with it. */
static void repl_conn_lost_generation(void *ctx)
{
	struct repl *r = ctx;
	if (r->role != ROLE_PRIMARY || !r->lost_established || r->disk == DISK_DISKLESS)
		return;
	/* This generation only marks where the peer's copy ends: the data stays this node's own,
	 * so a forced promotion it came from stays recorded. Without this, the reconnect that a
	 * forced promotion of a connected node does would erase the record at once. */
	uint32_t forced = r->sb.flags & META_F_FORCED;
	struct gen_ids g = repl_gen_local(r);
	gen_new_current(&g, repl_fresh_gen());
	repl_gen_store(r, &g);
	r->sb.flags |= forced;
	meta_flush_bitmap(r->meta, r->bm);
	repl_write_sb(r);
}

bool repl_range_dirty(const struct bitmap *bm, uint64_t off, uint64_t len)
{
	uint32_t bs = bitmap_block_size(bm);
	if (len == 0)
		return false;
	uint64_t last = (off + len - 1) / bs;
	return bitmap_find_next_set_before(bm, off / bs, last + 1) <= last;
}

static void connect_over(struct repl *r);

static void connect_done(void *ctx, struct tconnect *c, struct tstream *s, int err)
{
	struct repl *r = ctx;
	int idx = c == r->connecting[0] ? 0 : 1;
	r->connecting[idx] = NULL;
	if (err) {
		repl_log(r, LOG_LVL_DEBUG, "Connecting to %s at %s over %s failed: %s.",
		         r->p.peer->name, r->p.peer->address, r->conn_t->name, strerror(err));
		repl_drop_connection(r, NULL);
		if (tswitch_fall_back(r, err))
			connect_over(r); /* the same attempt, over the fallback */
		return;
	}
	if (idx == 0)
		r->data = s;
	else
		r->meta_s = s;
	repl_send_hello(r, s, (uint8_t)(idx + 1), 0);
}

void repl_start_connect(struct repl *r)
{
	r->handshake_start = ev_now(r->p.loop);
	r->conn_t = r->p.transport;
	connect_over(r);
}

struct tconnect_params repl_connect_params(struct repl *r,
                                           void (*done)(void *ctx, struct tconnect *c,
                                                        struct tstream *s, int err),
                                           void *topts)
{
	struct tconnect_params cp = {.loop = r->p.loop,
	                             .auth = r->auth,
	                             .addr = r->p.peer->address,
	                             .port_offset = r->p.vcfg->port_offset,
	                             .bind_host = r->p.self->host,
	                             .ops = &repl_stream_ops,
	                             .ctx = r,
	                             .done = done,
	                             .topts = topts};
	return cp;
}

static void connect_over(struct repl *r)
{
	struct tconnect_params cp = repl_connect_params(r, connect_done, r->p.topts);
	for (int i = 0; i < 2; i++) {
		if (tconnect_start(r->conn_t, &cp, &r->connecting[i]) < 0) {
			int err = errno;
			r->connecting[i] = NULL;
			repl_log(r, LOG_LVL_DEBUG, "Cannot connect to %s over %s: %s.",
			         r->p.peer->address, r->conn_t->name, strerror(err));
			repl_drop_connection(r, NULL);
			if (tswitch_fall_back(r, err))
				connect_over(r);
			return;
		}
	}
}

static void conn_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct repl *r = w->data;
	(void)loop;
	(void)revents;
	pending_expire(r);
	tswitch_tick(r);
	if (!r->want_connect || r->connected)
		return;
	if (r->data || r->meta_s || r->connecting[0] || r->connecting[1]) {
		/* A handshake that does not finish within a few intervals is abandoned; a connect
		 * over RDMA that hangs there falls back like one that failed. */
		bool hung = r->connecting[0] || r->connecting[1];
		if (ev_now(loop) - r->handshake_start <= handshake_limit(r))
			return;
		repl_drop_connection(r, "the handshake did not finish");
		if (hung && r->initiator && tswitch_fall_back(r, ETIMEDOUT)) {
			r->handshake_start = ev_now(loop);
			connect_over(r);
		}
		return;
	}
	if (r->initiator)
		repl_start_connect(r);
}

static void accepted(void *ctx, struct tlistener *l, struct tstream *s)
{
	struct repl *r = ctx;
	(void)l;
	if (!r->want_connect) {
		tstream_close(s);
		return;
	}
	char from[sizeof(r->pending_from[0])];
	tstream_peer_name(s, from, sizeof(from));
	int slot = -1;
	for (int i = 0; i < REPL_PENDING_MAX && slot < 0; i++)
		if (!r->pending_accept[i])
			slot = i;
	if (slot < 0) {
		/* Every slot is taken: the oldest has had the longest to speak, and the newest may
		 * be the peer coming back. The established connection is not among these. */
		slot = 0;
		for (int i = 1; i < REPL_PENDING_MAX; i++)
			if (r->pending_since[i] < r->pending_since[slot])
				slot = i;
		pending_close(r, slot,
		              "Closed the replication connection from %s, the oldest of %d still "
		              "without a HELLO after %.1f s, to make room for one from %s",
		              r->pending_from[slot], REPL_PENDING_MAX,
		              ev_now(r->p.loop) - r->pending_since[slot], from);
	}
	r->pending_accept[slot] = s;
	r->pending_since[slot] = ev_now(r->p.loop);
	snprintf(r->pending_from[slot], sizeof(r->pending_from[slot]), "%s", from);
}

static void ping_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct repl *r = w->data;
	uint8_t id[8] = {0};
	double gap = ev_now(loop) - r->ping_tick;
	(void)revents;
	r->ping_tick = ev_now(loop);
	fence_tick(r);
	if (!r->connected || !r->meta_s)
		return;
	/* After a stall of this loop (a blocking library call: librdmacm's first one once an RDMA
	 * device appeared took 2 s in a TCG guest) the timers run before the sockets are read:
	 * the peer's answers wait unread, and its silence would be ours. */
	bool stalled = gap > 2 * r->p.vcfg->ping_interval;
	if (!stalled && tstream_idle(r->meta_s) > r->p.vcfg->ping_timeout) {
		char why[96];
		snprintf(why, sizeof(why), "no answer from the peer for %.1f s",
		         tstream_idle(r->meta_s));
		repl_drop_connection(r, why);
		return;
	}
	r->ping_sent = ev_now(loop);
	r->pings_sent++;
	tstream_send_small(r->meta_s, WIRE_PING, 0, id, sizeof(id));
}

void repl_timers_reload(struct repl *r)
{
	const struct hak_volume_cfg *vc = r->p.vcfg;
	if (r->ping_timer.repeat != vc->ping_interval) {
		repl_log(r, LOG_LVL_INFO, "Pinging the peer every %.3f s (was %.3f s).",
		         vc->ping_interval, r->ping_timer.repeat);
		r->ping_timer.repeat = vc->ping_interval;
		ev_timer_again(r->p.loop, &r->ping_timer);
	}
	if (r->conn_timer.repeat != vc->connect_interval) {
		repl_log(r, LOG_LVL_INFO, "Trying to connect every %.3f s (was %.3f s).",
		         vc->connect_interval, r->conn_timer.repeat);
		r->conn_timer.repeat = vc->connect_interval;
		ev_timer_again(r->p.loop, &r->conn_timer);
	}
}

static void flush_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct repl *r = w->data;
	(void)revents;
	/* Lazy persistence is safe: a clear bit written late only repeats a resync, and a set bit
	 * lost in a crash lies in an extent the activity log still lists as hot (al_io.c flushes
	 * the bitmap before one leaves the log), or, without a log, in the crashed primary's full
	 * resync. */
	if (bitmap_dirty_pages(r->bm) && meta_flush_bitmap(r->meta, r->bm) < 0)
		repl_log(r, LOG_LVL_ERR, "Persisting the bitmap failed: %s.", strerror(errno));
	double now = ev_now(loop);
	if (r->rs_rate_t > 0 && now > r->rs_rate_t) {
		double rate = (double)(r->rs_done_bytes - r->rs_rate_bytes) / (now - r->rs_rate_t);
		r->rs_rate = r->rs_rate ? r->rs_rate * 0.5 + rate * 0.5 : rate;
	}
	r->rs_rate_t = now;
	r->rs_rate_bytes = r->rs_done_bytes;
}

/* ---- life cycle -------------------------------------------------------------------------- */

static void disk_from_flags(struct repl *r)
{
	if (r->sb.gen_current == 0 || (r->sb.flags & META_F_RESYNC_TARGET))
		r->disk = DISK_INCONSISTENT;
	else if (r->sb.flags & META_F_UPTODATE)
		r->disk = DISK_UPTODATE;
	else if (r->sb.flags & META_F_CONSISTENT)
		r->disk = DISK_OUTDATED;
	else
		r->disk = DISK_INCONSISTENT;
}

static int repl_open_meta(struct repl *r, char *err, size_t errlen)
{
	const struct hak_volume_cfg *vc = r->p.vcfg;
	const char *path = vc->meta_internal ? vc->backing : vc->meta_path;
	uint64_t backing = volume_size(r->p.vol);
	char merr[META_ERR_LEN] = "";
	if (meta_open(path, vc->meta_internal, vc->meta_internal ? backing : backing, &r->meta,
	              merr, sizeof(merr)) < 0) {
		snprintf(err, errlen,
		         "Volume %s has no usable metadata at %s: %s Create it with "
		         "'hakctl create-md %s'.",
		         vc->name, path, merr, vc->name);
		return -1;
	}
	if (merr[0])
		repl_log(r, LOG_LVL_WARN, "%s", merr);
	r->sb = *meta_sb(r->meta);
	if (vc->meta_internal)
		volume_set_size(r->p.vol, r->sb.size);
	r->bm = bitmap_create(r->sb.size, r->sb.bitmap_block_size);
	if (!r->bm || meta_load_bitmap(r->meta, r->bm) < 0) {
		snprintf(err, errlen, "Volume %s: loading the bitmap from %s failed: %s.", vc->name,
		         path, strerror(errno));
		return -1;
	}
	return 0;
}

static int repl_open_al(struct repl *r, char *err, size_t errlen)
{
	const struct hak_volume_cfg *vc = r->p.vcfg;
	struct al_io_params ap = {.loop = r->p.loop,
	                          .io = r->p.io,
	                          .meta = r->meta,
	                          .bm = r->bm,
	                          .name = r->name,
	                          .n_slots = vc->al_extents,
	                          .ext_size = vc->al_extent_size,
	                          .vol_size = r->sb.size,
	                          .resume = ship_al_resume,
	                          .want_stable = ship_al_want_stable,
	                          .ctx = r};
	char aerr[512];
	if (al_io_open(&ap, r->crashed_primary, &r->al_tail, &r->alio, aerr, sizeof(aerr)) < 0) {
		snprintf(err, errlen, "Volume %s: %s", r->name, aerr);
		return -1;
	}
	return 0;
}

/* The key the peer must prove it holds (a stranger who completed the handshake could read the
 * whole volume through a resync, or write it), or the warning that there is none. */
static int repl_open_auth(struct repl *r, char *err, size_t errlen)
{
	const char *path = r->p.vcfg->auth_key_file;
	if (!path) {
		repl_log(r, LOG_LVL_WARN,
		         "Replication of this volume is not authenticated (insecure-no-auth): "
		         "whoever can reach %s (+%u) can read and overwrite it.",
		         r->p.self->address, r->p.vcfg->port_offset);
		return 0;
	}
	struct key_bytes *key = malloc(sizeof(*key));
	r->auth = malloc(sizeof(*r->auth));
	int rc = -1;
	if (!key || !r->auth) {
		snprintf(err, errlen, "Out of memory.");
		goto out;
	}
	if (keyfile_load(path, "replication key", key, err, errlen) < 0)
		goto out;
	peerauth_init(r->auth, key, r->p.self->name, r->p.peer->name, r->name);
	r->auth->key_file = path;
	peerauth_refresh_key(r->auth); /* records the file's stamp: a later change is a rotation */
	r->auth->timeout = handshake_limit(r);
	rc = 0;
out:
	if (key)
		OPENSSL_cleanse(key, sizeof(*key));
	free(key);
	return rc;
}

/* The volume's configured transport; for tls its context, from the files, once. */
static int repl_transport_open(struct repl *r, char *err, size_t errlen)
{
	const struct hak_volume_cfg *vc = r->p.vcfg;
	char terr[512];
	if (vc->transport != HAK_TRANSPORT_TLS)
		return tswitch_configure(r, err, errlen);
	struct tls_params tp = {.ca_file = vc->tls_ca_file,
	                        .cert_file = vc->tls_cert_file,
	                        .key_file = vc->tls_key_file,
	                        .peer_name =
	                            vc->tls_peer_name ? vc->tls_peer_name : r->p.peer->name,
	                        .psk_file = vc->tls_psk_file,
	                        .kernel = vc->tls_kernel};
	if (tls_ctx_create(&tp, &r->tls, terr, sizeof(terr)) < 0) {
		snprintf(err, errlen, "Volume %s: %s", r->name, terr);
		return -1;
	}
	r->p.transport = r->conn_t = &transport_tls;
	r->p.topts = r->tls;
	return 0;
}

int repl_create(const struct repl_params *p, struct repl **out, char *err, size_t errlen)
{
	struct repl *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "Out of memory.");
		return -1;
	}
	r->p = *p;
	r->name = p->vcfg->name;
	r->mode = (enum repl_mode)p->vcfg->mode;
	if (!r->p.transport && repl_transport_open(r, err, errlen) < 0)
		goto fail;
	r->initiator = strcmp(p->self->name, p->peer->name) < 0;
	if (!r->conn_t)
		r->conn_t = r->p.transport; /* given by the caller (the unit tests) */
	tswitch_init(r);
	/* Every part of replication registers its hooks: their order is fixed by the CONN_LOST_*
	 * and RANGE_FREE_* constants (repl_int.h), not by the order of these calls. */
	ship_init(r);
	apply_init(r);
	resync_init(r);
	diskless_init(r);
	pull_init(r);
	fence_init(r);
	hooks_add(&r->on_conn_lost, CONN_LOST_GENERATION, repl_conn_lost_generation, r,
	          "generation");
	if (tlog_init(&r->tl, TLOG_SLOTS) < 0 || verify_create(r) < 0) {
		snprintf(err, errlen, "Out of memory.");
		goto fail;
	}
	if (repl_open_meta(r, err, errlen) < 0 || repl_open_auth(r, err, errlen) < 0)
		goto fail;
	r->crashed_primary = (r->sb.flags & META_F_PRIMARY) != 0;
	r->split_brain = (r->sb.flags & META_F_SPLIT_BRAIN) != 0;
	disk_from_flags(r);
	if (repl_open_al(r, err, errlen) < 0)
		goto fail;
	if (r->crashed_primary)
		repl_log(r, LOG_LVL_WARN,
		         "The metadata says this node went down as primary: it may hold writes the "
		         "peer never got, so the next connection resyncs %s.",
		         r->al_tail ? "them (the activity log's extents are in the bitmap)"
		                    : "fully (there is no activity log)");
	if (r->sb.flags & META_F_FORCED)
		repl_log(r, LOG_LVL_WARN,
		         "The current data (generation %016" PRIX64 ", disk %s) comes from a "
		         "forced promotion of %s: writes acknowledged by %s before that promotion "
		         "may be missing here.",
		         r->sb.gen_current, disk_names[r->disk],
		         r->sb.node[0] ? r->sb.node : "an unknown node", r->p.peer->name);
	r->role = ROLE_SECONDARY;
	r->sb.flags &= ~META_F_CLEAN;
	r->sb.flags |= r->crashed_primary ? META_F_PRIMARY : 0;
	/* Keep the crashed-primary mark on disk until a resync settles it. */
	if (meta_write_sb(r->meta, &r->sb) < 0) {
		snprintf(err, errlen, "Volume %s: writing the metadata failed: %s.", r->name,
		         strerror(errno));
		goto fail;
	}
	if (!r->initiator) {
		struct tlisten_params lp = {.loop = p->loop,
		                            .auth = r->auth,
		                            .addr = p->self->address,
		                            .port_offset = p->vcfg->port_offset,
		                            .ops = &repl_stream_ops,
		                            .ctx = r,
		                            .accepted = accepted,
		                            .topts = r->p.topts};
		int rc = r->fallback ? tswitch_listen(r, &lp)
		                     : tlistener_open(r->p.transport, &lp, &r->listener);
		if (rc < 0) {
			r->listener = NULL;
			snprintf(err, errlen, "Volume %s cannot listen on %s (+%u): %s.", r->name,
			         p->self->address, p->vcfg->port_offset, strerror(errno));
			goto fail;
		}
	}
	ev_timer_init(&r->conn_timer, conn_timer_cb, 0.05, p->vcfg->connect_interval);
	ev_timer_init(&r->ping_timer, ping_timer_cb, p->vcfg->ping_interval,
	              p->vcfg->ping_interval);
	ev_timer_init(&r->flush_timer, flush_timer_cb, 1.0, 1.0);
	r->conn_timer.data = r->ping_timer.data = r->flush_timer.data = r;
	ev_timer_start(p->loop, &r->conn_timer);
	ev_timer_start(p->loop, &r->ping_timer);
	ev_timer_start(p->loop, &r->flush_timer);
	r->want_connect = !r->split_brain;
	r->link = r->want_connect ? LINK_CONNECTING : LINK_STANDALONE;
	repl_log(r, LOG_LVL_INFO,
	         "Replicating to %s (%s) in %s mode; disk %s, %llu bytes out of "
	         "sync; %s.",
	         p->peer->name, p->peer->address, config_mode_name((enum hak_repl_mode)r->mode),
	         disk_names[r->disk],
	         (unsigned long long)bitmap_count(r->bm) * r->sb.bitmap_block_size,
	         r->initiator ? "this node connects" : "this node accepts");
	volume_set_repl(p->vol, &repl_door, r);
	*out = r;
	return 0;
fail:
	al_io_close(r->alio);
	if (r->bm)
		bitmap_free(r->bm);
	if (r->meta)
		meta_close(r->meta);
	tlistener_close(r->listener);
	tswitch_unlisten(r);
	tls_ctx_free(r->tls);
	verify_destroy(r);
	tlog_destroy(&r->tl);
	free(r->auth);
	free(r);
	return -1;
}

void repl_shutdown(struct repl *r)
{
	if (!r)
		return;
	r->want_connect = false;
	r->stopping = true;
	repl_drop_connection(r, NULL);
	fence_shutdown(r, false);
	for (int i = 0; i < REPL_PENDING_MAX; i++) {
		tstream_close(r->pending_accept[i]);
		r->pending_accept[i] = NULL;
	}
	ev_timer_stop(r->p.loop, &r->conn_timer);
	ev_timer_stop(r->p.loop, &r->ping_timer);
	ev_timer_stop(r->p.loop, &r->flush_timer);
	splitbrain_shutdown(r);
	ev_timer_stop(r->p.loop, &r->rs_timer);
	ev_timer_stop(r->p.loop, &r->epoch_timer);
	tlistener_close(r->listener);
	r->listener = NULL;
	tswitch_unlisten(r);
}

void repl_destroy(struct repl *r)
{
	if (!r)
		return;
	repl_shutdown(r);
	volume_set_repl(r->p.vol, NULL, NULL);
	diskless_destroy(r);
	meta_flush_bitmap(r->meta, r->bm);
	/* A clean stop: the bitmap on disk is complete. An earlier crash as primary stays recorded
	 * (repl_write_sb) until a resync settles it. */
	r->role = ROLE_SECONDARY;
	r->sb.flags |= META_F_CLEAN;
	repl_write_sb(r);
	al_io_close(r->alio);
	meta_close(r->meta);
	verify_destroy(r);
	tlog_destroy(&r->tl);
	bitmap_free(r->bm);
	if (r->auth)
		OPENSSL_cleanse(r->auth, sizeof(*r->auth));
	free(r->auth);
	tls_ctx_free(r->tls); /* after every stream: repl_shutdown closed them */
	free(r);
}
