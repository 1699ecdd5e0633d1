/* SPDX-License-Identifier: MIT */
/*
 * The service groups of a hakd: created from the config, driven over the control socket
 * (`hakctl group start|stop|clear NAME`) until the cluster manager drives them by itself, and
 * shown in `hakctl status`.
 */
#ifndef HAK_GROUPCTL_H
#define HAK_GROUPCTL_H

#include <jansson.h>

struct ev_loop;
struct control;
struct hak_config;
struct groupctl;

int groupctl_create(struct ev_loop *loop, struct control *ctl, const struct hak_config *cfg,
                    struct groupctl **out);
/* The group that runs on top of volume, one of its volumes (NULL: none). */
struct group *groupctl_find_volume(const struct groupctl *gc, const char *volume);
/* Called (from the loop) after every state change of any group: the cluster manager. */
void groupctl_set_listener(struct groupctl *gc, void (*fn)(void *ctx), void *ctx);
/* The "groups" array of the status. */
json_t *groupctl_status_json(const struct groupctl *gc);
void groupctl_destroy(struct groupctl *gc);

#endif
