/* SPDX-License-Identifier: MIT */
/*
 * A service group at run time: the resources of one "group" section, started in order and
 * stopped in reverse, one operation at a time, each a child process with a time limit (proc.h).
 *
 * Failure handling, as operators of Pacemaker and LifeKeeper expect it:
 *  - a start that fails stops what was started (the failed resource included, since a failed
 *    start may have done half its work) and leaves the group FAILED: the cluster fails over;
 *  - a monitor that fails restarts the group in place from that resource on (stop from the top
 *    down to it, start again), at most max-restarts times within restart-window; one more
 *    failure stops the group and leaves it FAILED;
 *  - a stop that fails leaves the group BLOCKED: nothing more is done by itself, the status says
 *    which resource and why, and the cluster must fence this node before the peer takes over. A
 *    mount is only stopped when /proc/self/mountinfo no longer lists it, whatever umount said.
 */
#ifndef HAK_GROUP_H
#define HAK_GROUP_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

struct ev_loop;
struct hak_group_cfg;
struct group;

enum group_state {
	GROUP_STOPPED = 0,
	GROUP_STARTING,
	GROUP_STARTED,
	GROUP_STOPPING,
	GROUP_RESTARTING, /* a monitor failed: restarting from the failed resource on */
	GROUP_FAILED,     /* stopped after a failed start or too many restarts */
	GROUP_BLOCKED,    /* a stop failed: the resources may still be active here */
};

/* Called on every state change, with a sentence saying why. */
typedef void (*group_changed_fn)(void *ctx, struct group *g, enum group_state st, const char *why);

/* nbd_sockets[i]: where cfg->volumes[i] is served, for the attach resources, each of which
 * opens its own volume; NULL (or a NULL entry) when unknown. */
int group_create(struct ev_loop *loop, const struct hak_group_cfg *cfg,
                 const char *const *nbd_sockets, group_changed_fn changed, void *ctx,
                 struct group **out);
/* Start or stop the whole group; 0, or -1 with a sentence in err (e.g. BLOCKED). Both may be
 * called in any state: the group turns around after the operation in progress. */
int group_start(struct group *g, char *err, size_t errlen);
int group_stop(struct group *g, char *err, size_t errlen);
/* After an operator fixed what blocked a stop: forget the block and stop again. */
int group_clear(struct group *g, char *err, size_t errlen);
enum group_state group_state(const struct group *g);
/* Announce the group's started virtual IPs again (the old primary re-appeared and neighbours
 * may have learnt its MAC back). Returns how many were announced. */
int group_announce(struct group *g);
/* The live pids named by the pid files of the started exec resources, at most max; how many.
 * For fault drills: a "node crash" kills these with the daemon. */
int group_pids(const struct group *g, pid_t *pids, size_t max);
const char *group_state_name(enum group_state st);
const char *group_name(const struct group *g);
json_t *group_status_json(const struct group *g);
/* Kills any operation in progress; the resources stay as they are. */
void group_destroy(struct group *g);

/* Exposed for tests: is DIR a mount point in /proc/self/mountinfo? 1, 0, or -1 with errno. */
int group_is_mounted(const char *dir);

#endif
