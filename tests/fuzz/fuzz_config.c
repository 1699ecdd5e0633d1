/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the hak.conf parser: any bytes must give either a config or one error
 * line, never a crash, a leak or undefined behaviour; and a config that parses must keep the
 * promises config.h makes about it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "conf/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_nodes(const struct hak_config *cfg)
{
	const struct hak_node_cfg *self, *peer;
	char err[512];

	if (cfg->n_nodes != 0 && cfg->n_nodes != 2)
		abort();
	for (size_t i = 0; i < cfg->n_nodes; i++) {
		const struct hak_node_cfg *n = &cfg->nodes[i];
		if (!n->name || !n->address || !n->hostname || n->port == 0 ||
		    (n->family != AF_INET && n->family != AF_INET6))
			abort();
	}
	if (cfg->n_nodes == 2 && (strcmp(cfg->nodes[0].name, cfg->nodes[1].name) == 0 ||
	                          strcmp(cfg->nodes[0].hostname, cfg->nodes[1].hostname) == 0))
		abort();
	if (cfg->node_name && cfg->n_nodes == 0)
		abort();
	if (cfg->n_nodes == 2) {
		if (config_find_self(cfg, cfg->nodes[1].name, &self, &peer, err, sizeof(err)) < 0 ||
		    self != &cfg->nodes[1] || peer != &cfg->nodes[0])
			abort();
	} else if (config_find_self(cfg, NULL, &self, &peer, err, sizeof(err)) < 0 || self ||
	           peer) {
		abort();
	}
}

static void check_volumes(const struct hak_config *cfg)
{
	for (size_t i = 0; i < cfg->n_volumes; i++) {
		const struct hak_volume_cfg *v = &cfg->volumes[i];
		if (!v->backing || !v->nbd_socket || config_find_volume(cfg, v->name) != v)
			abort();
		if (v->meta_internal == (v->meta_path != NULL))
			abort();
		if (v->ping_timeout <= v->ping_interval || v->ping_interval < 0.05 ||
		    v->connect_interval > 60.0)
			abort();
		if (v->bitmap_block_size < 4096 ||
		    (v->bitmap_block_size & (v->bitmap_block_size - 1)))
			abort();
		if (cfg->n_nodes && v->port_offset + cfg->nodes[0].port > 65535)
			abort();
		if (strcmp(config_mode_name(v->mode), "unknown") == 0)
			abort();
	}
}

/* A cluster section promises a pair with matching heartbeat paths and a sane deadtime. */
static void check_cluster(const struct hak_config *cfg)
{
	const struct hak_cluster_cfg *c = &cfg->cluster;

	if (!c->present) {
		for (size_t i = 0; i < cfg->n_nodes; i++)
			if (cfg->nodes[i].n_heartbeat)
				abort();
		return;
	}
	if (cfg->n_nodes != 2 || !c->auth_key_file || c->cluster_id == 0 ||
	    !(c->deadtime > 2 * c->heartbeat_interval))
		abort();
	const struct hak_node_cfg *a = &cfg->nodes[0], *b = &cfg->nodes[1];
	if (a->n_heartbeat < 2 || a->n_heartbeat > HAK_MAX_PATHS ||
	    a->n_heartbeat != b->n_heartbeat)
		abort();
	for (unsigned i = 0; i < a->n_heartbeat; i++)
		if (a->heartbeat[i].family != b->heartbeat[i].family || !a->heartbeat[i].port ||
		    (a->heartbeat[i].family != AF_INET && a->heartbeat[i].family != AF_INET6))
			abort();
}

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
		check_volumes(cfg);
		check_nodes(cfg);
		check_cluster(cfg);
	} else if (memchr(err, '\0', sizeof(err)) == NULL || strncmp(err, "fuzz.conf:", 10) != 0) {
		abort();
	}
	config_free(cfg);
	free(text);
	return 0;
}
