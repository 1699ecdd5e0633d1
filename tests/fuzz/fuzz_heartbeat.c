/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: heartbeat datagrams as an attacker on any path would send them. The raw
 * bytes go through hb_decode() under the harness key; then the first 44 bytes are signed with
 * that key, so the fuzzer also reaches the field checks behind the MAC. A packet that decodes must
 * encode back to the same bytes, and the replay window fed with the decoded (incarnation,
 * sequence) pairs must never accept a pair that is not newer than the last one it accepted.
 */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "cluster/heartbeat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char fuzz_key[] = "hak heartbeat fuzz key 0123456789";

static void check_decoded(const uint8_t *pkt, const struct key_bytes *key, struct hb_replay *w)
{
	struct hb_msg m;
	uint8_t again[HB_PKT_SIZE];
	struct hb_replay before = *w;

	if (hb_decode(pkt, HB_PKT_SIZE, key, &m) != HB_OK)
		return;
	if (m.path >= HB_MAX_PATHS || m.role > CLUSTER_PRIMARY || m.disk >= CLUSTER_DISK_COUNT ||
	    (m.flags & ~HB_F_ALL))
		abort();
	if (hb_encode(&m, key, again) != 0 || memcmp(again, pkt, HB_PKT_SIZE) != 0)
		abort();
	if (hb_replay_check(w, m.incarnation, m.seq) == HB_OK && before.seen &&
	    (m.incarnation < before.incarnation ||
	     (m.incarnation == before.incarnation && m.seq <= before.seq)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct key_bytes key;
	struct hb_replay w = {0};
	uint8_t pkt[HB_PKT_SIZE];
	unsigned len = 0;
	char err[256];

	if (keyfile_parse((const uint8_t *)fuzz_key, sizeof(fuzz_key) - 1, "heartbeat key", &key,
	                  err, sizeof(err)) < 0)
		abort();
	/* raw: whatever arrives on the socket */
	if (size == HB_PKT_SIZE)
		check_decoded(data, &key, &w);
	else if (hb_decode(data, size, &key, &(struct hb_msg){0}) == HB_OK)
		abort();
	/* signed: every HB_MAC_OFFSET bytes become one packet with a valid MAC */
	for (size_t off = 0; size - off >= HB_MAC_OFFSET; off += HB_MAC_OFFSET) {
		memcpy(pkt, data + off, HB_MAC_OFFSET);
		if (!HMAC(EVP_sha256(), key.bytes, (int)key.len, pkt, HB_MAC_OFFSET,
		          pkt + HB_MAC_OFFSET, &len))
			abort();
		check_decoded(pkt, &key, &w);
	}
	return 0;
}
