/* SPDX-License-Identifier: MIT */
/*
 * The cluster manager's runtime: inputs from heartbeats, the witness client, replication, the
 * service group and operator commands; one cluster_decide() step whenever one of them changes
 * (and every 100 ms as a safety net); the actions carried out in bit order. See clusterd.h.
 */
#include "clusterd.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "conf/config.h"
#include "ctl/control.h"
#include "ctl/events.h"
#include "group.h"
#include "groupctl.h"
#include "heartbeat.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "nbd/nbd.h"
#include "lib/proc.h"
#include "repl/repl.h"
#include "volume/volume.h"
#include "witness.h"

#define CLUSTERD_TICK      0.1  /* seconds: the safety-net decision interval */
#define CLUSTERD_FENCE_MAX 60.0 /* seconds a fence hook may run */

struct clusterd {
	struct clusterd_params p;
	struct hb_config hbc;
	struct hb *hb;
	struct wit_client *wit;
	struct group *group;
	struct cluster_policy policy;
	ev_timer tick, kick;
	ev_timer drill;       /* a drill's crash, armed by cmd_drill */
	enum cluster_cmd cmd; /* pending operator command */
	bool standby;
	char standby_path[512];
	enum cluster_fence fence;
	struct proc *fence_proc;
	enum cluster_fence stonith; /* the fence hook run for a primary's frozen writes */
	struct proc *stonith_proc;
	bool want_vote;
	bool peer_was_dead; /* for peer_returned */
	bool peer_dead;     /* silent on every path, as of the last decision */
	struct cluster_out last;
	char last_fail[CLUSTER_REASON_MAX]; /* the last failed action, logged once */
	uint64_t decisions, changes;
	uint64_t promotions; /* promote_all calls that made this node primary (the metrics) */
	double started;      /* ev_now at start */
};

void clusterd_kick(struct clusterd *cd)
{
	if (cd && !ev_is_active(&cd->kick))
		ev_timer_start(cd->p.loop, &cd->kick);
}

static void notify_cb(void *arg)
{
	clusterd_kick(arg);
}

/*
 * The node's volumes seen as one, for the decision and the heartbeat. Primary while any volume
 * is, so the peer never promotes next to a half-promoted node; the worst disk (the cluster_disk
 * order is best to worst), so it is eligible only when every volume is UpToDate; connected only
 * when every link is.
 */
static bool any_primary(const struct clusterd *cd)
{
	for (size_t i = 0; i < cd->p.n; i++)
		if (repl_role(cd->p.repls[i]) == ROLE_PRIMARY)
			return true;
	return false;
}

static enum cluster_disk worst_disk(const struct clusterd *cd)
{
	enum repl_disk d = DISK_UPTODATE;

	for (size_t i = 0; i < cd->p.n; i++)
		if (repl_disk_state(cd->p.repls[i]) > d)
			d = repl_disk_state(cd->p.repls[i]);
	return (enum cluster_disk)d;
}

static bool all_connected(const struct clusterd *cd)
{
	for (size_t i = 0; i < cd->p.n; i++)
		if (repl_link_state(cd->p.repls[i]) < LINK_CONNECTED)
			return false;
	return true;
}

/* Bit i: volume i is not UpToDate (the heartbeat's stale mask). */
static uint16_t stale_mask(const struct clusterd *cd)
{
	uint16_t m = 0;

	for (size_t i = 0; i < cd->p.n; i++)
		if (repl_disk_state(cd->p.repls[i]) != DISK_UPTODATE)
			m |= (uint16_t)(1u << i);
	return m;
}

static bool any_fencing(const struct clusterd *cd)
{
	for (size_t i = 0; i < cd->p.n; i++)
		if (repl_fencing(cd->p.repls[i]))
			return true;
	return false;
}

/* Writes held on some volume: frozen by the cluster manager or parked by a fence. */
static bool any_frozen(const struct clusterd *cd)
{
	for (size_t i = 0; i < cd->p.n; i++)
		if (volume_frozen(cd->p.vols[i]) || volume_fencing(cd->p.vols[i]))
			return true;
	return false;
}

static bool any_failing(const struct clusterd *cd)
{
	for (size_t i = 0; i < cd->p.n; i++)
		if (volume_failing(cd->p.vols[i]))
			return true;
	return false;
}

/* The longest fence-timeout of the fenced volumes: what the fence hook may take. */
static double fence_timeout(const struct clusterd *cd)
{
	double t = 0;

	for (size_t i = 0; i < cd->p.n; i++)
		if (volume_cfg(cd->p.vols[i])->fencing != HAK_FENCING_NONE &&
		    volume_cfg(cd->p.vols[i])->fence_timeout > t)
			t = volume_cfg(cd->p.vols[i])->fence_timeout;
	return t > 0 ? t : CLUSTERD_FENCE_MAX;
}

