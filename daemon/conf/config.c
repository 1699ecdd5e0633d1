/* SPDX-License-Identifier: MIT */
/*
 * hak.conf is read in two steps. conf_parse.c, which knows only the syntax, builds a tree of
 * blocks and directives, each remembering its line and column. The schema walk of conf_schema.c
 * then maps the tree into struct hak_config, following the tables here. A new section or
 * key is a row in the tables below (plus, for a new section, an open() and maybe a check()
 * callback); the parser never changes for it. Sections may nest (conf_section.parent); today
 * every section is top-level.
 *
 * Checks that need the whole file (the pair of nodes, ports, metadata files) run last, in
 * config_check.c, since 'global' and the nodes may come after the volumes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conf_parse.h"
#include "conf_schema.h"
#include "config_check.h"
#include "transport/hashrun.h"
#include "transport/transport.h"

#define CONFIG_HOSTNAME_MAX 64u /* HOST_NAME_MAX on Linux */

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The choices of the ENUM keys without a parser of their own, in the order of their enums. */
static const char *const mode_names[] = {"sync", "memsync", "async", NULL};
static const char *const csums_names[] = {"no", "yes", "after-crash", NULL};
static const char *const io_error_names[] = {"detach", "pass-on", NULL};
static const char *const fencing_names[] = {"none", "resource-only", "resource-and-stonith", NULL};
static const char *const quorum_loss_names[] = {"freeze", "demote", NULL};
static const char *const disk_failure_names[] = {"detach", "failover", NULL};
static const char *const sched_names[] = {"normal", "batch", NULL};    /* sched_batch 0 or 1 */
static const char *const integrity_names[] = {"none", "crc32c", NULL}; /* data_integrity 0, 1 */
static const char *const transport_names[] = {"tcp", "tls", "rdma", "rdma,tcp", NULL};
static const char *const nbd_tls_names[] = {"off", "on", "require", NULL};

static int enum_log_level(const char *s, void *field)
{
	return log_level_parse(s, field);
}

static int enum_io_kind(const char *s, void *field)
{
	return io_kind_parse(s, field);
}

static int enum_hash_alg(const char *s, void *field)
{
	enum hash_alg a;
	if (hash_alg_parse(s, &a) < 0)
		return -1;
	unsigned u = (unsigned)a;
	memcpy(field, &u, sizeof(u));
	return 0;
}

static int apply_node_ref(struct conf_parse *ps, const struct conf_key *k,
                          const struct conf_value *v, void *base);
static int apply_node_address(struct conf_parse *ps, const struct conf_key *k,
                              const struct conf_value *v, void *base);
static int apply_hostname(struct conf_parse *ps, const struct conf_key *k,
                          const struct conf_value *v, void *base);
static int apply_control_group(struct conf_parse *ps, const struct conf_key *k,
                               const struct conf_value *v, void *base);
static int apply_meta_disk(struct conf_parse *ps, const struct conf_key *k,
                           const struct conf_value *v, void *base);
static int apply_heartbeat_address(struct conf_parse *ps, const struct conf_key *k,
                                   const struct conf_value *v, void *base);

static int enum_sb_policy(const char *s, void *field)
{
	enum sb_policy p;
	if (sbpolicy_parse(s, &p) < 0)
		return -1;
	memcpy(field, &p, sizeof(p));
	return 0;
}

#define GFIELD(m) offsetof(struct hak_config, m), sizeof(((struct hak_config *)0)->m)
#define NFIELD(m) offsetof(struct hak_node_cfg, m), sizeof(((struct hak_node_cfg *)0)->m)
#define CFIELD(m) offsetof(struct hak_cluster_cfg, m), sizeof(((struct hak_cluster_cfg *)0)->m)
#define VFIELD(m) offsetof(struct hak_volume_cfg, m), sizeof(((struct hak_volume_cfg *)0)->m)
#define MS(n)     ((uint64_t)(n)*1000u)

static const struct conf_key global_keys[] = {
    {"control-socket", CONF_PATH, CONF_SOCKET, 0, 0, GFIELD(control_socket), NULL, NULL,
     .doc = "the UNIX socket hakctl talks to"},
    {"control-group", CONF_CUSTOM, 0, 0, 0, GFIELD(control_group), NULL, "a group name, like hak",
     "the group whose members may run hakctl's read-only commands", .apply = apply_control_group},
    {"log-level", CONF_ENUM, 0, 0, 0, GFIELD(log_level), enum_log_level,
     "err, warn, notice, info, debug", .doc = "the least important messages logged"},
    {"io-engine", CONF_ENUM, 0, 0, 0, GFIELD(io_engine), enum_io_kind, "auto, uring, pool",
     .doc = "how the backing stores are accessed"},
    {"io-depth", CONF_UINT, 0, 8, 4096, GFIELD(io_depth), NULL, NULL,
     .doc = "the most disk requests in flight"},
    {"max-clients", CONF_UINT, 0, 1, 1024, GFIELD(max_clients), NULL, NULL,
     .doc = "the most NBD clients per volume"},
    {"node", CONF_CUSTOM, 0, 0, 0, GFIELD(node_name), NULL, "the name of a node section",
     "which node this machine is", .apply = apply_node_ref},
    {"state-dir", CONF_PATH, 0, 0, 0, GFIELD(state_dir), NULL, NULL,
     .doc = "the directory of hakd's state files"},
    {"allow-drills", CONF_BOOL, 0, 0, 0, GFIELD(allow_drills), NULL, NULL,
     .doc = "whether hakctl drill may crash this node's hakd and services (default no)"},
    {"sched-policy", CONF_ENUM, 0, 0, 0, GFIELD(sched_batch), NULL, "batch, normal",
     .doc = "the CPU scheduling policy of the I/O threads (default batch: see hakd.conf(5))",
     .names = sched_names},
    {"metrics-listen", CONF_ADDR, 0, 0, 0, GFIELD(metrics_listen), NULL, NULL,
     .doc = "the IP:PORT of the Prometheus metrics endpoint, GET /metrics (default: none)"},
};

static const struct conf_key node_keys[] = {
    {"address", CONF_CUSTOM, CONF_REQUIRED, 0, 0, NFIELD(address), NULL,
     "IP:PORT, like 192.0.2.1:7789 or [2001:db8::1]:7789",
     "the IP:PORT it replicates on and its peer connects to", .apply = apply_node_address},
    {"hostname", CONF_CUSTOM, 0, 0, 0, NFIELD(hostname), NULL,
     "the machine's hostname, as the 'hostname' command prints it", "the machine's hostname",
     .apply = apply_hostname},
    {"heartbeat-address", CONF_CUSTOM, CONF_LIST, 0, 0, NFIELD(heartbeat), NULL,
     "one IP:PORT per heartbeat path, like 192.0.2.1:7790 198.51.100.1:7790",
     "the addresses it exchanges heartbeats on, one per path", .apply = apply_heartbeat_address},
};

