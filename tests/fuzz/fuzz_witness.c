/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: witness datagrams as anyone on the network would send them, to the witness
 * and to a node. The raw bytes go through wit_decode() under the harness key; then every 40 bytes
 * are signed with that key, so the fuzzer reaches the field checks and the grant decision behind
 * the MAC. A packet that decodes must encode back to the same bytes; fed to wit_grant() at
 * increasing times it must keep the state sane: a holder of 0, 1 or 2, marks for nodes 1 and 2
 * only, no vote ever granted to a node marked Outdated, the holder of a running lease never
 * outdated by the other node, and a reply that tells the truth about both.
 */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/heartbeat.h"
#include "cluster/witness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char fuzz_key[] = "hak witness fuzz key 0123456789ab";

static void check_grant(struct wit_state *s, const struct wit_msg *m, int64_t now)
{
	struct wit_msg rep;
	uint32_t running = s->holder && now < s->expires_ms ? s->holder : 0;
	uint8_t before = s->outdated;
	enum wit_decision d = wit_grant(s, m, now, 1000, &rep);

	if (s->holder > 2 || (s->outdated & ~3u))
		abort();
	if (d == WIT_DROP)
		return;
	if (m->node_id < 1 || m->node_id > 2 || rep.node_id != m->node_id || rep.seq != m->seq)
		abort();
	uint8_t self = (uint8_t)(1u << (m->node_id - 1)), peer = (uint8_t)(3u - self);
	/* an Outdated node never holds the vote by this request */
	if ((s->outdated & self) && (d == WIT_GRANT || d == WIT_RENEW))
		abort();
	/* the other node's running lease protects it from an outdate */
	if (running && running != m->node_id && !(before & peer) && (s->outdated & peer))
		abort();
	/* a node already Outdated changes no mark */
	if ((before & self) && s->outdated != before)
		abort();
	if (!!(rep.flags & WIT_F_OUTDATED) != !!(s->outdated & self) ||
	    !!(rep.flags & WIT_F_PEER_OUTDATED) != !!(s->outdated & peer) ||
	    !!(rep.flags & WIT_F_GRANTED) != (s->holder == m->node_id))
		abort();
}

static void check_decoded(const uint8_t *pkt, const struct key_bytes *key, struct wit_state *s,
                          int64_t now)
{
	struct wit_msg m;
	uint8_t again[WIT_PKT_SIZE];

	if (wit_decode(pkt, WIT_PKT_SIZE, key, &m) != HB_OK)
		return;
	if ((m.flags & ~WIT_F_ALL) || m.node_id < 1 || m.node_id > 2 || m.holder > 2)
		abort();
	if (wit_encode(&m, key, again) != 0 || memcmp(again, pkt, WIT_PKT_SIZE) != 0)
		abort();
	check_grant(s, &m, now);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct key_bytes key;
	struct wit_state s = {.cluster_id = 1};
	uint8_t pkt[WIT_PKT_SIZE];
	unsigned len = 0;
	char err[256];
	int64_t now = 0;

	if (keyfile_parse((const uint8_t *)fuzz_key, sizeof(fuzz_key) - 1, "heartbeat key", &key,
	                  err, sizeof(err)) < 0)
		abort();
	if (size == WIT_PKT_SIZE)
		check_decoded(data, &key, &s, now);
	else if (wit_decode(data, size, &key, &(struct wit_msg){0}) == HB_OK)
		abort();
	/* every WIT_MAC_OFFSET bytes: one signed packet, 300 ms after the one before */
	for (size_t off = 0; size - off >= WIT_MAC_OFFSET; off += WIT_MAC_OFFSET) {
		memcpy(pkt, data + off, WIT_MAC_OFFSET);
		if (!HMAC(EVP_sha256(), key.bytes, (int)key.len, pkt, WIT_MAC_OFFSET,
		          pkt + WIT_MAC_OFFSET, &len))
			abort();
		now += 300;
		check_decoded(pkt, &key, &s, now);
	}
	return 0;
}
