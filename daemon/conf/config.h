/* SPDX-License-Identifier: MIT */
/*
 * hak.conf: parse and validate. Every error names file, line and column and says how to fix it.
 *
 * Syntax (documented in docs/hak.conf.5 and etc/hak.conf; the parser is conf_parse.h):
 *   # comment to end of line
 *   global { key value ... }
 *   node NAME { key value ... }      zero or exactly two: the replication pair
 *   volume NAME { key value ... }
 * One directive per line: a key followed by one or more values. Values are bare words or
 * "double-quoted strings" (with \" and \\ escapes). Sizes take K/M/G/T suffixes (powers of 1024),
 * durations ms or s ("200ms", "1.5s"), booleans are yes/no/true/false/on/off.
 */
#ifndef HAK_CONFIG_H
#define HAK_CONFIG_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf_group.h"
#include "io/io.h"
#include "lib/log.h"
#include "sbpolicy.h"

#define HAK_DEFAULT_CONTROL_SOCKET "/run/hak/hakd.sock"
#define HAK_DEFAULT_CONTROL_GROUP  "hak"
#define HAK_GROUP_NAME_MAX         32u /* useradd's limit for user and group names */
#define HAK_DEFAULT_MAX_PAYLOAD    (32u << 20)
#define HAK_DEFAULT_IO_DEPTH       256u
#define HAK_DEFAULT_MAX_CLIENTS    64u
#define HAK_DEFAULT_STATE_DIR      "/var/lib/hak"
#define HAK_DEFAULT_BITMAP_BLOCK   4096u
#define HAK_DEFAULT_ASYNC_BUFFER   (64ull << 20)
#define HAK_DEFAULT_PING_INTERVAL  1.0 /* seconds */
#define HAK_DEFAULT_PING_TIMEOUT   2.0
#define HAK_DEFAULT_CONNECT_INTVL  1.0
#define HAK_DEFAULT_MAX_EPOCH      2048u
#define HAK_MAX_PATHS              8u  /* heartbeat paths per node */
#define HAK_DEFAULT_HB_INTERVAL    0.2 /* seconds */
#define HAK_DEFAULT_DEADTIME       1.0 /* seconds */
#define HAK_DEFAULT_CLUSTER_ID     1u
#define HAK_DEFAULT_AL_EXTENTS     1237u /* x 4 MiB: about 4.8 GiB hot */
#define HAK_DEFAULT_AL_EXTENT_SIZE (4u << 20)
#define HAK_AL_EXTENTS_MAX         12292u /* al.h AL_SLOTS_MAX */
#define HAK_DEFAULT_RS_RATE_MIN    (10ull << 20)
#define HAK_DEFAULT_RS_FILL        (64ull << 20)
#define HAK_DEFAULT_FENCE_TIMEOUT  10.0 /* seconds */

/* When a write is acknowledged to the client (DRBD protocols C, B, A). */
enum hak_repl_mode {
	HAK_MODE_SYNC,    /* after the peer wrote it */
	HAK_MODE_MEMSYNC, /* after the peer received it */
	HAK_MODE_ASYNC,   /* after the local write */
};

/*
 * What a primary does with its writes when it loses the peer ("fencing", as DRBD's): none keeps
 * acknowledging them alone, resource-only freezes them until the peer is known to be Outdated,
 * resource-and-stonith also needs the cluster's fence-hook to succeed.
 */
enum hak_fencing {
	HAK_FENCING_NONE,
	HAK_FENCING_RESOURCE_ONLY,
	HAK_FENCING_STONITH,
};

/* One heartbeat endpoint of a node: numeric IP and UDP port. */
struct hak_hb_addr {
	char host[INET6_ADDRSTRLEN];
	uint16_t port;
	int family; /* AF_INET or AF_INET6 */
};

/* What a cluster manager does when a primary loses both its peer and the witness. */
enum hak_quorum_loss { HAK_QL_FREEZE, HAK_QL_DEMOTE };
enum hak_disk_failure { HAK_DF_DETACH, HAK_DF_FAILOVER };