static const struct conf_key cluster_keys[] = {
    {"cluster-id", CONF_UINT, 0, 1, UINT32_MAX, CFIELD(cluster_id), NULL, NULL,
     .doc = "the number that tells this pair's heartbeats from another pair's"},
    {"heartbeat-interval", CONF_DURATION, 0, MS(10), MS(10000), CFIELD(heartbeat_interval), NULL,
     NULL, .doc = "the time between two heartbeats on each path"},
    {"deadtime", CONF_DURATION, 0, MS(50), MS(60000), CFIELD(deadtime), NULL, NULL,
     .doc = "how long the peer must be silent on every path to be dead"},
    {"auth-key-file", CONF_PATH, CONF_REQUIRED, 0, 0, CFIELD(auth_key_file), NULL, NULL,
     .doc = "the file with the key that authenticates heartbeats"},
    {"on-quorum-loss", CONF_ENUM, 0, 0, 0, CFIELD(on_quorum_loss), NULL, NULL,
     .doc = "what a primary does that lost both its peer and the witness",
     .names = quorum_loss_names},
    {"witness-address", CONF_ADDR, 0, 0, 0, CFIELD(witness_address), NULL, NULL,
     .doc = "the witness's IP:PORT: where hakd --witness listens and the nodes ask for its vote"},
    {"quorum", CONF_BOOL, 0, 0, 0, CFIELD(quorum), NULL, NULL,
     .doc = "no: promote without a witness vote, after fence-hook succeeded (default yes)"},
    {"fence-hook", CONF_PATH, 0, 0, 0, CFIELD(fence_hook), NULL, NULL,
     .doc = "a program that powers the peer off; exit 0 means it can no longer write"},
    {"on-disk-failure", CONF_ENUM, 0, 0, 0, CFIELD(on_disk_failure), NULL, NULL,
     .doc = "what a primary whose backing disk failed does: serve through the peer, or hand over",
     .names = disk_failure_names},
    {"preferred-node", CONF_STRING, 0, 0, 0, CFIELD(preferred_node), NULL, NULL,
     .doc = "the node that takes the primary role when both could and neither is"},
};

