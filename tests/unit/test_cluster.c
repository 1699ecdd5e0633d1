/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the cluster decision: the failure matrix of issue #5 row by row (each row a
 * sequence of steps, both nodes' views where both decide), then the safety property "never two
 * primaries serve writes": exhaustively per node (serving while the peer is silent requires the
 * vote or a successful fence), and as a simulation of two partitioned nodes and a witness from
 * every combination of start states.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "cluster/cluster.h"

#define MOVE_ACTIONS                                                                               \
	(CLUSTER_A_PROMOTE | CLUSTER_A_DEMOTE | CLUSTER_A_STOP_GROUP | CLUSTER_A_FREEZE_IO |       \
	 CLUSTER_A_FAIL_IO | CLUSTER_A_FENCE | CLUSTER_A_DETACH)

/* A healthy pair on two paths with a reachable witness; the caller adjusts it. */
static struct cluster_in base(enum cluster_role role)
{
	struct cluster_in in;

	memset(&in, 0, sizeof(in));
	in.n_paths = 2;
	in.path_alive[0] = in.path_alive[1] = true;
	in.repl_connected = true;
	in.witness_reachable = true;
	in.vote = CLUSTER_VOTE_NONE;
	in.local.role = role;
	in.local.disk = CLUSTER_DISK_UPTODATE;
	in.local.group = role == CLUSTER_PRIMARY ? CLUSTER_GROUP_RUNNING : CLUSTER_GROUP_STOPPED;
	in.peer.role = role == CLUSTER_PRIMARY ? CLUSTER_SECONDARY : CLUSTER_PRIMARY;
	in.peer.disk = CLUSTER_DISK_UPTODATE;
	in.peer.eligible = true;
	in.policy.restart_limit = 3;
	in.policy.on_quorum_loss = CLUSTER_QL_FREEZE;
	in.policy.on_disk_failure = CLUSTER_DF_DETACH;
	return in;
}

static void cut_all(struct cluster_in *in)
{
	for (unsigned i = 0; i < CLUSTER_MAX_PATHS; i++)
		in->path_alive[i] = false;
	in->repl_connected = false;
}

/* Decide and check rule and exact actions; returns the output for further checks. */
static struct cluster_out expect(const struct cluster_in *in, enum cluster_rule rule,
                                 unsigned actions, int line)
{
	struct cluster_out out;
	char got[256], want[256];

	cluster_decide(in, &out);
	cluster_actions_format(out.actions, got, sizeof(got));
	cluster_actions_format(actions, want, sizeof(want));
	ck_assert_msg(out.rule == rule && out.actions == actions,
	              "line %d: got rule %s actions %s, expected rule %s actions %s (reason: %s)",
	              line, cluster_rule_name(out.rule), got, cluster_rule_name(rule), want,
	              out.reason);
	ck_assert_msg(out.reason[0] && out.reason[strlen(out.reason) - 1] == '.',
	              "line %d: reason '%s' is not a sentence", line, out.reason);
	return out;
}
#define EXPECT(in, rule, actions) expect((in), (rule), (actions), __LINE__)

#define DEG CLUSTER_A_DEGRADED

START_TEST(primary_crash_fails_over)
{
	struct cluster_in b = base(CLUSTER_SECONDARY);

	EXPECT(&b, CLUSTER_R_SECONDARY_PEER_PRIMARY, 0);
	cut_all(&b); /* the primary is gone: silent on both paths */
	EXPECT(&b, CLUSTER_R_ASK_VOTE, CLUSTER_A_ASK_VOTE | DEG);
	b.vote = CLUSTER_VOTE_SELF;
	EXPECT(&b, CLUSTER_R_FAILOVER, CLUSTER_A_PROMOTE | DEG);
	b.local.role = CLUSTER_PRIMARY;
	EXPECT(&b, CLUSTER_R_PRIMARY_SERVE, CLUSTER_A_START_GROUP | DEG);
	b.local.group = CLUSTER_GROUP_RUNNING;
	EXPECT(&b, CLUSTER_R_PRIMARY_SERVE, DEG);
	/* The old primary comes back as secondary: the VIP is announced again, no switchback. */
	b.path_alive[0] = b.path_alive[1] = b.repl_connected = b.peer_returned = true;
	b.peer.role = CLUSTER_SECONDARY;
	EXPECT(&b, CLUSTER_R_PRIMARY_SERVE, CLUSTER_A_SEND_GARP);
	struct cluster_in a = base(CLUSTER_SECONDARY);
	a.policy.preferred = true; /* even the preferred node does not take the role back */
	EXPECT(&a, CLUSTER_R_SECONDARY_PEER_PRIMARY, 0);
}
END_TEST

