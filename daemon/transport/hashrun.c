/* SPDX-License-Identifier: MIT */
#include "hashrun.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "lib/crc32c.h"
#include "lib/endian.h"

static const struct {
	const char *name;
	size_t size;
} algs[HASH_ALG_COUNT] = {
    [HASH_CRC32C] = {"crc32c", 4},
    [HASH_SHA256] = {"sha256", 32},
};

size_t hash_alg_size(unsigned alg)
{
	return alg < HASH_ALG_COUNT ? algs[alg].size : 0;
}

const char *hash_alg_name(unsigned alg)
{
	return alg < HASH_ALG_COUNT ? algs[alg].name : "unknown";
}

int hash_alg_parse(const char *s, enum hash_alg *out)
{
	for (unsigned i = 0; i < HASH_ALG_COUNT; i++) {
		if (strcmp(s, algs[i].name) == 0) {
			*out = (enum hash_alg)i;
			return 0;
		}
	}
	return -1;
}

uint32_t hashrun_blocks(uint32_t len, uint32_t bs)
{
	return (uint32_t)(((uint64_t)len + bs - 1) / bs);
}

uint32_t hashrun_max_len(uint32_t bs, uint32_t max_bytes)
{
	uint32_t n = max_bytes / bs;
	if (n == 0)
		n = 1;
	if (n > HASHRUN_MAX_BLOCKS)
		n = HASHRUN_MAX_BLOCKS;
	return n * bs;
}

int hashrun_compute(unsigned alg, const uint8_t *buf, uint32_t len, uint32_t bs, uint8_t *out)
{
	size_t hs = hash_alg_size(alg);
	EVP_MD_CTX *ctx = NULL;
	int rc = -1;
	if (hs == 0)
		goto out;
	if (alg == HASH_SHA256 && !(ctx = EVP_MD_CTX_new()))
		goto out;
	for (uint32_t pos = 0; pos < len; pos += bs, out += hs) {
		uint32_t n = len - pos < bs ? len - pos : bs;
		if (alg == HASH_CRC32C) {
			be_put32(out, crc32c_update(0, buf + pos, n));
			continue;
		}
		unsigned int mdlen = 0;
		if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
		    EVP_DigestUpdate(ctx, buf + pos, n) != 1 ||
		    EVP_DigestFinal_ex(ctx, out, &mdlen) != 1 || mdlen != hs)
			goto out;
	}
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	return rc;
}

void hashrun_hdr_encode(uint8_t out[HASHRUN_HDR_SIZE], const struct hashrun *run)
{
	memset(out, 0, HASHRUN_HDR_SIZE);
	be_put64(out, run->id);
	be_put64(out + 8, run->off);
	be_put32(out + 16, run->len);
	out[20] = run->alg;
}

static bool is_reply(uint16_t type)
{
	return type == WIRE_VERIFY_REPLY || type == WIRE_RS_REQUEST;
}

