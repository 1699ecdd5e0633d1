/* SPDX-License-Identifier: MIT */
/*
 * The checks of hak.conf that need the whole file: the pair of nodes, ports and addresses,
 * metadata files, the cluster section and its paths, groups, and each volume's defaults that
 * depend on other sections (fencing, the replication key). They run after the schema walk
 * (config.c), since 'global' and the nodes may come after the volumes.
 */
#include "config_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "conf_parse.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Where to point at a setting: its value if it is written, else the section header. */
void config_setting_pos(const struct conf_block *blk, const char *key, unsigned *line,
                        unsigned *col)
{
	const struct conf_directive *d = conf_parse_find(blk, key);

	*line = d && d->vals ? d->vals->line : blk->line;
	*col = d && d->vals ? d->vals->col : blk->col;
}

/* ---- checks of the whole file ---- */

/* Markers for conf_parse_unique(): what a value must be unique among. */
static const char ns_files, ns_offsets;

static const struct conf_block *block_find(const struct conf_block *root, const char *type)
{
	for (const struct conf_block *c = root->children; c; c = c->next)
		if (strcmp(c->type, type) == 0)
			return c;
	return NULL;
}

static const struct conf_block *block_next(const struct conf_block *c, const char *type)
{
	for (c = c->next; c; c = c->next)
		if (strcmp(c->type, type) == 0)
			return c;
	return NULL;
}

/*
 * Metadata files get their default path here, since 'state-dir' may come after the volume; a
 * metadata file shared with another volume's metadata or backing would corrupt both.
 */
static int check_meta(struct conf_parse *ps, struct hak_config *cfg, const struct conf_block *root)
{
	const struct conf_block *c, *first;
	size_t i = 0;
	unsigned line, col;
	int rc = 0;

	for (c = block_find(root, "volume"); c; c = block_next(c, "volume"), i++) {
		struct hak_volume_cfg *v = &cfg->volumes[i];
		if (conf_parse_unique(ps, &ns_files, v->backing, c, &first) < 0)
			return -1;
		if (!v->meta_internal && !v->meta_path &&
		    !(v->meta_path = config_meta_default_path(cfg->state_dir, v->name)))
			return conf_parse_oom(ps);
	}
	for (i = 0, c = block_find(root, "volume"); c; c = block_next(c, "volume"), i++) {
		const struct hak_volume_cfg *v = &cfg->volumes[i];
		if (v->meta_internal)
			continue;
		if (conf_parse_unique(ps, &ns_files, v->meta_path, c, &first) < 0)
			return -1;
		if (!first)
			continue;
		const struct hak_volume_cfg *o = config_find_volume(cfg, first->name);
		int is_backing = strcmp(o->backing, v->meta_path) == 0;
		config_setting_pos(c, "meta-disk", &line, &col);
		if (o == v)
			rc = conf_parse_error(
			    ps, line, col,
			    "The metadata file of volume '%s' is its backing '%.80s'; write "
			    "'meta-disk internal' to keep the metadata on the backing store.",
			    v->name, v->backing);
		else
			rc = conf_parse_error(
			    ps, line, col,
			    "The metadata file '%.80s' of volume '%s' is also the %s of volume "
			    "'%s' (line %u); give each volume its own meta-disk, or use "
			    "'internal'.",
			    v->meta_path, v->name, is_backing ? "backing" : "metadata file",
			    o->name, o->line);
	}
	return rc;
}

static int check_node_pair(struct conf_parse *ps, const struct hak_config *cfg,
                           const struct conf_block *root)
{
	const struct conf_block *a = block_find(root, "node"),
	                        *b = a ? block_next(a, "node") : NULL;
	const struct hak_node_cfg *na = &cfg->nodes[0], *nb = &cfg->nodes[1];
	unsigned line, col;

	if (!b)
		return conf_parse_error(
		    ps, a->line, a->col,
		    "Node '%s' is the only node section; replication needs exactly two, so "
		    "add the peer's 'node NAME { address IP:PORT }' section, or remove this "
		    "one to serve standalone volumes.",
		    na->name);
	int rc = 0;

	if (na->family == nb->family && na->port == nb->port && strcmp(na->host, nb->host) == 0) {
		config_setting_pos(b, "address", &line, &col);
		rc = conf_parse_error(
		    ps, line, col,
		    "Node '%s' has the same address '%.80s' as node '%s' (line %u); "
		    "each node needs its own.",
		    nb->name, nb->address, na->name, na->line);
	}
	if (strcmp(na->hostname, nb->hostname) == 0) {
		config_setting_pos(b, "hostname", &line, &col);
		return conf_parse_error(
		    ps, line, col,
		    "Node '%s' has the same hostname '%.80s' as node '%s' (line %u), so "
		    "hakd could not tell which one it runs on; set 'hostname' to each "
		    "machine's own hostname.",
		    nb->name, nb->hostname, na->name, na->line);
	}
	return rc;
}

