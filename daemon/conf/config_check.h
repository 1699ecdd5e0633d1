/* SPDX-License-Identifier: MIT */
/*
 * hak.conf's checks of the whole file (config_check.c), and what config.c shares with them.
 */
#ifndef HAK_CONFIG_CHECK_H
#define HAK_CONFIG_CHECK_H

#include "conf_parse.h"
#include "config.h"

#define CONFIG_MAX_VOLUMES 4096u
#define CONFIG_MAX_NODES   2u
#define CONFIG_MAX_OFFSET  65534u /* replication-port-offset */

/* Where to point at a setting of blk: its value if it is written, else the section header. */
void config_setting_pos(const struct conf_block *blk, const char *key, unsigned *line,
                        unsigned *col);
/* STATE-DIR/NAME.meta, the default meta-disk (malloc'ed), or NULL when memory ran out. */
char *config_meta_default_path(const char *state_dir, const char *name);
/* Every check that needs the whole file, after the schema walk filled cfg. 0, or -1 with the
 * error (file:line:col and a sentence) in ps. */
int config_check_file(struct conf_parse *ps, struct hak_config *cfg, const struct conf_block *root);

#endif
