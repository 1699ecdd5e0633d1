/* SPDX-License-Identifier: MIT */
/*
 * The cluster manager's decision: a pure function from what this node knows (heartbeat paths,
 * witness vote, fencing, its own and the peer's role and disk, the service group, an operator
 * command, the policy) to the next step it must take. No I/O, no clock, no globals, so the whole
 * failure matrix and the "never two primaries" property are table-tested.
 *
 * Caller contract (the daemon's loop):
 *  - call cluster_decide() after every change of an input; carry out the actions in the order
 *    of the bits below (lowest first) and call again when their effect is visible in the inputs.
 *    One call gives one step: "stop the group" and "demote" come in successive calls, because a
 *    stop is asynchronous and may fail;
 *  - keep an operator command pending (cluster_in.cmd) until a decision sets cmd_done; a
 *    primary that lost quorum handles no command until quorum is back (or it demoted);
 *  - advertise out.eligible and out.want_primary in the heartbeats; the peer's copies arrive in
 *    cluster_in.peer;
 *  - a vote counts only while the witness is reachable: the witness grants it to one node at a
 *    time and a node that cannot reach the witness cannot know whether it still holds it.
 */
#ifndef HAK_CLUSTER_H
#define HAK_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#define CLUSTER_MAX_PATHS  8u
#define CLUSTER_REASON_MAX 256u

enum cluster_role { CLUSTER_SECONDARY, CLUSTER_PRIMARY };

enum cluster_disk {
	CLUSTER_DISK_UPTODATE,
	CLUSTER_DISK_OUTDATED,
	CLUSTER_DISK_INCONSISTENT,
	CLUSTER_DISK_DISKLESS,
	CLUSTER_DISK_FAILED,
	CLUSTER_DISK_UNKNOWN, /* the peer was never heard */
	CLUSTER_DISK_COUNT
};

/* The local service group (mount, database, VIP ...) as the resource module reports it. */
enum cluster_group {
	CLUSTER_GROUP_STOPPED,
	CLUSTER_GROUP_STARTING,
	CLUSTER_GROUP_RUNNING,
	CLUSTER_GROUP_STOPPING,
	CLUSTER_GROUP_FAILED,      /* a resource's monitor or start failed; restartable */
	CLUSTER_GROUP_STOP_FAILED, /* a stop failed: the data may still be in use */
	CLUSTER_GROUP_COUNT
};

enum cluster_vote {
	CLUSTER_VOTE_NONE, /* nobody holds it (or the answer is pending) */
	CLUSTER_VOTE_SELF,
	CLUSTER_VOTE_PEER,
};

enum cluster_fence {
	CLUSTER_FENCE_NOT_RUN,
	CLUSTER_FENCE_RUNNING,
	CLUSTER_FENCE_OK, /* the hook says the peer is off: it cannot write any more */
	CLUSTER_FENCE_FAILED,
};

enum cluster_cmd {
	CLUSTER_CMD_NONE,
	CLUSTER_CMD_SWITCHOVER_TO_PEER, /* planned: hand the primary role over */
	CLUSTER_CMD_SWITCHOVER_TO_SELF, /* planned: ask the peer to hand it over (switchback) */
	CLUSTER_CMD_STANDBY,            /* this node must not be primary (persistent flag) */
	CLUSTER_CMD_UNSTANDBY,
	CLUSTER_CMD_FAILOVER_FORCE, /* promote without vote, fence or UpToDate: operator's risk */
	CLUSTER_CMD_COUNT
};

enum cluster_quorum_loss { CLUSTER_QL_FREEZE, CLUSTER_QL_DEMOTE };
enum cluster_disk_policy { CLUSTER_DF_DETACH, CLUSTER_DF_FAILOVER };

/* Actions, in the order the daemon carries them out. */
#define CLUSTER_A_SET_STANDBY   (1u << 0)
#define CLUSTER_A_CLEAR_STANDBY (1u << 1)
#define CLUSTER_A_FREEZE_IO     (1u << 2) /* hold new writes; in-flight ones complete */
/* writes fail with EIO: the held ones, new ones, and in-flight ones the peer never confirmed */
#define CLUSTER_A_FAIL_IO     (1u << 3)
#define CLUSTER_A_ASK_VOTE    (1u << 4)
#define CLUSTER_A_FENCE       (1u << 5) /* run the fence hook against the peer */
#define CLUSTER_A_DETACH      (1u << 6) /* drop the failed backing disk, serve via the peer */
#define CLUSTER_A_STOP_GROUP  (1u << 7)
#define CLUSTER_A_DEMOTE      (1u << 8)
#define CLUSTER_A_PROMOTE     (1u << 9)
#define CLUSTER_A_UNFREEZE_IO (1u << 10) /* ends FREEZE_IO and FAIL_IO */
#define CLUSTER_A_START_GROUP (1u << 11)
#define CLUSTER_A_RESTART     (1u << 12) /* restart the failed resources of the group */
#define CLUSTER_A_SEND_GARP   (1u << 13) /* re-announce the VIPs (peer came back) */
#define CLUSTER_A_DEGRADED    (1u << 14) /* not an act: status shows "degraded" */
#define CLUSTER_A_COUNT       15u

