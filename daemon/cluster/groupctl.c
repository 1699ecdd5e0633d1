/* SPDX-License-Identifier: MIT */
#include "groupctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf_group.h"
#include "conf/config.h"
#include "ctl/control.h"
#include "group.h"
#include "lib/log.h"

struct groupctl {
	struct group *g[CONFIG_MAX_GROUPS];
	const struct hak_group_cfg *cfg[CONFIG_MAX_GROUPS];
	unsigned n;
	void (*listener)(void *ctx);
	void *listener_ctx;
};

static void groupctl_changed(void *ctx, struct group *g, enum group_state st, const char *why)
{
	struct groupctl *gc = ctx;

	(void)g;
	(void)st;
	(void)why;
	if (gc->listener)
		gc->listener(gc->listener_ctx);
}

struct group *groupctl_find_volume(const struct groupctl *gc, const char *volume)
{
	for (unsigned i = 0; gc && i < gc->n; i++)
		for (unsigned k = 0; k < gc->cfg[i]->n_volumes; k++)
			if (strcmp(gc->cfg[i]->volumes[k], volume) == 0)
				return gc->g[i];
	return NULL;
}

void groupctl_set_listener(struct groupctl *gc, void (*fn)(void *ctx), void *ctx)
{
	gc->listener = fn;
	gc->listener_ctx = ctx;
}

static json_t *groupctl_cmd(void *ctx, json_t *req, char *err, size_t errlen)
{
	struct groupctl *gc = ctx;
	const char *name = json_string_value(json_object_get(req, "group"));
	const char *action = json_string_value(json_object_get(req, "action"));
	struct group *g = NULL;
	int r;

	if (!name || !action) {
		snprintf(err, errlen, "The group command needs \"group\" and \"action\" strings.");
		return NULL;
	}
	for (unsigned i = 0; i < gc->n && !g; i++)
		if (strcmp(group_name(gc->g[i]), name) == 0)
			g = gc->g[i];
	if (!g) {
		snprintf(err, errlen, "No group is named '%.64s' in the configuration.", name);
		return NULL;
	}
	if (strcmp(action, "start") == 0) {
		r = group_start(g, err, errlen);
	} else if (strcmp(action, "stop") == 0) {
		r = group_stop(g, err, errlen);
	} else if (strcmp(action, "clear") == 0) {
		r = group_clear(g, err, errlen);
	} else {
		snprintf(err, errlen, "Unknown group action '%.32s'; use start, stop or clear.",
		         action);
		return NULL;
	}
	if (r < 0)
		return NULL;
	return json_pack("{s:s}", "state", group_state_name(group_state(g)));
}

int groupctl_create(struct ev_loop *loop, struct control *ctl, const struct hak_config *cfg,
                    struct groupctl **out)
{
	const struct hak_group_list *gl = &cfg->groups;
	struct groupctl *gc = calloc(1, sizeof(*gc));
	int ret = -1;

	if (!gc)
		goto out;
	for (unsigned i = 0; i < gl->n; i++) {
		const char *socks[GROUP_MAX_VOLUMES] = {NULL};

		for (unsigned k = 0; k < gl->g[i]->n_volumes; k++) {
			const struct hak_volume_cfg *v =
			    config_find_volume(cfg, gl->g[i]->volumes[k]);

			socks[k] = v ? v->nbd_socket : NULL;
		}
		if (group_create(loop, gl->g[i], socks, groupctl_changed, gc, &gc->g[i]) < 0)
			goto out;
		gc->cfg[i] = gl->g[i];
		gc->n++;
	}
	if (control_register(ctl, "group", CONTROL_ADMIN, groupctl_cmd, gc) < 0)
		goto out;
	*out = gc;
	gc = NULL;
	ret = 0;
out:
	groupctl_destroy(gc);
	return ret;
}

json_t *groupctl_status_json(const struct groupctl *gc)
{
	json_t *a = json_array();

	for (unsigned i = 0; gc && a && i < gc->n; i++)
		json_array_append_new(a, group_status_json(gc->g[i]));
	return a;
}

void groupctl_destroy(struct groupctl *gc)
{
	if (!gc)
		return;
	for (unsigned i = 0; i < gc->n; i++)
		group_destroy(gc->g[i]);
	free(gc);
}