/* The "cluster" section: heartbeats and failover; absent = replication only, no failover. */
struct hak_cluster_cfg {
	bool present;
	uint32_t cluster_id;       /* "cluster-id" 1..4294967295 (default 1): tells pairs apart */
	double heartbeat_interval; /* "heartbeat-interval" 10ms..10s (default 200ms) */
	double deadtime;           /* "deadtime" 50ms..60s (default 1s), > 2 intervals */
	char *auth_key_file;       /* "auth-key-file" (required): the HMAC key, mode 0600 */
	enum hak_quorum_loss on_quorum_loss; /* "on-quorum-loss" freeze|demote (default freeze) */
	char *witness_address; /* "witness-address IP:PORT": hakd --witness listens there, the
	                        * nodes ask it for the vote; NULL: no witness */
	int quorum;            /* "quorum" (default yes); no: a successful fence-hook replaces
	                        * the vote */
	char *fence_hook;      /* "fence-hook PATH": powers the peer off, exit 0 = fenced */
	enum hak_disk_failure on_disk_failure; /* "on-disk-failure" detach|failover (detach) */
	char *preferred_node; /* "preferred-node NAME": takes the primary role when both could
	                       * and neither is; NULL: the decision's tie-break (node order) */
	unsigned line;        /* of the "cluster" keyword */
};

/*
 * Checksum-based resync (DRBD's csums-alg / csums-after-crash-only): the target hashes each dirty
 * run and the source sends only the blocks whose hashes differ.
 */
enum hak_csums {
	HAK_CSUMS_NO,
	HAK_CSUMS_YES,         /* every resync */
	HAK_CSUMS_AFTER_CRASH, /* only the full resync owed to a primary that crashed */
};

/* The replication link of a volume ("transport"). */
enum hak_transport {
	HAK_TRANSPORT_TCP,
	HAK_TRANSPORT_TLS,  /* TLS 1.3: certificates (tls-ca-file...) or a key (tls-psk-file) */
	HAK_TRANSPORT_RDMA, /* reliable-connected queue pairs through rdma_cm (transport/rdma.h) */
	/* "rdma,tcp": RDMA, over TCP while RDMA has no path, and back onto RDMA in place once it
	 * has one (repl/tswitch.h). A build without RDMA replicates over TCP only. */
	HAK_TRANSPORT_RDMA_TCP,
};

/*
 * TLS on a volume's NBD listeners ("nbd-tls"), in the order of nbd_proto.h's enum nbd_tls_mode.
 * The mode is the TCP listener's; the UNIX socket offers TLS when it is on or required but
 * never requires it: only local processes its file mode admits reach it, and the daemon's own
 * groups attach through it in the clear.
 */
enum hak_nbd_tls {
	HAK_NBD_TLS_OFF = 0,
	HAK_NBD_TLS_ON,      /* offered; clients may stay in the clear */
	HAK_NBD_TLS_REQUIRE, /* every option but STARTTLS and ABORT is refused before TLS */
};
#define HAK_DEFAULT_NBD_HS_TIMEOUT 30.0 /* seconds from connect to transmission */

/* What a volume does when its backing store fails a request ("on-io-error"). */
enum hak_io_error_policy {
	HAK_IOERR_DETACH = 0, /* drop the disk, go Diskless, serve through the peer (default) */
	HAK_IOERR_PASS_ON,    /* return the error to the client, keep the disk */
};

/* One server of the replication pair. */
struct hak_node_cfg {
	char *name;     /* the block's NAME */
	char *address;  /* "address" as written: "192.0.2.1:7789" or "[2001:db8::1]:7789" */
	char *hostname; /* "hostname": the system hostname of this node (default: name) */
	char host[INET6_ADDRSTRLEN]; /* the address's IP in canonical form, without brackets */
	uint16_t port;               /* the address's port, 1..65535 */
	int family;                  /* AF_INET or AF_INET6 */
	unsigned line;               /* line of the "node" keyword */
	/* "heartbeat-address IP:PORT ...": path i runs between both nodes' entry i */
	struct hak_hb_addr heartbeat[HAK_MAX_PATHS];
	unsigned n_heartbeat;
};

/* The cluster manager's limit: every volume has one bit of the heartbeat's disk mask. */
#define CONFIG_MAX_CLUSTER_VOLUMES 16u

struct hak_volume_cfg {
	char *name;              /* the block's NAME; also the NBD export name */
	char *backing;           /* "backing": file or block device (required) */
	char *nbd_socket;        /* "nbd-socket": UNIX socket path serving this volume (required) */
	char *nbd_listen;        /* "nbd-listen": optional TCP "ADDR:PORT" ("[v6]:PORT" for IPv6) */
	char *description;       /* "description": optional, sent in NBD_INFO_DESCRIPTION */
	int read_only;           /* "read-only" (default no) */
	int direct_io;           /* "direct-io": O_DIRECT on the backing store (default no) */
	uint32_t block_size_min; /* "block-size-min": 0 = automatic (512, or 4096 with direct-io) */
	uint32_t max_payload;    /* "max-payload": default 32 MiB, range 64K..64M */

