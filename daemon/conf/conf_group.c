/* SPDX-License-Identifier: MIT */
#include "conf_group.h"

#include <errno.h>
#include <net/if.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_parse.h"
#include "config.h"
#include "lib/ipaddr.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define GFIELD(m)  offsetof(struct hak_group_cfg, m), sizeof(((struct hak_group_cfg *)0)->m)
#define RFIELD(m)  offsetof(struct hak_resource_cfg, m), sizeof(((struct hak_resource_cfg *)0)->m)
#define SEC(n)     ((uint64_t)(n)*1000000u)

static const char *const type_names[RES_TYPE_COUNT + 1] = {"exec",   "mount", "systemd",
                                                           "attach", "vip",   NULL};

const char *conf_res_type_name(enum hak_res_type t)
{
	return (unsigned)t < RES_TYPE_COUNT ? type_names[t] : "unknown";
}

/* The volumes of one group, in the order written: the first is what g->volume names. */
static int apply_group_volumes(struct conf_parse *ps, const struct conf_key *k,
                               const struct conf_value *v, void *base)
{
	struct hak_group_cfg *g = base;

	(void)k;
	for (; v; v = v->next) {
		if (g->n_volumes == GROUP_MAX_VOLUMES)
			return conf_parse_error(
			    ps, v->line, v->col,
			    "Group '%s' lists more than %u volumes; a group holds at most %u.",
			    g->name, GROUP_MAX_VOLUMES, GROUP_MAX_VOLUMES);
		for (unsigned i = 0; i < g->n_volumes; i++)
			if (strcmp(g->volumes[i], v->text) == 0)
				return conf_parse_error(
				    ps, v->line, v->col,
				    "Group '%s' lists volume '%.80s' twice; name each volume once.",
				    g->name, v->text);
		if (conf_schema_set_string(ps, &g->volumes[g->n_volumes], v->text) < 0)
			return -1;
		g->vol_line[g->n_volumes] = v->line;
		g->vol_col[g->n_volumes] = v->col;
		g->n_volumes++;
	}
	g->volume = g->volumes[0];
	return 0;
}

const struct conf_key conf_group_keys[CONF_GROUP_N_KEYS] = {
    {"volume", CONF_CUSTOM, CONF_REQUIRED | CONF_LIST, 0, 0, GFIELD(volumes), NULL,
     "one or more volume names, like db or db wal",
     "the volumes whose primary runs the group, failed over together",
     .apply = apply_group_volumes},
    {"monitor-interval", CONF_DURATION, 0, SEC(1) / 10, SEC(3600), GFIELD(monitor_interval), NULL,
     NULL, .doc = "the time between two health checks of the resources"},
    {"max-restarts", CONF_UINT, 0, 0, 100, GFIELD(max_restarts), NULL, NULL,
     .doc = "the in-place restarts allowed within restart-window before the group fails over"},
    {"restart-window", CONF_DURATION, 0, SEC(1), SEC(86400), GFIELD(restart_window), NULL, NULL,
     .doc = "the window in which restarts are counted"},
};

