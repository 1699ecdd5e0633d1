/* SPDX-License-Identifier: MIT */
/*
 * The witness: a third host's vote that breaks the tie when the two nodes lose each other (in the
 * spirit of NDB's arbitrator and corosync-qnetd). It grants its vote to at most one node of a
 * cluster at a time, as a lease: the holder renews it with every request, a request from the
 * other node is denied while the lease runs and granted once it expired without renewal. A node
 * that no longer wants the vote (its peer is back) releases it.
 *
 * It also remembers which node is Outdated (fencing): a primary that lost its peer asks it to
 * record the peer as Outdated, and from then on the witness never grants that node its vote and
 * tells it, in every reply, to mark its own disk Outdated, until the node that outdated it says
 * a resync made it current again. The marks are kept in a file and survive a restart of the
 * witness. A node that is Outdated itself, or that would outdate the holder of a running lease,
 * is not listened to: the vote and the current data never part.
 *
 * It prefers the primary: while a node that says it is primary keeps asking (within half a
 * lease of its last request), its peer is denied the vote. When only the pair's own links break,
 * both nodes reach the witness and ask at about the same moment; without this the faster one
 * won, and a secondary winning meant a needless failover with the primary's in-flight writes
 * failed. A primary that died or lost the witness stops asking, and half a lease later (one
 * deadtime, as long as its peer needs to call it dead) the peer may have the vote.
 *
 * UDP, one request and one reply, authenticated with HMAC-SHA256 under the cluster's auth key
 * (the heartbeat key). The witness keeps a per-node replay window (incarnation, sequence) and
 * drops stale or replayed requests without answering; a reply echoes the request's incarnation
 * and sequence, which the node checks, so an old reply cannot be replayed at it either.
 *
 * Packet (72 bytes, big-endian):
 *   0 magic "HAKW" | 4 version (1) | 5 type (1 request, 2 reply) | 6 flags (u16, WIT_F_*)
 *   8 cluster id (u32) | 12 node id (u32, the requester) | 16 incarnation (u64, the requester's)
 *   24 sequence (u64, the requester's) | 32 holder (u32, reply: node holding the vote, 0 none)
 *   36 lease left (u32 ms, reply) | 40 HMAC-SHA256 of bytes 0..39
 *
 * Pure parts (wit_encode, wit_decode, wit_grant) are table-tested; the runtime is the witness
 * server (hakd --witness) and the node-side client, each on its own thread with its own libev
 * loop, so neither ever blocks the main loop.
 */
#ifndef HAK_WITNESS_H
#define HAK_WITNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "heartbeat.h"

#define WIT_MAGIC      0x48414b57u /* "HAKW" */
#define WIT_VERSION    1u
#define WIT_PKT_SIZE   72u
#define WIT_MAC_OFFSET 40u
#define WIT_REQUEST    1u
#define WIT_REPLY      2u

#define WIT_F_WANT    (1u << 0) /* request: grant or renew the vote for me; else release */
#define WIT_F_GRANTED (1u << 1) /* reply: the requester holds the vote now */
/* request: record my peer as Outdated (I am a primary that lost it, fencing resource-only) */
#define WIT_F_OUTDATE_PEER (1u << 2)
/* request: my peer is current again (a resync from me completed): forget its Outdated mark */
#define WIT_F_PEER_CURRENT  (1u << 3)
#define WIT_F_OUTDATED      (1u << 4) /* reply: the requester is recorded as Outdated */
#define WIT_F_PEER_OUTDATED (1u << 5) /* reply: the requester's peer is recorded as Outdated */
#define WIT_F_PRIMARY       (1u << 6) /* request: I am primary (my peer waits for the vote) */
#define WIT_F_ALL           0x7fu

struct wit_msg {
	uint8_t type;
	uint16_t flags;
	uint32_t cluster_id;
	uint32_t node_id; /* 1 or 2 */
	uint64_t incarnation;
	uint64_t seq;
	uint32_t holder;   /* reply */
	uint32_t lease_ms; /* reply: what is left of the holder's lease */
};

