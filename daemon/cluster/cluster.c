/* SPDX-License-Identifier: MIT */
/*
 * The cluster manager's decision: see cluster.h. The rules are checked in a fixed order, first
 * match wins: impossible inputs, operator commands, then the rules of the current role. Every
 * rule that lets a node serve writes while it cannot hear its peer is gated on the witness vote
 * (or, with quorum disabled, on a fence hook that succeeded): that is what keeps two primaries
 * from serving at once when the paths between the nodes are cut.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"

static const char *const rule_names[CLUSTER_R_COUNT] = {
    [CLUSTER_R_INVALID] = "invalid-input",
    [CLUSTER_R_CMD_STANDBY] = "standby",
    [CLUSTER_R_CMD_UNSTANDBY] = "unstandby",
    [CLUSTER_R_CMD_FORCE] = "failover-force",
    [CLUSTER_R_CMD_FORCE_REFUSED] = "failover-force-refused",
    [CLUSTER_R_CMD_DONE] = "command-done",
    [CLUSTER_R_CMD_REFUSED] = "command-refused",
    [CLUSTER_R_BOTH_PRIMARY] = "both-primary",
    [CLUSTER_R_HANDOVER] = "handover",
    [CLUSTER_R_STOP_FAILED] = "stop-failed",
    [CLUSTER_R_DISK_DETACH] = "disk-detach",
    [CLUSTER_R_DISKLESS_NO_SOURCE] = "diskless-no-source",
    [CLUSTER_R_QUORUM_WAIT] = "quorum-wait",
    [CLUSTER_R_QUORUM_LOST] = "quorum-lost",
    [CLUSTER_R_PRIMARY_RESTART] = "local-restart",
    [CLUSTER_R_PRIMARY_GROUP_LOST] = "group-lost",
    [CLUSTER_R_PRIMARY_SERVE] = "serve",
    [CLUSTER_R_SECONDARY_STOP_GROUP] = "secondary-stop-group",
    [CLUSTER_R_SECONDARY_PEER_PRIMARY] = "peer-primary",
    [CLUSTER_R_SECONDARY_TAKEOVER] = "takeover",
    [CLUSTER_R_SECONDARY_WAIT] = "secondary-wait",
    [CLUSTER_R_NOT_ELIGIBLE] = "not-eligible",
    [CLUSTER_R_FENCE] = "fence",
    [CLUSTER_R_FENCE_WAIT] = "fence-wait",
    [CLUSTER_R_FENCE_FAILED] = "fence-failed",
    [CLUSTER_R_NO_FENCE] = "no-fence",
    [CLUSTER_R_FAILOVER] = "failover",
    [CLUSTER_R_ASK_VOTE] = "ask-vote",
    [CLUSTER_R_PEER_HOLDS_VOTE] = "peer-holds-vote",
    [CLUSTER_R_NO_WITNESS] = "no-witness",
};

static const char *const action_names[CLUSTER_A_COUNT] = {
    "set-standby", "clear-standby", "freeze-io",  "fail-io",   "ask-vote",
    "fence",       "detach",        "stop-group", "demote",    "promote",
    "unfreeze-io", "start-group",   "restart",    "send-garp", "degraded",
};

static const char *const disk_names[CLUSTER_DISK_COUNT] = {
    "UpToDate", "Outdated", "Inconsistent", "Diskless", "Failed", "Unknown",
};

static const char *const group_names[CLUSTER_GROUP_COUNT] = {
    "stopped", "starting", "running", "stopping", "failed", "stop-failed",
};

static const char *const cmd_names[CLUSTER_CMD_COUNT] = {
    "none", "switchover-to-peer", "switchover-to-self", "standby", "unstandby", "failover-force",
};

const char *cluster_rule_name(enum cluster_rule r)
{
	return (unsigned)r < CLUSTER_R_COUNT ? rule_names[r] : "unknown";
}

const char *cluster_action_name(unsigned bit)
{
	for (unsigned i = 0; i < CLUSTER_A_COUNT; i++)
		if (bit == 1u << i)
			return action_names[i];
	return "unknown";
}

const char *cluster_disk_name(enum cluster_disk d)
{
	return (unsigned)d < CLUSTER_DISK_COUNT ? disk_names[d] : "unknown";
}

static const char *cluster_group_name(enum cluster_group g)
{
	return (unsigned)g < CLUSTER_GROUP_COUNT ? group_names[g] : "unknown";
}

const char *cluster_cmd_name(enum cluster_cmd c)
{
	return (unsigned)c < CLUSTER_CMD_COUNT ? cmd_names[c] : "unknown";
}

const char *cluster_actions_format(unsigned actions, char *buf, size_t len)
{
	size_t used = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	for (unsigned i = 0; i < CLUSTER_A_COUNT; i++) {
		if (!(actions & (1u << i)) || used >= len)
			continue;
		int n = snprintf(buf + used, len - used, "%s%s", used ? "," : "", action_names[i]);
		used += n > 0 ? (size_t)n : 0;
	}
	if (!buf[0])
		snprintf(buf, len, "none");
	return buf;
}

/* ---- helpers ---- */

