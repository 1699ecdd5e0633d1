/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the hak.conf parser: any bytes must give either a config or one error
 * line, never a crash, a leak or undefined behaviour.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hak_config *cfg = NULL;
	char err[256];
	/* A private copy with no slack, so ASan catches any read past len. */
	char *text = malloc(size ? size : 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	if (config_parse(text, size, "fuzz.conf", &cfg, err, sizeof(err)) == 0) {
		/* A successful parse must be internally consistent. */
		for (size_t i = 0; i < cfg->n_volumes; i++) {
			if (!cfg->volumes[i].backing || !cfg->volumes[i].nbd_socket ||
			    config_find_volume(cfg, cfg->volumes[i].name) != &cfg->volumes[i])
				abort();
		}
	} else if (memchr(err, '\0', sizeof(err)) == NULL || strncmp(err, "fuzz.conf:", 10) != 0) {
		abort();
	}
	config_free(cfg);
	free(text);
	return 0;
}