	/* NBD over TLS: the TCP listener's mode and the credentials (nbd/nbd_tls.h). */
	enum hak_nbd_tls nbd_tls; /* "nbd-tls" off|on|require: must be written with nbd-listen */
	char *nbd_tls_cert_file;  /* "nbd-tls-cert-file": the server's PEM certificate (chain) */
	char *nbd_tls_key_file;   /* "nbd-tls-key-file": its PEM private key */
	char *nbd_tls_ca_file;    /* "nbd-tls-ca-file": clients must show a certificate it signed */
	char *nbd_tls_psk_file;   /* "nbd-tls-psk-file": "username:hexkey" lines (psktool's) */
	/* "nbd-handshake-timeout" 1s..10min (30s): connect to transmission, TLS included */
	double nbd_handshake_timeout;

	/* Replication: validated always, used only when the config has nodes. */
	enum hak_repl_mode mode; /* "mode" sync|memsync|async (default sync) */
	bool meta_internal; /* "meta-disk internal": metadata at the end of the backing store */
	char *meta_path;    /* "meta-disk PATH"; NULL when internal (default
	                     * STATE-DIR/NAME.meta) */
	uint32_t bitmap_block_size; /* "bitmap-block-size": bytes per bitmap bit, power of two
	                             * 4K..1M (default 4K) */
	unsigned port_offset;       /* "replication-port-offset" 0..65534 (default 0): the volume
	                             * replicates on each node's address port + this */
	uint64_t async_buffer;      /* "async-buffer" 1M..4G (default 64M): async mode's send
	                             * buffer before it falls back to the bitmap */
	double ping_interval;       /* "ping-interval" seconds, 50ms..60s (default 1s) */
	double ping_timeout;        /* "ping-timeout" seconds, > ping_interval (default 2s) */
	double connect_interval;    /* "connect-interval" seconds between tries (default 1s) */
	unsigned max_epoch_size;    /* "max-epoch-size" writes before a barrier, 1..20000 (2048) */
	enum sb_policy after_sb;    /* "after-split-brain" (default disconnect) */
	char *sb_discard_node;      /* "discard-node NAME": the victim of after-split-brain
	                             * discard-node (required with it, refused without it) */
	char *sb_hook;              /* "split-brain-hook PATH": run on every split brain */
	int data_integrity;         /* "data-integrity" none|crc32c (default none): checksum
	                             * every replicated payload */
	unsigned verify_alg;        /* "verify-alg" crc32c|sha256 (enum hash_alg, default crc32c):
	                             * the block hash of online verify and checksum resync */
	enum hak_csums csums;       /* "csums" no|yes|after-crash (default no) */
	enum hak_io_error_policy on_io_error; /* "on-io-error" detach|pass-on (default detach) */
	char *local_io_error_hook; /* "local-io-error-hook": program run on a disk error, or NULL */
	unsigned al_extents;       /* "al-extents" 0 (no activity log) or 64..12292 (1237) */
	uint32_t al_extent_size;   /* "al-extent-size" power of two 1M..1G (4M) */
	uint64_t resync_rate_max;  /* "resync-rate-max" bytes/s, 0 = unlimited (default 0) */
	uint64_t resync_rate_min;  /* "resync-rate-min" bytes/s kept while applications write
	                            * (default 10M) */
	uint64_t resync_fill;      /* "resync-fill-target" resync bytes in flight (64M) */
	/* "fencing"; when not written: resource-only for sync and memsync volumes of a cluster
	 * (it has the heartbeats and the witness to outdate the peer over), none otherwise */
	enum hak_fencing fencing;
	double fence_timeout; /* "fence-timeout": a freeze this long is reported (10s) */
	char *fence_peer;     /* "fence-peer": without a cluster section, the program that keeps
	                       * the peer from being promoted (exit 3, 4, 5 or 7 = done) */
	char *unfence_peer;   /* "unfence-peer": lifts that once the peer is in sync again */
	char *auth_key_file;  /* "auth-key-file": the peer proves it holds this key before it
	                       * may replicate; default the cluster's; required with nodes
	                       * unless "insecure-no-auth" */
	int insecure_no_auth; /* "insecure-no-auth" (default no): any peer may connect */
	enum hak_transport transport; /* "transport" tcp|tls|rdma|rdma,tcp (default tcp) */
	char *tls_ca_file;   /* "tls-ca-file": the CA the peer's certificate must chain to */
	char *tls_cert_file; /* "tls-cert-file": this node's certificate (PEM) */
	char *tls_key_file;  /* "tls-key-file": its private key */
	char *tls_peer_name; /* "tls-peer-name": the name in the peer's certificate;
	                      * NULL: the peer node's name */
	char *tls_psk_file;  /* "tls-psk-file": a pre-shared key instead of certificates */
	bool tls_kernel;     /* "tls-kernel": let the kernel make the records (kTLS) if it can */
	unsigned line;       /* line of the "volume" keyword, for later diagnostics */
};

