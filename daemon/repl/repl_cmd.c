/* SPDX-License-Identifier: MIT */
/*
 * What an operator (hakctl, the cluster manager, a drill) asks of one volume's replication:
 * promote, demote, connect, disconnect, verify, resync, and the split-brain resolution that
 * discards the local changes. Each checks what the states allow, then moves them through the
 * same calls the connection uses (repl.c); none touches a stream but to send the new state.
 */
#include "repl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conf/config.h"
#include "ctl/events.h"
#include "fence.h"
#include "lib/clock.h"
#include "meta/bitmap.h"
#include "repl_int.h"
#include "verify.h"
void repl_send_state(struct repl *r)
{
	uint8_t b[WIRE_STATE_SIZE] = {(uint8_t)r->role, (uint8_t)r->disk, 0, 0};
	if (r->connected && r->meta_s)
		tstream_send_small(r->meta_s, WIRE_STATE, 0, b, sizeof(b));
}

static void set_role(struct repl *r, enum repl_role role)
{
	if (r->role != role)
		events_emit("role", "volume:%s node:%s role:%s", r->name, r->p.self->name,
		            repl_role_name(role));
	r->role = role;
	if (r->p.role_changed)
		r->p.role_changed(r->p.ctx, role);
}

int repl_promote(struct repl *r, bool force, char *err, size_t errlen)
{
	if (r->role == ROLE_PRIMARY)
		return 0;
	if (r->connected && r->peer_role == ROLE_PRIMARY) {
		snprintf(err, errlen,
		         "Volume %s cannot be promoted: the peer %s is primary; demote it "
		         "first.",
		         r->name, r->p.peer->name);
		return -1;
	}
	if (r->link == LINK_SYNC_TARGET) {
		snprintf(err, errlen,
		         "Volume %s cannot be promoted while it is the target of a "
		         "resync (%llu bytes still out of sync).",
		         r->name,
		         (unsigned long long)bitmap_count(r->bm) * r->sb.bitmap_block_size);
		return -1;
	}
	if (r->disk != DISK_UPTODATE && !force) {
		snprintf(err, errlen,
		         "Volume %s cannot be promoted: its disk is %s, and only an "
		         "UpToDate disk may serve (use --force to promote it anyway and "
		         "make its data the reference).",
		         r->name, repl_disk_name(r->disk));
		return -1;
	}
	struct gen_ids g = repl_gen_local(r);
	bool new_gen = !r->connected || g.current == 0 || r->disk != DISK_UPTODATE;
	if (new_gen) {
		/* Writes from here on are a generation the peer does not have. */
		gen_new_current(&g, repl_fresh_gen());
		repl_gen_store(r, &g);
	}
	if (force && r->disk != DISK_UPTODATE) {
		repl_log(r, LOG_LVL_WARN,
		         "FORCED promotion of a %s disk: its data is now the reference copy, and "
		         "writes acknowledged since it stopped being current may be lost.",
		         repl_disk_name(r->disk));
		events_emit("forced-promotion", "volume:%s node:%s disk:%s", r->name,
		            r->p.self->name, repl_disk_name(r->disk));
		/* Recorded with the promotion's own superblock write below, so that it outlives
		 * restarts: a disk that was not UpToDate always gets a new generation above, and
		 * the flag lasts as long as that generation does (repl_gen_store). */
		r->sb.flags |= META_F_FORCED;
	}
	r->disk = DISK_UPTODATE;
	r->sb.flags &= ~META_F_RESYNC_TARGET;
	r->promoted_ms = clock_wall_ms();
	set_role(r, ROLE_PRIMARY);
	if (repl_write_sb(r) < 0) {
		set_role(r, ROLE_SECONDARY);
		snprintf(err, errlen,
		         "Volume %s was not promoted: writing its metadata failed (%s).", r->name,
		         strerror(errno));
		return -1;
	}
	repl_log(r, LOG_LVL_NOTICE, "Promoted to primary (%s).",
	         r->connected ? "peer connected" : "peer not connected");
	if (r->connected && new_gen) {
		/* The peer must learn the new generation: a fresh handshake decides the resync. */
		repl_drop_connection(r, "the generation changed with the forced promotion; "
		                        "reconnecting to resync the peer");
		return 0;
	}
	repl_send_state(r);
	return 0;
}