static int check_nodes(struct conf_parse *ps, const struct hak_config *cfg,
                       const struct conf_block *root)
{
	const struct conf_block *g = block_find(root, "global");
	const struct conf_directive *d;

	if (cfg->n_nodes && check_node_pair(ps, cfg, root) < 0)
		return -1;
	if (!cfg->node_name)
		return 0;
	for (size_t i = 0; i < cfg->n_nodes; i++)
		if (strcmp(cfg->nodes[i].name, cfg->node_name) == 0)
			return 0;
	d = conf_parse_find(g, "node");
	if (!cfg->n_nodes)
		return conf_parse_error(
		    ps, d->vals->line, d->vals->col,
		    "The global 'node %s' names a node, but there are no node sections; "
		    "remove it, or add the two 'node NAME {' sections.",
		    cfg->node_name);
	return conf_parse_error(
	    ps, d->vals->line, d->vals->col,
	    "The global 'node %s' names no node section; the nodes are '%s' and '%s'.",
	    cfg->node_name, cfg->nodes[0].name, cfg->nodes[1].name);
}

/* The arena keeps the text of an offset for the uniqueness table. */
static const char *offset_text(struct conf_parse *ps, unsigned offset)
{
	char *s = conf_parse_alloc(ps, 24);

	if (s)
		snprintf(s, 24, "%u", offset);
	else
		conf_parse_oom(ps);
	return s;
}

/*
 * Both nodes on one IP (a test pair on one machine): node A's volume with offset o listens on
 * A.port + o, which must not be B.port + o' for any volume's offset o'.
 */
static int check_shared_ip(struct conf_parse *ps, const struct hak_config *cfg,
                           const struct conf_block *root)
{
	const struct hak_node_cfg *na = &cfg->nodes[0], *nb = &cfg->nodes[1];
	long delta = (long)nb->port - (long)na->port;
	const struct conf_block *c, *other;
	char text[24];
	unsigned line, col;
	size_t i = 0;

	for (c = block_find(root, "volume"); c; c = block_next(c, "volume"), i++) {
		const struct hak_volume_cfg *v = &cfg->volumes[i];
		snprintf(text, sizeof(text), "%ld", (long)v->port_offset - delta);
		other = conf_parse_unique_find(ps, &ns_offsets, text);
		if (!other)
			continue;
		config_setting_pos(c, "replication-port-offset", &line, &col);
		return conf_parse_error(
		    ps, line, col,
		    "Volume '%s' would listen on port %u of node '%s', which volume '%s' "
		    "uses on node '%s'; both nodes have the IP %s, so choose offsets or "
		    "node ports farther apart.",
		    v->name, na->port + v->port_offset, na->name, other->name, nb->name, na->host);
	}
	return 0;
}

/*
 * With nodes, each volume listens on each node's port + its offset, so offsets must differ,
 * stay within 65535, and, when both nodes share an IP (a test pair on one machine), one node's
 * ports must not be the other's.
 */
static int check_ports(struct conf_parse *ps, const struct hak_config *cfg,
                       const struct conf_block *root)
{
	const struct hak_node_cfg *na, *nb;
	const struct conf_block *c, *first;
	unsigned top, line, col, errors = ps->n_errors;
	const char *text;
	size_t i = 0;

	if (cfg->n_nodes != 2) /* a lone node is check_node_pair()'s mistake */
		return 0;
	na = &cfg->nodes[0];
	nb = &cfg->nodes[1];
	top = na->port > nb->port ? na->port : nb->port;
	for (c = block_find(root, "volume"); c; c = block_next(c, "volume"), i++) {
		const struct hak_volume_cfg *v = &cfg->volumes[i];
		config_setting_pos(c, "replication-port-offset", &line, &col);
		if (top + v->port_offset > 65535) {
			conf_parse_error(
			    ps, line, col,
			    "replication-port-offset %u of volume '%s' goes past port 65535 "
			    "on node '%s' (port %u); use at most %u.",
			    v->port_offset, v->name, na->port == top ? na->name : nb->name, top,
			    65535 - top);
			continue;
		}
		if (!(text = offset_text(ps, v->port_offset)) ||
		    conf_parse_unique(ps, &ns_offsets, text, c, &first) < 0)
			return -1;
		if (first)
			conf_parse_error(
			    ps, line, col,
			    "Volume '%s' has the same replication-port-offset %u as volume "
			    "'%s' (line %u); with nodes, each volume needs its own port, so "
			    "give each a different offset.",
			    v->name, v->port_offset, first->name, first->line);
	}
	if (ps->n_errors != errors) /* the shared-IP check compares offsets that must be right */
		return -1;
	return na->family == nb->family && strcmp(na->host, nb->host) == 0
	           ? check_shared_ip(ps, cfg, root)
	           : 0;
}