int wit_encode(const struct wit_msg *m, const struct key_bytes *key, uint8_t buf[WIT_PKT_SIZE]);
/* Size, magic, version, MAC (constant time), then fields. Reuses hb_verdict's codes. */
enum hb_verdict wit_decode(const uint8_t *buf, size_t len, const struct key_bytes *key,
                           struct wit_msg *m);

/* The witness's memory of one cluster. */
struct wit_state {
	uint32_t cluster_id;
	uint32_t holder;        /* 0: nobody */
	int64_t expires_ms;     /* monotonic; the lease runs while now < expires_ms */
	struct hb_replay rp[2]; /* nodes 1 and 2 */
	/* A restarted witness forgot its holder, who still counts on its lease: no grant before
	 * a whole lease has passed since the start. */
	int64_t quiet_until;
	uint8_t outdated; /* bit n-1: node n is Outdated (persistent) */
	/* monotonic ms until which node n+1 counts as a primary still asking (WIT_F_PRIMARY) */
	int64_t primary_until[2];
};

enum wit_decision {
	WIT_GRANT,   /* nobody held it (or the lease expired): now the requester does */
	WIT_RENEW,   /* the holder asked again: lease extended */
	WIT_DENY,    /* the other node holds a running lease, or is a primary still asking */
	WIT_RELEASE, /* the holder does not want it any more */
	WIT_QUERY,   /* a node without the vote does not want it: just the state */
	WIT_DROP,    /* foreign cluster, bad node id, stale or replayed: no answer */
	WIT_DECISION_COUNT
};

/*
 * The grant decision for a decoded request at monotonic time now_ms: updates *s (the vote and
 * the Outdated marks) and, unless the result is WIT_DROP, fills *reply (holder, lease left,
 * Outdated marks, echo of the request).
 */
enum wit_decision wit_grant(struct wit_state *s, const struct wit_msg *req, int64_t now_ms,
                            int64_t lease_ms, struct wit_msg *reply);
const char *wit_decision_name(enum wit_decision d);

/* "IP:PORT" or "[IPv6]:PORT" (numeric) into a socket address. 0, or -1 with errno EINVAL. */
int wit_addr_parse(const char *text, struct sockaddr_storage *ss, socklen_t *len);

/* ---- runtime ---- */

struct ev_loop;
struct hak_config;

/* hakd --witness: serve the config's witness-address until SIGTERM/SIGINT. Returns the exit
 * code. */
int wit_serve(const struct hak_config *cfg);

struct wit_client;

struct wit_client_state {
	bool configured;
	bool reachable;        /* a valid reply within deadtime */
	bool outdated;         /* the last reply: the witness records this node as Outdated */
	bool peer_outdated;    /* ... and the peer */
	bool holds;            /* this node's lease is valid by its own (conservative) clock */
	uint32_t holder;       /* as the last reply said (0 nobody) */
	int64_t last_reply_ms; /* ago; -1 never */
	bool want;
	uint64_t tx, rx_ok, rx_bad;
	const char *key_rotation; /* "none", "waiting", "grace" (keyring.h); NULL unconfigured */
};

/*
 * Ask the witness every interval; notify runs on main_loop when reachable/holder change.
 * lease_ms is the witness's lease (2 × deadtime): this node counts its vote valid only until
 * the send time of the granted request plus lease_ms, which is never later than the witness's
 * own expiry. Returns NULL with a sentence in err.
 */
struct wit_client *wit_client_start(const struct hb_config *hb, const char *witness_addr,
                                    struct ev_loop *main_loop, void (*notify)(void *), void *arg,
                                    char *err, size_t errlen);
/* Want (grant/renew) or not (release) the vote from the next request on; thread-safe. */
void wit_client_want(struct wit_client *c, bool want);
/*
 * From the next request on, ask the witness to record the peer as Outdated, or to forget that
 * mark (never both); thread-safe. A change is sent at once, not at the next interval.
 */
void wit_client_peer(struct wit_client *c, bool outdate, bool current);
/* Whether this node is primary (WIT_F_PRIMARY) from the next request on; thread-safe. A change is
 * sent at once. */
void wit_client_primary(struct wit_client *c, bool primary);
void wit_client_state(struct wit_client *c, struct wit_client_state *out);
void wit_client_stop(struct wit_client *c);

#endif