const struct conf_key conf_resource_keys[CONF_RESOURCE_N_KEYS] = {
    {"type", CONF_ENUM, CONF_REQUIRED, 0, 0, RFIELD(type), NULL, NULL,
     .doc = "what kind of resource it is", .names = type_names},
    {"start", CONF_STRING, 0, 0, 0, RFIELD(start), NULL, NULL,
     .doc = "the shell command that starts it (exec)"},
    {"stop", CONF_STRING, 0, 0, 0, RFIELD(stop), NULL, NULL,
     .doc = "the shell command that stops it (exec)"},
    {"monitor", CONF_STRING, 0, 0, 0, RFIELD(monitor), NULL, NULL,
     .doc = "the shell command that exits 0 while it is healthy (exec)"},
    {"device", CONF_PATH, 0, 0, 0, RFIELD(device), NULL, NULL,
     .doc = "the block device to mount (mount)"},
    {"directory", CONF_PATH, 0, 0, 0, RFIELD(directory), NULL, NULL,
     .doc = "the mount point (mount), or the FUSE directory (attach)"},
    {"link", CONF_PATH, 0, 0, 0, RFIELD(link), NULL, NULL,
     .doc = "the symlink to the volume's block device (attach)"},
    {"volume", CONF_STRING, 0, 0, 0, RFIELD(volume), NULL, NULL,
     .doc = "which of the group's volumes it attaches; default: the first (attach)"},
    {"fstype", CONF_STRING, 0, 0, 0, RFIELD(fstype), NULL, NULL,
     .doc = "the filesystem type (mount)"},
    {"options", CONF_STRING, 0, 0, 0, RFIELD(options), NULL, NULL,
     .doc = "the mount options (mount)"},
    {"fsck", CONF_BOOL, 0, 0, 0, RFIELD(fsck), NULL, NULL,
     .doc = "whether to check the filesystem before mounting it (mount)"},
    {"force-unmount", CONF_BOOL, 0, 0, 0, RFIELD(force_unmount), NULL, NULL,
     .doc = "whether to kill the processes that keep it busy (mount)"},
    {"unit", CONF_STRING, 0, 0, 0, RFIELD(unit), NULL, NULL,
     .doc = "the systemd unit to start and stop (systemd)"},
    {"pidfile", CONF_PATH, 0, 0, 0, RFIELD(pidfile), NULL, NULL,
     .doc = "a file whose first line is the service's pid, for fault drills (exec)"},
    {"address", CONF_STRING, 0, 0, 0, RFIELD(address), NULL, NULL,
     .doc = "the virtual IP with its prefix length, IPv4 or IPv6 (vip)"},
    {"interface", CONF_STRING, 0, 0, 0, RFIELD(interface), NULL, NULL,
     .doc = "the interface the virtual IP goes on (vip)"},
    {"garp-count", CONF_UINT, 0, 0, 100, RFIELD(garp_count), NULL, NULL,
     .doc = "the gratuitous ARPs or neighbour advertisements sent at once, and again after "
            "garp-delay (vip)"},
    {"garp-delay", CONF_DURATION, 0, 0, SEC(3600), RFIELD(garp_delay), NULL, NULL,
     .doc = "when the second burst of announcements goes out; 0 for none (vip)"},
    {"timeout", CONF_DURATION, 0, SEC(1), SEC(3600), RFIELD(timeout), NULL, NULL,
     .doc = "the longest a start, stop or monitor may take"},
};