/*
 * The groups' volumes exist and belong to one group each. With a cluster section, one group:
 * the cluster manager fails every volume over as one and starts the group that holds the first,
 * so a second group would never start by itself.
 */
static int check_groups(struct conf_parse *ps, const struct hak_config *cfg)
{
	const char *names[CONFIG_MAX_VOLUMES];
	const struct hak_group_list *gl = &cfg->groups;

	for (size_t i = 0; i < cfg->n_volumes; i++)
		names[i] = cfg->volumes[i].name;
	if (conf_group_check_volumes(ps, gl, names, (unsigned)cfg->n_volumes) < 0)
		return -1;
	if (!cfg->cluster.present || gl->n == 0)
		return 0;
	if (gl->n > 1)
		return conf_parse_error(
		    ps, gl->g[1]->line, 1,
		    "Group '%s' is a second group, but the cluster manager fails every volume over "
		    "together and runs one group; put its resources in group '%s'.",
		    gl->g[1]->name, gl->g[0]->name);
	for (unsigned k = 0; k < gl->g[0]->n_volumes; k++)
		if (cfg->n_volumes == 0 || strcmp(gl->g[0]->volumes[k], cfg->volumes[0].name) == 0)
			return 0;
	return conf_parse_error(
	    ps, gl->g[0]->line, 1,
	    "Group '%s' does not hold the first volume '%s': the cluster manager "
	    "runs the group that holds it, once every volume is primary; add "
	    "it to the group's volume line.",
	    gl->g[0]->name, cfg->volumes[0].name);
}

/* Path i of one node pairs with path i of the other: same count, same family, distinct ends. */
static int check_paths(struct conf_parse *ps, const struct hak_config *cfg,
                       const struct conf_block *root)
{
	const struct conf_block *b = block_next(block_find(root, "node"), "node");
	const struct hak_node_cfg *na = &cfg->nodes[0], *nb = &cfg->nodes[1];
	unsigned line, col;

	config_setting_pos(b, "heartbeat-address", &line, &col);
	if (na->n_heartbeat != nb->n_heartbeat)
		return conf_parse_error(
		    ps, line, col,
		    "Node '%s' has %u heartbeat addresses and node '%s' has %u; list one "
		    "address per path on each node, in the same order.",
		    nb->name, nb->n_heartbeat, na->name, na->n_heartbeat);
	for (unsigned i = 0; i < na->n_heartbeat; i++) {
		const struct hak_hb_addr *x = &na->heartbeat[i], *y = &nb->heartbeat[i];
		if (x->family != y->family)
			return conf_parse_error(
			    ps, line, col,
			    "Heartbeat path %u joins an IPv%d address of node '%s' to an "
			    "IPv%d address of node '%s'; both ends of a path need the same "
			    "family.",
			    i + 1, x->family == AF_INET ? 4 : 6, na->name,
			    y->family == AF_INET ? 4 : 6, nb->name);
		if (x->port == y->port && strcmp(x->host, y->host) == 0)
			return conf_parse_error(
			    ps, line, col,
			    "Heartbeat path %u has the same address %s port %u on both nodes; "
			    "each end needs its own.",
			    i + 1, x->host, x->port);
	}
	return 0;
}

