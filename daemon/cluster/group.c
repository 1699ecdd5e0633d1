/* SPDX-License-Identifier: MIT */
#include "group.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf/conf_group.h"
#include "ctl/events.h"
#include "lib/log.h"
#include "lib/proc.h"
#include "vip.h"

#define GROUP_RESTARTS_MAX 128u

enum op_kind { OP_START, OP_STOP, OP_MONITOR };
static const char *const op_names[] = {"start", "stop", "monitor"};
enum res_state { RES_DOWN = 0, RES_UP, RES_UNKNOWN };
static const char *const res_state_names[] = {"down", "up", "unknown"};

struct res_rt {
	const struct hak_resource_cfg *cfg;
	enum res_state st;
	unsigned restarts;
	char last[PROC_OUTPUT_MAX + 128]; /* the last failure, for status */
	struct ipaddr vip;                /* vip: parsed at creation (the config checked it) */
	struct vip_garp garp;             /* vip: the announcement schedule */
	/* attach: its own volume's URI, socket and export name (for nbdfuse and hak-attach), and
	 * the identifier hak-attach gives the kernel device ("hak:GROUP/RESOURCE") */
	char nbd_uri[256];
	char nbd_socket[PATH_MAX];
	char nbd_export[128];
	char nbd_ident[160];
};

struct group {
	struct ev_loop *loop;
	const struct hak_group_cfg *cfg;
	group_changed_fn changed;
	void *ctx;
	enum group_state state;
	struct res_rt res[GROUP_MAX_RESOURCES];
	unsigned n;
	unsigned up;   /* resources [0, up) are up, or may be after a failed start */
	unsigned want; /* how many should be up */
	bool restarting, failing;
	struct proc *op;
	enum op_kind op_kind;
	unsigned op_idx;
	ev_timer mon_w;
	unsigned mon_idx;
	double restart_at[GROUP_RESTARTS_MAX];
	unsigned n_restart_at;
	char reason[PROC_OUTPUT_MAX + 256];
	char attach_bin[PATH_MAX]; /* hak-attach: next to hakd, else found through PATH */
};

static const char *const state_names[] = {"stopped",    "starting", "started", "stopping",
                                          "restarting", "failed",   "blocked"};

const char *group_state_name(enum group_state st)
{
	return (unsigned)st < sizeof(state_names) / sizeof(state_names[0]) ? state_names[st] : "?";
}

const char *group_name(const struct group *g)
{
	return g->cfg->name;
}

enum group_state group_state(const struct group *g)
{
	return g->state;
}

static void group_step(struct group *g);

static void group_set_state(struct group *g, enum group_state st, const char *why)
{
	if (g->state == st)
		return;
	g->state = st;
	if (why != g->reason)
		snprintf(g->reason, sizeof(g->reason), "%s", why);
	if (st == GROUP_FAILED || st == GROUP_BLOCKED)
		log_err("Group %s is %s: %s", g->cfg->name, group_state_name(st), why);
	else
		log_notice("Group %s is %s: %s", g->cfg->name, group_state_name(st), why);
	events_emit("group", "name:%s state:%s", g->cfg->name, group_state_name(st));
	if (st == GROUP_STARTED) {
		g->mon_idx = 0;
		ev_timer_set(&g->mon_w, g->cfg->monitor_interval, g->cfg->monitor_interval);
		ev_timer_start(g->loop, &g->mon_w);
	} else {
		ev_timer_stop(g->loop, &g->mon_w);
	}
	if (g->changed)
		g->changed(g->ctx, g, st, why);
}