static const struct conf_key volume_keys[] = {
    {"backing", CONF_PATH, CONF_REQUIRED | CONF_UNIQUE, 0, 0, VFIELD(backing), NULL, NULL,
     .doc = "the file or block device to serve"},
    {"nbd-socket", CONF_PATH, CONF_REQUIRED | CONF_UNIQUE | CONF_SOCKET, 0, 0, VFIELD(nbd_socket),
     NULL, NULL, .doc = "the UNIX socket NBD clients connect to"},
    {"nbd-listen", CONF_ADDR, CONF_UNIQUE, 0, 0, VFIELD(nbd_listen), NULL, NULL,
     .doc = "the TCP address NBD clients connect to"},
    {"description", CONF_STRING, 0, 0, 0, VFIELD(description), NULL, NULL,
     .doc = "a text shown to NBD clients"},
    {"nbd-tls", CONF_ENUM, 0, 0, 0, VFIELD(nbd_tls), NULL, NULL,
     .doc = "whether NBD clients may, or must, switch to TLS", .names = nbd_tls_names},
    {"nbd-tls-cert-file", CONF_PATH, 0, 0, 0, VFIELD(nbd_tls_cert_file), NULL, NULL,
     .doc = "the PEM certificate hakd shows NBD clients over TLS"},
    {"nbd-tls-key-file", CONF_PATH, 0, 0, 0, VFIELD(nbd_tls_key_file), NULL, NULL,
     .doc = "the PEM private key of nbd-tls-cert-file"},
    {"nbd-tls-ca-file", CONF_PATH, 0, 0, 0, VFIELD(nbd_tls_ca_file), NULL, NULL,
     .doc = "the CA whose certificate every NBD client must show"},
    {"nbd-tls-psk-file", CONF_PATH, 0, 0, 0, VFIELD(nbd_tls_psk_file), NULL, NULL,
     .doc = "the 'username:hexkey' pre-shared keys NBD clients may use instead of certificates"},
    {"nbd-handshake-timeout", CONF_DURATION, 0, MS(1000), MS(600000), VFIELD(nbd_handshake_timeout),
     NULL, NULL, .doc = "how long an NBD client may take from connecting to transmission"},
    {"read-only", CONF_BOOL, 0, 0, 0, VFIELD(read_only), NULL, NULL,
     .doc = "whether clients may only read"},
    {"direct-io", CONF_BOOL, 0, 0, 0, VFIELD(direct_io), NULL, NULL,
     .doc = "whether to bypass the page cache"},
    {"block-size-min", CONF_SIZE, CONF_POW2, 1, 65536, VFIELD(block_size_min), NULL, NULL,
     .doc = "the smallest I/O size clients may use"},
    {"max-payload", CONF_SIZE, 0, 64u << 10, 64u << 20, VFIELD(max_payload), NULL, NULL,
     .doc = "the largest request clients may send"},
    {"mode", CONF_ENUM, 0, 0, 0, VFIELD(mode), NULL, NULL, .doc = "when a write is acknowledged",
     .names = mode_names},
    {"meta-disk", CONF_CUSTOM, 0, 0, 0, VFIELD(meta_path), NULL, "'internal' or an absolute path",
     "where the replication metadata is kept", .apply = apply_meta_disk},
    {"bitmap-block-size", CONF_SIZE, CONF_POW2, 4u << 10, 1u << 20, VFIELD(bitmap_block_size), NULL,
     NULL, .doc = "the bytes tracked by one bit of the dirty bitmap"},
    {"replication-port-offset", CONF_UINT, 0, 0, CONFIG_MAX_OFFSET, VFIELD(port_offset), NULL, NULL,
     .doc = "what is added to the nodes' port for this volume"},
    {"async-buffer", CONF_SIZE, 0, 1u << 20, 4ull << 30, VFIELD(async_buffer), NULL, NULL,
     .doc = "the send buffer of async mode"},
    {"ping-interval", CONF_DURATION, 0, MS(50), MS(60000), VFIELD(ping_interval), NULL, NULL,
     .doc = "the time between two pings"},
    {"ping-timeout", CONF_DURATION, 0, MS(50), MS(60000), VFIELD(ping_timeout), NULL, NULL,
     .doc = "how long an unanswered ping takes to drop the peer"},
    {"connect-interval", CONF_DURATION, 0, MS(50), MS(60000), VFIELD(connect_interval), NULL, NULL,
     .doc = "the time between two tries to connect to the peer"},
    {"max-epoch-size", CONF_UINT, 0, 1, 20000, VFIELD(max_epoch_size), NULL, NULL,
     .doc = "the most writes between two barriers"},
    {"after-split-brain", CONF_ENUM, 0, 0, 0, VFIELD(after_sb), enum_sb_policy,
     "disconnect, discard-zero-changes, discard-least-changes, discard-younger-primary, "
     "discard-node",
     .doc = "whose changes a split brain drops"},
    {"discard-node", CONF_CUSTOM, 0, 0, 0, VFIELD(sb_discard_node), NULL, "a node name",
     "the node whose changes 'after-split-brain discard-node' drops", .apply = apply_node_ref},
    {"split-brain-hook", CONF_PATH, 0, 0, 0, VFIELD(sb_hook), NULL, NULL,
     .doc = "the program run on a split brain"},
    {"data-integrity", CONF_ENUM, 0, 0, 0, VFIELD(data_integrity), NULL, NULL,
     .doc = "the checksum of replicated data", .names = integrity_names},
    {"verify-alg", CONF_ENUM, 0, 0, 0, VFIELD(verify_alg), enum_hash_alg, "crc32c, sha256",
     .doc = "the block hash of online verify and checksum-based resync"},
    {"csums", CONF_ENUM, 0, 0, 0, VFIELD(csums), NULL, NULL,
     .doc = "whether a resync first compares block hashes and sends only what differs",
     .names = csums_names},
    {"on-io-error", CONF_ENUM, 0, 0, 0, VFIELD(on_io_error), NULL, NULL,
     .doc = "what a failed request of the backing store does", .names = io_error_names},
    {"local-io-error-hook", CONF_PATH, 0, 0, 0, VFIELD(local_io_error_hook), NULL, NULL,
     .doc = "the program run when the backing store fails a request"},
    {"al-extents", CONF_UINT, 0, 0, HAK_AL_EXTENTS_MAX, VFIELD(al_extents), NULL, NULL,
     .doc = "how many extents the activity log keeps hot (0: no activity log)"},
    {"al-extent-size", CONF_SIZE, CONF_POW2, 1u << 20, 1u << 30, VFIELD(al_extent_size), NULL, NULL,
     .doc = "the size of one activity-log extent"},
    {"resync-rate-max", CONF_SIZE, 0, 0, 1ull << 40, VFIELD(resync_rate_max), NULL, NULL,
     .doc = "the fastest a resync may run, in bytes per second (0: unlimited)"},
    {"resync-rate-min", CONF_SIZE, 0, 0, 1ull << 40, VFIELD(resync_rate_min), NULL, NULL,
     .doc = "the rate a resync keeps while applications write, in bytes per second"},
    {"resync-fill-target", CONF_SIZE, 0, 256u << 10, 1u << 30, VFIELD(resync_fill), NULL, NULL,
     .doc = "the resync bytes in flight on an idle volume"},
    {"fencing", CONF_ENUM, 0, 0, 0, VFIELD(fencing), NULL, NULL,
     .doc = "what a primary does with its writes when it loses the peer", .names = fencing_names},
    {"fence-timeout", CONF_DURATION, 0, MS(100), MS(3600000), VFIELD(fence_timeout), NULL, NULL,
     .doc = "how long writes may stay frozen before the freeze is reported as stuck"},
    {"fence-peer", CONF_PATH, 0, 0, 0, VFIELD(fence_peer), NULL, NULL,
     .doc = "without a cluster section: the program that keeps the peer from being promoted "
            "when the link is lost (Pacemaker: hak-crm-fence-peer)"},
    {"unfence-peer", CONF_PATH, 0, 0, 0, VFIELD(unfence_peer), NULL, NULL,
     .doc = "the program that lifts what fence-peer did, once the peer is in sync again"},
    {"auth-key-file", CONF_PATH, 0, 0, 0, VFIELD(auth_key_file), NULL, NULL,
     .doc = "the key the peer must prove it holds before it may replicate (default: the "
            "cluster's)"},
    {"insecure-no-auth", CONF_BOOL, 0, 0, 0, VFIELD(insecure_no_auth), NULL, NULL,
     .doc = "replicate with any peer that connects, unauthenticated (unsafe)"},
    {"transport", CONF_ENUM, 0, 0, 0, VFIELD(transport), NULL, NULL,
     .doc = "how the volume's replication link is carried: plain TCP, TLS 1.3, RDMA, or RDMA "
            "with TCP while RDMA has no path",
     .names = transport_names},
    {"tls-ca-file", CONF_PATH, 0, 0, 0, VFIELD(tls_ca_file), NULL, NULL,
     .doc = "the CA certificates the peer's TLS certificate must chain to"},
    {"tls-cert-file", CONF_PATH, 0, 0, 0, VFIELD(tls_cert_file), NULL, NULL,
     .doc = "this node's TLS certificate"},
    {"tls-key-file", CONF_PATH, 0, 0, 0, VFIELD(tls_key_file), NULL, NULL,
     .doc = "the private key of this node's TLS certificate"},
    {"tls-peer-name", CONF_STRING, 0, 0, 0, VFIELD(tls_peer_name), NULL, NULL,
     .doc = "the name the peer's TLS certificate must carry (default: the peer node's name)"},
    {"tls-psk-file", CONF_PATH, 0, 0, 0, VFIELD(tls_psk_file), NULL, NULL,
     .doc = "a TLS pre-shared key file, instead of certificates"},
    {"tls-kernel", CONF_BOOL, 0, 0, 0, VFIELD(tls_kernel), NULL, NULL,
     .doc = "hand the TLS record layer to the kernel (kTLS) where it offers it (default no)"},
};

_Static_assert(ARRAY_SIZE(global_keys) <= CONF_SCHEMA_MAX_KEYS, "raise CONF_SCHEMA_MAX_KEYS");
_Static_assert(ARRAY_SIZE(node_keys) <= CONF_SCHEMA_MAX_KEYS, "raise CONF_SCHEMA_MAX_KEYS");
_Static_assert(ARRAY_SIZE(volume_keys) <= CONF_SCHEMA_MAX_KEYS, "raise CONF_SCHEMA_MAX_KEYS");
_Static_assert(ARRAY_SIZE(cluster_keys) <= CONF_SCHEMA_MAX_KEYS, "raise CONF_SCHEMA_MAX_KEYS");