START_TEST(secondary_never_promotes_without_uptodate_data)
{
	static const enum cluster_disk disks[] = {CLUSTER_DISK_OUTDATED, CLUSTER_DISK_INCONSISTENT,
	                                          CLUSTER_DISK_DISKLESS, CLUSTER_DISK_FAILED};
	for (size_t i = 0; i < sizeof(disks) / sizeof(disks[0]); i++) {
		struct cluster_in b = base(CLUSTER_SECONDARY);
		cut_all(&b);
		b.vote = CLUSTER_VOTE_SELF;
		b.local.disk = disks[i];
		struct cluster_out o = EXPECT(&b, CLUSTER_R_NOT_ELIGIBLE, DEG);
		ck_assert(!o.eligible);
	}
}
END_TEST

START_TEST(database_crash_restarts_locally)
{
	struct cluster_in a = base(CLUSTER_PRIMARY);

	a.local.group = CLUSTER_GROUP_FAILED;
	for (unsigned r = 0; r < 3; r++) {
		a.local.restarts = r;
		EXPECT(&a, CLUSTER_R_PRIMARY_RESTART, CLUSTER_A_RESTART);
	}
	/* The limit is reached: the group moves to the willing peer, stop first. */
	a.local.restarts = 3;
	EXPECT(&a, CLUSTER_R_HANDOVER, CLUSTER_A_STOP_GROUP);
	a.local.group = CLUSTER_GROUP_STOPPING;
	EXPECT(&a, CLUSTER_R_HANDOVER, 0);
	a.local.group = CLUSTER_GROUP_STOPPED;
	EXPECT(&a, CLUSTER_R_HANDOVER, CLUSTER_A_DEMOTE);
	/* ... and when the peer cannot take over, the group stays down here, no demotion. */
	a = base(CLUSTER_PRIMARY);
	a.local.group = CLUSTER_GROUP_FAILED;
	a.local.restarts = 3;
	a.peer.disk = CLUSTER_DISK_OUTDATED;
	a.peer.eligible = false;
	EXPECT(&a, CLUSTER_R_PRIMARY_GROUP_LOST, DEG);
	/* The secondary never reacts to the primary's local restarts. */
	struct cluster_in b = base(CLUSTER_SECONDARY);
	EXPECT(&b, CLUSTER_R_SECONDARY_PEER_PRIMARY, 0);
}
END_TEST

START_TEST(one_path_lost_is_degraded_only)
{
	for (unsigned p = 0; p < 2; p++) {
		struct cluster_in a = base(CLUSTER_PRIMARY), b = base(CLUSTER_SECONDARY);
		a.path_alive[p] = b.path_alive[p] = false;
		/* path 0 is the replication link: losing it also drops the connection */
		a.repl_connected = b.repl_connected = p != 0;
		EXPECT(&a, CLUSTER_R_PRIMARY_SERVE, DEG);
		EXPECT(&b, CLUSTER_R_SECONDARY_PEER_PRIMARY, DEG);
	}
}
END_TEST

START_TEST(replication_link_loss_keeps_primary)
{
	/* Heartbeats still flow on the service network: no failover, the bitmap tracks writes. */
	struct cluster_in a = base(CLUSTER_PRIMARY), b = base(CLUSTER_SECONDARY);

	a.repl_connected = b.repl_connected = false;
	a.path_alive[0] = b.path_alive[0] = false;
	b.vote = CLUSTER_VOTE_SELF;
	EXPECT(&a, CLUSTER_R_PRIMARY_SERVE, DEG);
	EXPECT(&b, CLUSTER_R_SECONDARY_PEER_PRIMARY, DEG);
	/* The link returns: healthy again, nothing to do here (resync is replication's). */
	a = base(CLUSTER_PRIMARY);
	EXPECT(&a, CLUSTER_R_PRIMARY_SERVE, 0);
	/* A switchover is refused while the peer may miss writes. */
	a.repl_connected = false;
	a.cmd = CLUSTER_CMD_SWITCHOVER_TO_PEER;
	struct cluster_out o = EXPECT(&a, CLUSTER_R_CMD_REFUSED, DEG);
	ck_assert(o.cmd_done && o.cmd_refused);
}
END_TEST

START_TEST(witness_loss_changes_nothing)
{
	struct cluster_in a = base(CLUSTER_PRIMARY), b = base(CLUSTER_SECONDARY);

	a.witness_reachable = b.witness_reachable = false;
	EXPECT(&a, CLUSTER_R_PRIMARY_SERVE, DEG);
	EXPECT(&b, CLUSTER_R_SECONDARY_PEER_PRIMARY, DEG);
	a.policy.quorum_disabled = true; /* no witness configured: not even degraded */
	EXPECT(&a, CLUSTER_R_PRIMARY_SERVE, 0);
}
END_TEST