/* ---- /proc/self/mountinfo ---- */

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void mountinfo_unescape(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

int group_is_mounted(const char *dir)
{
	char line[4096], want[4096], *save, *tok;
	size_t len = strlen(dir);
	int found = 0, field;
	FILE *f;

	/* "/srv/pg/" and "/srv/pg" are the same mount point. */
	while (len > 1 && dir[len - 1] == '/')
		len--;
	if (len >= sizeof(want)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(want, dir, len);
	want[len] = '\0';
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	while (!found && fgets(line, sizeof(line), f)) {
		tok = strtok_r(line, " ", &save);
		for (field = 1; tok && field < 5; field++)
			tok = strtok_r(NULL, " ", &save);
		if (!tok)
			continue;
		mountinfo_unescape(tok);
		found = strcmp(tok, want) == 0;
	}
	fclose(f);
	return found;
}

/* ---- operations ---- */

static void group_op_done(struct group *g, bool ok, const char *what);

static void group_proc_done(void *ctx, const struct proc_result *res)
{
	struct group *g = ctx;
	const struct hak_resource_cfg *rc = g->res[g->op_idx].cfg;
	char desc[96], what[PROC_OUTPUT_MAX + 1024];
	bool ok = res->exited && res->code == 0;

	g->op = NULL;
	if (g->op_kind == OP_START && rc->type == RES_MOUNT && ok &&
	    group_is_mounted(rc->directory) != 1)
		snprintf(what, sizeof(what), "mount exited 0 but %.300s is not mounted",
		         rc->directory),
		    ok = false;
	else if (g->op_kind == OP_STOP && rc->type == RES_MOUNT &&
	         group_is_mounted(rc->directory) != 0) {
		/* umount may say yes while a lazy or stacked mount stays: the table decides. */
		proc_describe(res, rc->timeout, desc, sizeof(desc));
		snprintf(what, sizeof(what), "%.300s is still mounted after umount (%s): %s",
		         rc->directory, desc, res->output);
		ok = false;
	} else {
		proc_describe(res, rc->timeout, desc, sizeof(desc));
		snprintf(what, sizeof(what), "%s%s%s", desc, res->output[0] ? ": " : "",
		         res->output);
	}
	group_op_done(g, ok, what);
}

static int group_spawn_mount(struct group *g, const struct hak_resource_cfg *rc, char **env)
{
	/* Arguments go in as positional parameters, never pasted into the script text. fsck's
	 * status 8 ("in use") is retried: right after an unmount or an attach, udev's probe may
	 * hold the device for a moment. The device already mounted there (a start after hakd
	 * restarted under a running group) is a success, not an fsck of a mounted file system. */
	static const char start_sh[] =
	    "if mountpoint -q \"$4\" && [ \"$(findmnt -n -o SOURCE --mountpoint \"$4\")\" = "
	    "\"$(readlink -f \"$1\")\" ]; then exit 0; fi; "
	    "if [ \"$5\" = yes ]; then for i in 1 2 3 4 5; do fsck -p \"$1\"; r=$?; "
	    "[ $r -eq 8 ] || break; sleep 0.5; done; "
	    "if [ $r -gt 1 ]; then echo \"fsck of $1 exited with status $r\"; exit $r; fi; fi; "
	    "mkdir -p \"$4\" || exit 1; "
	    "if [ -n \"$3\" ]; then exec mount -t \"$2\" -o \"$3\" \"$1\" \"$4\"; fi; "
	    "exec mount -t \"$2\" \"$1\" \"$4\"";
	static const char stop_sh[] =
	    "umount \"$1\" && exit 0; [ \"$2\" = yes ] || exit 1; "
	    "echo \"$1 is busy; killing the processes using it\"; fuser -km -M \"$1\"; sleep 1; "
	    "umount \"$1\"";
	char sh[] = "/bin/sh", c[] = "-c", arg0[] = "hak-mount", yes[] = "yes", no[] = "no";
	char empty[] = "";
	char *argv[10];

	argv[0] = sh;
	argv[1] = c;
	if (g->op_kind == OP_START) {
		argv[2] = (char *)start_sh;
		argv[3] = arg0;
		argv[4] = rc->device;
		argv[5] = rc->fstype;
		argv[6] = rc->options ? rc->options : empty;
		argv[7] = rc->directory;
		argv[8] = rc->fsck ? yes : no;
		argv[9] = NULL;
	} else {
		argv[2] = (char *)stop_sh;
		argv[3] = arg0;
		argv[4] = rc->directory;
		argv[5] = rc->force_unmount ? yes : no;
		argv[6] = NULL;
	}
	return proc_run(g->loop, argv, env, rc->timeout, group_proc_done, g, &g->op);
}

/*
 * The volume as a block device, at a fixed name (the symlink $2) for the mount resource.
 *
 * Where the kernel has its NBD driver (loaded, or loadable with modprobe), hak-attach binds a
 * /dev/nbdN to the volume's socket through the netlink API, tagged with an identifier of the
 * group and resource. The kernel keeps the device across a restart of hakd (its requests wait
 * up to hak-attach's dead-connection timeout), so a start that finds the link on a device with
 * that identifier gives it new sockets (--reconfigure; a no-op while the old ones live) instead
 * of binding another one under the mounted file system. Its logical block size is 512 bytes,
 * as a loop device's: a small ext4 made through nbdfuse and a loop device (1 KiB blocks) must
 * still mount when the same volume is attached this way.
 *
 * Elsewhere nbdfuse exposes the volume as a file, a loop device makes that a block device.
 * nbdfuse is started in its own session so it outlives the script; both steps are idempotent,
 * so a start after a partial start or a restart of hakd picks up what exists; after nbdfuse died
 * (the monitor's restart), the dead FUSE mount and the loop devices left on its file are cleared
 * before a new nbdfuse starts. The loop device lets go of the FUSE file a moment after losetup -d
 * returns, so the FUSE unmount is retried for up to 15 s (a loaded host needs more than 5) before
 * the stop counts as failed. Loop devices are found through /sys/block/loopN/loop/backing_file, not
 * losetup -j: that one asks every loop device's backing file for its attributes, and one left on a
 * dead FUSE file would hang it.
 *
 * Arguments: $1 FUSE directory, $2 link, $3 URI, $4 socket, $5 export, $6 hak-attach, $7 the
 * device's identifier. Stop and monitor follow the link: a /dev/nbdN is the kernel's.
 */
static int group_spawn_attach(struct group *g, const struct hak_resource_cfg *rc, char **env)
{
	static const char start_sh[] =
	    "if [ -e /sys/module/nbd ] || modprobe nbd 2>/dev/null; then "
	    "dev=$(readlink \"$2\" 2>/dev/null); n=${dev#/dev/}; "
	    "case $n in nbd*) if [ -e \"/sys/block/$n/pid\" ] && "
	    "[ \"$(cat \"/sys/block/$n/backend\" 2>/dev/null)\" = \"$7\" ]; then "
	    "exec \"$6\" --reconfigure \"$dev\" --socket \"$4\" --export \"$5\" >/dev/null; fi;; "
	    "esac; "
	    "dev=$(\"$6\" --socket \"$4\" --export \"$5\" --identifier \"$7\" --block-size 512) || "
	    "exit 1; "
	    "exec ln -sfn \"$dev\" \"$2\"; fi; "
	    "stat \"$1\" >/dev/null 2>&1 || fusermount3 -u -z \"$1\" 2>/dev/null; "
	    "mkdir -p \"$1\" || exit 1; "
	    "if ! mountpoint -q \"$1\"; then rm -f \"$1.pid\"; "
	    "for f in /sys/block/loop*/loop/backing_file; do "
	    "[ \"$(cat \"$f\" 2>/dev/null)\" = \"$1/disk\" ] || continue; d=${f#/sys/block/}; "
	    "losetup -d \"/dev/${d%%/*}\"; done; "
	    "setsid nbdfuse -P \"$1.pid\" \"$1/disk\" \"$3\" </dev/null >\"$1.log\" 2>&1 & i=0; "
	    "while [ ! -s \"$1.pid\" ]; do i=$((i+1)); if [ $i -gt 100 ]; then "
	    "echo \"nbdfuse did not serve $3 on $1 within 10 s:\"; cat \"$1.log\"; exit 1; fi; "
	    "sleep 0.1; done; fi; "
	    "dev=; for f in /sys/block/loop*/loop/backing_file; do "
	    "[ \"$(cat \"$f\" 2>/dev/null)\" = \"$1/disk\" ] && { d=${f#/sys/block/}; "
	    "dev=/dev/${d%%/*}; break; }; done; "
	    "[ -n \"$dev\" ] || dev=$(losetup -f --show \"$1/disk\") || exit 1; "
	    "ln -sfn \"$dev\" \"$2\"";
	static const char stop_sh[] =
	    "dev=$(readlink \"$2\" 2>/dev/null); n=${dev#/dev/}; "
	    "case $n in nbd*) if [ \"$(cat \"/sys/block/$n/backend\" 2>/dev/null)\" = \"$7\" ]; "
	    "then \"$6\" --detach \"$dev\" || exit 1; fi; exec rm -f \"$2\";; esac; "
	    "for f in /sys/block/loop*/loop/backing_file; do "
	    "[ \"$(cat \"$f\" 2>/dev/null)\" = \"$1/disk\" ] || continue; d=${f#/sys/block/}; "
	    "losetup -d \"/dev/${d%%/*}\" || exit 1; done; rm -f \"$2\"; "
	    "i=0; while mountpoint -q \"$1\"; do fusermount3 -u \"$1\" 2>/dev/null && break; "
	    "i=$((i+1)); if [ $i -gt 150 ]; then fusermount3 -u \"$1\"; exit 1; fi; sleep 0.1; "
	    "done";
	static const char monitor_sh[] =
	    "dev=$(readlink -f \"$2\") && [ -b \"$dev\" ] || exit 1; n=${dev#/dev/}; "
	    "case $n in nbd*) [ -e \"/sys/block/$n/pid\" ] && "
	    "[ \"$(cat \"/sys/block/$n/backend\" 2>/dev/null)\" = \"$7\" ]; exit $?;; esac; "
	    "mountpoint -q \"$1\" && "
	    "[ \"$(cat /sys/block/$n/loop/backing_file 2>/dev/null)\" = \"$1/disk\" ]";
	char sh[] = "/bin/sh", c[] = "-c", arg0[] = "hak-attach";
	struct res_rt *r = &g->res[g->op_idx]; /* its own volume, of the group's several */
	char *argv[] = {sh,           c,          NULL,          arg0,          rc->directory,
	                rc->link,     r->nbd_uri, r->nbd_socket, r->nbd_export, g->attach_bin,
	                r->nbd_ident, NULL};

	argv[2] = (char *)(g->op_kind == OP_START  ? start_sh
	                   : g->op_kind == OP_STOP ? stop_sh
	                                           : monitor_sh);
	return proc_run(g->loop, argv, env, rc->timeout, group_proc_done, g, &g->op);
}

static int group_spawn_systemd(struct group *g, const struct hak_resource_cfg *rc, char **env)
{
	char prog[] = "systemctl", start[] = "start", stop[] = "stop", active[] = "is-active",
	     quiet[] = "--quiet";
	char *argv[5] = {prog, NULL, NULL, NULL, NULL};

	if (g->op_kind == OP_MONITOR) {
		argv[1] = active;
		argv[2] = quiet;
		argv[3] = rc->unit;
	} else {
		argv[1] = g->op_kind == OP_START ? start : stop;
		argv[2] = rc->unit;
	}
	return proc_run(g->loop, argv, env, rc->timeout, group_proc_done, g, &g->op);
}

/*
 * A virtual IP is handled in the daemon itself, not by a child process: rtnetlink answers at
 * once (vip.c bounds a wedged kernel at 1 s), and a failover should not pay a fork and an exec of
 * ip(8) twice. The stop is confirmed by asking the kernel again, like a mount by mountinfo.
 */
static void group_vip_op(struct group *g, enum op_kind kind, struct res_rt *r)
{
	const struct hak_resource_cfg *rc = r->cfg;
	char err[256], what[512], addr[IPADDR_TEXT_MAX];
	int rc_op, present;

	ipaddr_format(&r->vip, addr, sizeof(addr));
	if (kind == OP_MONITOR) {
		present = vip_present(rc->interface, &r->vip, err, sizeof(err));
		if (present == 0)
			snprintf(err, sizeof(err), "%s is no longer on %s", addr, rc->interface);
		group_op_done(g, present == 1, present == 1 ? "present" : err);
		return;
	}
	if (kind == OP_START) {
		rc_op = vip_add(rc->interface, &r->vip, err, sizeof(err));
		if (rc_op == 0 && vip_garp_start(&r->garp, g->loop, rc->interface, &r->vip,
		                                 rc->garp_count, rc->garp_delay) < 0)
			/* the address serves; neighbours learn it later from its own traffic */
			log_warn("Group %s: announcing %s on %s failed: %s.", g->cfg->name, addr,
			         rc->interface, strerror(errno));
		snprintf(what, sizeof(what), "%s", rc_op < 0 ? err : "added");
		group_op_done(g, rc_op == 0, what);
		return;
	}
	vip_garp_stop(&r->garp);
	rc_op = vip_remove(rc->interface, &r->vip, err, sizeof(err));
	if (rc_op == 0 && (present = vip_present(rc->interface, &r->vip, err, sizeof(err))) != 0) {
		if (present > 0)
			snprintf(err, sizeof(err), "%s is still on %s after its removal", addr,
			         rc->interface);
		rc_op = -1;
	}
	snprintf(what, sizeof(what), "%s", rc_op < 0 ? err : "removed");
	group_op_done(g, rc_op == 0, what);
}

/* Starts operation kind on resource idx. Completes through group_op_done, maybe at once. */
static void group_op(struct group *g, enum op_kind kind, unsigned idx)
{
	const struct hak_resource_cfg *rc = g->res[idx].cfg;
	char e_group[128], e_res[128], e_act[32], *env[4] = {e_group, e_res, e_act, NULL};
	const char *cmd = NULL;
	int mounted, r = 0;

	g->op_kind = kind;
	g->op_idx = idx;
	snprintf(e_group, sizeof(e_group), "HAK_GROUP=%s", g->cfg->name);
	snprintf(e_res, sizeof(e_res), "HAK_RESOURCE=%s", rc->name);
	snprintf(e_act, sizeof(e_act), "HAK_ACTION=%s", op_names[kind]);
	log_info("Group %s: %s of resource %s (%s).", g->cfg->name, op_names[kind], rc->name,
	         conf_res_type_name(rc->type));
	switch (rc->type) {
	case RES_MOUNT:
		mounted = group_is_mounted(rc->directory);
		if (mounted < 0) {
			group_op_done(g, false, "cannot read /proc/self/mountinfo");
			return;
		}
		/* Already in the wanted state: nothing to run (and no double mount). */
		if (kind == OP_MONITOR || (kind == OP_START && mounted) ||
		    (kind == OP_STOP && !mounted)) {
			group_op_done(g, kind == OP_MONITOR ? mounted : true,
			              mounted ? "mounted" : "not mounted");
			return;
		}
		r = group_spawn_mount(g, rc, env);
		break;
	case RES_SYSTEMD:
		r = group_spawn_systemd(g, rc, env);
		break;
	case RES_ATTACH:
		r = group_spawn_attach(g, rc, env);
		break;
	case RES_VIP:
		group_vip_op(g, kind, &g->res[idx]);
		return;
	case RES_EXEC:
	default:
		cmd = kind == OP_START ? rc->start : kind == OP_STOP ? rc->stop : rc->monitor;
		if (!cmd) {
			group_op_done(g, true, "no command");
			return;
		}
		r = proc_run_shell(g->loop, cmd, env, rc->timeout, group_proc_done, g, &g->op);
		break;
	}
	if (r < 0) {
		char what[160];

		snprintf(what, sizeof(what), "cannot run the command: %s", strerror(errno));
		group_op_done(g, false, what);
	}
}

/* true when one more restart still fits in max-restarts within restart-window. */
static bool group_restart_allowed(struct group *g)
{
	double now = ev_now(g->loop);
	unsigned k = 0;

	for (unsigned i = 0; i < g->n_restart_at; i++)
		if (now - g->restart_at[i] < g->cfg->restart_window)
			g->restart_at[k++] = g->restart_at[i];
	g->n_restart_at = k;
	if (k >= g->cfg->max_restarts || k >= GROUP_RESTARTS_MAX)
		return false;
	g->restart_at[g->n_restart_at++] = now;
	return true;
}

static void group_monitor_failed(struct group *g, unsigned idx, const char *what)
{
	char why[sizeof(g->reason)];

	g->res[idx].restarts++;
	if (!group_restart_allowed(g)) {
		snprintf(why, sizeof(why),
		         "the monitor of resource %s failed (%s) after %u restarts within %.0f s; "
		         "stopping the group so that it fails over",
		         g->res[idx].cfg->name, what, g->cfg->max_restarts, g->cfg->restart_window);
		g->failing = true;
		g->want = 0;
		group_set_state(g, GROUP_STOPPING, why);
		return;
	}
	snprintf(why, sizeof(why), "the monitor of resource %s failed (%s); restarting it in place",
	         g->res[idx].cfg->name, what);
	g->restarting = true;
	g->want = idx;
	group_set_state(g, GROUP_RESTARTING, why);
}

static void group_op_done(struct group *g, bool ok, const char *what)
{
	struct res_rt *r = &g->res[g->op_idx];
	char why[sizeof(g->reason)];

	if (!ok)
		snprintf(r->last, sizeof(r->last), "%s failed: %s", op_names[g->op_kind], what);
	switch (g->op_kind) {
	case OP_START:
		r->st = ok ? RES_UP : RES_UNKNOWN;
		g->up = g->op_idx + 1;
		if (!ok) {
			snprintf(why, sizeof(why), "start of resource %s failed: %s", r->cfg->name,
			         what);
			g->failing = true;
			g->restarting = false;
			g->want = 0;
			group_set_state(g, GROUP_STOPPING, why);
		}
		break;
	case OP_STOP:
		if (!ok) {
			snprintf(why, sizeof(why),
			         "stop of resource %s failed: %s; it may still be active here, so "
			         "this node must be fenced before the peer takes over",
			         r->cfg->name, what);
			r->st = RES_UNKNOWN;
			group_set_state(g, GROUP_BLOCKED, why);
			return;
		}
		r->st = RES_DOWN;
		g->up = g->op_idx;
		break;
	case OP_MONITOR:
		if (ok) {
			g->mon_idx = g->op_idx + 1;
			/* A start or stop requested meanwhile goes first. */
			if (g->state == GROUP_STARTED && g->want == g->up && g->mon_idx < g->up)
				group_op(g, OP_MONITOR, g->mon_idx);
			else
				group_step(g);
			return;
		}
		group_monitor_failed(g, g->op_idx, what);
		break;
	}
	group_step(g);
}

static void group_step(struct group *g)
{
	if (g->op || g->state == GROUP_BLOCKED)
		return;
	if (g->up < g->want) {
		if (g->state != GROUP_RESTARTING)
			group_set_state(g, GROUP_STARTING, "starting the resources in order");
		group_op(g, OP_START, g->up);
		return;
	}
	if (g->up > g->want) {
		if (g->state != GROUP_RESTARTING && !g->failing)
			group_set_state(g, GROUP_STOPPING,
			                "stopping the resources in reverse order");
		group_op(g, OP_STOP, g->up - 1);
		return;
	}
	if (g->restarting) {
		g->restarting = false;
		g->want = g->n;
		group_step(g);
		return;
	}
	if (g->want == g->n && g->n)
		group_set_state(g, GROUP_STARTED, "every resource is up");
	else if (g->failing)
		group_set_state(g, GROUP_FAILED, g->reason);
	else
		group_set_state(g, GROUP_STOPPED, "every resource is down");
}

static void group_mon_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct group *g = w->data;

	(void)loop;
	(void)revents;
	if (g->op || g->state != GROUP_STARTED || !g->up)
		return;
	group_op(g, OP_MONITOR, 0);
}

/* The URI nbdfuse opens for attach resource r: its volume (the group's first by default) on
 * that volume's socket. */
static void group_attach_uri(const struct hak_group_cfg *cfg, const char *const *nbd_sockets,
                             struct res_rt *r)
{
	const char *name = r->cfg->volume ? r->cfg->volume : cfg->volume, *sock = NULL;

	for (unsigned k = 0; name && nbd_sockets && k < cfg->n_volumes; k++)
		if (strcmp(cfg->volumes[k], name) == 0)
			sock = nbd_sockets[k];
	snprintf(r->nbd_uri, sizeof(r->nbd_uri), "nbd+unix:///%s?socket=%s", name ? name : "",
	         sock ? sock : "");
	snprintf(r->nbd_socket, sizeof(r->nbd_socket), "%s", sock ? sock : "");
	snprintf(r->nbd_export, sizeof(r->nbd_export), "%s", name ? name : "");
	snprintf(r->nbd_ident, sizeof(r->nbd_ident), "hak:%.60s/%.60s", cfg->name, r->cfg->name);
}

/* hak-attach from the same installation as this hakd (a build tree runs its own), else PATH's. */
static void group_find_attach(struct group *g)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	snprintf(g->attach_bin, sizeof(g->attach_bin), "hak-attach");
	if (n <= 0)
		return;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash || (size_t)(slash - self) + sizeof("/hak-attach") > sizeof(g->attach_bin))
		return;
	memcpy(slash, "/hak-attach", sizeof("/hak-attach"));
	if (access(self, X_OK) == 0)
		memcpy(g->attach_bin, self, strlen(self) + 1);
}