/* Every mistake of the cluster section; the paths are compared once each node has enough. */
static int check_cluster(struct conf_parse *ps, const struct hak_config *cfg,
                         const struct conf_block *root)
{
	const struct conf_block *c = block_find(root, "cluster"), *nb = block_find(root, "node");
	const struct hak_cluster_cfg *cl = &cfg->cluster;
	unsigned line, col, errors = ps->n_errors;

	for (size_t i = 0; !cl->present && i < cfg->n_nodes; i++, nb = block_next(nb, "node")) {
		if (!cfg->nodes[i].n_heartbeat)
			continue;
		config_setting_pos(nb, "heartbeat-address", &line, &col);
		conf_parse_error(
		    ps, line, col,
		    "heartbeat-address of node '%s' is used only by the cluster manager; "
		    "add a 'cluster { auth-key-file PATH }' section, or remove it.",
		    cfg->nodes[i].name);
	}
	if (!cl->present)
		return ps->n_errors == errors ? 0 : -1;
	if (cfg->n_nodes != 2)
		return conf_parse_error(
		    ps, c->line, c->col,
		    "The cluster section needs the two 'node NAME {' sections it fails over "
		    "between; add them, or remove the cluster section.");
	if (cfg->n_volumes > CONFIG_MAX_CLUSTER_VOLUMES)
		conf_parse_error(
		    ps, c->line, c->col,
		    "The cluster manager drives at most %u volumes (each has one bit in the "
		    "heartbeat), and this file has %zu; split them over two pairs.",
		    CONFIG_MAX_CLUSTER_VOLUMES, cfg->n_volumes);
	for (size_t i = 0; i < 2; i++, nb = block_next(nb, "node"))
		if (cfg->nodes[i].n_heartbeat < 2) {
			config_setting_pos(nb, "heartbeat-address", &line, &col);
			conf_parse_error(
			    ps, line, col,
			    "Node '%s' has %u heartbeat paths; the cluster needs at least two "
			    "(for example the replication and the service network), so one "
			    "failed link does not look like a dead peer: write "
			    "'heartbeat-address IP:PORT IP:PORT'.",
			    cfg->nodes[i].name, cfg->nodes[i].n_heartbeat);
		}
	bool paths_ok = ps->n_errors == errors;
	if (cl->preferred_node && strcmp(cl->preferred_node, cfg->nodes[0].name) != 0 &&
	    strcmp(cl->preferred_node, cfg->nodes[1].name) != 0) {
		config_setting_pos(c, "preferred-node", &line, &col);
		conf_parse_error(ps, line, col,
		                 "preferred-node '%s' is not a node; the nodes are %s and %s.",
		                 cl->preferred_node, cfg->nodes[0].name, cfg->nodes[1].name);
	}
	if (!cl->quorum && !cl->fence_hook) {
		config_setting_pos(c, "quorum", &line, &col);
		conf_parse_error(ps, line, col,
		                 "quorum no needs a fence-hook: without the witness's vote only a "
		                 "successful fence may let a node promote; add fence-hook PATH.");
	}
	if (!(cl->deadtime > 2 * cl->heartbeat_interval)) {
		config_setting_pos(c, "deadtime", &line, &col);
		conf_parse_error(
		    ps, line, col,
		    "deadtime %gs must be more than twice heartbeat-interval %gs, or one "
		    "late packet would declare the peer dead; raise deadtime.",
		    cl->deadtime, cl->heartbeat_interval);
	}
	if (paths_ok)
		check_paths(ps, cfg, root);
	return ps->n_errors == errors ? 0 : -1;
}

/* fence-peer and unfence-peer are for a pair whose roles an outside manager (Pacemaker)
 * decides; a cluster section's manager outdates the peer by itself. */
static int check_fence_handlers(struct conf_parse *ps, const struct hak_config *cfg,
                                const struct conf_block *blk, const struct hak_volume_cfg *v)
{
	unsigned line, col;
	const char *key = v->fence_peer ? "fence-peer" : "unfence-peer";

	if (!v->fence_peer && !v->unfence_peer)
		return 0;
	config_setting_pos(blk, key, &line, &col);
	if (cfg->cluster.present)
		return conf_parse_error(
		    ps, line, col,
		    "%s of volume '%s' is for a pair without a cluster section "
		    "(Pacemaker decides the roles); the cluster manager outdates "
		    "the peer by itself: remove it.",
		    key, v->name);
	if (!v->fence_peer)
		return conf_parse_error(
		    ps, line, col,
		    "unfence-peer of volume '%s' lifts what fence-peer did, and "
		    "there is no fence-peer: add one, or remove unfence-peer.",
		    v->name);
	return 0;
}

/*
 * The default fencing, and the combinations that cannot work: the peer is outdated over the
 * heartbeats and through the witness, which only a cluster section has, or kept from promotion
 * by a fence-peer handler; stonith needs the cluster's fence-hook to run.
 */
