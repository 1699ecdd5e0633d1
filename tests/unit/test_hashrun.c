/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for hash runs (daemon/hashrun.h): the per-block hashes of verify and checksum
 * resync, the frame codec and its validation, the comparison, and the first-ranges list.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "transport/hashrun.h"
#include "lib/endian.h"

static char err[256];

START_TEST(alg_names)
{
	enum hash_alg a;
	ck_assert_int_eq(hash_alg_parse("crc32c", &a), 0);
	ck_assert_int_eq(a, HASH_CRC32C);
	ck_assert_int_eq(hash_alg_parse("sha256", &a), 0);
	ck_assert_int_eq(a, HASH_SHA256);
	ck_assert_int_eq(hash_alg_parse("md5", &a), -1);
	ck_assert_int_eq(hash_alg_parse("", &a), -1);
	ck_assert_uint_eq(hash_alg_size(HASH_CRC32C), 4);
	ck_assert_uint_eq(hash_alg_size(HASH_SHA256), 32);
	ck_assert_uint_eq(hash_alg_size(7), 0);
	ck_assert_str_eq(hash_alg_name(7), "unknown");
}
END_TEST

static const struct {
	uint32_t bs, max, want_len;
} max_len_table[] = {
    {4096, 256 * 1024, 256 * 1024}, /* 64 blocks */
    {4096, 1u << 20, 256 * 1024},   /* capped at 64 blocks */
    {65536, 256 * 1024, 256 * 1024},
    {1u << 20, 256 * 1024, 1u << 20}, /* one block even when it is bigger than max */
    {4096, 6000, 4096},
};

START_TEST(max_len)
{
	for (size_t i = 0; i < sizeof(max_len_table) / sizeof(max_len_table[0]); i++)
		ck_assert_uint_eq(hashrun_max_len(max_len_table[i].bs, max_len_table[i].max),
		                  max_len_table[i].want_len);
	ck_assert_uint_eq(hashrun_blocks(8192, 4096), 2);
	ck_assert_uint_eq(hashrun_blocks(8193, 4096), 3);
	ck_assert_uint_eq(hashrun_blocks(1, 4096), 1);
}
END_TEST

/* Hashes are per block: changing one byte changes exactly that block's hash. */
START_TEST(compute_per_block)
{
	for (unsigned alg = 0; alg < HASH_ALG_COUNT; alg++) {
		size_t hs = hash_alg_size(alg);
		uint32_t len = 4 * 4096 + 512; /* a short last block */
		uint8_t *buf = calloc(1, len), a[5 * 32], b[5 * 32];
		for (uint32_t i = 0; i < len; i++)
			buf[i] = (uint8_t)(i * 7);
		ck_assert_int_eq(hashrun_compute(alg, buf, len, 4096, a), 0);
		buf[2 * 4096 + 100] ^= 1;
		buf[4 * 4096 + 511] ^= 0x80;
		ck_assert_int_eq(hashrun_compute(alg, buf, len, 4096, b), 0);
		ck_assert_uint_eq(hashrun_diff(alg, 5, a, b, 0), (1u << 2) | (1u << 4));
		/* A skipped block is never reported. */
		ck_assert_uint_eq(hashrun_diff(alg, 5, a, b, 1u << 2), 1u << 4);
		ck_assert_uint_eq(hashrun_diff(alg, 5, a, a, 0), 0);
		(void)hs;
		free(buf);
	}
	/* crc32c of a block is the standard CRC-32C, big-endian on the wire. */
	uint8_t h[4];
	ck_assert_int_eq(hashrun_compute(HASH_CRC32C, (const uint8_t *)"123456789", 9, 4096, h), 0);
	ck_assert_uint_eq(be_get32(h), 0xE3069283u);
	/* sha256 of "abc" (FIPS 180-2 test vector). */
	uint8_t s[32];
	ck_assert_int_eq(hashrun_compute(HASH_SHA256, (const uint8_t *)"abc", 3, 4096, s), 0);
	ck_assert_uint_eq(s[0], 0xba);
	ck_assert_uint_eq(s[31], 0xad);
	ck_assert_int_eq(hashrun_compute(9, (const uint8_t *)"abc", 3, 4096, s), -1);
}
END_TEST