static void *global_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                         void *parent_base);
static void *node_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                       void *parent_base);
static int node_check(struct conf_parse *ps, void *ctx, const struct conf_block *blk, void *base);
static void *cluster_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                          void *parent_base);
static void *volume_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                         void *parent_base);
static int volume_check(struct conf_parse *ps, void *ctx, const struct conf_block *blk, void *base);

static const struct conf_section sections[] = {
    {"global", NULL, 0, 1, global_keys, ARRAY_SIZE(global_keys), global_open, NULL, NULL},
    {"node", NULL, 1, CONFIG_MAX_NODES, node_keys, ARRAY_SIZE(node_keys), node_open, node_check,
     "hak replicates between a pair of nodes"},
    {"cluster", NULL, 0, 1, cluster_keys, ARRAY_SIZE(cluster_keys), cluster_open, NULL, NULL},
    {"volume", NULL, 1, CONFIG_MAX_VOLUMES, volume_keys, ARRAY_SIZE(volume_keys), volume_open,
     volume_check, NULL},
    CONF_GROUP_SECTIONS,
};

static const struct conf_schema schema = {sections, ARRAY_SIZE(sections)};

const struct conf_schema *config_schema(void)
{
	return &schema;
}

static int is_top_section(const char *type)
{
	return conf_schema_is_section(&schema, type);
}

/* ---- helpers ---- */

static uint64_t duration_usec(double seconds)
{
	return (uint64_t)(seconds * 1e6 + 0.5);
}

/* A key (node, discard-node) whose char * field names a node section. */
static int apply_node_ref(struct conf_parse *ps, const struct conf_key *k,
                          const struct conf_value *v, void *base)
{
	if (!conf_schema_name_valid(v->text))
		return conf_parse_error(
		    ps, v->line, v->col,
		    "Bad node name '%.80s' for %s; use 1 to %u letters, digits, '_', '.' or "
		    "'-', as in the 'node NAME {' sections.",
		    v->text, k->key, CONF_SCHEMA_NAME_MAX);
	return conf_schema_set_string(ps, (char **)((char *)base + k->offset), v->text);
}

/*
 * One of node n's own IP:PORTs (address, heartbeat-address) into *hp. The peer sends to it, so it
 * must be a real, numeric one: no name, no wildcard. 0, or -1 after an error.
 */
static int node_ip_port(struct conf_parse *ps, const struct conf_key *k, const struct conf_value *v,
                        const struct hak_node_cfg *n, const char *example, struct conf_hostport *hp)
{
	const char *why;

	if (conf_parse_hostport(v->text, hp, &why) < 0)
		return conf_schema_addr_error(ps, k, v, why, example);
	if (hp->family == AF_UNSPEC)
		return conf_parse_error(
		    ps, v->line, v->col,
		    "%s '%.80s' of node '%s' has a host name; write the node's IP "
		    "address, like %s.",
		    k->key, v->text, n->name, example);
	if (strcmp(hp->host, "0.0.0.0") == 0 || strcmp(hp->host, "::") == 0)
		return conf_parse_error(ps, v->line, v->col,
		                        "%s '%.80s' of node '%s' is the wildcard address; the peer "
		                        "sends to it, so write the node's own IP address.",
		                        k->key, v->text, n->name);
	return 0;
}

static int apply_node_address(struct conf_parse *ps, const struct conf_key *k,
                              const struct conf_value *v, void *base)
{
	struct hak_node_cfg *n = base;
	struct conf_hostport hp;

	if (node_ip_port(ps, k, v, n, "192.0.2.1:7789 or [2001:db8::1]:7789", &hp) < 0)
		return -1;
	_Static_assert(sizeof(n->host) <= sizeof(hp.host), "host buffers");
	memcpy(n->host, hp.host, sizeof(n->host));
	n->host[sizeof(n->host) - 1] = '\0';
	n->port = hp.port;
	n->family = hp.family;
	return conf_schema_set_string(ps, &n->address, v->text);
}

static int apply_hostname(struct conf_parse *ps, const struct conf_key *k,
                          const struct conf_value *v, void *base)
{
	struct hak_node_cfg *n = base;
	size_t len = strlen(v->text);

	if (len < 1 || len > CONFIG_HOSTNAME_MAX || v->text[0] == '.' || v->text[0] == '-' ||
	    strspn(v->text, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") !=
	        len)
		return conf_parse_error(
		    ps, v->line, v->col,
		    "Bad %s '%.80s' for node '%s'; use 1 to %u letters, digits, '-', '_' "
		    "or '.', as the 'hostname' command prints it.",
		    k->key, v->text, n->name, CONFIG_HOSTNAME_MAX);
	return conf_schema_set_string(ps, &n->hostname, v->text);
}

/* The name is checked here, not whether the group exists: that is hakd's business at start (it
 * warns and keeps the socket root-only), and hakctl reads the same file on hosts without it. */
static int apply_control_group(struct conf_parse *ps, const struct conf_key *k,
                               const struct conf_value *v, void *base)
{
	struct hak_config *cfg = base;
	size_t len = strlen(v->text);

	if (len < 1 || len > HAK_GROUP_NAME_MAX || v->text[0] == '-' ||
	    strspn(v->text, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") !=
	        len)
		return conf_parse_error(ps, v->line, v->col,
		                        "Bad %s '%.80s'; use a group name of 1 to %u letters, "
		                        "digits, '-', '_' or '.' that does not start with '-'.",
		                        k->key, v->text, HAK_GROUP_NAME_MAX);
	cfg->control_group_set = 1;
	return conf_schema_set_string(ps, &cfg->control_group, v->text);
}

static int apply_meta_disk(struct conf_parse *ps, const struct conf_key *k,
                           const struct conf_value *v, void *base)
{
	struct hak_volume_cfg *vol = base;

	if (strcmp(v->text, "internal") == 0) {
		vol->meta_internal = true;
		free(vol->meta_path);
		vol->meta_path = NULL;
		return 0;
	}
	if (v->text[0] != '/')
		return conf_parse_error(
		    ps, v->line, v->col,
		    "%s '%.80s' must be 'internal' or an absolute path (starting with "
		    "'/').",
		    k->key, v->text);
	vol->meta_internal = false;
	return conf_schema_set_string(ps, &vol->meta_path, v->text);
}

static int apply_heartbeat_address(struct conf_parse *ps, const struct conf_key *k,
                                   const struct conf_value *v, void *base)
{
	struct hak_node_cfg *n = base;
	struct conf_hostport hp;

	for (n->n_heartbeat = 0; v; v = v->next) {
		if (n->n_heartbeat == HAK_MAX_PATHS)
			return conf_parse_error(
			    ps, v->line, v->col,
			    "Node '%s' lists more than %u heartbeat addresses; use at most %u "
			    "paths.",
			    n->name, HAK_MAX_PATHS, HAK_MAX_PATHS);
		if (node_ip_port(ps, k, v, n, "192.0.2.1:7790 or [2001:db8::1]:7790", &hp) < 0)
			return -1;
		struct hak_hb_addr *a = &n->heartbeat[n->n_heartbeat];
		for (unsigned i = 0; i < n->n_heartbeat; i++)
			if (n->heartbeat[i].port == hp.port &&
			    strcmp(n->heartbeat[i].host, hp.host) == 0)
				return conf_parse_error(
				    ps, v->line, v->col,
				    "heartbeat-address '%.80s' of node '%s' is listed twice; each "
				    "path needs its own address.",
				    v->text, n->name);
		_Static_assert(sizeof(a->host) <= sizeof(hp.host), "host buffers");
		memcpy(a->host, hp.host, sizeof(a->host));
		a->host[sizeof(a->host) - 1] = '\0';
		a->port = hp.port;
		a->family = hp.family;
		n->n_heartbeat++;
	}
	return 0;
}

/* ---- sections ---- */

static void *cluster_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                          void *parent_base)
{
	struct hak_config *cfg = ctx;

	(void)ps;
	(void)parent_base;
	cfg->cluster.present = true;
	cfg->cluster.line = blk->line;
	return &cfg->cluster;
}

static void *global_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                         void *parent_base)
{
	(void)ps;
	(void)blk;
	(void)parent_base;
	return ctx;
}