static enum cluster_group map_group(const struct group *g)
{
	switch (g ? group_state(g) : GROUP_STOPPED) {
	case GROUP_STARTING:
	case GROUP_RESTARTING:
		return CLUSTER_GROUP_STARTING;
	case GROUP_STARTED:
		return CLUSTER_GROUP_RUNNING;
	case GROUP_STOPPING:
		return CLUSTER_GROUP_STOPPING;
	case GROUP_FAILED:
		return CLUSTER_GROUP_FAILED;
	case GROUP_BLOCKED:
		return CLUSTER_GROUP_STOP_FAILED;
	default:
		return CLUSTER_GROUP_STOPPED;
	}
}

static void build_in(struct clusterd *cd, struct cluster_in *in)
{
	struct hb_snapshot s;
	struct wit_client_state w;

	memset(in, 0, sizeof(*in));
	hb_snapshot(cd->hb, &s);
	wit_client_state(cd->wit, &w);
	in->n_paths = s.n_paths;
	for (unsigned i = 0; i < s.n_paths && i < CLUSTER_MAX_PATHS; i++)
		in->path_alive[i] = s.paths[i].alive;
	in->peer_returned = cd->peer_was_dead && s.peer_alive;
	cd->peer_dead = s.peer_known && !s.peer_alive;
	in->repl_connected = all_connected(cd);
	in->witness_reachable = w.reachable;
	in->vote = w.holds                                      ? CLUSTER_VOTE_SELF
	           : w.reachable && w.holder == cd->hbc.peer_id ? CLUSTER_VOTE_PEER
	                                                        : CLUSTER_VOTE_NONE;
	in->fence = cd->fence;
	in->local.role = any_primary(cd) ? CLUSTER_PRIMARY : CLUSTER_SECONDARY;
	in->local.disk = worst_disk(cd);
	in->local.standby = cd->standby;
	in->local.io_frozen = false;
	for (size_t i = 0; i < cd->p.n; i++)
		in->local.io_frozen |= volume_frozen(cd->p.vols[i]);
	in->local.io_failing = any_failing(cd);
	in->local.group = map_group(cd->group);
	/* group.c restarts in place by itself; FAILED means its restarts are used up */
	in->local.restarts = in->local.group == CLUSTER_GROUP_FAILED ? 1 : 0;
	if (s.peer_known) {
		in->peer.role = s.peer.role;
		in->peer.disk = s.peer.disk;
		in->peer.eligible = s.peer.flags & HB_F_ELIGIBLE;
		in->peer.want_primary = s.peer.flags & HB_F_WANT_PRIMARY;
		in->peer.io_frozen = s.peer.flags & HB_F_IO_FROZEN;
	} else {
		in->peer.disk = CLUSTER_DISK_UNKNOWN;
	}
	in->cmd = cd->cmd;
	in->policy = cd->policy;
	if (s.peer_alive) {
		cd->peer_was_dead = false;
		/* The pair hears itself again: give the vote back, but not while both are primary
		 * (a healed partition): the vote decides which one yields, and once given back
		 * neither holds it, so both would. */
		if (!(in->local.role == CLUSTER_PRIMARY && s.peer_known && s.peer.role))
			cd->want_vote = false;
		cd->fence = CLUSTER_FENCE_NOT_RUN;
	} else if (s.peer_known) {
		cd->peer_was_dead = true;
	}
}

static void fail_once(struct clusterd *cd, const char *what, const char *err)
{
	char msg[CLUSTER_REASON_MAX];

	snprintf(msg, sizeof(msg), "%s: %s", what, err);
	if (strcmp(msg, cd->last_fail) == 0)
		return;
	snprintf(cd->last_fail, sizeof(cd->last_fail), "%s", msg);
	log_err("Cluster manager: %s failed: %s", what, err);
	events_emit("cluster-action", "action:%s result:failed", what);
}