#define VOL (64ull << 20)

/* Encode a frame of type with run r and nh hash bytes; decode it back. */
static int roundtrip(uint16_t type, struct hashrun r, size_t nh, uint64_t size, struct hashrun *out,
                     const uint8_t **hashes)
{
	static uint8_t b[HASHRUN_MAX_REPLY + 64];
	hashrun_hdr_encode(b, &r);
	memset(b + HASHRUN_HDR_SIZE, 0x5a, nh);
	struct wire_hdr h = {.type = type, .len = (uint32_t)(HASHRUN_HDR_SIZE + nh)};
	return hashrun_decode(&h, b, size, 4096, 256 * 1024, out, hashes, err, sizeof(err));
}

static const struct {
	const char *what;
	uint16_t type;
	struct hashrun run;
	size_t nh;
	const char *err; /* NULL: accepted */
} decode_table[] = {
    {"request", WIRE_VERIFY_REQ, {1, 0, 256 * 1024, HASH_CRC32C}, 0, NULL},
    {"csum request", WIRE_CSUM_REQ, {2, 4096, 8192, HASH_SHA256}, 0, NULL},
    {"reply crc32c", WIRE_VERIFY_REPLY, {3, 8192, 16384, HASH_CRC32C}, 4 * 4, NULL},
    {"reply sha256", WIRE_RS_REQUEST, {4, 0, 256 * 1024, HASH_SHA256}, 64 * 32, NULL},
    {"last block", WIRE_VERIFY_REQ, {5, VOL - 4096, 4096, HASH_CRC32C}, 0, NULL},
    {"request with hashes", WIRE_VERIFY_REQ, {6, 0, 4096, 0}, 4, "expected 24"},
    {"reply short", WIRE_VERIFY_REPLY, {7, 0, 8192, 0}, 4, "expected 32"},
    {"reply long", WIRE_RS_REQUEST, {8, 0, 4096, 1}, 64, "expected 56"},
    {"unknown alg", WIRE_VERIFY_REQ, {9, 0, 4096, 2}, 0, "unknown hash algorithm 2"},
    {"empty", WIRE_VERIFY_REQ, {10, 0, 0, 0}, 0, "is empty"},
    {"too long", WIRE_VERIFY_REQ, {11, 0, 256 * 1024 + 4096, 0}, 0, "longer than"},
    {"outside", WIRE_VERIFY_REQ, {12, VOL, 4096, 0}, 0, "outside the volume"},
    {"wraps", WIRE_VERIFY_REQ, {13, UINT64_MAX - 100, 4096, 0}, 0, "outside the volume"},
    {"unaligned start", WIRE_VERIFY_REQ, {14, 512, 4096, 0}, 0, "whole 4096-byte blocks"},
    {"partial block", WIRE_VERIFY_REQ, {15, 0, 5000, 0}, 0, "whole 4096-byte blocks"},
};