/* conf_schema_validate() keeps the count within CONFIG_MAX_NODES, so the array never moves. */
static void *node_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                       void *parent_base)
{
	struct hak_config *cfg = ctx;
	struct hak_node_cfg *n;

	(void)parent_base;
	if (!cfg->nodes && !(cfg->nodes = calloc(CONFIG_MAX_NODES, sizeof(*cfg->nodes))))
		goto oom;
	n = &cfg->nodes[cfg->n_nodes];
	if (!(n->name = strdup(blk->name)))
		goto oom;
	n->line = blk->line;
	cfg->n_nodes++;
	return n;
oom:
	conf_parse_oom(ps);
	return NULL;
}

static int node_check(struct conf_parse *ps, void *ctx, const struct conf_block *blk, void *base)
{
	struct hak_node_cfg *n = base;

	(void)ctx;
	(void)blk;
	if (!n->hostname && !(n->hostname = strdup(n->name)))
		return conf_parse_oom(ps);
	return 0;
}

char *config_meta_default_path(const char *state_dir, const char *name)
{
	size_t len = strlen(state_dir);
	char *path;

	while (len > 1 && state_dir[len - 1] == '/')
		len--;
	if (asprintf(&path, "%.*s%s%s.meta", (int)len, state_dir, len == 1 ? "" : "/", name) < 0)
		return NULL;
	return path;
}

static struct hak_volume_cfg *volume_append(struct hak_config *cfg, const char *name)
{
	struct hak_volume_cfg *vols, *v;

	if (cfg->n_volumes >= CONFIG_MAX_VOLUMES) {
		errno = ENOSPC;
		return NULL;
	}
	if (cfg->n_volumes == cfg->volumes_alloc) {
		size_t n = cfg->volumes_alloc ? cfg->volumes_alloc * 2 : 4;
		vols = realloc(cfg->volumes, n * sizeof(*vols));
		if (!vols)
			return NULL;
		cfg->volumes = vols;
		cfg->volumes_alloc = n;
	}
	v = &cfg->volumes[cfg->n_volumes];
	memset(v, 0, sizeof(*v));
	v->name = strdup(name);
	if (!v->name)
		return NULL;
	v->max_payload = HAK_DEFAULT_MAX_PAYLOAD;
	v->mode = HAK_MODE_SYNC;
	v->bitmap_block_size = HAK_DEFAULT_BITMAP_BLOCK;
	v->async_buffer = HAK_DEFAULT_ASYNC_BUFFER;
	v->ping_interval = HAK_DEFAULT_PING_INTERVAL;
	v->ping_timeout = HAK_DEFAULT_PING_TIMEOUT;
	v->connect_interval = HAK_DEFAULT_CONNECT_INTVL;
	v->max_epoch_size = HAK_DEFAULT_MAX_EPOCH;
	v->al_extents = HAK_DEFAULT_AL_EXTENTS;
	v->al_extent_size = HAK_DEFAULT_AL_EXTENT_SIZE;
	v->resync_rate_min = HAK_DEFAULT_RS_RATE_MIN;
	v->resync_fill = HAK_DEFAULT_RS_FILL;
	v->fence_timeout = HAK_DEFAULT_FENCE_TIMEOUT;
	v->nbd_handshake_timeout = HAK_DEFAULT_NBD_HS_TIMEOUT;
	cfg->n_volumes++;
	return v;
}

static void *volume_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                         void *parent_base)
{
	struct hak_volume_cfg *v = volume_append(ctx, blk->name);

	(void)parent_base;
	if (!v) {
		conf_parse_oom(ps);
		return NULL;
	}
	v->line = blk->line;
	return v;
}

/* NBD requires the maximum payload to be a multiple of the minimum block size. */
static int volume_check_sizes(struct conf_parse *ps, const struct conf_block *blk,
                              const struct hak_volume_cfg *v)
{
	uint32_t min = v->block_size_min ? v->block_size_min : v->direct_io ? 4096 : 512;
	const struct conf_directive *d = conf_parse_find(blk, "max-payload");
	char a[32], b[32];

	if (v->max_payload % min == 0)
		return 0;
	if (!d)
		d = conf_parse_find(blk, "block-size-min");
	conf_parse_fmt_size(v->max_payload, a, sizeof(a));
	conf_parse_fmt_size(min, b, sizeof(b));
	return conf_parse_error(
	    ps, d ? d->line : blk->line, d ? d->col : blk->col,
	    "max-payload %s of volume '%s' is not a multiple of its minimum block size %s.", a,
	    v->name, b);
}