static void set_standby(struct clusterd *cd, bool on)
{
	int fd;

	cd->standby = on;
	if (on && (fd = open(cd->standby_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0) {
		if (fsync(fd) < 0)
			log_warn("Cannot sync the standby flag %s: %s.", cd->standby_path,
			         strerror(errno));
		close(fd);
	} else if (on) {
		log_err("Cannot persist the standby flag in %s: %s; it holds until the next "
		        "restart only.",
		        cd->standby_path, strerror(errno));
	} else if (unlink(cd->standby_path) < 0 && errno != ENOENT) {
		log_err("Cannot remove the standby flag %s: %s.", cd->standby_path,
		        strerror(errno));
	}
}

static void fence_done(void *ctx, const struct proc_result *res)
{
	struct clusterd *cd = ctx;
	char d[128];

	cd->fence_proc = NULL;
	proc_describe(res, CLUSTERD_FENCE_MAX, d, sizeof(d));
	cd->fence = res->exited && res->code == 0 ? CLUSTER_FENCE_OK : CLUSTER_FENCE_FAILED;
	log_notice("Cluster manager: the fence hook against %s ended with %s: the peer is %s.",
	           cd->p.peer->name, d, cd->fence == CLUSTER_FENCE_OK ? "fenced" : "NOT fenced");
	events_emit("cluster-fence", "peer:%s result:%s", cd->p.peer->name,
	            cd->fence == CLUSTER_FENCE_OK ? "ok" : "failed");
	clusterd_kick(cd);
}

static void run_fence(struct clusterd *cd)
{
	char env[128];
	char *envp[] = {env, NULL};

	if (cd->fence_proc || cd->fence != CLUSTER_FENCE_NOT_RUN)
		return;
	snprintf(env, sizeof(env), "HAK_PEER=%s", cd->p.peer->name);
	if (proc_run_shell(cd->p.loop, cd->p.cfg->cluster.fence_hook, envp, CLUSTERD_FENCE_MAX,
	                   fence_done, cd, &cd->fence_proc) < 0) {
		cd->fence = CLUSTER_FENCE_FAILED;
		fail_once(cd, "fence", strerror(errno));
		return;
	}
	cd->fence = CLUSTER_FENCE_RUNNING;
}

static void stonith_done(void *ctx, const struct proc_result *res)
{
	struct clusterd *cd = ctx;
	char d[128];

	cd->stonith_proc = NULL;
	proc_describe(res, fence_timeout(cd), d, sizeof(d));
	cd->stonith = res->exited && res->code == 0 ? CLUSTER_FENCE_OK : CLUSTER_FENCE_FAILED;
	log_notice("Cluster manager: the fence hook run for the frozen writes against %s: %s; "
	           "the peer is %s.",
	           cd->p.peer->name, d, cd->stonith == CLUSTER_FENCE_OK ? "fenced" : "NOT fenced");
	events_emit("cluster-fence", "peer:%s result:%s for:frozen-writes", cd->p.peer->name,
	            cd->stonith == CLUSTER_FENCE_OK ? "ok" : "failed");
	clusterd_kick(cd);
}

/* resource-and-stonith, or no witness to outdate a dead peer: the fence hook must power the
 * peer off before the frozen writes may resume. */
static void run_stonith(struct clusterd *cd)
{
	char env[128], tmo[64];
	char *envp[] = {env, tmo, NULL};

	if (cd->stonith_proc || cd->stonith != CLUSTER_FENCE_NOT_RUN ||
	    !cd->p.cfg->cluster.fence_hook)
		return;
	snprintf(env, sizeof(env), "HAK_PEER=%s", cd->p.peer->name);
	snprintf(tmo, sizeof(tmo), "HAK_FENCE_TIMEOUT=%.0f", fence_timeout(cd));
	log_warn("Cluster manager: running the fence hook against %s: writes stay frozen until it "
	         "succeeds.",
	         cd->p.peer->name);
	if (proc_run_shell(cd->p.loop, cd->p.cfg->cluster.fence_hook, envp, fence_timeout(cd),
	                   stonith_done, cd, &cd->stonith_proc) < 0) {
		cd->stonith = CLUSTER_FENCE_FAILED;
		fail_once(cd, "fence", strerror(errno));
		return;
	}
	cd->stonith = CLUSTER_FENCE_RUNNING;
}

/*
 * Fencing, both halves (repl/fence.c has the why), volume by volume. A secondary volume with an
 * UpToDate disk and no replication connection is marked Outdated when the witness records this
 * node so, or when the primary asks over the heartbeats. A primary volume whose writes are
 * frozen is confirmed by the first of: the peer is connected and in sync again, the fence hook
 * (resource-and-stonith, or a silent peer and no witness to ask), the peer's heartbeat showing
 * that volume's bit in its stale mask, the witness's record. The witness and the heartbeat flag
 * speak for the node, not a volume: the node asks while any volume is frozen, and the witness
 * forgets its mark once every volume of the peer is connected and UpToDate again.
 */
static void fence_volume(struct clusterd *cd, size_t i, const struct hb_snapshot *s,
                         const struct wit_client_state *w)
{
	struct repl *r = cd->p.repls[i];
	bool hb_asks = s->peer_alive && s->peer_known && s->peer.role == CLUSTER_PRIMARY &&
	               (s->peer.flags & HB_F_OUTDATE_PEER);
	bool stonith = volume_cfg(cd->p.vols[i])->fencing == HAK_FENCING_STONITH ||
	               (!s->peer_alive && !w->configured);

	/* Connected, the secondary gets every write: a mark still at the witness is from before
	 * the resync that made it current, and the primary clears it (PEER_CURRENT below). */
	if (repl_role(r) != ROLE_PRIMARY && repl_disk_state(r) == DISK_UPTODATE &&
	    repl_link_state(r) < LINK_CONNECTED) {
		if (w->outdated)
			repl_outdate(r, "the witness records this node as Outdated");
		else if (hb_asks)
			repl_outdate(r,
			             "the primary lost the replication connection and asked over "
			             "the heartbeat paths");
	}
	if (!repl_fencing(r))
		return;
	if (repl_peer_serves(r)) {
		/* back and resynced: the peer holds every parked write now */
		repl_fence_confirm(r, "is connected and in sync again");
	} else if (stonith) {
		run_stonith(cd);
		if (cd->stonith == CLUSTER_FENCE_OK)
			repl_fence_confirm(r, "was powered off by the fence hook");
	} else if (s->peer_alive && s->peer_known && i < 16 && (s->peer.stale & (1u << i))) {
		repl_fence_confirm(r, s->peer.disk == CLUSTER_DISK_OUTDATED
		                          ? "marked itself Outdated (heartbeat)"
		                          : "is not UpToDate (heartbeat)");
	} else if (w->peer_outdated) {
		repl_fence_confirm(r, "is recorded Outdated by the witness");
	}
}

static void fence_step(struct clusterd *cd, const struct hb_snapshot *s,
                       const struct wit_client_state *w)
{
	bool all_served = true;

	for (size_t i = 0; i < cd->p.n; i++) {
		fence_volume(cd, i, s, w);
		all_served &= repl_peer_serves(cd->p.repls[i]);
	}
	if (!any_fencing(cd) && !cd->stonith_proc)
		cd->stonith = CLUSTER_FENCE_NOT_RUN;
	/* Asked only while the witness answers: a request that arrives when the replies do not (a
	 * one-way loss) would outdate the peer for nothing, as this node can never learn it and
	 * steps down, and leave neither node able to take over. */
	wit_client_peer(cd->wit, any_fencing(cd) && w->reachable,
	                !any_fencing(cd) && all_served && w->peer_outdated);
}

/*
 * Promote every volume that is not primary yet, or none: each is checked first (a resync
 * target, or a disk not UpToDate without force, would be refused), so a refusal leaves no volume
 * promoted with a generation of its own that the peer would later call a split brain. A failure
 * after the checks (a metadata write) demotes the ones this call promoted.
 */
static int promote_all(struct clusterd *cd, bool force, char *err, size_t errlen)
{
	bool done[CONFIG_MAX_CLUSTER_VOLUMES] = {false}, promoted = false;
	char why[256];
	size_t i;
	int rc = 0;

	for (i = 0; i < cd->p.n; i++) {
		struct repl *r = cd->p.repls[i];
		if (repl_role(r) == ROLE_PRIMARY)
			continue;
		if (repl_link_state(r) == LINK_SYNC_TARGET ||
		    (!force && repl_disk_state(r) != DISK_UPTODATE)) {
			snprintf(err, errlen,
			         "volume %s is %s and %s, so none of the %zu volumes was promoted",
			         volume_name(cd->p.vols[i]), repl_disk_name(repl_disk_state(r)),
			         repl_link_name(repl_link_state(r)), cd->p.n);
			return -1;
		}
	}
	for (i = 0; i < cd->p.n && rc == 0; i++) {
		struct repl *r = cd->p.repls[i];
		if (repl_role(r) == ROLE_PRIMARY)
			continue;
		promoted = true;
		/* A dead peer's TCP connection lingers until the ping timeout (no RST comes from
		 * a powered-off machine); the heartbeats, the replication path's included, already
		 * say it is gone. */
		if (cd->peer_dead)
			repl_peer_dead(r, "the cluster manager found the peer silent on every "
			                  "heartbeat path");
		rc = repl_promote(r, force, err, errlen);
		done[i] = rc == 0;
	}
	if (rc == 0) {
		cd->promotions += promoted;
		return 0;
	}
	for (size_t k = 0; k < cd->p.n; k++)
		if (done[k] && repl_demote(cd->p.repls[k], false, why, sizeof(why)) < 0)
			log_err(
			    "Cluster manager: volume %s stays primary after the failed promotion "
			    "of the others: %s",
			    volume_name(cd->p.vols[k]), why);
	return -1;
}

/* Demote every primary volume; the first refusal is the error, the others are still tried. */
static int demote_all(struct clusterd *cd, char *err, size_t errlen)
{
	struct nbd_server_stats ns;
	char why[512];
	int rc = 0;

	for (size_t i = 0; i < cd->p.n; i++) {
		if (repl_role(cd->p.repls[i]) != ROLE_PRIMARY)
			continue;
		nbd_server_stats(cd->p.srvs[i], &ns);
		if (repl_demote(cd->p.repls[i], ns.clients > 0, why, sizeof(why)) < 0 && rc == 0) {
			snprintf(err, errlen, "%s", why);
			rc = -1;
		}
	}
	return rc;
}

/* One action bit. */
static void act(struct clusterd *cd, unsigned bit, enum cluster_rule rule)
{
	char err[512] = "";
	int rc = 0;

	switch (bit) {
	case CLUSTER_A_SET_STANDBY:
	case CLUSTER_A_CLEAR_STANDBY:
		set_standby(cd, bit == CLUSTER_A_SET_STANDBY);
		break;
	case CLUSTER_A_FREEZE_IO:
	case CLUSTER_A_UNFREEZE_IO:
		for (size_t i = 0; i < cd->p.n; i++)
			volume_freeze(cd->p.vols[i], bit == CLUSTER_A_FREEZE_IO);
		break;
	case CLUSTER_A_FAIL_IO:
		for (size_t i = 0; i < cd->p.n; i++) {
			volume_fail_writes(cd->p.vols[i]);
			log_warn(
			    "Cluster manager: writes to volume %s now fail with EIO until this "
			    "node has stepped down.",
			    volume_name(cd->p.vols[i]));
		}
		break;
	case CLUSTER_A_ASK_VOTE:
		cd->want_vote = true;
		break;
	case CLUSTER_A_FENCE:
		run_fence(cd);
		break;
	case CLUSTER_A_DETACH:
		for (size_t i = 0; i < cd->p.n; i++)
			if (repl_disk_state(cd->p.repls[i]) == DISK_FAILED &&
			    !volume_diskless(cd->p.vols[i]) &&
			    volume_detach(cd->p.vols[i], 0,
			                  "the cluster manager detached the failed disk") < 0) {
				snprintf(err, sizeof(err), "volume %s: %s",
				         volume_name(cd->p.vols[i]), strerror(errno));
				rc = -1;
			}
		break;
	case CLUSTER_A_STOP_GROUP:
		if (cd->group)
			rc = group_stop(cd->group, err, sizeof(err));
		break;
	case CLUSTER_A_DEMOTE:
		rc = demote_all(cd, err, sizeof(err));
		break;
	case CLUSTER_A_PROMOTE:
		rc = promote_all(cd, rule == CLUSTER_R_CMD_FORCE, err, sizeof(err));
		break;
	case CLUSTER_A_START_GROUP:
	case CLUSTER_A_RESTART:
		/* the node counts as primary while any volume is: the group needs all of them */
		rc = promote_all(cd, false, err, sizeof(err));
		if (rc == 0 && cd->group)
			rc = group_start(cd->group, err, sizeof(err));
		break;
	case CLUSTER_A_SEND_GARP:
		log_info("Cluster manager: the peer is back; %d virtual IPs announced again.",
		         group_announce(cd->group));
		break;
	default:
		break;
	}
	if (rc < 0)
		fail_once(cd, cluster_action_name(bit), err);
}

static uint16_t local_flags(const struct clusterd *cd, const struct cluster_out *o)
{
	return (uint16_t)((o->eligible ? HB_F_ELIGIBLE : 0) |
	                  (o->want_primary ? HB_F_WANT_PRIMARY : 0) |
	                  (any_frozen(cd) ? HB_F_IO_FROZEN : 0) | (cd->standby ? HB_F_STANDBY : 0) |
	                  (any_fencing(cd) ? HB_F_OUTDATE_PEER : 0));
}

static void decide(struct clusterd *cd)
{
	struct cluster_in in;
	struct cluster_out o;
	struct hb_snapshot hs;
	struct wit_client_state ws;
	char acts[256];

	build_in(cd, &in);
	/* Like heartbeat's initdead: a peer not heard yet right after the start is not dead, it
	 * may be starting too; deciding now could promote next to a primary just booting. */
	if (in.peer.disk == CLUSTER_DISK_UNKNOWN &&
	    ev_now(cd->p.loop) - cd->started < 2 * cd->hbc.deadtime)
		return;
	cluster_decide(&in, &o);
	cd->decisions++;
	if (o.rule != cd->last.rule || o.actions != cd->last.actions ||
	    strcmp(o.reason, cd->last.reason) != 0) {
		cd->changes++;
		cluster_actions_format(o.actions, acts, sizeof(acts));
		if (o.actions & ~CLUSTER_A_DEGRADED || o.rule != cd->last.rule)
			log_notice("Cluster manager: rule %s, actions %s: %s",
			           cluster_rule_name(o.rule), acts, o.reason);
		events_emit("cluster", "rule:%s actions:%s cmd:%s", cluster_rule_name(o.rule), acts,
		            cluster_cmd_name(in.cmd));
	}
	cd->last = o;
	for (unsigned b = 0; b < CLUSTER_A_COUNT; b++)
		if (o.actions & (1u << b))
			act(cd, 1u << b, o.rule);
	hb_snapshot(cd->hb, &hs);
	wit_client_state(cd->wit, &ws);
	fence_step(cd, &hs, &ws);
	if (o.cmd_done) {
		if (o.cmd_refused)
			log_warn("Cluster manager: the %s command was refused: %s",
			         cluster_cmd_name(cd->cmd), o.reason);
		cd->cmd = CLUSTER_CMD_NONE;
	}
	if (cd->wit) {
		wit_client_want(cd->wit, cd->want_vote);
		wit_client_primary(cd->wit, any_primary(cd));
	}
	hb_set_local(cd->hb, any_primary(cd), (uint8_t)worst_disk(cd), local_flags(cd, &o),
	             stale_mask(cd));
	/* an action whose effect is synchronous deserves the next step at once */
	if (o.actions & ~(CLUSTER_A_DEGRADED | CLUSTER_A_ASK_VOTE))
		clusterd_kick(cd);
}

/* Both timers, the kick and the periodic tick, only ask for the next step. */
static void decide_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	decide(w->data);
}

static json_t *cmd_cluster(void *ctx, json_t *req, char *err, size_t errlen)
{
	struct clusterd *cd = ctx;
	const char *cmd = json_string_value(json_object_get(req, "cmd"));
	const char *to = json_string_value(json_object_get(req, "to"));
	enum cluster_cmd c;

	if (strcmp(cmd, "switchover") == 0) {
		if (to && strcmp(to, cd->p.self->name) != 0 && strcmp(to, cd->p.peer->name) != 0) {
			snprintf(err, errlen, "No node is named '%.64s'; the nodes are %s and %s.",
			         to, cd->p.self->name, cd->p.peer->name);
			return NULL;
		}
		c = to && strcmp(to, cd->p.self->name) == 0 ? CLUSTER_CMD_SWITCHOVER_TO_SELF
		                                            : CLUSTER_CMD_SWITCHOVER_TO_PEER;
	} else if (strcmp(cmd, "standby") == 0) {
		c = CLUSTER_CMD_STANDBY;
	} else if (strcmp(cmd, "unstandby") == 0) {
		c = CLUSTER_CMD_UNSTANDBY;
	} else {
		if (!json_is_true(json_object_get(req, "force"))) {
			snprintf(err, errlen,
			         "failover needs --force: it promotes without the witness vote, a "
			         "fence or UpToDate data, at the operator's risk.");
			return NULL;
		}
		c = CLUSTER_CMD_FAILOVER_FORCE;
	}
	if (cd->cmd != CLUSTER_CMD_NONE) {
		snprintf(err, errlen, "The %s command is still pending; wait for it to finish.",
		         cluster_cmd_name(cd->cmd));
		return NULL;
	}
	cd->cmd = c;
	log_notice("Cluster manager: the operator asked for %s.", cluster_cmd_name(c));
	clusterd_kick(cd);
	return json_pack("{s:s}", "pending", cluster_cmd_name(c));
}

/* SIGKILL the group's services (pid files of started exec resources); how many were killed. */
static int kill_services(struct clusterd *cd)
{
	pid_t pids[GROUP_MAX_RESOURCES];
	int n = group_pids(cd->group, pids, GROUP_MAX_RESOURCES), killed = 0;

	for (int i = 0; i < n; i++)
		if (kill(pids[i], SIGKILL) == 0)
			killed++;
	return killed;
}

/* The crash itself, a moment after the reply went out: the services, then the daemon. */
static void drill_crash_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct clusterd *cd = w->data;

	(void)loop;
	(void)revents;
	kill_services(cd);
	raise(SIGKILL);
}