static void say(struct cluster_out *out, enum cluster_rule rule, unsigned actions, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));

static void say(struct cluster_out *out, enum cluster_rule rule, unsigned actions, const char *fmt,
                ...)
{
	va_list ap;

	out->rule = rule;
	out->actions |= actions;
	va_start(ap, fmt);
	vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
	va_end(ap);
}

static unsigned paths_alive(const struct cluster_in *in)
{
	unsigned n = 0;

	for (unsigned i = 0; i < in->n_paths && i < CLUSTER_MAX_PATHS; i++)
		n += in->path_alive[i] ? 1 : 0;
	return n;
}

/* Silent on every path: the only case in which the peer counts as dead. */
static bool cluster_peer_dead(const struct cluster_in *in)
{
	return paths_alive(in) == 0;
}

static bool holds_vote(const struct cluster_in *in)
{
	return in->witness_reachable && in->vote == CLUSTER_VOTE_SELF;
}

/* The peer is alive and could take over from us with all our data. */
static bool peer_can_take_over(const struct cluster_in *in)
{
	return !cluster_peer_dead(in) && in->peer.eligible &&
	       in->peer.disk == CLUSTER_DISK_UPTODATE && in->repl_connected;
}

/*
 * Whether this node could and would take the primary role: its own data is current, nothing
 * local forbids it, and it is not in the middle of giving the role away.
 */
static bool local_eligible(const struct cluster_in *in)
{
	const struct cluster_local *l = &in->local;

	if (l->disk != CLUSTER_DISK_UPTODATE || l->standby || l->group == CLUSTER_GROUP_STOP_FAILED)
		return false;
	if (l->restarts >= in->policy.restart_limit || in->cmd == CLUSTER_CMD_SWITCHOVER_TO_PEER)
		return false;
	return cluster_peer_dead(in) || !in->peer.want_primary;
}

static bool degraded(const struct cluster_in *in)
{
	return paths_alive(in) < in->n_paths || !in->repl_connected ||
	       (!in->policy.quorum_disabled && !in->witness_reachable) ||
	       in->local.disk != CLUSTER_DISK_UPTODATE ||
	       (!cluster_peer_dead(in) && in->peer.disk != CLUSTER_DISK_UPTODATE);
}

/* ---- operator commands ---- */

