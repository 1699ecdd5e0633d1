/* SPDX-License-Identifier: MIT */
/*
 * Fencing, as DRBD's "fencing resource-only": the one invariant of sync and memsync is that a
 * write is acknowledged only when the peer has it, or when the peer is known, by everyone who
 * could promote it, to be Outdated. When a primary loses the connection to an UpToDate peer,
 * the peer's copy stops being current at the first write that follows; if that write were
 * acknowledged and the primary then died, the peer would be promoted without it. So the loss
 * freezes the writes here (the ones whose peer was lost are parked, new ones wait) until the
 * cluster manager confirms that the peer cannot be promoted with its data: it marked itself
 * Outdated (asked over the heartbeat paths), the witness recorded it Outdated (and will never
 * give it its vote), or a fence hook powered it off. Only then do the writes resume, into the
 * bitmap. If nothing confirms it, they stay frozen: a freeze longer than fence-timeout is
 * reported, never ended by itself.
 *
 * The other half runs on the secondary: repl_outdate() marks its disk Outdated in the metadata,
 * so neither the cluster manager nor an operator (without --force) promotes it, across
 * restarts, until a resync from the primary makes it UpToDate again.
 *
 * Without a cluster section an outside manager (Pacemaker) decides the roles, and only it can
 * keep the peer from being promoted: the volume's fence-peer handler asks it to (a location
 * constraint), as DRBD's crm-fence-peer does, and its exit status says whether that is done.
 * The freeze ends when it is, or when the peer is connected and in sync again; unfence-peer
 * lifts the constraint once the peer holds every write again.
 */
#include <errno.h>
#include <string.h>

#include "fence.h"

#include "ctl/events.h"
#include "lib/log.h"
#include "lib/proc.h"
#include "repl_int.h"
#include "volume/volume.h"

/*
 * The fence-peer handler's exit status, as DRBD's: 3 the peer's disk is Inconsistent already,
 * 4 the peer is fenced (kept from promotion), 5 it is down or unreachable and cannot be
 * promoted, 7 it was powered off. Anything else (6: the peer is primary; 1: an error) is no
 * confirmation. NULL for those.
 */
static const char *fence_peer_meaning(int code)
{
	switch (code) {
	case 3:
		return "its disk is Inconsistent already";
	case 4:
		return "it is kept from being promoted";
	case 5:
		return "it is down or unreachable and cannot be promoted";
	case 7:
		return "it was powered off";
	default:
		return NULL;
	}
}

static void fence_handler_run(struct repl *r, const char *cmd, proc_done_fn done,
                              struct proc **slot, const char *what)
{
	char vol[128], peer[128], self[128], tmo[64];
	char *envp[] = {vol, peer, self, tmo, NULL};

	snprintf(vol, sizeof(vol), "HAK_VOLUME=%s", r->name);
	snprintf(peer, sizeof(peer), "HAK_PEER=%s", r->p.peer->name);
	snprintf(self, sizeof(self), "HAK_NODE=%s", r->p.self->name);
	snprintf(tmo, sizeof(tmo), "HAK_FENCE_TIMEOUT=%.0f", r->p.vcfg->fence_timeout);
	if (proc_run_shell(r->p.loop, cmd, envp, r->p.vcfg->fence_timeout, done, r, slot) < 0)
		repl_log(r, LOG_LVL_ERR, "Cannot run the %s handler %s: %s.", what, cmd,
		         strerror(errno));
}