/*
 * Fault injection for hakctl drill, refused unless the configuration allows drills:
 * "crash" plays a node crash (the services and hakd die by SIGKILL, 20 ms after the reply, so
 * the reply still reaches hakctl), "service" kills only the services. The reply carries the
 * wall-clock time of the fault, from which hakctl measures.
 */
static json_t *cmd_drill(void *ctx, json_t *req, char *err, size_t errlen)
{
	struct clusterd *cd = ctx;
	const char *what = json_string_value(json_object_get(req, "fault"));
	uint64_t now = clock_wall_us();
	int killed = 0;

	if (!cd->p.cfg->allow_drills) {
		snprintf(err, errlen,
		         "Drills are not allowed on node %s: add 'allow-drills yes' to the global "
		         "section of its configuration and restart hakd.",
		         cd->p.self->name);
		return NULL;
	}
	if (!what || (strcmp(what, "crash") != 0 && strcmp(what, "service") != 0)) {
		snprintf(err, errlen, "Unknown drill fault '%.32s'; use crash or service.",
		         what ? what : "(none)");
		return NULL;
	}
	log_warn("Drill: the operator injects a %s fault on node %s now.", what, cd->p.self->name);
	if (strcmp(what, "crash") == 0) {
		ev_timer_init(&cd->drill, drill_crash_cb, 0.02, 0.0);
		cd->drill.data = cd;
		ev_timer_start(cd->p.loop, &cd->drill);
		now += 20000;
	} else {
		killed = kill_services(cd);
	}
	return json_pack("{s:s, s:s, s:I, s:i}", "node", cd->p.self->name, "fault", what, "time_us",
	                 (json_int_t)now, "killed", killed);
}