/* All paths cut, the witness reachable from one side only: exactly one primary in the end. */
START_TEST(partition_witness_on_primary_side)
{
	struct cluster_in a = base(CLUSTER_PRIMARY), b = base(CLUSTER_SECONDARY);

	cut_all(&a);
	cut_all(&b);
	b.witness_reachable = false;
	EXPECT(&a, CLUSTER_R_QUORUM_WAIT, CLUSTER_A_FREEZE_IO | CLUSTER_A_ASK_VOTE | DEG);
	EXPECT(&b, CLUSTER_R_NO_WITNESS, DEG);
	a.local.io_frozen = true;
	a.vote = CLUSTER_VOTE_SELF;
	EXPECT(&a, CLUSTER_R_PRIMARY_SERVE, CLUSTER_A_UNFREEZE_IO | DEG);
	EXPECT(&b, CLUSTER_R_NO_WITNESS, DEG);
}
END_TEST

START_TEST(partition_witness_on_secondary_side)
{
	struct cluster_in a = base(CLUSTER_PRIMARY), b = base(CLUSTER_SECONDARY);

	cut_all(&a);
	cut_all(&b);
	a.witness_reachable = false;
	EXPECT(&a, CLUSTER_R_QUORUM_LOST, CLUSTER_A_FREEZE_IO | DEG);
	a.local.io_frozen = true;
	EXPECT(&a, CLUSTER_R_QUORUM_LOST, DEG); /* stays frozen, nothing new */
	EXPECT(&b, CLUSTER_R_ASK_VOTE, CLUSTER_A_ASK_VOTE | DEG);
	b.vote = CLUSTER_VOTE_SELF;
	EXPECT(&b, CLUSTER_R_FAILOVER, CLUSTER_A_PROMOTE | DEG);
	/*
	 * on-quorum-loss demote: stop the group, then demote. Writes fail meanwhile rather than
	 * wait: held writes would keep the group's stop (a database's shutdown checkpoint, the
	 * unmount) from ever finishing.
	 */
	a = base(CLUSTER_PRIMARY);
	cut_all(&a);
	a.witness_reachable = false;
	a.policy.on_quorum_loss = CLUSTER_QL_DEMOTE;
	EXPECT(&a, CLUSTER_R_QUORUM_LOST, CLUSTER_A_FAIL_IO | CLUSTER_A_STOP_GROUP | DEG);
	a.local.io_frozen = a.local.io_failing = true;
	a.local.group = CLUSTER_GROUP_STOPPING;
	EXPECT(&a, CLUSTER_R_QUORUM_LOST, DEG);
	a.local.group = CLUSTER_GROUP_STOPPED;
	EXPECT(&a, CLUSTER_R_QUORUM_LOST, CLUSTER_A_DEMOTE | DEG);
	a.local.role = CLUSTER_SECONDARY; /* demoted: writes neither fail nor wait any more */
	EXPECT(&a, CLUSTER_R_NO_WITNESS, CLUSTER_A_UNFREEZE_IO | DEG);
	/* It first waited for the vote with writes held; the peer got it: the held ones fail. */
	a = base(CLUSTER_PRIMARY);
	cut_all(&a);
	a.policy.on_quorum_loss = CLUSTER_QL_DEMOTE;
	EXPECT(&a, CLUSTER_R_QUORUM_WAIT, CLUSTER_A_FREEZE_IO | CLUSTER_A_ASK_VOTE | DEG);
	a.local.io_frozen = true;
	a.vote = CLUSTER_VOTE_PEER;
	EXPECT(&a, CLUSTER_R_QUORUM_LOST, CLUSTER_A_FAIL_IO | CLUSTER_A_STOP_GROUP | DEG);
	/* The vote went to the peer while the witness is reachable: same policy. */
	a = base(CLUSTER_PRIMARY);
	cut_all(&a);
	a.vote = CLUSTER_VOTE_PEER;
	EXPECT(&a, CLUSTER_R_QUORUM_LOST, CLUSTER_A_FREEZE_IO | DEG);
}
END_TEST

START_TEST(healed_partition_both_primary)
{
	/* Only after a forced promotion or without quorum: the one that holds the vote keeps it. */
	struct cluster_in a = base(CLUSTER_PRIMARY), b = base(CLUSTER_PRIMARY);

	a.peer.role = b.peer.role = CLUSTER_PRIMARY;
	a.vote = CLUSTER_VOTE_SELF;
	b.vote = CLUSTER_VOTE_PEER;
	EXPECT(&a, CLUSTER_R_BOTH_PRIMARY, DEG);
	EXPECT(&b, CLUSTER_R_BOTH_PRIMARY, CLUSTER_A_FAIL_IO | CLUSTER_A_STOP_GROUP | DEG);
	b.local.io_frozen = b.local.io_failing = true;
	b.local.group = CLUSTER_GROUP_STOPPED;
	EXPECT(&b, CLUSTER_R_BOTH_PRIMARY, CLUSTER_A_DEMOTE | DEG);
	/* no witness, neither frozen: the preferred node keeps it */
	a = base(CLUSTER_PRIMARY);
	b = base(CLUSTER_PRIMARY);
	a.peer.role = b.peer.role = CLUSTER_PRIMARY;
	a.witness_reachable = b.witness_reachable = false;
	a.policy.preferred = true;
	EXPECT(&a, CLUSTER_R_BOTH_PRIMARY, DEG);
	EXPECT(&b, CLUSTER_R_BOTH_PRIMARY, CLUSTER_A_FAIL_IO | CLUSTER_A_STOP_GROUP | DEG);
	/*
	 * The old primary froze on quorum loss while the other was promoted and served: the
	 * frozen one yields even though it is the preferred node (its data is older).
	 */
	a.local.io_frozen = b.peer.io_frozen = true;
	EXPECT(&a, CLUSTER_R_BOTH_PRIMARY, CLUSTER_A_FAIL_IO | CLUSTER_A_STOP_GROUP | DEG);
	EXPECT(&b, CLUSTER_R_BOTH_PRIMARY, DEG);
}
END_TEST