static void fence_peer_done(void *ctx, const struct proc_result *res)
{
	struct repl *r = ctx;
	const char *meaning = res->exited ? fence_peer_meaning(res->code) : NULL;
	char d[128], how[96];

	r->fence_proc = NULL;
	proc_describe(res, r->p.vcfg->fence_timeout, d, sizeof(d));
	if (!meaning) {
		repl_log(r, LOG_LVL_ERR,
		         "The fence-peer handler against %s ended with %s (%s): %s is not known to "
		         "be kept from promotion, so the writes stay frozen; it runs again after "
		         "fence-timeout.",
		         r->p.peer->name, d, res->output, r->p.peer->name);
		events_emit("fence", "volume:%s peer:%s state:handler-failed", r->name,
		            r->p.peer->name);
		return;
	}
	r->unfence_owed = true;
	repl_log(r, LOG_LVL_NOTICE, "The fence-peer handler against %s ended with %s: %s.",
	         r->p.peer->name, d, meaning);
	snprintf(how, sizeof(how), "was fenced by the fence-peer handler (exit %d)", res->code);
	repl_fence_confirm(r, how);
}

static void unfence_peer_done(void *ctx, const struct proc_result *res)
{
	struct repl *r = ctx;
	char d[128];

	r->unfence_proc = NULL;
	proc_describe(res, r->p.vcfg->fence_timeout, d, sizeof(d));
	if (res->exited && res->code == 0) {
		r->unfence_owed = false;
		repl_log(r, LOG_LVL_NOTICE,
		         "The unfence-peer handler ended with %s: %s may be promoted again.", d,
		         r->p.peer->name);
		events_emit("fence", "volume:%s peer:%s state:unfenced", r->name, r->p.peer->name);
	}
	if (!res->exited || res->code != 0) {
		r->unfence_next = ev_now(r->p.loop) + r->p.vcfg->fence_timeout;
		repl_log(
		    r, LOG_LVL_ERR,
		    "The unfence-peer handler ended with %s (%s): %s stays kept from promotion; "
		    "it runs again after fence-timeout.",
		    d, res->output, r->p.peer->name);
	}
	/* a loss while it ran: fence now, after it, so its removal cannot undo the new fence */
	if (r->fencing && !r->fence_proc)
		fence_handler_run(r, r->p.vcfg->fence_peer, fence_peer_done, &r->fence_proc,
		                  "fence-peer");
}

void fence_tick(struct repl *r)
{
	const struct hak_volume_cfg *vc = r->p.vcfg;

	if (!vc->fence_peer || !repl_peer_serves(r))
		return;
	/* back and resynced: the peer holds every parked write now */
	if (r->fencing)
		repl_fence_confirm(r, "is connected and in sync again");
	if (!r->unfence_owed || r->unfence_proc || r->fence_proc ||
	    ev_now(r->p.loop) < r->unfence_next)
		return;
	if (!vc->unfence_peer) {
		r->unfence_owed = false;
		return;
	}
	fence_handler_run(r, vc->unfence_peer, unfence_peer_done, &r->unfence_proc, "unfence-peer");
}

static void fence_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct repl *r = w->data;

	(void)loop;
	(void)revents;
	/* a failed or hung handler is tried again, once per fence-timeout */
	if (r->p.vcfg->fence_peer) {
		if (!r->fence_proc && !r->unfence_proc)
			fence_handler_run(r, r->p.vcfg->fence_peer, fence_peer_done, &r->fence_proc,
			                  "fence-peer");
		ev_timer_set(&r->fence_timer, r->p.vcfg->fence_timeout, 0.0);
		ev_timer_start(r->p.loop, &r->fence_timer);
	}
	r->fence_stuck = true;
	repl_log(r, LOG_LVL_ERR,
	         "Writes have been frozen for %.1f s (%u parked): %s could not be confirmed "
	         "Outdated over the heartbeats, by the witness or by a fence hook; they stay "
	         "frozen until it is, or until the cluster manager makes this node step down.",
	         ev_now(r->p.loop) - r->fence_start, volume_fence_parked(r->p.vol),
	         r->p.peer->name);
	events_emit("fence", "volume:%s peer:%s state:stuck", r->name, r->p.peer->name);
}

/* A loss that must freeze: a primary's established connection to an UpToDate peer, in a mode
 * that waits for the peer, unless the daemon is stopping. */