bool clusterd_joined(const struct clusterd *cd)
{
	return !cd || hb_joined(cd->hb);
}

void clusterd_summary(const struct clusterd *cd, char *out, size_t len)
{
	struct hb_snapshot s;

	if (!hb_joined(cd->hb)) {
		snprintf(out, len, "joining");
		return;
	}
	hb_snapshot(cd->hb, &s);
	snprintf(out, len, "joined, peer %s%s", s.peer_alive ? "alive" : "silent",
	         cd->standby ? ", standby" : "");
}

json_t *clusterd_status_json(const struct clusterd *cd)
{
	struct hb_snapshot s;
	struct wit_client_state w;
	json_t *paths;
	char acts[256];

	if (!cd)
		return NULL;
	hb_snapshot(cd->hb, &s);
	wit_client_state(cd->wit, &w);
	paths = json_array();
	for (unsigned i = 0; paths && i < s.n_paths; i++)
		json_array_append_new(
		    paths, json_pack("{s:i, s:b, s:I, s:I, s:I, s:I, s:I, s:I}", "path", (int)i,
		                     "alive", s.paths[i].alive, "last_heard_ms",
		                     (json_int_t)s.paths[i].last_heard_ms, "rtt_us",
		                     (json_int_t)s.paths[i].rtt_us, "rx_ok",
		                     (json_int_t)s.paths[i].rx_ok, "rx_rejected",
		                     (json_int_t)(s.paths[i].rx_bad + s.paths[i].rx_replay +
		                                  s.paths[i].rx_foreign),
		                     "tx_ok", (json_int_t)s.paths[i].tx_ok, "tx_err",
		                     (json_int_t)s.paths[i].tx_err));
	cluster_actions_format(cd->last.actions, acts, sizeof(acts));
	json_t *o = json_pack(
	    "{s:s, s:o, s:{s:b, s:b, s:s, s:s, s:b}, s:{s:b, s:b, s:b, s:i, s:b}, s:s, s:s, "
	    "s:s, s:s, s:b, s:b, s:b, s:I, s:I}",
	    "node", cd->p.self->name, "paths", paths ? paths : json_array(), "peer", "alive",
	    s.peer_alive, "known", s.peer_known, "role",
	    s.peer_known ? (s.peer.role ? "primary" : "secondary") : "unknown", "disk",
	    s.peer_known ? cluster_disk_name(s.peer.disk) : "unknown", "frozen",
	    s.peer_known && (s.peer.flags & HB_F_IO_FROZEN), "witness", "configured", w.configured,
	    "reachable", w.reachable, "vote", w.holds, "holder", (int)w.holder, "want", w.want,
	    "rule", cluster_rule_name(cd->last.rule), "reason", cd->last.reason, "actions", acts,
	    "pending", cluster_cmd_name(cd->cmd), "standby", cd->standby, "frozen", any_frozen(cd),
	    "eligible", cd->last.eligible, "decisions", (json_int_t)cd->decisions, "promotions",
	    (json_int_t)cd->promotions);
	/* a rotation of the cluster key in progress (keyring.h): "waiting" until the other side
	 * is seen using the new key, then "grace" while the old one is still accepted */
	json_object_set_new(o, "key",
	                    json_pack("{s:s, s:s?, s:I}", "peer",
	                              s.key_rotation ? s.key_rotation : "none", "witness",
	                              w.key_rotation, "rotations", (json_int_t)s.key_rotations));
	return o;
}