struct hak_config {
	char *file;           /* the path it was loaded from (or the name given to config_parse);
	                       * NULL for config_new_default() */
	char *control_socket; /* global "control-socket" */
	/* global "control-group": its members may run hakctl's read-only commands (default hak) */
	char *control_group;
	int control_group_set;      /* 1: "control-group" is written in the file (for messages) */
	enum log_level log_level;   /* global "log-level" (default info) */
	enum io_kind io_engine;     /* global "io-engine" auto|uring|pool (default auto) */
	unsigned io_depth;          /* global "io-depth" 8..4096 (default 256) */
	unsigned max_clients;       /* global "max-clients" per volume 1..1024 (default 64) */
	char *node_name;            /* global "node": which node this is; NULL = by hostname */
	char *state_dir;            /* global "state-dir" (default /var/lib/hak) */
	int allow_drills;           /* global "allow-drills": hakctl drill may kill (default no) */
	int sched_batch;            /* global "sched-policy" batch (1, default) or normal (0) */
	struct hak_node_cfg *nodes; /* none (standalone volumes) or exactly two */
	size_t n_nodes;
	struct hak_volume_cfg *volumes;
	size_t n_volumes;
	size_t volumes_alloc;           /* entries allocated in volumes; config.c's bookkeeping */
	struct hak_group_list groups;   /* "group" sections, in file order */
	struct hak_cluster_cfg cluster; /* the "cluster" section */
	/* global "metrics-listen" HOST:PORT: the Prometheus endpoint; NULL: none (the default) */
	char *metrics_listen;
};

/*
 * Parse text (not NUL-terminated necessarily: len bytes) named name (used in messages).
 * On failure returns -1, errno=EINVAL (ENOMEM if memory ran out), and err holds one line
 * "NAME:LINE:COL: message".
 */
int config_parse(const char *text, size_t len, const char *name, struct hak_config **out, char *err,
                 size_t errlen);
/* Read and parse a file. Errors as config_parse (errno from open/read for I/O failures). */
int config_load(const char *path, struct hak_config **out, char *err, size_t errlen);
/*
 * As config_load(), but report(arg, message) hears every error of the file, each
 * "FILE:LINE:COL: sentence." in the order found (or the one sentence why it cannot be read), not
 * only the first (hakctl check-config). Syntax and section errors are all found in one run; the
 * checks between sections run once the sections themselves are right.
 */
int config_check_all(const char *path, void (*report)(void *arg, const char *message), void *arg,
                     struct hak_config **out);
/* A config with defaults, no nodes and no volumes (used by hakd --export). */
struct hak_config *config_new_default(void);
/*
 * Append a volume with defaults; name and backing are copied. Returns the new entry, or NULL with
 * errno: EINVAL (NULL backing, or a name not matching [A-Za-z0-9_.-]{1,64} or "." or ".."),
 * EEXIST (the name is taken), ENOSPC (4096 volumes already), ENOMEM. Every other field gets its
 * default (meta_path from cfg->state_dir). The entry stays valid until
 * the next add: the array may move. Strings set in it later must be malloc'ed; config_free()
 * frees them.
 */
struct hak_volume_cfg *config_add_volume(struct hak_config *cfg, const char *name,
                                         const char *backing);
const struct hak_volume_cfg *config_find_volume(const struct hak_config *cfg, const char *name);
void config_free(struct hak_config *cfg);

/*
 * Which configured node this machine is, and its peer: override_name (hakd --node; may be
 * NULL) wins, then the global "node", then the node whose hostname equals gethostname() (or,
 * failing that, its first label, so "alpha.example.com" finds "alpha"). With no nodes and no
 * override_name both are NULL and it succeeds. Returns 0, or -1 with errno ENOENT (no such
 * node, or --node without nodes), EINVAL (a config built by hand with one node) or
 * gethostname()'s, and err (may be NULL) holding a sentence that lists the configured nodes and
 * this machine's hostname.
 */
int config_find_self(const struct hak_config *cfg, const char *override_name,
                     const struct hak_node_cfg **self, const struct hak_node_cfg **peer, char *err,
                     size_t errlen);
/* "sync", "memsync", "async". */
const char *config_mode_name(enum hak_repl_mode mode);
/* hak.conf's tables (for config_reload's key-by-key comparison). */
const struct conf_schema *config_schema(void);
const char *config_fencing_name(enum hak_fencing f);

#endif