void *conf_group_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                      void *parent_base)
{
	struct hak_config *cfg = ctx;
	struct hak_group_cfg *g;

	(void)parent_base;
	if (cfg->groups.n >= CONFIG_MAX_GROUPS) {
		conf_parse_error(ps, blk->line, blk->col,
		                 "Too many groups; hak supports at most %u.", CONFIG_MAX_GROUPS);
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (!g || !(g->name = strdup(blk->name))) {
		free(g);
		conf_parse_oom(ps);
		return NULL;
	}
	g->monitor_interval = HAK_DEFAULT_MON_INTERVAL;
	g->max_restarts = HAK_DEFAULT_MAX_RESTARTS;
	g->restart_window = HAK_DEFAULT_RESTART_WINDOW;
	g->line = blk->line;
	cfg->groups.g[cfg->groups.n++] = g;
	return g;
}

/* Where resource i of the group is written: its volume value if any, else its header. */
static void attach_pos(const struct conf_block *blk, unsigned i, unsigned *line, unsigned *col)
{
	const struct conf_block *rb = blk->children;
	const struct conf_directive *d;

	/* the group's children are its resources, in the order they were opened */
	for (; rb && i; rb = rb->next)
		i--;
	if (!rb)
		return;
	*line = rb->line;
	*col = rb->col;
	if ((d = conf_parse_find(rb, "volume")) != NULL) {
		*line = d->vals->line;
		*col = d->vals->col;
	}
}

/*
 * Each attach resource names one of the group's volumes (the first by default), and no two
 * attach the same one: two nbdfuse mounts of one volume would be two writers behind one
 * filesystem's back.
 */
static int check_attach_volumes(struct conf_parse *ps, const struct conf_block *blk,
                                struct hak_group_cfg *g)
{
	char list[GROUP_MAX_VOLUMES * (CONF_SCHEMA_NAME_MAX + 2)] = "";
	unsigned line = blk->line, col = blk->col;

	for (unsigned i = 0; i < g->n_volumes; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
		         g->volumes[i]);
	for (unsigned i = 0; i < g->n_res; i++) {
		struct hak_resource_cfg *r = g->res[i];
		unsigned k = 0;

		if (r->type != RES_ATTACH)
			continue;
		if (!r->volume && conf_schema_set_string(ps, &r->volume, g->volumes[0]) < 0)
			return -1;
		attach_pos(blk, i, &line, &col);
		while (k < g->n_volumes && strcmp(g->volumes[k], r->volume) != 0)
			k++;
		if (k == g->n_volumes)
			return conf_parse_error(
			    ps, line, col,
			    "Resource '%s' attaches volume '%.80s', which group "
			    "'%s' does not hold; name one of its volumes: %s.",
			    r->name, r->volume, g->name, list);
		for (unsigned j = 0; j < i; j++)
			if (g->res[j]->type == RES_ATTACH &&
			    strcmp(g->res[j]->volume, r->volume) == 0)
				return conf_parse_error(ps, line, col,
				                        "Resources '%s' and '%s' of group '%s' "
				                        "both attach volume '%s'; "
				                        "attach each volume once.",
				                        g->res[j]->name, r->name, g->name,
				                        r->volume);
	}
	return 0;
}

int conf_group_check(struct conf_parse *ps, void *ctx, const struct conf_block *blk, void *base)
{
	struct hak_group_cfg *g = base;

	(void)ctx;
	if (!g->n_res)
		return conf_parse_error(
		    ps, blk->line, blk->col,
		    "Group '%s' has no resource; add at least one 'resource NAME {' section "
		    "inside it.",
		    g->name);
	return check_attach_volumes(ps, blk, g);
}

void *conf_resource_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                         void *parent_base)
{
	struct hak_group_cfg *g = parent_base;
	struct hak_resource_cfg *r;

	(void)ctx;
	for (unsigned i = 0; i < g->n_res; i++) {
		if (strcmp(g->res[i]->name, blk->name) == 0) {
			conf_parse_error(
			    ps, blk->line, blk->col,
			    "Group '%s' already has a resource '%s' (line %u); each needs its own "
			    "name.",
			    g->name, blk->name, g->res[i]->line);
			return NULL;
		}
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->name = strdup(blk->name))) {
		free(r);
		conf_parse_oom(ps);
		return NULL;
	}
	r->fsck = 1;
	r->force_unmount = 1;
	r->timeout = HAK_DEFAULT_RES_TIMEOUT;
	r->garp_count = HAK_DEFAULT_GARP_COUNT;
	r->garp_delay = HAK_DEFAULT_GARP_DELAY;
	r->line = blk->line;
	g->res[g->n_res++] = r;
	return r;
}

/* Keys of one type are an error in another: a 'unit' on a mount is a typo worth a stop. */
static const char *const type_keys[RES_TYPE_COUNT][4] = {
    [RES_EXEC] = {"start", "stop", "monitor", NULL},
    [RES_MOUNT] = {"device", "directory", "fstype", NULL},
    [RES_SYSTEMD] = {"unit", NULL},
    [RES_ATTACH] = {"directory", "link", NULL},
    [RES_VIP] = {"address", "interface", NULL},
};
static const char *const type_only_keys[] = {
    "start",   "stop",      "monitor",       "device",     "directory", "fstype",
    "options", "fsck",      "force-unmount", "unit",       "link",      "pidfile",
    "address", "interface", "garp-count",    "garp-delay", "volume"};

static int key_allowed(enum hak_res_type t, const char *key)
{
	static const char *const extra[RES_TYPE_COUNT][3] = {
	    [RES_EXEC] = {"pidfile"},
	    [RES_MOUNT] = {"options", "fsck", "force-unmount"},
	    [RES_ATTACH] = {"volume"},
	    [RES_VIP] = {"garp-count", "garp-delay"},
	};

	for (unsigned i = 0; i < 4 && type_keys[t][i]; i++)
		if (strcmp(type_keys[t][i], key) == 0)
			return 1;
	for (unsigned i = 0; i < 3 && extra[t][i]; i++)
		if (strcmp(extra[t][i], key) == 0)
			return 1;
	return 0;
}