START_TEST(disk_failure_on_primary)
{
	struct cluster_in a = base(CLUSTER_PRIMARY), b = base(CLUSTER_SECONDARY);

	a.local.disk = CLUSTER_DISK_FAILED;
	EXPECT(&a, CLUSTER_R_DISK_DETACH, CLUSTER_A_DETACH | DEG);
	a.local.disk = CLUSTER_DISK_DISKLESS; /* detached: serves through the peer */
	EXPECT(&a, CLUSTER_R_PRIMARY_SERVE, DEG);
	a.repl_connected = false; /* ... until that goes too: no data anywhere, freeze */
	EXPECT(&a, CLUSTER_R_DISKLESS_NO_SOURCE, CLUSTER_A_FREEZE_IO | DEG);

	a = base(CLUSTER_PRIMARY);
	a.policy.on_disk_failure = CLUSTER_DF_FAILOVER;
	a.local.disk = CLUSTER_DISK_FAILED;
	struct cluster_out o = EXPECT(&a, CLUSTER_R_HANDOVER, CLUSTER_A_STOP_GROUP | DEG);
	ck_assert(!o.eligible);
	a.local.group = CLUSTER_GROUP_STOPPED;
	EXPECT(&a, CLUSTER_R_HANDOVER, CLUSTER_A_DEMOTE | DEG);
	/* the peer sees a secondary with a failed disk and takes over */
	b.peer.role = CLUSTER_SECONDARY;
	b.peer.disk = CLUSTER_DISK_FAILED;
	b.peer.eligible = false;
	EXPECT(&b, CLUSTER_R_SECONDARY_TAKEOVER, CLUSTER_A_PROMOTE | DEG);
	/* failover policy, but the peer is not UpToDate: detach instead */
	a = base(CLUSTER_PRIMARY);
	a.policy.on_disk_failure = CLUSTER_DF_FAILOVER;
	a.local.disk = CLUSTER_DISK_FAILED;
	a.peer.disk = CLUSTER_DISK_INCONSISTENT;
	a.peer.eligible = false;
	EXPECT(&a, CLUSTER_R_DISK_DETACH, CLUSTER_A_DETACH | DEG);
}
END_TEST