/* A timeout no longer than the interval would drop a healthy peer between two pings. */
static int volume_check_ping(struct conf_parse *ps, const struct conf_block *blk,
                             const struct hak_volume_cfg *v)
{
	char iv[32], to[32];
	unsigned line, col;

	if (v->ping_timeout > v->ping_interval)
		return 0;
	config_setting_pos(blk,
	                   conf_parse_find(blk, "ping-timeout") ? "ping-timeout" : "ping-interval",
	                   &line, &col);
	conf_parse_fmt_duration(duration_usec(v->ping_interval), iv, sizeof(iv));
	conf_parse_fmt_duration(duration_usec(v->ping_timeout), to, sizeof(to));
	return conf_parse_error(
	    ps, line, col,
	    "ping-timeout %s of volume '%s' must be longer than its ping-interval %s, or a "
	    "healthy peer would be dropped between two pings.",
	    to, v->name, iv);
}

/* discard-node names the victim of one policy and means nothing with another. */
static int volume_check_sb(struct conf_parse *ps, const struct conf_block *blk,
                           const struct hak_volume_cfg *v)
{
	unsigned line, col;
	bool want = v->after_sb == SB_POLICY_DISCARD_NODE;
	if (want == (v->sb_discard_node != NULL))
		return 0;
	config_setting_pos(blk, want ? "after-split-brain" : "discard-node", &line, &col);
	if (want)
		return conf_parse_error(
		    ps, line, col,
		    "Volume '%s' has 'after-split-brain discard-node' but no 'discard-node "
		    "NAME' naming the node whose changes are dropped; add it.",
		    v->name);
	return conf_parse_error(
	    ps, line, col,
	    "Volume '%s' has 'discard-node %s' but after-split-brain is %s; set "
	    "'after-split-brain discard-node' or remove discard-node.",
	    v->name, v->sb_discard_node, sbpolicy_name(v->after_sb));
}

/* Fewer slots than one request may span would let a wide write wait forever. */
static int volume_check_al(struct conf_parse *ps, const struct conf_block *blk,
                           const struct hak_volume_cfg *v)
{
	unsigned line, col;

	if (v->al_extents == 0 || v->al_extents >= 64)
		return 0;
	config_setting_pos(blk, "al-extents", &line, &col);
	return conf_parse_error(
	    ps, line, col,
	    "al-extents %u of volume '%s' is too small; use 0 to turn the activity log off "
	    "or 64 to %u.",
	    v->al_extents, v->name, HAK_AL_EXTENTS_MAX);
}

/* The first tls-* key written in blk, or NULL. */
static const char *volume_tls_key(const struct conf_block *blk)
{
	static const char *const keys[] = {"tls-ca-file", "tls-cert-file", "tls-key-file",
	                                   "tls-peer-name", "tls-psk-file"};
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		if (conf_parse_find(blk, keys[i]))
			return keys[i];
	return NULL;
}

/* TLS authenticates with a pre-shared key or with certificates, never neither nor both; tls-*
 * keys without TLS would look like protection that is not there. */
static int volume_check_tls(struct conf_parse *ps, const struct conf_block *blk,
                            const struct hak_volume_cfg *v)
{
	const char *key = volume_tls_key(blk);
	bool certs = v->tls_ca_file || v->tls_cert_file || v->tls_key_file || v->tls_peer_name;
	unsigned line, col;

	if (v->transport == HAK_TRANSPORT_RDMA && !transport_find("rdma")) {
		config_setting_pos(blk, "transport", &line, &col);
		return conf_parse_error(
		    ps, line, col,
		    "Volume '%s' has 'transport rdma' but this build has no RDMA "
		    "transport (it was built without librdmacm and libibverbs).",
		    v->name);
	}
	if (v->transport != HAK_TRANSPORT_TLS) {
		if (!key)
			return 0;
		config_setting_pos(blk, key, &line, &col);
		return conf_parse_error(ps, line, col,
		                        "Volume '%s' has %s but its transport is %s; add "
		                        "'transport tls' or remove the tls-* keys.",
		                        v->name, key, transport_names[v->transport]);
	}
	config_setting_pos(blk, key ? key : "transport", &line, &col);
	if (v->tls_psk_file && certs)
		return conf_parse_error(
		    ps, line, col,
		    "Volume '%s' has both tls-psk-file and certificate keys; TLS "
		    "takes a pre-shared key or certificates, not both.",
		    v->name);
	if (!v->tls_psk_file && (!v->tls_ca_file || !v->tls_cert_file || !v->tls_key_file))
		return conf_parse_error(
		    ps, line, col,
		    "Volume '%s' has 'transport tls' without %s; give "
		    "tls-ca-file, tls-cert-file and tls-key-file, or tls-psk-file.",
		    v->name,
		    !v->tls_ca_file     ? "tls-ca-file"
		    : !v->tls_cert_file ? "tls-cert-file"
		                        : "tls-key-file");
	return 0;
}

/* TLS needs credentials, and TLS files without TLS would look like protection that is not. */
static int volume_check_nbd_tls_files(struct conf_parse *ps, const struct conf_block *blk,
                                      const struct hak_volume_cfg *v)
{
	bool cert = v->nbd_tls_cert_file || v->nbd_tls_key_file;
	unsigned line, col;
	const char *msg = NULL;

	if (v->nbd_tls == HAK_NBD_TLS_OFF && (cert || v->nbd_tls_ca_file || v->nbd_tls_psk_file))
		msg =
		    "has nbd-tls files but nbd-tls is off; set 'nbd-tls on' or 'nbd-tls require', "
		    "or remove the files";
	else if (v->nbd_tls != HAK_NBD_TLS_OFF && !cert && !v->nbd_tls_psk_file)
		msg = "has nbd-tls on but no credentials; add nbd-tls-cert-file and "
		      "nbd-tls-key-file, or nbd-tls-psk-file";
	else if (cert && !(v->nbd_tls_cert_file && v->nbd_tls_key_file))
		msg = "needs both nbd-tls-cert-file and nbd-tls-key-file; add the missing one";
	else if (cert && v->nbd_tls_psk_file)
		msg = "has both a certificate and nbd-tls-psk-file; keep one way for clients to "
		      "authenticate";
	else if (v->nbd_tls_ca_file && !cert)
		msg = "has nbd-tls-ca-file without a certificate; the CA checks client "
		      "certificates, which only the certificate mode asks for";
	if (!msg)
		return 0;
	config_setting_pos(blk, "nbd-tls", &line, &col);
	return conf_parse_error(ps, line, col, "Volume '%s' %s.", v->name, msg);
}

/*
 * A TCP export carries the volume's data over the network: it goes without TLS only when the
 * file says so in so many words. require needs the TCP listener it applies to.
 */