START_TEST(decode_checks)
{
	for (size_t i = 0; i < sizeof(decode_table) / sizeof(decode_table[0]); i++) {
		struct hashrun out;
		const uint8_t *hashes = (const uint8_t *)1;
		err[0] = '\0';
		int rc = roundtrip(decode_table[i].type, decode_table[i].run, decode_table[i].nh,
		                   VOL, &out, &hashes);
		if (!decode_table[i].err) {
			ck_assert_msg(rc == 0, "%s: rejected: %s", decode_table[i].what, err);
			ck_assert_uint_eq(out.id, decode_table[i].run.id);
			ck_assert_uint_eq(out.off, decode_table[i].run.off);
			ck_assert_uint_eq(out.len, decode_table[i].run.len);
			ck_assert_uint_eq(out.alg, decode_table[i].run.alg);
			if (decode_table[i].nh)
				ck_assert_uint_eq(hashes[0], 0x5a);
			else
				ck_assert_ptr_null(hashes);
		} else {
			ck_assert_msg(rc == -1, "%s: accepted", decode_table[i].what);
			ck_assert_msg(strstr(err, decode_table[i].err), "%s: error '%s' lacks '%s'",
			              decode_table[i].what, err, decode_table[i].err);
		}
	}
	/* The short last block of a volume whose size is not a multiple of the block size. */
	struct hashrun out;
	ck_assert_int_eq(roundtrip(WIRE_VERIFY_REPLY,
	                           (struct hashrun){1, VOL - 4096, 4096 + 100, 0}, 8, VOL + 100,
	                           &out, NULL),
	                 0);
	/* Reserved bytes must be zero; a header cut short is refused. */
	uint8_t b[HASHRUN_HDR_SIZE];
	hashrun_hdr_encode(b, &(struct hashrun){1, 0, 4096, 0});
	b[22] = 1;
	struct wire_hdr h = {.type = WIRE_VERIFY_REQ, .len = HASHRUN_HDR_SIZE};
	ck_assert_int_eq(hashrun_decode(&h, b, VOL, 4096, 256 * 1024, &out, NULL, err, sizeof(err)),
	                 -1);
	ck_assert_ptr_nonnull(strstr(err, "reserved"));
	h.len = 20;
	ck_assert_int_eq(hashrun_decode(&h, b, VOL, 4096, 256 * 1024, &out, NULL, err, sizeof(err)),
	                 -1);
	ck_assert_ptr_nonnull(strstr(err, "shorter"));
	/* The frame sizes wire.c allows match the largest reply. */
	uint8_t hb[WIRE_HDR_SIZE];
	struct wire_hdr wh;
	wire_hdr_encode(hb, WIRE_VERIFY_REPLY, 0, HASHRUN_MAX_REPLY);
	ck_assert_int_eq(wire_hdr_decode(hb, &wh, err, sizeof(err)), 0);
	wire_hdr_encode(hb, WIRE_RS_REQUEST, 0, HASHRUN_MAX_REPLY + 1);
	ck_assert_int_eq(wire_hdr_decode(hb, &wh, err, sizeof(err)), -1);
	wire_hdr_encode(hb, 18, 0, 0); /* a number no frame has (yet) */
	ck_assert_int_eq(wire_hdr_decode(hb, &wh, err, sizeof(err)), -1);
}
END_TEST

struct range {
	uint64_t off, len;
};

static const struct {
	const char *what;
	unsigned n;
	struct range add[12];
	unsigned want_n;
	struct range want[HASHRUN_RANGES_MAX];
} ranges_table[] = {
    {"one", 1, {{4096, 4096}}, 1, {{4096, 4096}}},
    {"adjacent merge", 2, {{4096, 4096}, {8192, 4096}}, 1, {{4096, 8192}}},
    {"adjacent merge reversed", 2, {{8192, 4096}, {4096, 4096}}, 1, {{4096, 8192}}},
    {"sorted",
     3,
     {{40960, 4096}, {4096, 4096}, {20480, 4096}},
     3,
     {{4096, 4096}, {20480, 4096}, {40960, 4096}}},
    {"bridge", 3, {{0, 4096}, {8192, 4096}, {4096, 4096}}, 1, {{0, 12288}}},
    {"overlap", 2, {{0, 8192}, {4096, 8192}}, 1, {{0, 12288}}},
    {"bridge many", 4, {{0, 4096}, {8192, 4096}, {16384, 4096}, {4096, 12288}}, 1, {{0, 20480}}},
    {"full keeps lowest",
     10,
     {{90, 1}, {80, 1}, {70, 1}, {60, 1}, {50, 1}, {40, 1}, {30, 1}, {20, 1}, {10, 1}, {100, 1}},
     8,
     {{10, 1}, {20, 1}, {30, 1}, {40, 1}, {50, 1}, {60, 1}, {70, 1}, {80, 1}}},
    {"full then lower",
     9,
     {{20, 1}, {30, 1}, {40, 1}, {50, 1}, {60, 1}, {70, 1}, {80, 1}, {90, 1}, {0, 1}},
     8,
     {{0, 1}, {20, 1}, {30, 1}, {40, 1}, {50, 1}, {60, 1}, {70, 1}, {80, 1}}},
    {"full then merge",
     9,
     {{20, 1}, {30, 1}, {40, 1}, {50, 1}, {60, 1}, {70, 1}, {80, 1}, {90, 1}, {21, 9}},
     7,
     {{20, 11}, {40, 1}, {50, 1}, {60, 1}, {70, 1}, {80, 1}, {90, 1}}},
};