static void fence_conn_lost(void *ctx)
{
	struct repl *r = ctx;

	if (r->fencing || r->fencing_policy == HAK_FENCING_NONE || r->stopping ||
	    r->role != ROLE_PRIMARY || !r->lost_established || r->disk == DISK_DISKLESS ||
	    r->mode == MODE_ASYNC || r->peer_disk != DISK_UPTODATE)
		return;
	r->fencing = true;
	r->fence_stuck = false;
	r->fence_prev_gen = r->sb.gen_current; /* before the loss's new generation */
	r->fence_start = ev_now(r->p.loop);
	r->fences++;
	volume_fence(r->p.vol, true);
	ev_timer_set(&r->fence_timer, r->p.vcfg->fence_timeout, 0.0);
	ev_timer_start(r->p.loop, &r->fence_timer);
	repl_log(r, LOG_LVL_WARN,
	         "Lost the UpToDate peer %s: writes are frozen until it is known to be Outdated "
	         "(fencing %s); no write is acknowledged by this node alone.",
	         r->p.peer->name, config_fencing_name(r->fencing_policy));
	events_emit("fence", "volume:%s peer:%s state:frozen policy:%s", r->name, r->p.peer->name,
	            config_fencing_name(r->fencing_policy));
	/* one handler at a time: a fence-peer still running from an earlier loss answers for
	 * this one, and a running unfence-peer starts it when it ends (unfence_peer_done) */
	if (r->p.vcfg->fence_peer && !r->fence_proc && !r->unfence_proc)
		fence_handler_run(r, r->p.vcfg->fence_peer, fence_peer_done, &r->fence_proc,
		                  "fence-peer");
}

void fence_init(struct repl *r)
{
	r->fencing_policy = r->p.vcfg->fencing;
	/* A constraint left by fence-peer before a restart is not remembered: unfence-peer runs
	 * once the peer is in sync anyway (it does nothing when there is no constraint). */
	r->unfence_owed = r->p.vcfg->fence_peer && r->p.vcfg->unfence_peer;
	ev_timer_init(&r->fence_timer, fence_timer_cb, 1.0, 0.0);
	r->fence_timer.data = r;
	hooks_add(&r->on_conn_lost, CONN_LOST_FENCE, fence_conn_lost, r, "fence");
}

void fence_shutdown(struct repl *r, bool demoting)
{
	ev_timer_stop(r->p.loop, &r->fence_timer);
	if (!demoting) {
		if (r->fence_proc)
			proc_cancel(r->fence_proc);
		if (r->unfence_proc)
			proc_cancel(r->unfence_proc);
		r->fence_proc = r->unfence_proc = NULL;
	}
	if (!r->fencing)
		return;
	r->fencing = false;
	repl_log(r, LOG_LVL_WARN,
	         "%s while writes are frozen: the %u parked writes fail with EIO, since %s never "
	         "confirmed them and is not known to be Outdated.",
	         demoting ? "Leaving the primary role" : "Stopping", volume_fence_parked(r->p.vol),
	         r->p.peer->name);
	volume_fail_writes(r->p.vol);
	if (!demoting)
		return;
	/*
	 * A primary that steps down before its peer was outdated yields to a peer that may be
	 * promoted now (it won the witness's vote): nothing it wrote since the loss was
	 * acknowledged (every write was parked, and has failed), so its copy is not the newest.
	 * It goes back to the generation the peer also descends from, keeps those blocks in the
	 * bitmap and is Outdated: the next connection makes it the target of a bitmap-based
	 * resync, without a split brain and without an operator.
	 */
	struct gen_ids g = repl_gen_local(r);
	uint64_t prev = r->fence_prev_gen;
	if (prev != 0 && g.current != prev) {
		/* undo gen_new_current() of the loss */
		if (g.bitmap == prev) {
			g.bitmap = 0;
		} else if (g.history[0] == prev) {
			g.history[0] = g.history[1];
			g.history[1] = 0;
		}
		g.current = prev;
		repl_gen_store(r, &g);
	}
	r->disk = DISK_OUTDATED;
	repl_log(r, LOG_LVL_WARN,
	         "Stepped down without fencing %s: this node's changes since the loss were never "
	         "acknowledged, so its disk is Outdated and its generation back to the one both "
	         "share; the next connection resyncs it from %s.",
	         r->p.peer->name, r->p.peer->name);
	events_emit("outdated", "volume:%s node:%s reason:stepped-down-unfenced", r->name,
	            r->p.self->name);
}

