/* SPDX-License-Identifier: MIT */
/*
 * What happens when the handshake finds a split brain: the after-split-brain policy (sbpolicy.c)
 * picks the side whose changes are dropped, or the connection stops for an operator; either way
 * the event stream and the split-brain hook hear of it. The discarding side takes the same path
 * as `hakctl resolve --discard-local` and reconnects as a full resync target; the other side only
 * drops this connection and keeps trying, so the next handshake starts the resync.
 *
 * A policy decides only when both nodes are secondary (DRBD's after-sb-0pri): with a primary, a
 * discard would pull data from under a running service, so that case always stops.
 */
#include <errno.h>
#include <ev.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "meta/bitmap.h"
#include "conf/config.h"
#include "lib/crc32c.h"
#include "ctl/events.h"
#include "lib/log.h"
#include "repl_int.h"
#include "splitbrain.h"

extern char **environ;

struct sb_hook {
	struct sb_hook *next;
	struct repl *r;
	ev_child child;
};

static void hook_done(struct ev_loop *loop, ev_child *w, int revents)
{
	struct sb_hook *h = w->data;
	struct repl *r = h->r;
	(void)revents;
	ev_child_stop(loop, w);
	if (WIFEXITED(w->rstatus) && WEXITSTATUS(w->rstatus) == 0)
		repl_log(r, LOG_LVL_INFO, "The split-brain hook %s (pid %d) finished.",
		         r->p.vcfg->sb_hook, w->rpid);
	else
		repl_log(r, LOG_LVL_WARN,
		         "The split-brain hook %s (pid %d) failed with status 0x%x.",
		         r->p.vcfg->sb_hook, w->rpid, w->rstatus);
	for (struct sb_hook **pp = &r->sb_hooks; *pp; pp = &(*pp)->next) {
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	}
	free(h);
}

