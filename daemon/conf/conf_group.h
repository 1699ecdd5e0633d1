/* SPDX-License-Identifier: MIT */
/*
 * hak.conf's service groups: what runs on top of a replicated volume on whichever node is
 * primary, started in the order written and stopped in reverse.
 *
 *   group pg {
 *       volume db wal             # the volumes whose primary runs the group (one or more)
 *       monitor-interval 5s
 *       max-restarts 3            # in-place restarts within restart-window, then fail over
 *       restart-window 10m
 *       resource data { type mount; device /dev/loop7; directory /srv/pg; fstype ext4 }
 *       resource postgres { type exec; start "..."; stop "..."; monitor "..." }
 *       resource ip { type vip; address 192.0.2.10/24; interface eth0 }
 *       resource walblk { type attach; volume wal; directory /run/wal; link /dev/hak-wal }
 *   }
 * (one key per line in the real file; see etc/hak.conf and hak.conf(5)).
 */
#ifndef HAK_CONF_GROUP_H
#define HAK_CONF_GROUP_H

#include <stdbool.h>

#include "conf_schema.h"

#define CONFIG_MAX_GROUPS          16u
#define GROUP_MAX_RESOURCES        16u
#define GROUP_MAX_VOLUMES          16u
#define HAK_DEFAULT_RES_TIMEOUT    60.0 /* seconds for one start, stop or monitor */
#define HAK_DEFAULT_MON_INTERVAL   5.0
#define HAK_DEFAULT_MAX_RESTARTS   3u
#define HAK_DEFAULT_RESTART_WINDOW 600.0

#define HAK_DEFAULT_GARP_COUNT 5u  /* gratuitous ARPs / unsolicited NAs at once ... */
#define HAK_DEFAULT_GARP_DELAY 5.0 /* ... and again this many seconds later */

enum hak_res_type { RES_EXEC = 0, RES_MOUNT, RES_SYSTEMD, RES_ATTACH, RES_VIP, RES_TYPE_COUNT };

struct hak_resource_cfg {
	char *name;
	enum hak_res_type type; /* "type" (required) */
	/* exec: shell commands; monitor exit 0 = healthy */
	char *start, *stop, *monitor;
	char *pidfile; /* exec, optional: the service's pid on the first line (fault drills) */
	/* mount */
	char *device, *directory, *fstype, *options;
	int fsck;          /* "fsck": check the filesystem before mounting (default yes) */
	int force_unmount; /* "force-unmount": kill the processes using it if umount fails */
	/* systemd */
	char *unit;
	/* attach: the volume as a block device, through nbdfuse (FUSE file in directory) and a
	 * loop device, which link points to; volume is one of the group's volumes (after the
	 * check, the group's first when the key is not written) */
	char *link, *volume;
	/* vip: "192.0.2.10/24" or "2001:db8::10/64" on interface, announced garp_count times at
	 * once and again after garp_delay seconds (0: once) */
	char *address, *interface;
	unsigned garp_count;
	double garp_delay;
	double timeout; /* "timeout": the longest one start, stop or monitor may take */
	unsigned line;
};

struct hak_group_cfg {
	char *name;
	/* "volume" (required, one or more): the group runs where these volumes are primary; the
	 * cluster manager fails them over together */
	char *volumes[GROUP_MAX_VOLUMES];
	unsigned n_volumes;
	unsigned vol_line[GROUP_MAX_VOLUMES], vol_col[GROUP_MAX_VOLUMES]; /* for messages */
	char *volume; /* volumes[0] itself (not a copy), for code that follows one volume */
	double monitor_interval;
	unsigned max_restarts;
	double restart_window;
	struct hak_resource_cfg *res[GROUP_MAX_RESOURCES]; /* in start order */
	unsigned n_res;
	unsigned line;
};

struct hak_group_list {
	struct hak_group_cfg *g[CONFIG_MAX_GROUPS];
	unsigned n;
};

/* The two sections config.c puts in its schema (an initializer needs constants, hence the
 * macro); ctx of the open() functions is the hak_config. */
#define CONF_GROUP_N_KEYS    4
#define CONF_RESOURCE_N_KEYS 19
extern const struct conf_key conf_group_keys[CONF_GROUP_N_KEYS];
extern const struct conf_key conf_resource_keys[CONF_RESOURCE_N_KEYS];
void *conf_group_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                      void *parent_base);
int conf_group_check(struct conf_parse *ps, void *ctx, const struct conf_block *blk, void *base);
void *conf_resource_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                         void *parent_base);
int conf_resource_check(struct conf_parse *ps, void *ctx, const struct conf_block *blk, void *base);
#define CONF_GROUP_SECTIONS                                                                        \
	{"group",                                                                                  \
	 NULL,                                                                                     \
	 1,                                                                                        \
	 CONFIG_MAX_GROUPS,                                                                        \
	 conf_group_keys,                                                                          \
	 CONF_GROUP_N_KEYS,                                                                        \
	 conf_group_open,                                                                          \
	 conf_group_check,                                                                         \
	 NULL},                                                                                    \
	{                                                                                          \
		"resource", "group", 1, GROUP_MAX_RESOURCES, conf_resource_keys,                   \
		    CONF_RESOURCE_N_KEYS, conf_resource_open, conf_resource_check, NULL            \
	}

/* Checks across sections once the whole file is read: the volumes named by groups exist, and
 * none belongs to two groups. */
int conf_group_check_volumes(struct conf_parse *ps, const struct hak_group_list *gl,
                             const char *const *volumes, unsigned n_volumes);
void conf_group_free(struct hak_group_list *gl);
const char *conf_res_type_name(enum hak_res_type t);

#endif
