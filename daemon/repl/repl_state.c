/* SPDX-License-Identifier: MIT */
/*
 * Read-only views of the replication state: accessors for the cluster manager (clusterd.c)
 * and the status object hakctl shows.
 */
#include "repl.h"

#include "conf/config.h"
#include "ctl/statjson.h"
#include "fence.h"
#include "meta/al_io.h"
#include "meta/bitmap.h"
#include "repl_int.h"
#include "resync.h"
#include "ship.h"
#include "transport/peerauth.h"
#include "transport/tls.h"
#include "tswitch.h"
#include "verify.h"

enum repl_disk repl_disk_state(const struct repl *r)
{
	return r->disk;
}

enum repl_link repl_link_state(const struct repl *r)
{
	return r->link;
}

bool repl_peer_serves(const struct repl *r)
{
	return r->connected && r->peer_disk == DISK_UPTODATE && r->link == LINK_CONNECTED;
}

/* The link's transport (the connection's, the configured one, moves onto RDMA), and for TLS whether
 * the kernel does the records and the cipher. */
static void repl_status_transport(const struct repl *r, json_t *o)
{
	bool tx, rx;
	const char *cipher;
	tswitch_status(r, o);
	if (r->data && tls_stream_info(r->data, &tx, &rx, &cipher) == 0)
		json_object_set_new(o, "tls",
		                    json_pack("{s:b, s:b, s:b, s:s}", "ktls", tx && rx, "ktls_tx",
		                              tx, "ktls_rx", rx, "cipher", cipher));
}

json_t *repl_status_json(const struct repl *r)
{
	uint64_t oos = bitmap_count(r->bm) * (uint64_t)r->sb.bitmap_block_size;
	json_t *o = json_pack(
	    "{s:s, s:s, s:s, s:s, s:s, s:s?, s:s?, s:I, s:i, s:f, s:f, s:f, s:b, s:s?, s:b, s:b, "
	    "s:I, s:I}",
	    "role", repl_role_name(r->role), "disk", repl_disk_name(r->disk), "link",
	    repl_link_name(r->link), "mode", config_mode_name((enum hak_repl_mode)r->mode), "peer",
	    r->p.peer->name, "peer_role", r->connected ? repl_role_name(r->peer_role) : NULL,
	    "peer_disk", r->connected ? repl_disk_name(r->peer_disk) : NULL, "out_of_sync_bytes",
	    (json_int_t)oos, "in_flight_writes", (int)r->pend_count, "ack_latency_ms",
	    ship_ack_latency(r, false) * 1000.0, "ack_latency_max_ms",
	    ship_ack_latency(r, true) * 1000.0, "ping_rtt_ms", r->ping_rtt * 1000.0, "split_brain",
	    r->split_brain, "last_refusal", r->last_refusal[0] ? r->last_refusal : NULL,
	    "crashed_primary", r->crashed_primary, "forced", (r->sb.flags & META_F_FORCED) != 0,
	    "bytes_resynced", (json_int_t)r->bytes_resynced_total, "resyncs_completed",
	    (json_int_t)r->resyncs_completed);
	if (o) {
		json_object_set_new(o, "after_split_brain",
		                    json_string(sbpolicy_name(r->p.vcfg->after_sb)));
		json_object_set_new(o, "split_brains_resolved", json_integer(r->sb_resolved));
		json_object_set_new(o, "pings_sent", json_integer((json_int_t)r->pings_sent));
		json_object_set_new(o, "data_integrity",
		                    json_string(r->p.vcfg->data_integrity ? "crc32c" : "none"));
		json_object_set_new(o, "integrity_errors",
		                    json_integer((json_int_t)r->integrity_errors));
		json_object_set_new(o, "auth", json_string(r->auth ? "hmac-sha256" : "none"));
		json_object_set_new(o, "auth_refused",
		                    json_integer(r->auth ? (json_int_t)r->auth->refused : 0));
		repl_status_transport(r, o);
		/* As the peer's barriers' target: how many flushes answered how many barriers. */
		json_object_set_new(o, "barriers_acked",
		                    json_integer((json_int_t)r->barriers_acked));
		json_object_set_new(o, "barrier_flushes",
		                    json_integer((json_int_t)r->barrier_flushes));
		json_t *bl = json_pack("{s:o?, s:o?, s:o?, s:o?}", "writes",
		                       statjson_lathist(&r->bar_lat.writes), "queue",
		                       statjson_lathist(&r->bar_lat.queue), "fsync",
		                       statjson_lathist(&r->bar_lat.fsync), "total",
		                       statjson_lathist(&r->bar_lat.total));
		if (bl)
			json_object_set_new(o, "barrier_latency", bl);
		json_object_set_new(o, "shipped_bytes", json_integer((json_int_t)r->shipped_bytes));
		json_t *rt = json_pack("{s:o?, s:o?}", "write", statjson_lathist(&r->rtt_write),
		                       "flush", statjson_lathist(&r->rtt_flush));
		if (rt)
			json_object_set_new(o, "round_trip", rt);
	}
	json_t *fe = fence_status_json(r);
	if (o && fe)
		json_object_set_new(o, "fencing", fe);
	json_t *rs = resync_status_json(r);
	if (o && rs)
		json_object_set_new(o, "resync", rs);
	json_t *vf = verify_status_json(r);
	if (o && vf)
		json_object_set_new(o, "verify", vf);
	if (o && r->last_rs.valid)
		json_object_set_new(o, "last_resync",
		                    json_pack("{s:b, s:b, s:I, s:I, s:I, s:I, s:f}", "csums",
		                              r->last_rs.csums, "full", r->last_rs.full,
		                              "bytes_marked", (json_int_t)r->last_rs.marked,
		                              "bytes_sent", (json_int_t)r->last_rs.sent,
		                              "bytes_equal", (json_int_t)r->last_rs.equal,
		                              "bytes_holes", (json_int_t)r->last_rs.holes,
		                              "seconds", r->last_rs.seconds));
	if (o && r->detach_reason[0])
		json_object_set_new(o, "detach_reason", json_string(r->detach_reason));
	if (o)
		json_object_set_new(o, "remote_reads", json_integer((json_int_t)r->remote_reads));
	if (o)
		json_object_set_new(o, "resync_paused", json_boolean(r->rsctl.paused_local));
	if (o && r->alio)
		json_object_set_new(o, "activity_log", al_io_status_json(r->alio));
	return o;
}