int hashrun_decode(const struct wire_hdr *h, const uint8_t *in, uint64_t size, uint32_t bs,
                   uint32_t max_len, struct hashrun *run, const uint8_t **hashes, char *err,
                   size_t errlen)
{
	const char *what = wire_type_name(h->type);
	if (h->len < HASHRUN_HDR_SIZE) {
		snprintf(err, errlen, "%s frame of %u bytes is shorter than its %u-byte header",
		         what, h->len, HASHRUN_HDR_SIZE);
		return -1;
	}
	run->id = be_get64(in);
	run->off = be_get64(in + 8);
	run->len = be_get32(in + 16);
	run->alg = in[20];
	if (in[21] || in[22] || in[23]) {
		snprintf(err, errlen, "%s frame has non-zero reserved bytes", what);
		return -1;
	}
	size_t hs = hash_alg_size(run->alg);
	if (hs == 0) {
		snprintf(err, errlen, "%s frame names unknown hash algorithm %u", what, run->alg);
		return -1;
	}
	if (run->len == 0 || run->len > max_len || run->off > size || size - run->off < run->len) {
		snprintf(err, errlen,
		         "%s range %llu+%u is empty, longer than %u bytes or outside the volume "
		         "(%llu bytes)",
		         what, (unsigned long long)run->off, run->len, max_len,
		         (unsigned long long)size);
		return -1;
	}
	if (run->off % bs != 0 || (run->len % bs != 0 && run->off + run->len != size)) {
		snprintf(err, errlen, "%s range %llu+%u does not cover whole %u-byte blocks", what,
		         (unsigned long long)run->off, run->len, bs);
		return -1;
	}
	uint32_t n = hashrun_blocks(run->len, bs);
	if (n > HASHRUN_MAX_BLOCKS) {
		snprintf(err, errlen, "%s range %llu+%u spans %u blocks (at most %u)", what,
		         (unsigned long long)run->off, run->len, n, HASHRUN_MAX_BLOCKS);
		return -1;
	}
	uint64_t want = HASHRUN_HDR_SIZE + (is_reply(h->type) ? (uint64_t)n * hs : 0);
	if (h->len != want) {
		snprintf(err, errlen, "%s frame of %u bytes for %u blocks of %s (expected %llu)",
		         what, h->len, n, hash_alg_name(run->alg), (unsigned long long)want);
		return -1;
	}
	if (hashes)
		*hashes = is_reply(h->type) ? in + HASHRUN_HDR_SIZE : NULL;
	return 0;
}

uint64_t hashrun_diff(unsigned alg, uint32_t n, const uint8_t *a, const uint8_t *b, uint64_t skip)
{
	size_t hs = hash_alg_size(alg);
	uint64_t mask = 0;
	for (uint32_t i = 0; i < n && i < HASHRUN_MAX_BLOCKS; i++) {
		if (skip & (UINT64_C(1) << i))
			continue;
		if (memcmp(a + i * hs, b + i * hs, hs) != 0)
			mask |= UINT64_C(1) << i;
	}
	return mask;
}

void hashrun_ranges_add(struct hashrun_ranges *rs, uint64_t off, uint64_t len)
{
	unsigned i = 0;
	while (i < rs->n && rs->r[i].off + rs->r[i].len < off)
		i++;
	if (i < rs->n && rs->r[i].off <= off + len) {
		/* Touches or overlaps range i: widen it, then swallow the ranges it now reaches. */
		uint64_t end = off + len > rs->r[i].off + rs->r[i].len
		                   ? off + len
		                   : rs->r[i].off + rs->r[i].len;
		if (off < rs->r[i].off)
			rs->r[i].off = off;
		rs->r[i].len = end - rs->r[i].off;
		while (i + 1 < rs->n && rs->r[i + 1].off <= end) {
			uint64_t e2 = rs->r[i + 1].off + rs->r[i + 1].len;
			if (e2 > end)
				end = e2;
			rs->r[i].len = end - rs->r[i].off;
			memmove(&rs->r[i + 1], &rs->r[i + 2], (rs->n - i - 2) * sizeof(rs->r[0]));
			rs->n--;
		}
		return;
	}
	if (i == HASHRUN_RANGES_MAX)
		return; /* higher than every range kept, and no room */
	unsigned keep = rs->n < HASHRUN_RANGES_MAX ? rs->n : HASHRUN_RANGES_MAX - 1;
	memmove(&rs->r[i + 1], &rs->r[i], (keep - i) * sizeof(rs->r[0]));
	rs->r[i].off = off;
	rs->r[i].len = len;
	rs->n = keep + 1;
}

void hashrun_mask_ranges(uint64_t mask, uint32_t n, uint64_t off, uint32_t len, uint32_t bs,
                         void (*fn)(void *ctx, uint64_t off, uint64_t len), void *ctx)
{
	uint32_t i = 0;
	while (i < n) {
		if (!(mask & (UINT64_C(1) << i))) {
			i++;
			continue;
		}
		uint32_t j = i;
		while (j < n && (mask & (UINT64_C(1) << j)))
			j++;
		uint64_t start = (uint64_t)i * bs;
		uint64_t end = (uint64_t)j * bs > len ? len : (uint64_t)j * bs;
		fn(ctx, off + start, end - start);
		i = j;
	}
}