bool repl_fencing(const struct repl *r)
{
	return r->fencing;
}

void repl_fence_confirm(struct repl *r, const char *how)
{
	char tok[96];
	unsigned parked;
	double ms;

	if (!r->fencing)
		return;
	ms = (ev_now(r->p.loop) - r->fence_start) * 1000.0;
	r->fencing = false;
	r->fence_stuck = false;
	ev_timer_stop(r->p.loop, &r->fence_timer);
	r->fence_ms_last = (uint64_t)ms;
	r->fence_ms_total += (uint64_t)ms;
	snprintf(r->fence_how, sizeof(r->fence_how), "%s", how);
	parked = volume_fence_parked(r->p.vol);
	volume_fence(r->p.vol, false);
	/* A node stepping down already failed its parked writes (volume_fail_writes): the
	 * confirmation ends the fence but resumes nothing. */
	repl_log(r, LOG_LVL_NOTICE, "%s %s after %.0f ms frozen: %s.", r->p.peer->name, how, ms,
	         volume_failing(r->p.vol)
	             ? "the fence ends, but this node is stepping down and its writes keep failing"
	             : "writes resume, the parked ones answered (their blocks are in the bitmap "
	               "for the resync)");
	events_token(tok, sizeof(tok), how);
	events_emit("fence", "volume:%s peer:%s state:resumed ms:%.0f parked:%u how:%s", r->name,
	            r->p.peer->name, ms, parked, tok);
}

int repl_outdate(struct repl *r, const char *why)
{
	char tok[128];

	if (r->role == ROLE_PRIMARY) {
		errno = EBUSY;
		return -1;
	}
	if (r->disk != DISK_UPTODATE) {
		errno = EALREADY;
		return -1;
	}
	r->disk = DISK_OUTDATED;
	/* Only a persistent mark counts: the peer resumes its writes once it sees it. */
	if (repl_write_sb(r) < 0) {
		int e = errno;
		r->disk = DISK_UPTODATE;
		repl_log(r, LOG_LVL_ERR,
		         "Could not mark the disk Outdated (%s) as asked (%s): it stays UpToDate, "
		         "and the primary's writes stay frozen.",
		         strerror(e), why);
		errno = e;
		return -1;
	}
	repl_log(r, LOG_LVL_WARN,
	         "The disk is now Outdated (%s): this node will not be promoted until a resync "
	         "from %s makes it UpToDate again (or an operator forces it).",
	         why, r->p.peer->name);
	events_token(tok, sizeof(tok), why);
	events_emit("outdated", "volume:%s node:%s reason:%s", r->name, r->p.self->name, tok);
	if (r->connected)
		repl_send_state(r);
	return 0;
}

json_t *fence_status_json(const struct repl *r)
{
	double now = ev_now(r->p.loop);

	return json_pack("{s:s, s:b, s:b, s:I, s:i, s:I, s:I, s:I, s:s}", "policy",
	                 config_fencing_name(r->fencing_policy), "frozen", r->fencing, "stuck",
	                 r->fence_stuck, "frozen_ms",
	                 (json_int_t)(r->fencing ? (now - r->fence_start) * 1000.0 : 0),
	                 "frozen_writes", (int)(r->fencing ? volume_fence_parked(r->p.vol) : 0),
	                 "fences", (json_int_t)r->fences, "last_ms", (json_int_t)r->fence_ms_last,
	                 "total_ms", (json_int_t)r->fence_ms_total, "last_how", r->fence_how);
}
