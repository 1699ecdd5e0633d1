/* SPDX-License-Identifier: MIT */
/*
 * The cluster manager at run time: heartbeats and the witness client feed cluster_decide() (the
 * pure decision, cluster.h) with what this node knows, and the actions it returns are carried out
 * here: promote, demote, start and stop the service group, freeze writes, ask for the vote, fence
 * the peer, standby. It manages every replicated volume of the node as one: the node's role is
 * primary while any of them is, its disk the worst of theirs, and a promotion promotes all of
 * them or none; the service group that holds the first volume runs on top.
 */
#ifndef HAK_CLUSTERD_H
#define HAK_CLUSTERD_H

#include <jansson.h>
#include <stdbool.h>

struct ev_loop;
struct control;
struct hak_config;
struct hak_node_cfg;
struct repl;
struct volume;
struct groupctl;
struct nbd_server;
struct clusterd;

struct clusterd_params {
	struct ev_loop *loop;
	const struct hak_config *cfg;
	const struct hak_node_cfg *self, *peer;
	/* the replicated volumes, in the configuration's order (bit i of the heartbeat's stale
	 * mask is vols[i]); 1..CONFIG_MAX_CLUSTER_VOLUMES */
	struct repl **repls;
	struct volume **vols;
	struct nbd_server **srvs;
	size_t n;
	struct groupctl *groups;
	struct control *ctl;
};

/* Start heartbeats, the witness client and the decisions. 0, or -1 with a sentence in err. */
int clusterd_start(const struct clusterd_params *p, struct clusterd **out, char *err,
                   size_t errlen);
/* Something changed (a role, a group): decide again soon, from the loop. cd may be NULL. */
void clusterd_kick(struct clusterd *cd);
/*
 * Joined: the heartbeat thread runs and has sent its first round, so the peer hears this node
 * (what systemd's READY waits for). True when cd is NULL (no cluster: nothing to join).
 */
bool clusterd_joined(const struct clusterd *cd);
/* One line for systemd's STATUS: "joining", or "joined, peer alive|silent[, standby]". */
void clusterd_summary(const struct clusterd *cd, char *out, size_t len);
/* The "cluster" object of the status; NULL when there is none. */
json_t *clusterd_status_json(const struct clusterd *cd);
void clusterd_stop(struct clusterd *cd);

#endif