static bool decide_force(const struct cluster_in *in, struct cluster_out *out)
{
	const struct cluster_local *l = &in->local;

	out->cmd_done = true;
	if (l->role == CLUSTER_PRIMARY) {
		say(out, CLUSTER_R_CMD_DONE, 0, "Failover-force: this node is already primary.");
	} else if (!cluster_peer_dead(in) && in->peer.role == CLUSTER_PRIMARY) {
		out->cmd_refused = true;
		say(out, CLUSTER_R_CMD_FORCE_REFUSED, 0,
		    "Failover-force refused: the peer is alive and primary on %u of %u paths; use "
		    "switchover instead.",
		    paths_alive(in), in->n_paths);
	} else if (l->disk == CLUSTER_DISK_DISKLESS || l->disk == CLUSTER_DISK_FAILED ||
	           l->disk == CLUSTER_DISK_UNKNOWN) {
		out->cmd_refused = true;
		say(out, CLUSTER_R_CMD_FORCE_REFUSED, 0,
		    "Failover-force refused: the local disk is %s, there is no data to serve.",
		    cluster_disk_name(l->disk));
	} else {
		say(out, CLUSTER_R_CMD_FORCE, CLUSTER_A_PROMOTE,
		    "Failover-force: promoting with local disk %s, without vote or fence, on the "
		    "operator's word.",
		    cluster_disk_name(l->disk));
	}
	return true;
}

static bool refuse(struct cluster_out *out, const char *why, const struct cluster_in *in)
{
	out->cmd_done = out->cmd_refused = true;
	say(out, CLUSTER_R_CMD_REFUSED, 0,
	    "%s refused: %s (peer heard on %u of %u paths, peer disk %s, replication %s).",
	    cluster_cmd_name(in->cmd), why, paths_alive(in), in->n_paths,
	    cluster_disk_name(in->peer.disk), in->repl_connected ? "connected" : "disconnected");
	return true;
}

static bool decide_switchover(const struct cluster_in *in, struct cluster_out *out)
{
	bool primary = in->local.role == CLUSTER_PRIMARY;
	bool peer_alive = !cluster_peer_dead(in);

	if (in->cmd == CLUSTER_CMD_SWITCHOVER_TO_PEER) {
		if (!primary && peer_alive && in->peer.role == CLUSTER_PRIMARY) {
			out->cmd_done = true;
			say(out, CLUSTER_R_CMD_DONE, 0, "Switchover done: the peer is primary.");
			return true;
		}
		if (!peer_can_take_over(in))
			return refuse(out, "the peer cannot take over with all the data", in);
		return false; /* the handover rules do it step by step */
	}
	if (primary) {
		out->cmd_done = true;
		say(out, CLUSTER_R_CMD_DONE, 0, "Switchover done: this node is primary.");
		return true;
	}
	if (!peer_alive)
		return refuse(out, "the peer is not heard; use failover-force if it is down", in);
	if (!in->repl_connected)
		return refuse(out, "replication is not connected, this node may miss writes", in);
	if (in->local.disk != CLUSTER_DISK_UPTODATE)
		return refuse(out, "the local disk is not UpToDate", in);
	if (in->local.standby)
		return refuse(out, "this node is in standby", in);
	out->want_primary = true;
	return false;
}

static bool decide_cmd(const struct cluster_in *in, struct cluster_out *out)
{
	switch (in->cmd) {
	case CLUSTER_CMD_NONE:
		return false;
	case CLUSTER_CMD_STANDBY:
		out->cmd_done = true;
		say(out, CLUSTER_R_CMD_STANDBY, in->local.standby ? 0 : CLUSTER_A_SET_STANDBY,
		    "Standby: this node will not be primary until unstandby.");
		return true;
	case CLUSTER_CMD_UNSTANDBY:
		out->cmd_done = true;
		say(out, CLUSTER_R_CMD_UNSTANDBY, in->local.standby ? CLUSTER_A_CLEAR_STANDBY : 0,
		    "Unstandby: this node may be primary again.");
		return true;
	case CLUSTER_CMD_FAILOVER_FORCE:
		return decide_force(in, out);
	case CLUSTER_CMD_SWITCHOVER_TO_PEER:
	case CLUSTER_CMD_SWITCHOVER_TO_SELF:
		return decide_switchover(in, out);
	case CLUSTER_CMD_COUNT:
		break;
	}
	out->cmd_done = out->cmd_refused = true;
	say(out, CLUSTER_R_INVALID, 0, "Unknown command %d refused.", (int)in->cmd);
	return true;
}

