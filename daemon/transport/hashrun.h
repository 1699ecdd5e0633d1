/* SPDX-License-Identifier: MIT */
/*
 * Hash runs: the block hashes that online verify and checksum-based resync exchange, and the pure
 * helpers around them (no I/O, no globals), so the codec and the comparison are table-tested.
 *
 * A run is at most HASHRUN_MAX_BLOCKS consecutive bitmap blocks; every block gets one hash (the
 * last block of the volume may be short). On the wire a run travels as a 24-byte header
 *   u64 id | u64 offset | u32 length | u8 alg | u8 0 | u16 0
 * followed, in replies, by one hash per block (4 bytes for crc32c, 32 for sha256).
 *
 * Algorithms: crc32c is the default because it is hardware-accelerated (SSE4.2) and already in
 * hakd, so verify costs little CPU on the loop thread; it is a 32-bit check, so a difference is
 * missed with probability 2^-32 per block. sha256 (OpenSSL EVP) is for operators who want a
 * cryptographic comparison; it is ~20x slower per byte.
 */
#ifndef HAK_HASHRUN_H
#define HAK_HASHRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/wire.h"

enum hash_alg { HASH_CRC32C = 0, HASH_SHA256 = 1, HASH_ALG_COUNT };

#define HASHRUN_MAX_BLOCKS 64u /* so a run's per-block masks fit one uint64_t */
#define HASHRUN_HDR_SIZE   24u
#define HASHRUN_MAX_HASH   32u
#define HASHRUN_MAX_REPLY  (HASHRUN_HDR_SIZE + HASHRUN_MAX_BLOCKS * HASHRUN_MAX_HASH)

struct hashrun {
	uint64_t id;
	uint64_t off;
	uint32_t len;
	uint8_t alg;
};

/* Bytes per hash of alg, 0 for an unknown alg. */
size_t hash_alg_size(unsigned alg);
const char *hash_alg_name(unsigned alg);
/* "crc32c" / "sha256" → alg. 0, or -1 for any other name. */
int hash_alg_parse(const char *s, enum hash_alg *out);

/* Blocks of a run of len bytes with bitmap block size bs (the last may be short). */
uint32_t hashrun_blocks(uint32_t len, uint32_t bs);
/* The longest run: HASHRUN_MAX_BLOCKS blocks, but no more than max_bytes unless one block is. */
uint32_t hashrun_max_len(uint32_t bs, uint32_t max_bytes);

/* One hash per block of buf[0..len) into out (hashrun_blocks × hash_alg_size bytes). 0 or -1. */
int hashrun_compute(unsigned alg, const uint8_t *buf, uint32_t len, uint32_t bs, uint8_t *out);

void hashrun_hdr_encode(uint8_t out[HASHRUN_HDR_SIZE], const struct hashrun *run);
/*
 * Decode and check a request (VERIFY_REQ, CSUM_REQ: header only) or a reply (VERIFY_REPLY,
 * RS_REQUEST: header and hashes, *hashes pointing into in) against the volume: known alg, zero
 * reserved bytes, the range inside size, starting on a block, a whole number of blocks unless it
 * ends at the end of the volume, at most max_len bytes, and a reply carrying exactly one hash per
 * block. 0, or -1 with a sentence in err.
 */
int hashrun_decode(const struct wire_hdr *h, const uint8_t *in, uint64_t size, uint32_t bs,
                   uint32_t max_len, struct hashrun *run, const uint8_t **hashes, char *err,
                   size_t errlen);

/*
 * Compare two hash arrays of n blocks: bit i of the result is set when block i differs. Blocks
 * whose bit is set in skip are not compared (never reported).
 */
uint64_t hashrun_diff(unsigned alg, uint32_t n, const uint8_t *a, const uint8_t *b, uint64_t skip);

/*
 * The first ranges of differing blocks, ascending by offset, adjacent ranges merged. Runs
 * complete out of order, so ranges may be added in any order; once full, the highest range is
 * dropped to make room for a lower one.
 */
#define HASHRUN_RANGES_MAX 8u
struct hashrun_ranges {
	unsigned n;
	struct {
		uint64_t off, len;
	} r[HASHRUN_RANGES_MAX];
};
void hashrun_ranges_add(struct hashrun_ranges *rs, uint64_t off, uint64_t len);

/*
 * Walk the set bits of mask (n blocks starting at off) as maximal ranges: calls fn for each
 * range with the byte offset and length (the last block ends at off + len of the run).
 */
void hashrun_mask_ranges(uint64_t mask, uint32_t n, uint64_t off, uint32_t len, uint32_t bs,
                         void (*fn)(void *ctx, uint64_t off, uint64_t len), void *ctx);

#endif