int group_create(struct ev_loop *loop, const struct hak_group_cfg *cfg,
                 const char *const *nbd_sockets, group_changed_fn changed, void *ctx,
                 struct group **out)
{
	struct group *g = calloc(1, sizeof(*g));

	if (!g)
		return -1;
	g->loop = loop;
	g->cfg = cfg;
	g->changed = changed;
	g->ctx = ctx;
	g->n = cfg->n_res;
	group_find_attach(g);
	for (unsigned i = 0; i < g->n; i++) {
		g->res[i].cfg = cfg->res[i];
		if (cfg->res[i]->type == RES_ATTACH)
			group_attach_uri(cfg, nbd_sockets, &g->res[i]);
		if (cfg->res[i]->type == RES_VIP &&
		    ipaddr_parse(cfg->res[i]->address, &g->res[i].vip, g->reason,
		                 sizeof(g->reason)) < 0) {
			log_err("Group %s, resource %s: %s", cfg->name, cfg->res[i]->name,
			        g->reason);
			free(g);
			errno = EINVAL;
			return -1;
		}
	}
	ev_timer_init(&g->mon_w, group_mon_cb, cfg->monitor_interval, cfg->monitor_interval);
	g->mon_w.data = g;
	snprintf(g->reason, sizeof(g->reason), "not started yet");
	*out = g;
	return 0;
}