/* Environment for the hook: ours plus the split brain's facts. */
static char **hook_env(char vars[][160], size_t nvars)
{
	size_t n = 0;
	while (environ && environ[n])
		n++;
	char **env = calloc(n + nvars + 1, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		env[i] = environ[i];
	for (size_t i = 0; i < nvars; i++)
		env[n + i] = vars[i];
	return env;
}

/* Run `hook VOLUME NODE PEER` without waiting for it; ev_child reaps it. */
static void hook_run(struct repl *r, const char *policy, const char *verdict)
{
	const char *path = r->p.vcfg->sb_hook;
	char vars[5][160];
	char *argv[] = {(char *)path, (char *)r->name, (char *)r->p.self->name,
	                (char *)r->p.peer->name, NULL};
	pid_t pid;
	if (!path)
		return;
	if (!ev_is_default_loop(r->p.loop)) {
		repl_log(r, LOG_LVL_WARN,
		         "The split-brain hook %s is not run: child processes are "
		         "only watched on the default loop.",
		         path);
		return;
	}
	snprintf(vars[0], sizeof(vars[0]), "HAK_VOLUME=%s", r->name);
	snprintf(vars[1], sizeof(vars[1]), "HAK_NODE=%s", r->p.self->name);
	snprintf(vars[2], sizeof(vars[2]), "HAK_PEER=%s", r->p.peer->name);
	snprintf(vars[3], sizeof(vars[3]), "HAK_SB_POLICY=%s", policy);
	snprintf(vars[4], sizeof(vars[4]), "HAK_SB_VERDICT=%s", verdict);
	char **env = hook_env(vars, 5);
	struct sb_hook *h = calloc(1, sizeof(*h));
	int rc = env && h ? posix_spawn(&pid, path, NULL, NULL, argv, env) : ENOMEM;
	free(env);
	if (rc != 0) {
		repl_log(r, LOG_LVL_ERR, "Cannot run the split-brain hook %s: %s.", path,
		         strerror(rc));
		free(h);
		return;
	}
	h->r = r;
	ev_child_init(&h->child, hook_done, pid, 0);
	h->child.data = h;
	ev_child_start(r->p.loop, &h->child);
	h->next = r->sb_hooks;
	r->sb_hooks = h;
	repl_log(r, LOG_LVL_NOTICE, "Started the split-brain hook %s %s %s %s (pid %d).", path,
	         r->name, r->p.self->name, r->p.peer->name, (int)pid);
}

void splitbrain_shutdown(struct repl *r)
{
	/* Hooks still running are left to finish on their own; only our watchers go. */
	while (r->sb_hooks) {
		struct sb_hook *h = r->sb_hooks;
		r->sb_hooks = h->next;
		ev_child_stop(r->p.loop, &h->child);
		free(h);
	}
}

static enum sb_verdict decide(struct repl *r, bool primary, const char **why)
{
	const struct hak_volume_cfg *vc = r->p.vcfg;
	const struct wire_hello *h = &r->peer_hello;
	uint32_t victim = vc->sb_discard_node
	                      ? crc32c_update(0, vc->sb_discard_node, strlen(vc->sb_discard_node))
	                      : 0;
	if (vc->after_sb == SB_POLICY_DISCONNECT) {
		*why = "the policy is disconnect";
		return SB_VERDICT_DISCONNECT;
	}
	if (h->sb_policy != (uint8_t)vc->after_sb || h->sb_victim != victim) {
		*why = "the nodes' after-split-brain settings differ";
		return SB_VERDICT_DISCONNECT;
	}
	if (primary) {
		*why = "a node is primary";
		return SB_VERDICT_DISCONNECT;
	}
	struct sb_side l = {r->p.self->name, bitmap_count(r->bm), r->promoted_ms};
	struct sb_side p = {r->p.peer->name, h->bits_set, h->promoted_ms};
	return sbpolicy_decide(vc->after_sb, vc->sb_discard_node, &l, &p, why);
}

void splitbrain_handle(struct repl *r, bool both_primary, const char *rule, const char *lg,
                       const char *pg)
{
	const char *why = "";
	bool primary =
	    both_primary || r->role == ROLE_PRIMARY || r->peer_hello.role == WIRE_ROLE_PRIMARY;
	enum sb_verdict v = decide(r, primary, &why);
	const char *policy = sbpolicy_name(r->p.vcfg->after_sb);
	const char *vname = sbpolicy_verdict_name(v);
	char whytok[96];
	events_token(whytok, sizeof(whytok), why);
	events_emit("split-brain", "volume:%s peer:%s rule:%s policy:%s verdict:%s why:%s", r->name,
	            r->p.peer->name, rule, policy, vname, whytok);
	hook_run(r, policy, vname);
	if (v == SB_VERDICT_DISCONNECT) {
		r->split_brain = true;
		repl_write_sb(r);
		repl_refuse(
		    r, true,
		    "split brain detected (rule %s; local %s, peer %s; after-split-brain %s: "
		    "%s). Choose the node whose changes to drop and run 'hakctl resolve %s "
		    "--discard-local' there, then 'hakctl connect %s' on the other.",
		    rule, lg, pg, policy, why, r->name, r->name);
		return;
	}
	const char *loser = v == SB_VERDICT_DISCARD_LOCAL ? r->p.self->name : r->p.peer->name;
	repl_log(r, LOG_LVL_WARN,
	         "Split brain detected (rule %s; local %s, peer %s); after-split-brain %s "
	         "resolves it: %s, so the changes of %s are discarded.",
	         rule, lg, pg, policy, why, loser);
	r->sb_resolved++;
	if (v == SB_VERDICT_DISCARD_LOCAL)
		repl_discard_local(r);
	events_emit("split-brain-resolved", "volume:%s peer:%s by:%s discarded:%s", r->name,
	            r->p.peer->name, policy, loser);
	/* Our HELLOs may still be queued: the peer needs them to reach the same verdict. */
	tstream_try_flush(r->data);
	tstream_try_flush(r->meta_s);
	r->want_connect = true;
	repl_drop_connection(r, NULL);
}