int repl_demote(struct repl *r, bool clients_connected, char *err, size_t errlen)
{
	if (r->role == ROLE_SECONDARY)
		return 0;
	if (clients_connected) {
		snprintf(err, errlen,
		         "Volume %s cannot be demoted while NBD clients are connected; "
		         "unmount and detach it first.",
		         r->name);
		return -1;
	}
	set_role(r, ROLE_SECONDARY);
	fence_shutdown(r, true); /* a secondary has no writes to freeze */
	meta_flush_bitmap(r->meta, r->bm);
	repl_write_sb(r);
	repl_log(r, LOG_LVL_NOTICE, "Demoted to secondary.");
	repl_send_state(r);
	return 0;
}

int repl_connect(struct repl *r, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	if (r->split_brain)
		repl_log(r, LOG_LVL_NOTICE,
		         "Connecting again although split brain was detected: "
		         "the generation IDs will decide anew.");
	r->split_brain = false;
	r->want_connect = true;
	r->last_refusal[0] = '\0';
	if (r->link == LINK_STANDALONE)
		r->link = LINK_CONNECTING;
	if (r->initiator && !r->connected && !r->data)
		repl_start_connect(r);
	return 0;
}

int repl_disconnect(struct repl *r, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	r->want_connect = false;
	repl_drop_connection(r, "the operator disconnected");
	for (int i = 0; i < REPL_PENDING_MAX; i++) {
		tstream_close(r->pending_accept[i]);
		r->pending_accept[i] = NULL;
	}
	r->link = LINK_STANDALONE;
	return 0;
}

void repl_discard_local(struct repl *r)
{
	struct gen_ids g = repl_gen_local(r);
	gen_discard_local(&g);
	repl_gen_store(r, &g);
	r->crashed_primary = false;
	r->split_brain = false;
	r->disk = DISK_OUTDATED;
	repl_write_sb(r);
	repl_log(r, LOG_LVL_NOTICE,
	         "Local changes will be discarded: this node becomes the target "
	         "of a full resync from %s.",
	         r->p.peer->name);
}

int repl_verify(struct repl *r, char *err, size_t errlen)
{
	return verify_start(r, err, errlen);
}

int repl_resync(struct repl *r, char *err, size_t errlen)
{
	if (!r->connected || r->link != LINK_CONNECTED || verify_running(r)) {
		snprintf(err, errlen,
		         "Volume %s cannot start a resync now: the link is %s%s; it needs a "
		         "Connected peer, no resync and no verify running.",
		         r->name, repl_link_name(r->link),
		         verify_running(r) ? " and a verify runs" : "");
		return -1;
	}
	if (r->role != ROLE_PRIMARY && r->peer_role != ROLE_PRIMARY) {
		snprintf(err, errlen,
		         "Volume %s has no primary: promote the node whose copy is the reference, "
		         "then run 'hakctl resync %s' again.",
		         r->name, r->name);
		return -1;
	}
	/*
	 * As after a DRBD verify, the resync comes from a new connection: the primary starts a new
	 * generation when it loses the peer, so the handshake decides a bitmap-based resync from
	 * the primary, with both bitmaps merged, and an interruption resumes like any other.
	 */
	repl_log(r, LOG_LVL_NOTICE,
	         "Resync of the %llu blocks marked out of sync here (and those marked on %s) "
	         "requested: reconnecting to %s.",
	         (unsigned long long)bitmap_count(r->bm), r->p.peer->name, r->p.peer->name);
	repl_drop_connection(r, "the operator asked for a resync of the out-of-sync blocks");
	return 0;
}

int repl_resolve_discard_local(struct repl *r, char *err, size_t errlen)
{
	if (r->role == ROLE_PRIMARY) {
		snprintf(err, errlen, "Volume %s is primary: demote it before discarding its data.",
		         r->name);
		return -1;
	}
	if (r->connected) {
		snprintf(err, errlen,
		         "Volume %s is connected to its peer: there is nothing to "
		         "resolve.",
		         r->name);
		return -1;
	}
	bool was_split = r->split_brain;
	repl_discard_local(r);
	if (was_split)
		events_emit("split-brain-resolved", "volume:%s peer:%s by:operator discarded:%s",
		            r->name, r->p.peer->name, r->p.self->name);
	return repl_connect(r, err, errlen);
}
