/* SPDX-License-Identifier: MIT */
/*
 * Heartbeats between the two nodes: one UDP datagram every interval on every path (the
 * replication link, the service network, ...), authenticated with HMAC-SHA256 under a shared key,
 * with a per-sender, per-path replay window. The peer is dead only when it has been silent on
 * every path for deadtime.
 *
 * Two layers: pure functions (hb_encode, hb_decode, hb_replay_check, keyfile_parse) that the unit
 * tests and the fuzz harness drive directly, and a runtime (hb_start ... hb_stop) with its own
 * thread and its own libev loop, so a saturated data path or a CPU-bound verify on the main loop
 * never delays a heartbeat. The runtime tells the main loop about changes through an ev_async;
 * the main loop reads a consistent copy of the state with hb_snapshot().
 *
 * Packet (88 bytes, big-endian):
 *   0 magic "HAKH" | 4 version (2) | 5 path index | 6 role | 7 disk
 *   8 cluster id (u32) | 12 sender node id (u32) | 16 sender incarnation (u64)
 *   24 sequence (u64) | 32 sender timestamp ms (u64, CLOCK_REALTIME, informative)
 *   40 flags (u16, HB_F_*) | 42 stale volumes (u16)
 *   44 echo: the newest sequence the sender accepted from its peer on this path (u64, 0 none)
 *   52 echo hold: microseconds between that packet's arrival and this one's sending (u32)
 *   56 HMAC-SHA256 of bytes 0..55
 *
 * The echo gives each node the path's round trip without a packet of its own: the time from
 * sending sequence S to receiving a packet that echoes S, less the hold. It is informative
 * (status, metrics); liveness never depends on it.
 *
 * The disk at 7 is the worst of the sender's volumes; bit i of the stale mask is set when its
 * volume i (in the configuration's order) is not UpToDate, so a fence confirms per volume.
 */
#ifndef HAK_HEARTBEAT_H
#define HAK_HEARTBEAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lib/keyfile.h"

#define HB_MAGIC        0x48414b48u /* "HAKH" */
#define HB_VERSION      2u
#define HB_PKT_SIZE     88u
#define HB_MAC_OFFSET   56u
#define HB_MAX_PATHS    8u
#define HB_DEFAULT_PORT 7790u
#define HB_SENT_RING    64u /* send times kept for the round trip: 4 intervals of 8 paths x 2 keys */

/* Flags a node advertises (cluster_out.eligible / want_primary and its I/O state). */
#define HB_F_ELIGIBLE     (1u << 0)
#define HB_F_WANT_PRIMARY (1u << 1)
#define HB_F_IO_FROZEN    (1u << 2)
#define HB_F_STANDBY      (1u << 3)
/* A primary that lost the replication connection asks its peer to mark itself Outdated (fencing
 * resource-only); the peer answers by advertising the Outdated disk. */
#define HB_F_OUTDATE_PEER (1u << 4)
#define HB_F_ALL          0x1fu

struct hb_msg {
	uint8_t path;
	uint8_t role; /* enum cluster_role */
	uint8_t disk; /* enum cluster_disk */
	uint32_t cluster_id;
	uint32_t node_id;
	uint64_t incarnation; /* the sender's start, microseconds since the epoch */
	uint64_t seq;         /* per sender, increasing by one per packet sent on any path */
	uint64_t time_ms;
	uint16_t flags;
	uint16_t stale;        /* bit i: the sender's volume i is not UpToDate */
	uint64_t echo_seq;     /* the newest sequence the sender accepted on this path; 0 none */
	uint32_t echo_hold_us; /* how long the sender held it before this packet left */
};

/* What the receiver remembers of one sender on one path. */
struct hb_replay {
	uint64_t incarnation;
	uint64_t seq; /* the newest accepted */
	bool seen;
};

enum hb_verdict {
	HB_OK,
	HB_BAD_SIZE,
	HB_BAD_MAGIC,
	HB_BAD_VERSION,
	HB_BAD_MAC,
	HB_BAD_FIELD,       /* reserved bits, flags, role or disk out of range */
	HB_OLD_INCARNATION, /* a packet from before the sender's restart */
	HB_REPLAY,          /* the same sequence as the newest accepted */
	HB_STALE,           /* an older sequence */
	HB_VERDICT_COUNT
};

/* Into buf (exactly HB_PKT_SIZE bytes), MAC included. Returns 0, or -1 (errno EIO) if OpenSSL
 * fails. */
int hb_encode(const struct hb_msg *m, const struct key_bytes *key, uint8_t buf[HB_PKT_SIZE]);
/*
 * Check size, magic, version and MAC (in constant time), then every field; fills *m only on HB_OK.
 * Never reads past len.
 */
enum hb_verdict hb_decode(const uint8_t *buf, size_t len, const struct key_bytes *key,
                          struct hb_msg *m);
/*
 * The replay window: accepts (and records) a newer incarnation, or the same incarnation with a
 * higher sequence; refuses a replay of the newest packet, an older sequence and an older
 * incarnation. Sequence gaps are fine (lost datagrams).
 */