/* ---- primary ---- */

/* Stop the group, then demote: never demote while a resource may still use the volume. */
static void step_down(const struct cluster_in *in, struct cluster_out *out, enum cluster_rule rule,
                      const char *why)
{
	switch (in->local.group) {
	case CLUSTER_GROUP_STOPPED:
		say(out, rule, CLUSTER_A_DEMOTE, "%s: group stopped, demoting.", why);
		break;
	case CLUSTER_GROUP_STOPPING:
		say(out, rule, 0, "%s: waiting for the group to stop.", why);
		break;
	case CLUSTER_GROUP_STOP_FAILED:
		say(out, CLUSTER_R_STOP_FAILED, CLUSTER_A_DEGRADED,
		    "%s, but stopping the group failed: staying primary so the peer cannot promote "
		    "while the volume may be in use; an operator must clean up.",
		    why);
		break;
	default:
		say(out, rule, CLUSTER_A_STOP_GROUP, "%s: stopping the group (it is %s).", why,
		    cluster_group_name(in->local.group));
		break;
	}
}

/*
 * A primary that must leave while the peer may serve writes: its writes fail instead of being
 * held. Held writes would keep the group from stopping (a database's shutdown checkpoint, the
 * unmount's journal flush wait on them), and a write completed here now is one the peer never
 * got. The error lets the stack above fail fast and stop, and no client is told "done".
 */
static unsigned fail_writes(const struct cluster_in *in)
{
	return in->local.io_failing ? 0 : CLUSTER_A_FAIL_IO;
}

/* Why a healthy-enough primary should hand the role to a willing peer; NULL to keep it. */
static const char *handover_reason(const struct cluster_in *in)
{
	const struct cluster_local *l = &in->local;

	if (in->cmd == CLUSTER_CMD_SWITCHOVER_TO_PEER)
		return "Switchover to the peer";
	if (!peer_can_take_over(in))
		return NULL;
	if (in->peer.want_primary)
		return "Switchover requested on the peer";
	if (l->standby)
		return "Standby: handing over to the peer";
	if (l->disk == CLUSTER_DISK_FAILED && in->policy.on_disk_failure == CLUSTER_DF_FAILOVER)
		return "The backing disk failed and the policy is failover";
	/* Once the stop has begun the group no longer reads "failed": the count still says it. */
	if (l->restarts >= in->policy.restart_limit && l->group != CLUSTER_GROUP_RUNNING &&
	    l->group != CLUSTER_GROUP_STARTING)
		return "The group failed after the restart limit";
	return NULL;
}

/*
 * Both primary (a healed partition after a forced promotion, or without quorum): the vote
 * decides; without a witness, the one that kept serving writes wins over a frozen one, whose
 * data is older; only then the preferred node.
 */
static void both_primary(const struct cluster_in *in, struct cluster_out *out)
{
	bool frozen = in->local.io_frozen, peer_frozen = in->peer.io_frozen, keep;
	const char *why;

	if (in->witness_reachable) {
		keep = in->vote == CLUSTER_VOTE_SELF;
		why = "it holds the witness vote";
	} else if (frozen != peer_frozen) {
		keep = !frozen;
		why = "it kept serving writes while the other was frozen";
	} else {
		keep = in->policy.preferred;
		why = "it is the preferred node";
	}
	if (keep) {
		say(out, CLUSTER_R_BOTH_PRIMARY, CLUSTER_A_DEGRADED,
		    "The peer is primary too (split brain); this node keeps the role (%s).", why);
		return;
	}
	out->actions |= fail_writes(in);
	step_down(in, out, CLUSTER_R_BOTH_PRIMARY,
	          "The peer is primary too (split brain) and wins; this node yields");
	out->actions |= CLUSTER_A_DEGRADED;
}