static int setup(struct clusterd *cd, char *err, size_t errlen)
{
	const struct hak_cluster_cfg *cc = &cd->p.cfg->cluster;

	if (hb_config_build(&cd->hbc, cd->p.cfg, cd->p.self, cd->p.peer, err, errlen) < 0)
		return -1;
	cd->hb = hb_start(&cd->hbc, cd->p.loop, notify_cb, cd, err, errlen);
	if (!cd->hb)
		return -1;
	if (cc->witness_address) {
		cd->wit = wit_client_start(&cd->hbc, cc->witness_address, cd->p.loop, notify_cb, cd,
		                           err, errlen);
		if (!cd->wit)
			return -1;
	} else if (cc->quorum) {
		log_warn("The cluster section has no witness-address and quorum is on: this node "
		         "never takes over by itself (hakctl failover --force can).");
	}
	static const char *const cmds[] = {"switchover", "standby", "unstandby", "failover"};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (control_register(cd->p.ctl, cmds[i], CONTROL_ADMIN, cmd_cluster, cd) < 0) {
			snprintf(err, errlen, "Cannot register the cluster commands.");
			return -1;
		}
	if (control_register(cd->p.ctl, "drill", CONTROL_ADMIN, cmd_drill, cd) < 0) {
		snprintf(err, errlen, "Cannot register the drill command.");
		return -1;
	}
	return 0;
}

