/* SPDX-License-Identifier: MIT */
/* Unit tests for the transfer log: merging, barriers, the full log, and a reference model. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "repl/tlog.h"

#define NBLK 256

static uint8_t drained[NBLK];

static void mark(void *ctx, uint64_t off, uint64_t len)
{
	unsigned *calls = ctx;
	(*calls)++;
	for (uint64_t b = off; b < off + len && b < NBLK; b++)
		drained[b] = 1;
}

START_TEST(init_limits)
{
	struct tlog t;
	const uint32_t bad[] = {0, 1, 3, 6, 100};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		ck_assert_int_eq(tlog_init(&t, bad[i]), -1);
		ck_assert_int_eq(errno, EINVAL);
	}
	ck_assert_int_eq(tlog_init(&t, 4), 0);
	ck_assert_uint_eq(tlog_used(&t), 0);
	tlog_destroy(&t);
}
END_TEST

START_TEST(merge_within_epoch_only)
{
	struct tlog t;
	unsigned calls = 0;
	ck_assert_int_eq(tlog_init(&t, 8), 0);
	ck_assert_int_eq(tlog_add(&t, 10, 2), 0);
	ck_assert_int_eq(tlog_add(&t, 12, 3), 0); /* touches: merged */
	ck_assert_int_eq(tlog_add(&t, 11, 1), 0); /* inside: merged */
	ck_assert_int_eq(tlog_add(&t, 8, 3), 0);  /* overlaps the start: merged */
	ck_assert_uint_eq(tlog_used(&t), 1);
	ck_assert_uint_eq(t.ring[0].off, 8);
	ck_assert_uint_eq(t.ring[0].len, 7);
	ck_assert_uint_eq(t.epoch_writes, 4);
	ck_assert_uint_eq(t.epoch_bytes, 9);
	ck_assert_int_eq(tlog_add(&t, 20, 1), 0); /* a gap: a new entry */
	ck_assert_uint_eq(tlog_used(&t), 2);
	uint64_t b1 = tlog_barrier(&t);
	ck_assert_uint_eq(b1, 2);
	ck_assert_uint_eq(t.epoch_writes, 0);
	ck_assert_int_eq(tlog_add(&t, 21, 1), 0); /* touches, but the barrier is between */
	ck_assert_uint_eq(tlog_used(&t), 3);
	tlog_stable(&t, b1);
	ck_assert_uint_eq(tlog_used(&t), 1);
	memset(drained, 0, sizeof(drained));
	tlog_drain(&t, mark, &calls);
	ck_assert_uint_eq(calls, 1);
	for (unsigned b = 0; b < 32; b++)
		ck_assert_uint_eq(drained[b], b == 21);
	ck_assert_uint_eq(tlog_used(&t), 0);
	/* After a drain nothing merges into the drained entry. */
	ck_assert_int_eq(tlog_add(&t, 22, 1), 0);
	ck_assert_uint_eq(tlog_used(&t), 1);
	ck_assert_uint_eq(t.ring[t.tail & 7].off, 22);
	tlog_destroy(&t);
}
END_TEST

START_TEST(full_and_stale_acks)
{
	struct tlog t;
	ck_assert_int_eq(tlog_init(&t, 4), 0);
	for (uint64_t i = 0; i < 4; i++)
		ck_assert_int_eq(tlog_add(&t, i * 10, 1), 0);
	errno = 0;
	ck_assert_int_eq(tlog_add(&t, 100, 1), -1);
	ck_assert_int_eq(errno, ENOSPC);
	/* A range merging into the newest entry needs no room. */
	ck_assert_int_eq(tlog_add(&t, 31, 1), 0);
	uint64_t b = tlog_barrier(&t);
	ck_assert_int_eq(tlog_add(&t, 100, 1), -1);
	tlog_stable(&t, b - 2);
	ck_assert_uint_eq(tlog_used(&t), 2);
	tlog_stable(&t, 1); /* older than what is already released: no effect */
	ck_assert_uint_eq(tlog_used(&t), 2);
	tlog_stable(&t, 1000); /* beyond the head: clamped */
	ck_assert_uint_eq(tlog_used(&t), 0);
	for (uint64_t i = 0; i < 4; i++) /* the ring wraps */
		ck_assert_int_eq(tlog_add(&t, 200 + i * 10, 1), 0);
	ck_assert_uint_eq(tlog_used(&t), 4);
	tlog_destroy(&t);
}
END_TEST

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1Dull;
}

/*
 * Random adds, barriers, in-order acks and drains against a model: after a drain, the blocks
 * reported are exactly those written in an epoch whose barrier was not acknowledged.
 */
START_TEST(reference_model)
{
	struct tlog t;
	uint64_t last_epoch[NBLK];
	uint64_t bseq[64];
	unsigned nb = 0, calls = 0;
	uint64_t epoch = 1, acked_epoch = 1; /* epochs below acked_epoch are stable */
	uint64_t first_epoch_of[64];
	ck_assert_int_eq(tlog_init(&t, 16), 0);
	memset(last_epoch, 0, sizeof(last_epoch));
	for (int round = 0; round < 20000; round++) {
		unsigned op = (unsigned)(rnd() % 100);
		if (op < 70) {
			uint64_t off = rnd() % (NBLK - 4), len = 1 + rnd() % 4;
			if (tlog_add(&t, off, len) == 0) {
				for (uint64_t b = off; b < off + len; b++)
					last_epoch[b] = epoch;
			} else {
				ck_assert_int_eq(errno, ENOSPC);
				ck_assert_uint_eq(tlog_used(&t), 16);
			}
		} else if (op < 85 && nb < 64) {
			first_epoch_of[nb] = epoch;
			bseq[nb++] = tlog_barrier(&t);
			epoch++;
		} else if (op < 98 && nb > 0) {
			tlog_stable(&t, bseq[0]);
			acked_epoch = first_epoch_of[0] + 1;
			memmove(bseq, bseq + 1, (nb - 1) * sizeof(bseq[0]));
			memmove(first_epoch_of, first_epoch_of + 1, (nb - 1) * sizeof(bseq[0]));
			nb--;
		} else {
			memset(drained, 0, sizeof(drained));
			tlog_drain(&t, mark, &calls);
			for (unsigned b = 0; b < NBLK; b++)
				ck_assert_msg(drained[b] == (last_epoch[b] >= acked_epoch),
				              "round %d block %u: drained %u, last epoch %llu, "
				              "acked below %llu",
				              round, b, drained[b],
				              (unsigned long long)last_epoch[b],
				              (unsigned long long)acked_epoch);
			/* The connection is gone: its barriers will never be acknowledged. */
			nb = 0;
			memset(last_epoch, 0, sizeof(last_epoch));
			acked_epoch = epoch;
		}
	}
	ck_assert_uint_gt(calls, 0);
	tlog_destroy(&t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tlog");
	TCase *t = tcase_create("core");
	tcase_add_test(t, init_limits);
	tcase_add_test(t, merge_within_epoch_only);
	tcase_add_test(t, full_and_stale_acks);
	tcase_add_test(t, reference_model);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
