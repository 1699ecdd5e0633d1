/* SPDX-License-Identifier: MIT */
/*
 * The cluster key as the heartbeats and the witness hold it, and its rotation without a gap.
 *
 * Rotating a shared key means replacing a file on two nodes and the witness, one after the
 * other, minutes apart. A side that switched to the new key at once would stop being understood
 * by the others until they caught up: the heartbeat paths would go dead and the cluster manager
 * would fail over. So a key ring keeps two keys while a rotation runs:
 *
 *   - the file is checked for replacement at most once a second; a new key becomes "current"
 *     and the one before stays as "old";
 *   - every packet received is verified under the current key, then under the old one;
 *   - until the other side (the peer; for the witness server, both nodes) has been seen using
 *     the current key, every packet is sent twice, once under each key, so whoever has not
 *     rotated yet still understands us and whoever has does too;
 *   - once the other side was seen on the current key, packets go under it alone, and the old
 *     key is still accepted for KEYRING_GRACE_MS (packets already in flight), then forgotten.
 *
 * A second replacement before the other side caught up keeps the old key (the one it is known
 * to use) and replaces only the current one. A file that cannot be read, or holds a key too
 * short, is reported once per change and the keys in use stay. One key ring belongs to one
 * thread (the heartbeat thread, the witness client's, the witness server's): no locking.
 */
#ifndef HAK_KEYRING_H
#define HAK_KEYRING_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/keyfile.h"

#define KEYRING_CHECK_MS 1000  /* how often the key file is checked for replacement */
#define KEYRING_GRACE_MS 10000 /* the old key is still accepted this long after the switch */
#define KEYRING_PATH_MAX 4096

struct keyring {
	char path[KEYRING_PATH_MAX];
	const char *what;        /* names the key in messages: "cluster key" */
	unsigned need;           /* bit per other side that must use the new key (1, or 3) */
	struct file_stamp stamp; /* of the file the current key came from */
	struct key_bytes cur, old;
	bool rotating;       /* old is valid */
	unsigned seen;       /* other sides seen using cur since the rotation began */
	int64_t switched_ms; /* when seen reached need (-1: not yet) */
	int64_t next_check_ms;
	uint64_t rotations; /* keys taken from a replaced file since the start */
};

/* Load path (the first key). need: one bit per other side (the witness server: 3, one per
 * node). 0, or -1 with errno and a sentence in err. */
int keyring_init(struct keyring *kr, const char *path, const char *what, unsigned need, char *err,
                 size_t errlen);
/* Start from a key already in memory (tests, callers without a file: no rotation). */
void keyring_init_key(struct keyring *kr, const struct key_bytes *key, unsigned need);
/*
 * Check the file if KEYRING_CHECK_MS passed since the last check, and end the grace period if it
 * is over. Returns 1 if a new key was taken, 0 if nothing changed, -1 if the file could not be
 * used (logged; the keys in use stay).
 */
int keyring_refresh(struct keyring *kr, int64_t now_ms);
/* The keys to send under, in order: 1 (no rotation, or the other side caught up) or 2. */
unsigned keyring_send_keys(const struct keyring *kr, const struct key_bytes *out[2]);
/* The keys to verify a received packet under: the current one first. */
unsigned keyring_recv_keys(const struct keyring *kr, const struct key_bytes *out[2]);
/* A packet from side (bit) verified under key index idx of keyring_recv_keys. */
void keyring_seen(struct keyring *kr, unsigned idx, unsigned side, int64_t now_ms);
/* "none", "waiting" (sending under both keys), "grace" (old key still accepted). */
const char *keyring_state(const struct keyring *kr);
/* Wipe both keys. */
void keyring_clear(struct keyring *kr);

#endif