START_TEST(planned_switchover_and_switchback)
{
	struct cluster_in a = base(CLUSTER_PRIMARY), b = base(CLUSTER_SECONDARY);
	struct cluster_out o;

	a.cmd = CLUSTER_CMD_SWITCHOVER_TO_PEER;
	o = EXPECT(&a, CLUSTER_R_HANDOVER, CLUSTER_A_STOP_GROUP);
	ck_assert(!o.cmd_done && !o.eligible);
	a.local.group = CLUSTER_GROUP_STOPPED;
	EXPECT(&a, CLUSTER_R_HANDOVER, CLUSTER_A_DEMOTE);
	a.local.role = CLUSTER_SECONDARY;
	a.peer.role = CLUSTER_SECONDARY;
	o = EXPECT(&a, CLUSTER_R_SECONDARY_WAIT, 0);
	ck_assert(!o.cmd_done && !o.eligible);
	/* B sees A secondary and not eligible: takes over even though A is the preferred node */
	a.policy.preferred = true;
	o = EXPECT(&a, CLUSTER_R_SECONDARY_WAIT, 0);
	b.peer.role = CLUSTER_SECONDARY;
	b.peer.eligible = o.eligible;
	EXPECT(&b, CLUSTER_R_SECONDARY_TAKEOVER, CLUSTER_A_PROMOTE);
	a.peer.role = CLUSTER_PRIMARY;
	o = EXPECT(&a, CLUSTER_R_CMD_DONE, 0);
	ck_assert(o.cmd_done && !o.cmd_refused);

	/* Manual switchback, asked on A (now secondary). */
	a = base(CLUSTER_SECONDARY);
	b = base(CLUSTER_PRIMARY);
	a.cmd = CLUSTER_CMD_SWITCHOVER_TO_SELF;
	o = EXPECT(&a, CLUSTER_R_SECONDARY_PEER_PRIMARY, 0);
	ck_assert(o.want_primary && !o.cmd_done);
	b.peer.want_primary = o.want_primary;
	b.peer.eligible = o.eligible;
	EXPECT(&b, CLUSTER_R_HANDOVER, CLUSTER_A_STOP_GROUP);
	b.local.group = CLUSTER_GROUP_STOPPED;
	EXPECT(&b, CLUSTER_R_HANDOVER, CLUSTER_A_DEMOTE);
	b.local.role = CLUSTER_SECONDARY;
	b.peer.role = CLUSTER_SECONDARY;
	o = EXPECT(&b, CLUSTER_R_SECONDARY_WAIT, 0);
	ck_assert(!o.eligible);
	a.peer.role = CLUSTER_SECONDARY;
	a.peer.eligible = o.eligible;
	EXPECT(&a, CLUSTER_R_SECONDARY_TAKEOVER, CLUSTER_A_PROMOTE);
	a.local.role = CLUSTER_PRIMARY;
	o = EXPECT(&a, CLUSTER_R_CMD_DONE, 0);
	ck_assert(o.cmd_done && !o.cmd_refused);
	/* Refused: the peer is down (failover-force is the tool), or this disk is Outdated. */
	a = base(CLUSTER_SECONDARY);
	a.cmd = CLUSTER_CMD_SWITCHOVER_TO_SELF;
	a.local.disk = CLUSTER_DISK_OUTDATED;
	EXPECT(&a, CLUSTER_R_CMD_REFUSED, DEG);
	cut_all(&a);
	EXPECT(&a, CLUSTER_R_CMD_REFUSED, DEG);
	/* switchover to a peer that is not eligible */
	b = base(CLUSTER_PRIMARY);
	b.cmd = CLUSTER_CMD_SWITCHOVER_TO_PEER;
	b.peer.eligible = false;
	o = EXPECT(&b, CLUSTER_R_CMD_REFUSED, 0);
	ck_assert(o.cmd_refused);
}
END_TEST

START_TEST(standby_and_force)
{
	struct cluster_in a = base(CLUSTER_PRIMARY);
	struct cluster_out o;

	a.cmd = CLUSTER_CMD_STANDBY;
	o = EXPECT(&a, CLUSTER_R_CMD_STANDBY, CLUSTER_A_SET_STANDBY);
	ck_assert(o.cmd_done);
	a.cmd = CLUSTER_CMD_NONE;
	a.local.standby = true;
	EXPECT(&a, CLUSTER_R_HANDOVER, CLUSTER_A_STOP_GROUP);
	a.peer.eligible = false; /* nobody to hand over to: the services stop all the same */
	EXPECT(&a, CLUSTER_R_CMD_STANDBY, CLUSTER_A_STOP_GROUP);
	a.local.group = CLUSTER_GROUP_STOPPED;
	EXPECT(&a, CLUSTER_R_CMD_STANDBY, CLUSTER_A_DEMOTE);
	a.local.group = CLUSTER_GROUP_RUNNING;
	a.cmd = CLUSTER_CMD_UNSTANDBY;
	EXPECT(&a, CLUSTER_R_CMD_UNSTANDBY, CLUSTER_A_CLEAR_STANDBY);

	struct cluster_in b = base(CLUSTER_SECONDARY);
	b.cmd = CLUSTER_CMD_FAILOVER_FORCE;
	o = EXPECT(&b, CLUSTER_R_CMD_FORCE_REFUSED, 0);
	ck_assert(o.cmd_refused);
	cut_all(&b);
	b.witness_reachable = false;
	b.local.disk = CLUSTER_DISK_OUTDATED;
	EXPECT(&b, CLUSTER_R_CMD_FORCE, CLUSTER_A_PROMOTE | DEG);
	b.local.disk = CLUSTER_DISK_DISKLESS;
	EXPECT(&b, CLUSTER_R_CMD_FORCE_REFUSED, DEG);
	/* a standby secondary does not fail over */
	b = base(CLUSTER_SECONDARY);
	cut_all(&b);
	b.vote = CLUSTER_VOTE_SELF;
	b.local.standby = true;
	EXPECT(&b, CLUSTER_R_NOT_ELIGIBLE, DEG);
}
END_TEST