static int volume_check_nbd_tls(struct conf_parse *ps, const struct conf_block *blk,
                                const struct hak_volume_cfg *v)
{
	unsigned line, col;

	if (v->nbd_listen && !conf_parse_find(blk, "nbd-tls")) {
		config_setting_pos(blk, "nbd-listen", &line, &col);
		return conf_parse_error(
		    ps, line, col,
		    "Volume '%s' listens on TCP %s without saying whether NBD clients use TLS; add "
		    "'nbd-tls require' with a certificate or PSK file, or 'nbd-tls off' to serve "
		    "the "
		    "volume unencrypted to anyone who can reach the port.",
		    v->name, v->nbd_listen);
	}
	if (v->nbd_tls == HAK_NBD_TLS_REQUIRE && !v->nbd_listen) {
		config_setting_pos(blk, "nbd-tls", &line, &col);
		return conf_parse_error(
		    ps, line, col,
		    "Volume '%s' has 'nbd-tls require' but no nbd-listen; require applies to the "
		    "TCP "
		    "listener (the UNIX socket never requires TLS), so add nbd-listen or use "
		    "'nbd-tls on'.",
		    v->name);
	}
	return volume_check_nbd_tls_files(ps, blk, v);
}

static int volume_check(struct conf_parse *ps, void *ctx, const struct conf_block *blk, void *base)
{
	/* independent checks: each says its own mistake */
	int rc = volume_check_sizes(ps, blk, base);
	(void)ctx;
	rc |= volume_check_sb(ps, blk, base);
	rc |= volume_check_al(ps, blk, base);
	rc |= volume_check_tls(ps, blk, base);
	rc |= volume_check_nbd_tls(ps, blk, base);
	rc |= volume_check_ping(ps, blk, base);
	return rc;
}

/* ---- public API ---- */

struct hak_config *config_new_default(void)
{
	struct hak_config *cfg = calloc(1, sizeof(*cfg));

	if (!cfg)
		return NULL;
	cfg->control_socket = strdup(HAK_DEFAULT_CONTROL_SOCKET);
	cfg->control_group = strdup(HAK_DEFAULT_CONTROL_GROUP);
	cfg->state_dir = strdup(HAK_DEFAULT_STATE_DIR);
	if (!cfg->control_socket || !cfg->control_group || !cfg->state_dir) {
		config_free(cfg);
		return NULL;
	}
	cfg->log_level = LOG_LVL_INFO;
	cfg->io_engine = IO_KIND_AUTO;
	cfg->sched_batch = 1;
	cfg->io_depth = HAK_DEFAULT_IO_DEPTH;
	cfg->max_clients = HAK_DEFAULT_MAX_CLIENTS;
	cfg->cluster.cluster_id = HAK_DEFAULT_CLUSTER_ID;
	cfg->cluster.heartbeat_interval = HAK_DEFAULT_HB_INTERVAL;
	cfg->cluster.deadtime = HAK_DEFAULT_DEADTIME;
	cfg->cluster.on_quorum_loss = HAK_QL_FREEZE;
	cfg->cluster.quorum = 1;
	return cfg;
}

/*
 * The whole-file checks compare sections with each other and index the volumes by their blocks,
 * so they run only once every section is right.
 */
static int config_parse_report(const char *text, size_t len, const char *name,
                               struct hak_config **out, char *err, size_t errlen,
                               conf_parse_report_fn report, void *arg)
{
	struct conf_parse ps;
	struct hak_config *cfg = NULL;
	struct conf_block *root;
	int ret = -1;

	*out = NULL;
	conf_parse_init(&ps, name, err, errlen);
	conf_parse_collect(&ps, report, arg);
	conf_parse_text(&ps, text, len, is_top_section, &root);
	if (!root)
		goto out;
	cfg = config_new_default();
	if (!cfg || !(cfg->file = strdup(ps.name))) {
		conf_parse_oom(&ps);
		goto out;
	}
	if (conf_schema_validate(&ps, &schema, root, cfg) < 0 || ps.n_errors ||
	    config_check_file(&ps, cfg, root) < 0)
		goto out;
	*out = cfg;
	cfg = NULL;
	ret = 0;
out:
	conf_parse_free(&ps);
	config_free(cfg);
	if (ret < 0)
		errno = ps.enomem ? ENOMEM : EINVAL;
	return ret;
}

int config_parse(const char *text, size_t len, const char *name, struct hak_config **out, char *err,
                 size_t errlen)
{
	return config_parse_report(text, len, name, out, err, errlen, NULL, NULL);
}