/* A blocked group takes no start or stop until the operator clears it. */
static int group_refuse_blocked(const struct group *g, char *err, size_t errlen)
{
	if (g->state != GROUP_BLOCKED)
		return 0;
	snprintf(err, errlen, "Group %s is blocked (%s); clear it first.", g->cfg->name, g->reason);
	return -1;
}

int group_start(struct group *g, char *err, size_t errlen)
{
	if (group_refuse_blocked(g, err, errlen) < 0)
		return -1;
	g->failing = false;
	g->restarting = false;
	g->want = g->n;
	group_step(g);
	return 0;
}

int group_stop(struct group *g, char *err, size_t errlen)
{
	if (group_refuse_blocked(g, err, errlen) < 0)
		return -1;
	g->restarting = false;
	g->want = 0;
	group_step(g);
	return 0;
}

int group_clear(struct group *g, char *err, size_t errlen)
{
	if (g->state != GROUP_BLOCKED && g->state != GROUP_FAILED) {
		snprintf(err, errlen, "Group %s is %s, neither blocked nor failed.", g->cfg->name,
		         group_state_name(g->state));
		return -1;
	}
	g->state = GROUP_STOPPING;
	g->failing = false;
	g->want = 0;
	group_step(g);
	return 0;
}

json_t *group_status_json(const struct group *g)
{
	json_t *res = json_array(), *vols = json_array(), *o;

	for (unsigned i = 0; i < g->cfg->n_volumes; i++)
		json_array_append_new(vols, json_string(g->cfg->volumes[i]));
	for (unsigned i = 0; i < g->n; i++) {
		const struct hak_resource_cfg *rc = g->res[i].cfg;

		o = json_pack("{s:s, s:s, s:s, s:i}", "name", rc->name, "type",
		              conf_res_type_name(rc->type), "state", res_state_names[g->res[i].st],
		              "restarts", (int)g->res[i].restarts);
		if (o && g->res[i].last[0])
			json_object_set_new(o, "last_failure", json_string(g->res[i].last));
		/* with several volumes, which one an attach resource is is worth showing */
		if (o && rc->type == RES_ATTACH)
			json_object_set_new(o, "volume",
			                    json_string(rc->volume ? rc->volume : g->cfg->volume));
		json_array_append_new(res, o);
	}
	/* "volume" (the first) stays for readers of the single-volume status */
	return json_pack("{s:s, s:s?, s:o, s:s, s:s, s:o}", "name", g->cfg->name, "volume",
	                 g->cfg->volume, "volumes", vols, "state", group_state_name(g->state),
	                 "reason", g->reason, "resources", res);
}