/* What this node knows of the peer: its last heartbeat. */
struct cluster_peer {
	enum cluster_role role;
	enum cluster_disk disk;
	bool eligible;     /* it could and would take the primary role (its out.eligible) */
	bool want_primary; /* an operator asked it to become primary (its out.want_primary) */
	bool io_frozen;    /* it holds writes (HB_F_IO_FROZEN) */
};

struct cluster_local {
	enum cluster_role role;
	enum cluster_disk disk;
	bool standby;    /* operator standby, persistent */
	bool io_frozen;  /* writes are held (or failed: io_failing) */
	bool io_failing; /* writes fail with EIO (FAIL_IO) */
	enum cluster_group group;
	unsigned restarts; /* local restarts of the group in the policy's window */
};

struct cluster_policy {
	enum cluster_quorum_loss on_quorum_loss; /* default freeze */
	enum cluster_disk_policy on_disk_failure;
	unsigned restart_limit; /* restarts in the window before the group moves; default 3 */
	bool quorum_disabled;   /* no witness: a successful fence hook replaces the vote */
	bool fence_configured;
	bool preferred; /* wins when both nodes could become primary and neither is */
};

struct cluster_in {
	unsigned n_paths;                   /* 1..CLUSTER_MAX_PATHS */
	bool path_alive[CLUSTER_MAX_PATHS]; /* the peer was heard within deadtime on path i */
	bool peer_returned;                 /* heard again after being dead on all paths */
	bool repl_connected;                /* the replication connection is up */
	bool witness_reachable;
	enum cluster_vote vote;   /* meaningful only when witness_reachable */
	enum cluster_fence fence; /* of the current peer loss */
	struct cluster_local local;
	struct cluster_peer peer;
	enum cluster_cmd cmd;
	struct cluster_policy policy;
};

/* Which rule decided, for tests, logs and `hakctl status`. */
enum cluster_rule {
	CLUSTER_R_INVALID,
	CLUSTER_R_CMD_STANDBY,
	CLUSTER_R_CMD_UNSTANDBY,
	CLUSTER_R_CMD_FORCE,
	CLUSTER_R_CMD_FORCE_REFUSED,
	CLUSTER_R_CMD_DONE,
	CLUSTER_R_CMD_REFUSED,
	CLUSTER_R_BOTH_PRIMARY,
	CLUSTER_R_HANDOVER,    /* primary giving the role to the peer, step by step */
	CLUSTER_R_STOP_FAILED, /* primary whose stop failed stays, never demotes */
	CLUSTER_R_DISK_DETACH,
	CLUSTER_R_DISKLESS_NO_SOURCE, /* diskless primary without an UpToDate peer: freeze */
	CLUSTER_R_QUORUM_WAIT,        /* peer dead, vote not yet answered: freeze and ask */
	CLUSTER_R_QUORUM_LOST,
	CLUSTER_R_PRIMARY_RESTART,
	CLUSTER_R_PRIMARY_GROUP_LOST, /* restart limit reached, nobody can take over */
	CLUSTER_R_PRIMARY_SERVE,
	CLUSTER_R_SECONDARY_STOP_GROUP,
	CLUSTER_R_SECONDARY_PEER_PRIMARY,
	CLUSTER_R_SECONDARY_TAKEOVER, /* peer alive but cannot or will not be primary */
	CLUSTER_R_SECONDARY_WAIT,
	CLUSTER_R_NOT_ELIGIBLE,
	CLUSTER_R_FENCE,
	CLUSTER_R_FENCE_WAIT,
	CLUSTER_R_FENCE_FAILED,
	CLUSTER_R_NO_FENCE,
	CLUSTER_R_FAILOVER,
	CLUSTER_R_ASK_VOTE,
	CLUSTER_R_PEER_HOLDS_VOTE,
	CLUSTER_R_NO_WITNESS,
	CLUSTER_R_COUNT
};

struct cluster_out {
	unsigned actions; /* CLUSTER_A_* */
	enum cluster_rule rule;
	bool cmd_done;     /* the pending command is finished (done or refused) */
	bool cmd_refused;  /* ... refused; reason says why */
	bool eligible;     /* advertise: this node could and would take the primary role */
	bool want_primary; /* advertise: an operator asked this node to become primary */
	char reason[CLUSTER_REASON_MAX]; /* one sentence with the values that decided */
};

/* Decide the next step. Always fills *out (rule CLUSTER_R_INVALID for impossible inputs). */
void cluster_decide(const struct cluster_in *in, struct cluster_out *out);

/* Names for logs and status: "promote", "switchover-to-peer", "UpToDate" ...; "unknown". */
const char *cluster_rule_name(enum cluster_rule r);
const char *cluster_action_name(unsigned bit);
const char *cluster_disk_name(enum cluster_disk d);
const char *cluster_cmd_name(enum cluster_cmd c);
/* "freeze-io,ask-vote" into buf (always terminated); "none" for 0. Returns buf. */
const char *cluster_actions_format(unsigned actions, char *buf, size_t len);

#endif
