/* SPDX-License-Identifier: MIT */
#include "checkconf.h"

#include <stdio.h>
#include <string.h>

#include "conf/config.h"
#include "ctl.h"

static void checkconf_print(void *arg, const char *message)
{
	unsigned *n = arg;

	(*n)++;
	printf("%s\n", message);
}

int checkconf_run(int argc, char **argv)
{
	struct hak_config *cfg = NULL;
	unsigned errors = 0;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "hakctl check-config: name the file and nothing else, e.g. 'hakctl "
		                "check-config /etc/hak/hak.conf'.\n");
		return EXIT_USAGE;
	}
	if (config_check_all(argv[1], checkconf_print, &errors, &cfg) < 0) {
		fflush(stdout);
		fprintf(stderr, "hakctl check-config: %s has %u error%s.\n", argv[1], errors,
		        errors == 1 ? "" : "s");
		return EXIT_USAGE;
	}
	printf("%s: no errors; %zu node section%s, %zu volume%s, %zu group%s, %s.\n", argv[1],
	       cfg->n_nodes, cfg->n_nodes == 1 ? "" : "s", cfg->n_volumes,
	       cfg->n_volumes == 1 ? "" : "s", (size_t)cfg->groups.n, cfg->groups.n == 1 ? "" : "s",
	       cfg->cluster.present ? "a cluster section" : "no cluster section");
	config_free(cfg);
	return 0;
}