enum hb_verdict hb_replay_check(struct hb_replay *w, uint64_t incarnation, uint64_t seq);
const char *hb_verdict_name(enum hb_verdict v);

/* Same family, address and port. */
bool hb_same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
/*
 * One datagram from fd without waiting, of up to len bytes, its sender in *from (zeroed past the
 * address, so hb_same_addr compares it whole) and *flen. Its size, or -1 with errno (EAGAIN: none
 * left). Give a buffer one byte larger than a packet: a longer datagram then shows as the wrong
 * size instead of being cut to the right one.
 */
ssize_t hb_recv(int fd, uint8_t *buf, size_t len, struct sockaddr_storage *from, socklen_t *flen);

/*
 * The frame the heartbeat and the witness packets share: exactly size bytes, the magic (u32) at 0
 * and the version at 4, and at mac_offset the HMAC-SHA256 under the cluster key of every byte
 * before it. The bytes in between are each format's own.
 */
struct hb_frame {
	uint32_t magic;
	uint8_t version;
	size_t size, mac_offset;
};
/* Write the magic and the version into buf, whose fields are filled in, and close it with the MAC.
 * 0, or -1 with errno EIO if OpenSSL fails. */
int hb_frame_seal(const struct hb_frame *f, const struct key_bytes *key, uint8_t *buf);
/* Size, magic, version, then the MAC (compared in constant time): HB_OK when the fields may be
 * read, the first check that failed otherwise. */
enum hb_verdict hb_frame_check(const struct hb_frame *f, const uint8_t *buf, size_t len,
                               const struct key_bytes *key);

/* ---- runtime ---- */

struct ev_loop;
struct hb;

struct hb_path_cfg {
	struct sockaddr_storage local; /* bound: the address this node sends from on the path */
	struct sockaddr_storage peer;  /* the peer's address on the path; only it is accepted */
	socklen_t local_len, peer_len;
};

struct hb_config {
	uint32_t cluster_id;
	uint32_t node_id, peer_id;
	unsigned n_paths; /* 1..HB_MAX_PATHS */
	struct hb_path_cfg paths[HB_MAX_PATHS];
	double interval; /* seconds between heartbeats (default 0.2) */
	double deadtime; /* seconds of silence before a path is dead (default 1), > interval */
	struct key_bytes key;
	/* where key came from, watched for a replacement (keyring.h); NULL: key stays as given.
	 * Read only while hb_start or wit_client_start runs. */
	const char *key_file;
};

struct hb_path_state {
	bool alive;
	int64_t last_heard_ms; /* ms since the last accepted packet; -1: never */
	int64_t rtt_us;        /* the path's last measured round trip (echo); -1: none yet */
	uint64_t rx_ok, rx_bad, rx_replay, rx_foreign, tx_ok, tx_err;
};

struct hb_snapshot {
	unsigned n_paths;
	struct hb_path_state paths[HB_MAX_PATHS];
	bool peer_alive;          /* alive on at least one path */
	bool peer_known;          /* heard at least once since start */
	struct hb_msg peer;       /* the newest accepted message on any path */
	uint64_t generation;      /* increases at every change that notified the main loop */
	const char *key_rotation; /* keyring_state(): "none", "waiting", "grace" */
	uint64_t key_rotations;   /* new keys taken from a replaced key file since the start */
};

/* Called on the main loop after the heartbeat thread saw a change (alive/dead, peer state). */
typedef void (*hb_notify_fn)(void *arg);

struct hak_config;
struct hak_node_cfg;
/*
 * The heartbeat setup of this node from hak.conf: its cluster section, self's and peer's
 * heartbeat-address lists (path i = entry i of both), node ids 1 and 2 in file order, and the
 * key from auth-key-file. Returns 0, or -1 with errno and a sentence in err (no cluster section,
 * or the key file).
 */
int hb_config_build(struct hb_config *out, const struct hak_config *cfg,
                    const struct hak_node_cfg *self, const struct hak_node_cfg *peer, char *err,
                    size_t errlen);

/*
 * Bind every path's socket, start the thread. notify runs on main_loop (which must be run by
 * the calling thread). Returns NULL with errno and a sentence in err on failure.
 */
struct hb *hb_start(const struct hb_config *cfg, struct ev_loop *main_loop, hb_notify_fn notify,
                    void *arg, char *err, size_t errlen);
/* Whether the thread has sent its first round on every path: the peer can hear this node
 * (thread-safe). */
bool hb_joined(struct hb *hb);
/* What this node advertises (thread-safe); a change goes out at once on every path. */
void hb_set_local(struct hb *hb, uint8_t role, uint8_t disk, uint16_t flags, uint16_t stale);
/* A consistent copy of the state (thread-safe; ages computed now). */
void hb_snapshot(struct hb *hb, struct hb_snapshot *out);
/* Stop sending (the peer will see this node die) and free everything. hb may be NULL. */
void hb_stop(struct hb *hb);

#endif