/* A typo in a virtual IP must stop the daemon at start, not surface at the first failover. */
static int check_vip(struct conf_parse *ps, const struct conf_block *blk,
                     const struct hak_resource_cfg *r)
{
	const struct conf_directive *d = conf_parse_find(blk, "address");
	struct ipaddr a;
	char err[256];

	if (ipaddr_parse(r->address, &a, err, sizeof(err)) < 0)
		return conf_parse_error(ps, d->line, d->col, "Resource '%s': %s", r->name, err);
	d = conf_parse_find(blk, "interface");
	if (!r->interface[0] || strlen(r->interface) >= IFNAMSIZ || strchr(r->interface, '/'))
		return conf_parse_error(
		    ps, d->line, d->col,
		    "Resource '%s': '%s' is not an interface name (1 to %d characters, no "
		    "'/').",
		    r->name, r->interface, IFNAMSIZ - 1);
	return 0;
}

int conf_resource_check(struct conf_parse *ps, void *ctx, const struct conf_block *blk, void *base)
{
	struct hak_resource_cfg *r = base;
	const struct conf_directive *d;

	(void)ctx;
	for (unsigned i = 0; i < N_ELEMS(type_only_keys); i++) {
		d = conf_parse_find(blk, type_only_keys[i]);
		if (d && !key_allowed(r->type, type_only_keys[i]))
			return conf_parse_error(
			    ps, d->line, d->col,
			    "Key '%s' does not apply to resource '%s' of type %s%s.",
			    type_only_keys[i], r->name, conf_res_type_name(r->type),
			    /* a group's volumes are listed once, on the group's own line */
			    strcmp(type_only_keys[i], "volume") == 0
			        ? "; only an attach resource names a volume, the group's volumes "
			          "go on the group's own 'volume' line"
			        : "");
	}
	for (unsigned i = 0; i < 4 && type_keys[r->type][i]; i++) {
		if (!conf_parse_find(blk, type_keys[r->type][i]))
			return conf_parse_error(
			    ps, blk->line, blk->col, "Resource '%s' of type %s needs the key '%s'.",
			    r->name, conf_res_type_name(r->type), type_keys[r->type][i]);
	}
	return r->type == RES_VIP ? check_vip(ps, blk, r) : 0;
}

/* Whether group g lists volume name. */
static bool group_holds(const struct hak_group_cfg *g, const char *name)
{
	for (unsigned i = 0; i < g->n_volumes; i++)
		if (strcmp(g->volumes[i], name) == 0)
			return true;
	return false;
}

int conf_group_check_volumes(struct conf_parse *ps, const struct hak_group_list *gl,
                             const char *const *volumes, unsigned n_volumes)
{
	for (unsigned i = 0; i < gl->n; i++) {
		const struct hak_group_cfg *g = gl->g[i];

		for (unsigned v = 0; v < g->n_volumes; v++) {
			const char *name = g->volumes[v];
			unsigned k = 0;

			while (k < n_volumes && strcmp(volumes[k], name) != 0)
				k++;
			if (k == n_volumes)
				return conf_parse_error(
				    ps, g->vol_line[v], g->vol_col[v],
				    "Group '%s' follows volume '%s', but no 'volume %s {' section "
				    "exists.",
				    g->name, name, name);
			/* One primary per volume, so one group: two would fight over its
			 * failover. */
			for (unsigned j = 0; j < i; j++)
				if (group_holds(gl->g[j], name))
					return conf_parse_error(
					    ps, g->vol_line[v], g->vol_col[v],
					    "Groups '%s' and '%s' both hold volume '%s'; a volume "
					    "belongs to one group.",
					    gl->g[j]->name, g->name, name);
		}
	}
	return 0;
}

static void resource_free(struct hak_resource_cfg *r)
{
	char **strs[] = {&r->name,      &r->start,   &r->stop,      &r->monitor, &r->device,
	                 &r->directory, &r->fstype,  &r->options,   &r->unit,    &r->link,
	                 &r->pidfile,   &r->address, &r->interface, &r->volume};

	for (unsigned i = 0; i < N_ELEMS(strs); i++)
		free(*strs[i]);
	free(r);
}

void conf_group_free(struct hak_group_list *gl)
{
	for (unsigned i = 0; i < gl->n; i++) {
		for (unsigned k = 0; k < gl->g[i]->n_res; k++)
			resource_free(gl->g[i]->res[k]);
		free(gl->g[i]->name);
		/* volume is volumes[0], not a copy */
		for (unsigned k = 0; k < gl->g[i]->n_volumes; k++)
			free(gl->g[i]->volumes[k]);
		free(gl->g[i]);
	}
	gl->n = 0;
}