int clusterd_start(const struct clusterd_params *p, struct clusterd **out, char *err, size_t errlen)
{
	struct clusterd *cd = calloc(1, sizeof(*cd));

	if (!cd) {
		snprintf(err, errlen, "Out of memory starting the cluster manager.");
		return -1;
	}
	cd->p = *p;
	if (p->n == 0 || p->n > CONFIG_MAX_CLUSTER_VOLUMES) {
		snprintf(err, errlen,
		         "The cluster manager drives 1 to %u volumes; this node has %zu.",
		         CONFIG_MAX_CLUSTER_VOLUMES, p->n);
		free(cd);
		return -1;
	}
	cd->group = groupctl_find_volume(p->groups, volume_name(p->vols[0]));
	cd->policy = (struct cluster_policy){
	    .on_quorum_loss = p->cfg->cluster.on_quorum_loss == HAK_QL_DEMOTE ? CLUSTER_QL_DEMOTE
	                                                                      : CLUSTER_QL_FREEZE,
	    .on_disk_failure = p->cfg->cluster.on_disk_failure == HAK_DF_FAILOVER
	                           ? CLUSTER_DF_FAILOVER
	                           : CLUSTER_DF_DETACH,
	    .restart_limit = 1,
	    .quorum_disabled = !p->cfg->cluster.quorum,
	    .fence_configured = p->cfg->cluster.fence_hook != NULL,
	    /* without preferred-node, the first node section breaks ties, the same on both */
	    .preferred = strcmp(p->cfg->cluster.preferred_node ? p->cfg->cluster.preferred_node
	                                                       : p->cfg->nodes[0].name,
	                        p->self->name) == 0,
	};
	snprintf(cd->standby_path, sizeof(cd->standby_path), "%s/cluster-%" PRIu32 ".standby",
	         p->cfg->state_dir, p->cfg->cluster.cluster_id);
	cd->standby = access(cd->standby_path, F_OK) == 0;
	cd->last.rule = CLUSTER_R_COUNT; /* the first decision is always logged */
	ev_timer_init(&cd->kick, decide_cb, 0.0, 0.0);
	cd->kick.data = cd;
	ev_timer_init(&cd->tick, decide_cb, CLUSTERD_TICK, CLUSTERD_TICK);
	cd->tick.data = cd;
	if (setup(cd, err, errlen) < 0) {
		clusterd_stop(cd);
		return -1;
	}
	groupctl_set_listener(p->groups, notify_cb, cd);
	cd->started = ev_now(p->loop);
	ev_timer_start(p->loop, &cd->tick);
	log_notice("Cluster manager started for %zu volume(s) (first: %s)%s%s: %u heartbeat "
	           "paths, witness %s, standby %s.",
	           p->n, volume_name(p->vols[0]), cd->group ? " and group " : "",
	           cd->group ? group_name(cd->group) : "", cd->hbc.n_paths,
	           p->cfg->cluster.witness_address ? p->cfg->cluster.witness_address : "none",
	           cd->standby ? "yes" : "no");
	*out = cd;
	return 0;
}

void clusterd_stop(struct clusterd *cd)
{
	if (!cd)
		return;
	if (cd->p.groups)
		groupctl_set_listener(cd->p.groups, NULL, NULL);
	ev_timer_stop(cd->p.loop, &cd->tick);
	ev_timer_stop(cd->p.loop, &cd->kick);
	ev_timer_stop(cd->p.loop, &cd->drill);
	if (cd->fence_proc)
		proc_cancel(cd->fence_proc);
	if (cd->stonith_proc)
		proc_cancel(cd->stonith_proc);
	wit_client_stop(cd->wit);
	hb_stop(cd->hb);
	free(cd);
}