static int config_load_report(const char *path, struct hak_config **out, char *err, size_t errlen,
                              conf_parse_report_fn report, void *arg)
{
	size_t cap = CONF_PARSE_MAX_BYTES + 1, len = 0; /* one more, so that too big is detected */
	char *buf = NULL;
	int fd = -1, ret = -1, saved;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto io_error;
	buf = malloc(cap);
	if (!buf)
		goto io_error;
	while (len < cap) {
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto io_error;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	ret = config_parse_report(buf, len, path, out, err, errlen, report, arg);
	goto out;
io_error:
	saved = errno;
	if (err && errlen)
		snprintf(err, errlen, "%s: cannot read the configuration file: %s.", path,
		         strerror(saved));
	errno = saved;
out:
	saved = errno;
	free(buf);
	if (fd >= 0)
		close(fd);
	errno = saved;
	return ret;
}

int config_load(const char *path, struct hak_config **out, char *err, size_t errlen)
{
	return config_load_report(path, out, err, errlen, NULL, NULL);
}

/* Counts what the caller's collector hears, so an unreadable file is reported once too. */
struct check_all {
	void (*report)(void *arg, const char *message);
	void *arg;
	unsigned heard;
};

static void check_all_report(void *arg, const char *message)
{
	struct check_all *ca = arg;

	ca->heard++;
	ca->report(ca->arg, message);
}

int config_check_all(const char *path, void (*report)(void *arg, const char *message), void *arg,
                     struct hak_config **out)
{
	struct check_all ca = {.report = report, .arg = arg};
	char err[1024] = "";
	int rc = config_load_report(path, out, err, sizeof(err), check_all_report, &ca);

	if (rc < 0 && !ca.heard)
		report(arg, err);
	return rc;
}

struct hak_volume_cfg *config_add_volume(struct hak_config *cfg, const char *name,
                                         const char *backing)
{
	struct hak_volume_cfg *v = NULL;
	char *copy = NULL, *meta = NULL;

	if (!cfg || !name || !backing || !conf_schema_name_valid(name)) {
		errno = EINVAL;
		goto out;
	}
	if (config_find_volume(cfg, name)) {
		errno = EEXIST;
		goto out;
	}
	copy = strdup(backing);
	meta =
	    config_meta_default_path(cfg->state_dir ? cfg->state_dir : HAK_DEFAULT_STATE_DIR, name);
	if (!copy || !meta)
		goto out;
	v = volume_append(cfg, name);
	if (!v)
		goto out;
	v->backing = copy;
	v->meta_path = meta;
	copy = meta = NULL;
out:
	free(copy);
	free(meta);
	return v;
}

const struct hak_volume_cfg *config_find_volume(const struct hak_config *cfg, const char *name)
{
	for (size_t i = 0; cfg && name && i < cfg->n_volumes; i++)
		if (strcmp(cfg->volumes[i].name, name) == 0)
			return &cfg->volumes[i];
	return NULL;
}

void config_free(struct hak_config *cfg)
{
	if (!cfg)
		return;
	conf_group_free(&cfg->groups);
	for (size_t i = 0; i < cfg->n_volumes; i++) {
		struct hak_volume_cfg *v = &cfg->volumes[i];
		free(v->name);
		free(v->backing);
		free(v->nbd_socket);
		free(v->nbd_listen);
		free(v->nbd_tls_cert_file);
		free(v->nbd_tls_key_file);
		free(v->nbd_tls_ca_file);
		free(v->nbd_tls_psk_file);
		free(v->description);
		free(v->meta_path);
		free(v->sb_discard_node);
		free(v->sb_hook);
		free(v->local_io_error_hook);
		free(v->fence_peer);
		free(v->unfence_peer);
		free(v->auth_key_file);
		free(v->tls_ca_file);
		free(v->tls_cert_file);
		free(v->tls_key_file);
		free(v->tls_peer_name);
		free(v->tls_psk_file);
	}
	for (size_t i = 0; i < cfg->n_nodes; i++) {
		free(cfg->nodes[i].name);
		free(cfg->nodes[i].address);
		free(cfg->nodes[i].hostname);
	}
	free(cfg->nodes);
	free(cfg->volumes);
	free(cfg->file);
	free(cfg->control_socket);
	free(cfg->control_group);
	free(cfg->node_name);
	free(cfg->state_dir);
	free(cfg->metrics_listen);
	free(cfg->cluster.auth_key_file);
	free(cfg->cluster.witness_address);
	free(cfg->cluster.fence_hook);
	free(cfg->cluster.preferred_node);
	free(cfg);
}

const char *config_fencing_name(enum hak_fencing f)
{
	return (size_t)f < ARRAY_SIZE(fencing_names) - 1 ? fencing_names[f] : "unknown";
}

const char *config_mode_name(enum hak_repl_mode mode)
{
	if ((size_t)mode >= ARRAY_SIZE(mode_names) - 1)
		return "unknown";
	return mode_names[mode];
}

/* ---- which node this machine is ---- */

/* "'alpha' (hostname alpha) and 'beta' (hostname b.example)", for messages. */
static void node_list(const struct hak_config *cfg, char *buf, size_t len)
{
	const struct hak_node_cfg *a = &cfg->nodes[0], *b = &cfg->nodes[1];

	snprintf(buf, len, "'%s' (hostname %.80s) and '%s' (hostname %.80s)", a->name, a->hostname,
	         b->name, b->hostname);
}

/* Exact hostname first; then the first label of an FQDN, as 'hostname -s' would print it. */
static int node_by_hostname(const struct hak_config *cfg, const char *host)
{
	size_t short_len = strcspn(host, ".");

	for (size_t i = 0; i < cfg->n_nodes; i++)
		if (strcmp(cfg->nodes[i].hostname, host) == 0)
			return (int)i;
	for (size_t i = 0; host[short_len] && i < cfg->n_nodes; i++)
		if (strlen(cfg->nodes[i].hostname) == short_len &&
		    strncmp(cfg->nodes[i].hostname, host, short_len) == 0)
			return (int)i;
	return -1;
}

static int node_by_name(const struct hak_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_nodes; i++)
		if (strcmp(cfg->nodes[i].name, name) == 0)
			return (int)i;
	return -1;
}

int config_find_self(const struct hak_config *cfg, const char *override_name,
                     const struct hak_node_cfg **self, const struct hak_node_cfg **peer, char *err,
                     size_t errlen)
{
	const char *file = cfg->file ? cfg->file : "the configuration";
	const char *want = override_name ? override_name : cfg->node_name;
	char host[CONFIG_HOSTNAME_MAX + 2] = "", nodes[256] = "";
	int idx, e = ENOENT, ret = -1;

	*self = *peer = NULL;
	if (!err)
		errlen = 0;
	if (errlen)
		err[0] = '\0';
	if (cfg->n_nodes == 0 && !override_name) { /* standalone volumes: no pair to be part of */
		ret = 0;
		goto out;
	}
	if (gethostname(host, sizeof(host) - 1) < 0) {
		e = errno;
		snprintf(err, errlen,
		         "Cannot read this machine's hostname (%s); name the node with 'node NAME' "
		         "in the global section of %s or with hakd --node NAME.",
		         strerror(e), file);
		if (!want)
			goto out;
		snprintf(host, sizeof(host), "(unknown)");
	}
	if (cfg->n_nodes != 2) {
		e = cfg->n_nodes ? EINVAL : ENOENT;
		snprintf(
		    err, errlen,
		    "%s has %zu node sections, but a pair needs two (this machine's hostname is "
		    "'%s'); add the 'node NAME {' sections%s.",
		    file, cfg->n_nodes, host, override_name ? " or leave out hakd --node" : "");
		goto out;
	}
	node_list(cfg, nodes, sizeof(nodes));
	idx = want ? node_by_name(cfg, want) : node_by_hostname(cfg, host);
	if (idx >= 0) {
		*self = &cfg->nodes[idx];
		*peer = &cfg->nodes[1 - idx];
		ret = 0;
	} else if (want) {
		snprintf(err, errlen,
		         "%s '%.80s' names no node of %s; the nodes are %s, and this machine's "
		         "hostname is '%s'.",
		         override_name ? "hakd --node" : "The global node", want, file, nodes,
		         host);
	} else {
		snprintf(
		    err, errlen,
		    "This machine's hostname '%s' is not the hostname of a node of %s, which "
		    "are %s; set 'hostname' in this machine's node section, 'node NAME' in the "
		    "global section, or start hakd with --node NAME.",
		    host, file, nodes);
	}
out:
	if (ret < 0)
		errno = e;
	else if (errlen)
		err[0] = '\0'; /* a hostname error that --node made harmless */
	return ret;
}