START_TEST(quorum_disabled_needs_fence)
{
	struct cluster_in b = base(CLUSTER_SECONDARY);

	cut_all(&b);
	b.witness_reachable = false;
	b.policy.quorum_disabled = true;
	EXPECT(&b, CLUSTER_R_NO_FENCE, DEG);
	b.policy.fence_configured = true;
	EXPECT(&b, CLUSTER_R_FENCE, CLUSTER_A_FENCE | DEG);
	b.fence = CLUSTER_FENCE_RUNNING;
	EXPECT(&b, CLUSTER_R_FENCE_WAIT, DEG);
	b.fence = CLUSTER_FENCE_FAILED;
	EXPECT(&b, CLUSTER_R_FENCE_FAILED, DEG);
	b.fence = CLUSTER_FENCE_OK;
	EXPECT(&b, CLUSTER_R_FAILOVER, CLUSTER_A_PROMOTE | DEG);
	/* the primary keeps serving without a witness when quorum is disabled */
	struct cluster_in a = base(CLUSTER_PRIMARY);
	cut_all(&a);
	a.witness_reachable = false;
	a.policy.quorum_disabled = true;
	EXPECT(&a, CLUSTER_R_PRIMARY_SERVE, DEG);
}
END_TEST

START_TEST(startup_and_stop_failure)
{
	/* Both up, secondary, healthy: the preferred node promotes, the other waits. */
	struct cluster_in a = base(CLUSTER_SECONDARY), b = base(CLUSTER_SECONDARY);

	a.peer.role = b.peer.role = CLUSTER_SECONDARY;
	a.policy.preferred = true;
	EXPECT(&a, CLUSTER_R_SECONDARY_TAKEOVER, CLUSTER_A_PROMOTE);
	EXPECT(&b, CLUSTER_R_SECONDARY_WAIT, 0);
	a.repl_connected = false; /* not before the data is compared */
	EXPECT(&a, CLUSTER_R_SECONDARY_WAIT, DEG);
	/* A stop that failed on a primary that must step down: never demote. */
	struct cluster_in p = base(CLUSTER_PRIMARY);
	p.cmd = CLUSTER_CMD_SWITCHOVER_TO_PEER;
	p.local.group = CLUSTER_GROUP_STOP_FAILED;
	EXPECT(&p, CLUSTER_R_STOP_FAILED, DEG);
	p.cmd = CLUSTER_CMD_NONE;
	EXPECT(&p, CLUSTER_R_STOP_FAILED, DEG);
	/* a secondary left running its group stops it, and unfreezes */
	b = base(CLUSTER_SECONDARY);
	b.local.group = CLUSTER_GROUP_RUNNING;
	EXPECT(&b, CLUSTER_R_SECONDARY_STOP_GROUP, CLUSTER_A_STOP_GROUP);
	b.local.group = CLUSTER_GROUP_STOPPED;
	b.local.io_frozen = true;
	EXPECT(&b, CLUSTER_R_SECONDARY_PEER_PRIMARY, CLUSTER_A_UNFREEZE_IO);
	/* invalid inputs */
	b.n_paths = 0;
	EXPECT(&b, CLUSTER_R_INVALID, 0);
	b.n_paths = CLUSTER_MAX_PATHS + 1;
	EXPECT(&b, CLUSTER_R_INVALID, 0);
	b.n_paths = 2;
	b.local.group = CLUSTER_GROUP_COUNT;
	EXPECT(&b, CLUSTER_R_INVALID, 0);
}
END_TEST

START_TEST(names)
{
	char buf[256];

	ck_assert_str_eq(cluster_actions_format(0, buf, sizeof(buf)), "none");
	ck_assert_str_eq(
	    cluster_actions_format(CLUSTER_A_FREEZE_IO | CLUSTER_A_ASK_VOTE, buf, sizeof(buf)),
	    "freeze-io,ask-vote");
	ck_assert_str_eq(cluster_actions_format(~0u, buf, 10), "set-stand");
	for (unsigned i = 0; i < CLUSTER_R_COUNT; i++)
		ck_assert_str_ne(cluster_rule_name(i), "unknown");
	ck_assert_str_eq(cluster_rule_name(CLUSTER_R_COUNT), "unknown");
	ck_assert_str_eq(cluster_action_name(CLUSTER_A_PROMOTE), "promote");
	ck_assert_str_eq(cluster_action_name(CLUSTER_A_FAIL_IO), "fail-io");
	ck_assert_str_eq(cluster_action_name(3), "unknown");
	ck_assert_str_eq(cluster_disk_name(CLUSTER_DISK_UPTODATE), "UpToDate");
	ck_assert_str_eq(cluster_cmd_name(CLUSTER_CMD_COUNT), "unknown");
}
END_TEST

/* ---- the safety property ---- */

static bool serving_after(const struct cluster_in *in, const struct cluster_out *o)
{
	bool primary = (in->local.role == CLUSTER_PRIMARY && !(o->actions & CLUSTER_A_DEMOTE)) ||
	               (o->actions & CLUSTER_A_PROMOTE);
	bool frozen = (in->local.io_frozen && !(o->actions & CLUSTER_A_UNFREEZE_IO)) ||
	              (o->actions & (CLUSTER_A_FREEZE_IO | CLUSTER_A_FAIL_IO));
	return primary && !frozen;
}