/* The peer is dead on every path: may this primary keep serving writes? */
static bool primary_quorum(const struct cluster_in *in, struct cluster_out *out)
{
	unsigned freeze = in->local.io_frozen ? 0 : CLUSTER_A_FREEZE_IO;

	if (in->policy.quorum_disabled || holds_vote(in))
		return true;
	if (in->witness_reachable && in->vote == CLUSTER_VOTE_NONE) {
		say(out, CLUSTER_R_QUORUM_WAIT, freeze | CLUSTER_A_ASK_VOTE,
		    "The peer is silent on all %u paths: I/O frozen until the witness grants this "
		    "node its vote.",
		    in->n_paths);
		return false;
	}
	if (in->policy.on_quorum_loss == CLUSTER_QL_DEMOTE) {
		out->actions |= fail_writes(in);
		step_down(in, out, CLUSTER_R_QUORUM_LOST,
		          in->witness_reachable
		              ? "Quorum lost, the peer holds the witness vote"
		              : "Quorum lost, neither peer nor witness is reachable");
		return false;
	}
	out->actions |= freeze;
	say(out, CLUSTER_R_QUORUM_LOST, 0,
	    "Quorum lost (peer silent on all %u paths, %s): I/O stays frozen, policy "
	    "on-quorum-loss is freeze.",
	    in->n_paths,
	    in->witness_reachable ? "the peer holds the witness vote" : "witness unreachable");
	return false;
}

static void primary_serve(const struct cluster_in *in, struct cluster_out *out)
{
	const struct cluster_local *l = &in->local;
	unsigned unfreeze = l->io_frozen ? CLUSTER_A_UNFREEZE_IO : 0;

	if (l->group == CLUSTER_GROUP_FAILED && l->restarts < in->policy.restart_limit) {
		say(out, CLUSTER_R_PRIMARY_RESTART, unfreeze | CLUSTER_A_RESTART,
		    "A resource of the group failed: restarting it in place (restart %u of %u), no "
		    "failover.",
		    l->restarts + 1, in->policy.restart_limit);
	} else if (l->group == CLUSTER_GROUP_FAILED) {
		say(out, CLUSTER_R_PRIMARY_GROUP_LOST, unfreeze | CLUSTER_A_DEGRADED,
		    "The group failed %u times, the limit, and the peer cannot take over: it stays "
		    "down here.",
		    l->restarts);
	} else if (l->group == CLUSTER_GROUP_STOPPED) {
		say(out, CLUSTER_R_PRIMARY_SERVE, unfreeze | CLUSTER_A_START_GROUP,
		    "Primary: starting the group.");
	} else {
		unsigned garp = in->peer_returned && l->group == CLUSTER_GROUP_RUNNING
		                    ? CLUSTER_A_SEND_GARP
		                    : 0;
		say(out, CLUSTER_R_PRIMARY_SERVE, unfreeze | garp,
		    "Primary serving; group %s, peer heard on %u of %u paths.",
		    cluster_group_name(l->group), paths_alive(in), in->n_paths);
	}
}

