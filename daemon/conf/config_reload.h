/* SPDX-License-Identifier: MIT */
/*
 * What a configuration reload (SIGHUP, hakctl reload) may change in a running hakd. The
 * difference between the running configuration and the file's new one is walked key by key
 * through the schema tables (so a new key is compared without code here); each changed key is
 * live (applied in place: the modules that use it read it from the running configuration when
 * they need it) or refused (it was copied at start into sockets, threads or metadata: a restart
 * is needed). See hak.conf(5), RELOADING.
 */
#ifndef HAK_CONFIG_RELOAD_H
#define HAK_CONFIG_RELOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

#define RELOAD_MAX_CHANGES 64u
#define RELOAD_VALUE_MAX   128u

struct conf_key;

struct reload_change {
	char where[80]; /* "global", "cluster", "node a", "volume db", "group pg", ... */
	char key[48]; /* the key as written in hak.conf, or "(section)" when one is added or gone */
	char old_val[RELOAD_VALUE_MAX], new_val[RELOAD_VALUE_MAX];
	bool live;
	/* where to apply a live change: the key's field in the running and the new section */
	const struct conf_key *k;
	void *run_base;
	const void *new_base;
};

struct reload_plan {
	struct reload_change c[RELOAD_MAX_CHANGES];
	unsigned n, n_live, n_refused;
	bool overflow; /* more changes than RELOAD_MAX_CHANGES (all refused) */
};

/*
 * Fills plan with every difference between the running configuration run and next (which passed
 * the whole-file checks). Live changes are those of the keys in the list of hak.conf(5).
 */
void config_reload_diff(struct hak_config *run, const struct hak_config *next,
                        struct reload_plan *plan);
/*
 * Copies the live changes of plan into run (on the main loop: nothing else reads them
 * meanwhile). 0, or -1 with errno ENOMEM (some may be applied then).
 */
int config_reload_apply(struct reload_plan *plan);
/* "volume db: resync-rate-max 0 -> 100M" style, one change, for the log and the reply. */
void config_reload_describe(const struct reload_change *c, char *out, size_t len);

#endif