/*
 * Every input of one node whose peer is silent on all paths (commands except failover-force,
 * which is the operator overriding exactly this): it serves writes afterwards only if it holds
 * the vote, or quorum is disabled and either it was primary already or the fence succeeded.
 */
START_TEST(property_partitioned_node_needs_vote)
{
	static const unsigned restarts[] = {0, 3}; /* below and at the limit */
	static const struct {
		bool reachable;
		enum cluster_vote vote;
	} witness[] = {{false, CLUSTER_VOTE_NONE},
	               {false, CLUSTER_VOTE_SELF},
	               {true, CLUSTER_VOTE_NONE},
	               {true, CLUSTER_VOTE_SELF},
	               {true, CLUSTER_VOTE_PEER}};
	unsigned long checked = 0, promoted = 0;
	struct cluster_in in = base(CLUSTER_SECONDARY);

	cut_all(&in);
	for (unsigned x = 0; x < 2u * CLUSTER_DISK_COUNT * 2 * CLUSTER_GROUP_COUNT * 2 * 2; x++) {
		unsigned v = x;
		in.local.role = v % 2 ? CLUSTER_PRIMARY : CLUSTER_SECONDARY, v /= 2;
		in.local.disk = v % CLUSTER_DISK_COUNT, v /= CLUSTER_DISK_COUNT;
		in.local.io_frozen = v % 2, v /= 2;
		in.local.group = v % CLUSTER_GROUP_COUNT, v /= CLUSTER_GROUP_COUNT;
		in.local.standby = v % 2, v /= 2;
		in.local.restarts = restarts[v % 2];
		for (unsigned y = 0; y < 5u * 5 * 5 * 2 * 2 * 2 * 2 * 2; y++) {
			unsigned w = y;
			in.cmd = w % 5, w /= 5; /* every command but failover-force */
			in.witness_reachable = witness[w % 5].reachable;
			in.vote = witness[w % 5].vote, w /= 5;
			/* quorum enabled, or disabled with each fence result */
			in.policy.quorum_disabled = w % 5 != 0;
			in.fence = w % 5 ? (enum cluster_fence)(w % 5 - 1) : CLUSTER_FENCE_NOT_RUN;
			in.policy.fence_configured = w % 5 != 1, w /= 5;
			in.policy.on_quorum_loss = w % 2, w /= 2;
			in.policy.on_disk_failure = w % 2, w /= 2;
			in.peer.role = w % 2, w /= 2;
			in.peer.eligible = w % 2, w /= 2;
			in.peer.want_primary = w % 2;
			struct cluster_out o;
			cluster_decide(&in, &o);
			checked++;
			promoted += (o.actions & CLUSTER_A_PROMOTE) != 0;
			if (!serving_after(&in, &o))
				continue;
			bool ok =
			    in.policy.quorum_disabled
			        ? in.local.role == CLUSTER_PRIMARY || in.fence == CLUSTER_FENCE_OK
			        : in.witness_reachable && in.vote == CLUSTER_VOTE_SELF;
			ck_assert_msg(
			    ok,
			    "case %u/%u: node serves while partitioned without vote/fence: "
			    "rule %s (%s)",
			    x, y, cluster_rule_name(o.rule), o.reason);
		}
	}
	ck_assert_uint_eq(checked, 576u * 4000u);
	ck_assert_uint_gt(promoted, 0); /* the property is not met by never promoting */
}
END_TEST

/* Two partitioned nodes and a witness, stepped together until nothing changes. */
struct sim_node {
	struct cluster_local l;
	enum cluster_quorum_loss ql;
	bool reachable;
};

static bool sim_serving(const struct sim_node *n)
{
	return n->l.role == CLUSTER_PRIMARY && !n->l.io_frozen;
}

static void sim_apply(struct sim_node *n, unsigned a)
{
	if (a & (CLUSTER_A_FREEZE_IO | CLUSTER_A_FAIL_IO))
		n->l.io_frozen = true;
	if (a & CLUSTER_A_FAIL_IO)
		n->l.io_failing = true;
	if (a & CLUSTER_A_DETACH)
		n->l.disk = CLUSTER_DISK_DISKLESS;
	if (a & CLUSTER_A_STOP_GROUP)
		n->l.group = CLUSTER_GROUP_STOPPED;
	if (a & CLUSTER_A_DEMOTE)
		n->l.role = CLUSTER_SECONDARY;
	if (a & CLUSTER_A_PROMOTE)
		n->l.role = CLUSTER_PRIMARY;
	if (a & CLUSTER_A_UNFREEZE_IO)
		n->l.io_frozen = n->l.io_failing = false;
	if (a & (CLUSTER_A_START_GROUP | CLUSTER_A_RESTART))
		n->l.group = CLUSTER_GROUP_RUNNING;
	if (a & CLUSTER_A_RESTART)
		n->l.restarts++;
}