static void decide_primary(const struct cluster_in *in, struct cluster_out *out)
{
	const struct cluster_local *l = &in->local;
	bool peer_alive = !cluster_peer_dead(in);
	const char *why;

	if (peer_alive && in->peer.role == CLUSTER_PRIMARY)
		return both_primary(in, out);
	why = handover_reason(in);
	if (why)
		return step_down(in, out, CLUSTER_R_HANDOVER, why);
	/* Pacemaker's node standby: the services leave the node, and stop when no other node
	 * can take them (maintenance on the last node, or stopping the pair cleanly). */
	if (l->standby)
		return step_down(
		    in, out, CLUSTER_R_CMD_STANDBY,
		    "Standby and the peer cannot take over: stopping the services here");
	if (l->group == CLUSTER_GROUP_STOP_FAILED) {
		say(out, CLUSTER_R_STOP_FAILED, CLUSTER_A_DEGRADED,
		    "Stopping the group failed: staying primary until an operator cleans up.");
		return;
	}
	if (l->disk == CLUSTER_DISK_FAILED) {
		say(out, CLUSTER_R_DISK_DETACH, CLUSTER_A_DETACH | CLUSTER_A_DEGRADED,
		    "The backing disk failed: detaching it (policy %s, peer %s).",
		    in->policy.on_disk_failure == CLUSTER_DF_DETACH ? "detach" : "failover",
		    peer_can_take_over(in) ? "able to take over" : "unable to take over");
		return;
	}
	if (l->disk == CLUSTER_DISK_DISKLESS &&
	    !(peer_alive && in->repl_connected && in->peer.disk == CLUSTER_DISK_UPTODATE)) {
		say(out, CLUSTER_R_DISKLESS_NO_SOURCE, l->io_frozen ? 0 : CLUSTER_A_FREEZE_IO,
		    "Diskless primary without an UpToDate peer (peer disk %s, replication %s): I/O "
		    "frozen.",
		    cluster_disk_name(in->peer.disk),
		    in->repl_connected ? "connected" : "disconnected");
		return;
	}
	primary_serve(in, out);
}

/* ---- secondary ---- */

static void secondary_peer_alive(const struct cluster_in *in, struct cluster_out *out)
{
	bool self_wants = out->want_primary, wins;

	if (in->peer.role == CLUSTER_PRIMARY) {
		say(out, CLUSTER_R_SECONDARY_PEER_PRIMARY, 0,
		    "The peer is primary, heard on %u of %u paths.", paths_alive(in), in->n_paths);
		return;
	}
	wins = !in->peer.eligible || self_wants > in->peer.want_primary ||
	       (self_wants == in->peer.want_primary && in->policy.preferred);
	if (out->eligible && in->repl_connected && wins) {
		say(out, CLUSTER_R_SECONDARY_TAKEOVER, CLUSTER_A_PROMOTE,
		    "No primary: promoting (peer %s, disk %s%s).",
		    in->peer.eligible ? "eligible" : "not eligible",
		    cluster_disk_name(in->peer.disk),
		    self_wants ? ", switchover requested here" : "");
		return;
	}
	say(out, CLUSTER_R_SECONDARY_WAIT, 0,
	    "No primary, and this node does not take over (eligible %s, replication %s, peer %s).",
	    out->eligible ? "yes" : "no", in->repl_connected ? "connected" : "disconnected",
	    in->peer.eligible ? "eligible" : "not eligible");
}

static void secondary_quorum_disabled(const struct cluster_in *in, struct cluster_out *out)
{
	if (!in->policy.fence_configured) {
		say(out, CLUSTER_R_NO_FENCE, 0,
		    "The peer is silent on all paths, but quorum is disabled and no fence hook is "
		    "configured: not promoting.");
		return;
	}
	switch (in->fence) {
	case CLUSTER_FENCE_NOT_RUN:
		say(out, CLUSTER_R_FENCE, CLUSTER_A_FENCE,
		    "The peer is silent on all %u paths and quorum is disabled: fencing it.",
		    in->n_paths);
		break;
	case CLUSTER_FENCE_RUNNING:
		say(out, CLUSTER_R_FENCE_WAIT, 0, "Waiting for the fence hook.");
		break;
	case CLUSTER_FENCE_OK:
		say(out, CLUSTER_R_FAILOVER, CLUSTER_A_PROMOTE,
		    "The peer is fenced and this node is UpToDate: promoting.");
		break;
	default:
		say(out, CLUSTER_R_FENCE_FAILED, 0,
		    "The fence hook failed: not promoting, the peer may still write.");
		break;
	}
}