START_TEST(ranges)
{
	for (size_t i = 0; i < sizeof(ranges_table) / sizeof(ranges_table[0]); i++) {
		struct hashrun_ranges rs = {0};
		for (unsigned k = 0; k < ranges_table[i].n; k++)
			hashrun_ranges_add(&rs, ranges_table[i].add[k].off,
			                   ranges_table[i].add[k].len);
		ck_assert_msg(rs.n == ranges_table[i].want_n, "%s: %u ranges, want %u",
		              ranges_table[i].what, rs.n, ranges_table[i].want_n);
		for (unsigned k = 0; k < rs.n; k++)
			ck_assert_msg(rs.r[k].off == ranges_table[i].want[k].off &&
			                  rs.r[k].len == ranges_table[i].want[k].len,
			              "%s: range %u is %llu+%llu, want %llu+%llu",
			              ranges_table[i].what, k, (unsigned long long)rs.r[k].off,
			              (unsigned long long)rs.r[k].len,
			              (unsigned long long)ranges_table[i].want[k].off,
			              (unsigned long long)ranges_table[i].want[k].len);
	}
}
END_TEST

static struct range got[64];
static unsigned ngot;

static void collect(void *ctx, uint64_t off, uint64_t len)
{
	(void)ctx;
	got[ngot].off = off;
	got[ngot].len = len;
	ngot++;
}

START_TEST(mask_ranges)
{
	ngot = 0;
	hashrun_mask_ranges(0x0, 64, 0, 64 * 4096, 4096, collect, NULL);
	ck_assert_uint_eq(ngot, 0);
	hashrun_mask_ranges(~UINT64_C(0), 64, 1 << 20, 64 * 4096, 4096, collect, NULL);
	ck_assert_uint_eq(ngot, 1);
	ck_assert_uint_eq(got[0].off, 1 << 20);
	ck_assert_uint_eq(got[0].len, 64 * 4096);
	ngot = 0;
	/* Blocks 0, 2-3 and 63. */
	hashrun_mask_ranges(UINT64_C(1) | (UINT64_C(3) << 2) | (UINT64_C(1) << 63), 64, 0,
	                    64 * 4096, 4096, collect, NULL);
	ck_assert_uint_eq(ngot, 3);
	ck_assert_uint_eq(got[0].off, 0);
	ck_assert_uint_eq(got[0].len, 4096);
	ck_assert_uint_eq(got[1].off, 8192);
	ck_assert_uint_eq(got[1].len, 8192);
	ck_assert_uint_eq(got[2].off, 63 * 4096);
	ck_assert_uint_eq(got[2].len, 4096);
	ngot = 0;
	/* A short last block ends at the run's end; bits beyond n are ignored. */
	hashrun_mask_ranges(0xff, 3, 0, 2 * 4096 + 100, 4096, collect, NULL);
	ck_assert_uint_eq(ngot, 1);
	ck_assert_uint_eq(got[0].len, 2 * 4096 + 100);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hashrun");
	TCase *t = tcase_create("core");
	tcase_add_test(t, alg_names);
	tcase_add_test(t, max_len);
	tcase_add_test(t, compute_per_block);
	tcase_add_test(t, decode_checks);
	tcase_add_test(t, ranges);
	tcase_add_test(t, mask_ranges);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