/* Returns the number of nodes serving at the end; fails the test on a double primary. */
static int simulate(struct sim_node n[2], int holder, int first_asker, const char *start)
{
	struct cluster_in in[2];
	struct cluster_out o[2];
	struct sim_node peer_seen[2] = {n[1], n[0]}; /* last heartbeat before the cut */

	for (int step = 0; step < 6; step++) {
		for (int i = 0; i < 2; i++) {
			in[i] = base(n[i].l.role);
			cut_all(&in[i]);
			in[i].local = n[i].l;
			in[i].policy.on_quorum_loss = n[i].ql;
			in[i].witness_reachable = n[i].reachable;
			in[i].vote = holder < 0    ? CLUSTER_VOTE_NONE
			             : holder == i ? CLUSTER_VOTE_SELF
			                           : CLUSTER_VOTE_PEER;
			in[i].peer.role = peer_seen[i].l.role;
			in[i].peer.disk = peer_seen[i].l.disk;
			cluster_decide(&in[i], &o[i]);
		}
		for (int k = 0; k < 2; k++) {
			int i = k ? !first_asker : first_asker;
			if ((o[i].actions & CLUSTER_A_ASK_VOTE) && holder < 0 && n[i].reachable)
				holder = i;
		}
		sim_apply(&n[0], o[0].actions);
		sim_apply(&n[1], o[1].actions);
		ck_assert_msg(!(sim_serving(&n[0]) && sim_serving(&n[1])),
		              "from %s: both nodes serve after step %d (%s / %s)", start, step,
		              o[0].reason, o[1].reason);
	}
	return sim_serving(&n[0]) + sim_serving(&n[1]);
}

static void sim_node_from(unsigned v, struct sim_node *n)
{
	static const enum cluster_disk disks[] = {CLUSTER_DISK_UPTODATE, CLUSTER_DISK_OUTDATED,
	                                          CLUSTER_DISK_FAILED};
	static const enum cluster_group groups[] = {CLUSTER_GROUP_STOPPED, CLUSTER_GROUP_RUNNING,
	                                            CLUSTER_GROUP_FAILED,
	                                            CLUSTER_GROUP_STOP_FAILED};
	memset(n, 0, sizeof(*n));
	n->l.role = v % 2, v /= 2;
	n->l.disk = disks[v % 3], v /= 3;
	n->l.io_frozen = v % 2, v /= 2;
	n->l.group = groups[v % 4], v /= 4;
	n->ql = v % 2;
}

START_TEST(property_partition_never_two_primaries)
{
	unsigned runs = 0, ended_with_one = 0;

	for (unsigned a = 0; a < 96; a++) {
		for (unsigned b = 0; b < 96; b++) {
			for (unsigned w = 0; w < 4 * 3 * 2; w++) {
				struct sim_node n[2];
				char start[64];
				sim_node_from(a, &n[0]);
				sim_node_from(b, &n[1]);
				if (sim_serving(&n[0]) && sim_serving(&n[1]))
					continue; /* already broken before the cut */
				n[0].reachable = w % 2;
				n[1].reachable = w / 2 % 2;
				int holder = (int)(w / 4 % 3) - 1;
				snprintf(start, sizeof(start), "a=%u b=%u w=%u", a, b, w);
				int serving = simulate(n, holder, (int)(w / 12), start);
				runs++;
				ended_with_one += serving == 1;
			}
		}
	}
	ck_assert_uint_gt(runs, 200000);
	/* liveness: in many starts someone ends up serving (the property is not vacuous) */
	ck_assert_uint_gt(ended_with_one, runs / 10);
}
END_TEST

static Suite *cluster_suite(void)
{
	Suite *s = suite_create("cluster");
	TCase *tc = tcase_create("matrix");

	tcase_add_test(tc, primary_crash_fails_over);
	tcase_add_test(tc, secondary_never_promotes_without_uptodate_data);
	tcase_add_test(tc, database_crash_restarts_locally);
	tcase_add_test(tc, one_path_lost_is_degraded_only);
	tcase_add_test(tc, replication_link_loss_keeps_primary);
	tcase_add_test(tc, witness_loss_changes_nothing);
	tcase_add_test(tc, partition_witness_on_primary_side);
	tcase_add_test(tc, partition_witness_on_secondary_side);
	tcase_add_test(tc, healed_partition_both_primary);
	tcase_add_test(tc, disk_failure_on_primary);
	tcase_add_test(tc, planned_switchover_and_switchback);
	tcase_add_test(tc, standby_and_force);
	tcase_add_test(tc, quorum_disabled_needs_fence);
	tcase_add_test(tc, startup_and_stop_failure);
	tcase_add_test(tc, names);
	suite_add_tcase(s, tc);
	tc = tcase_create("property");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, property_partitioned_node_needs_vote);
	tcase_add_test(tc, property_partition_never_two_primaries);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(cluster_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