static void secondary_peer_dead(const struct cluster_in *in, struct cluster_out *out)
{
	const struct cluster_local *l = &in->local;

	if (!out->eligible) {
		say(out, CLUSTER_R_NOT_ELIGIBLE, 0,
		    "The peer is silent on all %u paths, but this node cannot take over (disk %s, "
		    "standby %s, %u restarts of %u).",
		    in->n_paths, cluster_disk_name(l->disk), l->standby ? "yes" : "no", l->restarts,
		    in->policy.restart_limit);
	} else if (in->policy.quorum_disabled) {
		secondary_quorum_disabled(in, out);
	} else if (!in->witness_reachable) {
		say(out, CLUSTER_R_NO_WITNESS, 0,
		    "The peer is silent on all %u paths and the witness is unreachable: not "
		    "promoting.",
		    in->n_paths);
	} else if (in->vote == CLUSTER_VOTE_SELF) {
		say(out, CLUSTER_R_FAILOVER, CLUSTER_A_PROMOTE,
		    "The peer is silent on all %u paths and this node holds the witness vote: "
		    "promoting.",
		    in->n_paths);
	} else if (in->vote == CLUSTER_VOTE_NONE) {
		say(out, CLUSTER_R_ASK_VOTE, CLUSTER_A_ASK_VOTE,
		    "The peer is silent on all %u paths: asking the witness for its vote.",
		    in->n_paths);
	} else {
		say(out, CLUSTER_R_PEER_HOLDS_VOTE, 0,
		    "The peer is silent on all %u paths but holds the witness vote: not promoting.",
		    in->n_paths);
	}
}

static void decide_secondary(const struct cluster_in *in, struct cluster_out *out)
{
	enum cluster_group g = in->local.group;

	if (g == CLUSTER_GROUP_RUNNING || g == CLUSTER_GROUP_STARTING ||
	    g == CLUSTER_GROUP_FAILED) {
		say(out, CLUSTER_R_SECONDARY_STOP_GROUP, CLUSTER_A_STOP_GROUP,
		    "A secondary never runs the group: stopping it (it is %s).",
		    cluster_group_name(g));
		return;
	}
	if (g == CLUSTER_GROUP_STOPPING) {
		say(out, CLUSTER_R_SECONDARY_STOP_GROUP, 0, "Waiting for the group to stop.");
		return;
	}
	/* A secondary serves nothing; a freeze left over from a demotion has no purpose. */
	if (in->local.io_frozen)
		out->actions |= CLUSTER_A_UNFREEZE_IO;
	if (!cluster_peer_dead(in))
		secondary_peer_alive(in, out);
	else
		secondary_peer_dead(in, out);
}

void cluster_decide(const struct cluster_in *in, struct cluster_out *out)
{
	bool quorum_lost;

	memset(out, 0, sizeof(*out));
	if (in->n_paths == 0 || in->n_paths > CLUSTER_MAX_PATHS ||
	    (unsigned)in->local.disk >= CLUSTER_DISK_COUNT ||
	    (unsigned)in->local.group >= CLUSTER_GROUP_COUNT ||
	    (unsigned)in->peer.disk >= CLUSTER_DISK_COUNT) {
		say(out, CLUSTER_R_INVALID, 0,
		    "Invalid cluster inputs (%u paths, local disk %d, group %d, peer disk %d): "
		    "doing "
		    "nothing.",
		    in->n_paths, (int)in->local.disk, (int)in->local.group, (int)in->peer.disk);
		return;
	}
	out->eligible = local_eligible(in);
	/*
	 * Without quorum a primary serves no write, whatever else is wrong or asked: this comes
	 * before commands, which stay pending until it is resolved.
	 */
	quorum_lost =
	    in->local.role == CLUSTER_PRIMARY && cluster_peer_dead(in) && !primary_quorum(in, out);
	if (!quorum_lost && !decide_cmd(in, out)) {
		if (in->local.role == CLUSTER_PRIMARY)
			decide_primary(in, out);
		else
			decide_secondary(in, out);
	}
	if (out->rule != CLUSTER_R_INVALID && degraded(in))
		out->actions |= CLUSTER_A_DEGRADED;
}