int group_announce(struct group *g)
{
	unsigned n = 0;

	for (unsigned i = 0; g && i < g->n; i++) {
		struct res_rt *r = &g->res[i];

		if (r->cfg->type != RES_VIP || r->st != RES_UP)
			continue;
		if (vip_garp_start(&r->garp, g->loop, r->cfg->interface, &r->vip,
		                   r->cfg->garp_count, r->cfg->garp_delay) < 0)
			log_warn("Group %s: announcing resource %s on %s again failed: %s.",
			         g->cfg->name, r->cfg->name, r->cfg->interface, strerror(errno));
		else
			n++;
	}
	return (int)n;
}

/* The first line of a pid file: a positive pid, or 0. */
static pid_t pidfile_read(const char *path)
{
	char line[32] = "";
	FILE *f = fopen(path, "re");
	long v;
	char *end;

	if (!f)
		return 0;
	if (!fgets(line, sizeof(line), f))
		line[0] = 0;
	fclose(f);
	errno = 0;
	v = strtol(line, &end, 10);
	if (errno || end == line || (*end && *end != '\n') || v <= 1 || v > 1 << 22)
		return 0;
	return (pid_t)v;
}

/* kill(pid, 0) also succeeds on a zombie, and a daemonized service's zombie may never be
 * reaped here: read the state letter after the ")" of /proc/PID/stat. */
static bool pid_running(pid_t p)
{
	char path[64], buf[512];
	const char *rp;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] && rp[2] != 'Z' && rp[2] != 'X';
}

int group_pids(const struct group *g, pid_t *pids, size_t max)
{
	size_t n = 0;
	pid_t p;

	for (unsigned i = 0; g && i < g->n && n < max; i++) {
		const struct hak_resource_cfg *rc = g->res[i].cfg;

		if (rc->type != RES_EXEC || !rc->pidfile || g->res[i].st != RES_UP)
			continue;
		p = pidfile_read(rc->pidfile);
		if (p > 0 && pid_running(p))
			pids[n++] = p;
	}
	return (int)n;
}

void group_destroy(struct group *g)
{
	if (!g)
		return;
	for (unsigned i = 0; i < g->n; i++)
		vip_garp_stop(&g->res[i].garp);
	ev_timer_stop(g->loop, &g->mon_w);
	proc_cancel(g->op);
	free(g);
}