static int check_fencing(struct conf_parse *ps, const struct hak_config *cfg,
                         const struct conf_block *blk, struct hak_volume_cfg *v)
{
	unsigned line, col;

	if (check_fence_handlers(ps, cfg, blk, v) < 0)
		return -1;
	if (!conf_parse_find(blk, "fencing")) {
		v->fencing = (cfg->cluster.present || v->fence_peer) && v->mode != HAK_MODE_ASYNC
		                 ? HAK_FENCING_RESOURCE_ONLY
		                 : HAK_FENCING_NONE;
		return 0;
	}
	config_setting_pos(blk, "fencing", &line, &col);
	if (v->fencing == HAK_FENCING_RESOURCE_ONLY && !cfg->cluster.present && !v->fence_peer)
		return conf_parse_error(
		    ps, line, col,
		    "fencing resource-only of volume '%s' needs a cluster section (the peer is "
		    "outdated over its heartbeat paths and through the witness) or a fence-peer "
		    "handler; add one, or write fencing none.",
		    v->name);
	if (v->fencing == HAK_FENCING_STONITH && !cfg->cluster.present)
		return conf_parse_error(
		    ps, line, col,
		    "fencing resource-and-stonith of volume '%s' needs a cluster section and its "
		    "fence-hook; with a fence-peer handler, write fencing resource-only.",
		    v->name);
	if (v->fencing == HAK_FENCING_STONITH && !cfg->cluster.fence_hook)
		return conf_parse_error(ps, line, col,
		                        "fencing resource-and-stonith of volume '%s' needs a "
		                        "fence-hook in the cluster section to power the peer off.",
		                        v->name);
	return 0;
}

/*
 * Whoever completes the replication handshake can read the whole volume (a resync) and write
 * it: a pair replicates only with a peer that proves it holds a key, unless the file says
 * insecure-no-auth in so many words. The cluster's key is the default.
 */
static int check_auth(struct conf_parse *ps, const struct hak_config *cfg,
                      const struct conf_block *blk, struct hak_volume_cfg *v)
{
	unsigned line, col;

	if (v->insecure_no_auth && v->auth_key_file) {
		config_setting_pos(blk, "insecure-no-auth", &line, &col);
		return conf_parse_error(
		    ps, line, col,
		    "volume '%s' has both auth-key-file and insecure-no-auth yes; "
		    "remove one of them.",
		    v->name);
	}
	if (v->auth_key_file || v->insecure_no_auth || cfg->n_nodes == 0)
		return 0;
	if (cfg->cluster.present && cfg->cluster.auth_key_file) {
		v->auth_key_file = strdup(cfg->cluster.auth_key_file);
		if (!v->auth_key_file)
			return conf_parse_oom(ps);
		return 0;
	}
	return conf_parse_error(
	    ps, blk->line, blk->col,
	    "volume '%s' would replicate with whoever connects to its port: add 'auth-key-file "
	    "PATH' (a secret of at least 16 bytes both nodes share, mode 0600) to it or a cluster "
	    "section with one, or write 'insecure-no-auth yes' to accept any peer.",
	    v->name);
}

/* The checks are independent: each says its own mistake, and all of them run. */
int config_check_file(struct conf_parse *ps, struct hak_config *cfg, const struct conf_block *root)
{
	unsigned errors = ps->n_errors;
	size_t i = 0;

	for (const struct conf_block *c = root->children; c; c = c->next) {
		if (strcmp(c->type, "volume") != 0)
			continue;
		struct hak_volume_cfg *v = &cfg->volumes[i++];
		check_fencing(ps, cfg, c, v);
		if (strcmp(v->nbd_socket, cfg->control_socket) == 0) {
			const struct conf_value *val = conf_parse_find(c, "nbd-socket")->vals;
			conf_parse_error(
			    ps, val->line, val->col,
			    "nbd-socket of volume '%s' is the control socket '%.80s'; use "
			    "another path.",
			    v->name, v->nbd_socket);
		}
	}
	if (check_meta(ps, cfg, root) < 0 && ps->enomem)
		return -1;
	check_nodes(ps, cfg, root);
	check_cluster(ps, cfg, root);
	if (check_ports(ps, cfg, root) < 0 && ps->enomem)
		return -1;
	check_groups(ps, cfg);
	/* Last: a file with another mistake says that one first. */
	i = 0;
	for (const struct conf_block *c = root->children; c && !ps->enomem; c = c->next)
		if (strcmp(c->type, "volume") == 0)
			check_auth(ps, cfg, c, &cfg->volumes[i++]);
	return ps->n_errors == errors ? 0 : -1;
}
