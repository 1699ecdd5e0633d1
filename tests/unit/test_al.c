/* SPDX-License-Identifier: MIT */
/* Unit tests for the activity log: hot table and LRU, transaction codec, ring recovery. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "meta/al.h"
#include "meta/gen.h"

#define MiB (1ull << 20)
#define VOL (64ull << 30) /* 64 GiB: 16384 extents of 4 MiB */

static uint8_t ring[AL_RING_SIZE];

/* Write the next transaction into the ring image and commit it. */
static unsigned commit(struct al *al, bool *evicts)
{
	uint8_t buf[AL_TR_SIZE];
	bool ev = false;
	unsigned slot = al_tr_build(al, buf, &ev);

	memcpy(ring + (size_t)slot * AL_TR_SIZE, buf, AL_TR_SIZE);
	al_tr_committed(al);
	if (evicts)
		*evicts = ev;
	return slot;
}

static bool recovered_has(const struct al_recovered *rec, uint32_t ext)
{
	for (uint32_t i = 0; i < rec->n_ext; i++)
		if (rec->ext[i] == ext)
			return true;
	return false;
}

START_TEST(create_limits)
{
	struct al *al;

	ck_assert_int_eq(al_create(AL_SLOTS_MIN - 1, 22, VOL, 1, &al), -1);
	ck_assert_int_eq(al_create(AL_SLOTS_MAX + 1, 22, VOL, 1, &al), -1);
	ck_assert_int_eq(al_create(64, 19, VOL, 1, &al), -1);
	ck_assert_int_eq(al_create(64, 31, VOL, 1, &al), -1);
	ck_assert_int_eq(al_create(64, 22, 0, 1, &al), -1);
	ck_assert_int_eq(al_create(64, 22, VOL, 1, &al), 0);
	al_free(al);
}
END_TEST

START_TEST(cold_then_hot)
{
	struct al *al;
	struct al_stats st;

	ck_assert_int_eq(al_create(64, 22, VOL, 1, &al), 0);
	/* A write across two extents: both cold, one transaction makes both hot. */
	ck_assert_int_eq(al_begin_io(al, 4 * MiB - 4096, 8192), 0);
	ck_assert(al_tr_pending(al));
	ck_assert_int_eq(al_begin_io(al, 4 * MiB - 4096, 8192), 0); /* queued, not yet on disk */
	bool ev;
	commit(al, &ev);
	ck_assert(!ev);
	ck_assert(!al_tr_pending(al));
	ck_assert_int_eq(al_begin_io(al, 4 * MiB - 4096, 8192), 1);
	ck_assert_int_eq(al_begin_io(al, 0, 4096), 1); /* same extent 0: hot */
	al_stats(al, &st);
	ck_assert_uint_eq(st.hot, 2);
	ck_assert_uint_eq(st.busy, 2);
	ck_assert(!al_end_io(al, 0, 4096));
	ck_assert(al_end_io(al, 4 * MiB - 4096, 8192)); /* both now unreferenced */
	al_stats(al, &st);
	ck_assert_uint_eq(st.busy, 0);
	ck_assert_uint_eq(st.seq, 1);
	al_free(al);
}
END_TEST

START_TEST(batching)
{
	struct al *al;

	ck_assert_int_eq(al_create(128, 22, VOL, 1, &al), 0);
	/* 64 cold extents share one transaction; the 65th waits for the next. */
	for (uint32_t e = 0; e < AL_UPDATES_MAX + 1; e++)
		ck_assert_int_eq(al_begin_io(al, (uint64_t)e * 4 * MiB, 4096), 0);
	commit(al, NULL);
	for (uint32_t e = 0; e < AL_UPDATES_MAX; e++)
		ck_assert_int_eq(al_begin_io(al, (uint64_t)e * 4 * MiB, 4096), 1);
	ck_assert_int_eq(al_begin_io(al, (uint64_t)AL_UPDATES_MAX * 4 * MiB, 4096), 0);
	commit(al, NULL);
	ck_assert_int_eq(al_begin_io(al, (uint64_t)AL_UPDATES_MAX * 4 * MiB, 4096), 1);
	struct al_stats st;
	al_stats(al, &st);
	ck_assert_uint_eq(st.seq, 2);
	al_free(al);
}
END_TEST

START_TEST(lru_eviction)
{
	struct al *al;
	bool ev;

	ck_assert_int_eq(al_create(64, 22, VOL, 1, &al), 0);
	for (uint32_t e = 0; e < 64; e++)
		al_begin_io(al, (uint64_t)e * 4 * MiB, 4096);
	commit(al, &ev);
	ck_assert(!ev);
	for (uint32_t e = 0; e < 64; e++) {
		ck_assert_int_eq(al_begin_io(al, (uint64_t)e * 4 * MiB, 4096), 1);
		al_end_io(al, (uint64_t)e * 4 * MiB, 4096);
	}
	/* Touch extent 0 again: extent 1 is now the least recently used. Extent 2 stays busy. */
	ck_assert_int_eq(al_begin_io(al, 0, 4096), 1);
	al_end_io(al, 0, 4096);
	ck_assert_int_eq(al_begin_io(al, 2 * 4 * MiB, 4096), 1);
	ck_assert_int_eq(al_begin_io(al, 100 * 4 * MiB, 4096), 0);
	ck_assert_int_eq(al_begin_io(al, 101 * 4 * MiB, 4096), 0);
	commit(al, &ev);
	ck_assert(ev);
	/* Evicted: 1 and 3 (2 is busy); 0 and 2 stay hot. */
	ck_assert_int_eq(al_begin_io(al, 0, 4096), 1);
	ck_assert_int_eq(al_begin_io(al, 2 * 4 * MiB, 4096), 1);
	ck_assert_int_eq(al_begin_io(al, 1 * 4 * MiB, 4096), 0);
	ck_assert_int_eq(al_begin_io(al, 3 * 4 * MiB, 4096), 0);
	ck_assert_int_eq(al_begin_io(al, 100 * 4 * MiB, 4096), 1);
	ck_assert_int_eq(al_begin_io(al, 101 * 4 * MiB, 4096), 1);
	struct al_stats st;
	al_stats(al, &st);
	ck_assert_uint_eq(st.evictions, 4);
	al_free(al);
}
END_TEST

START_TEST(all_busy_waits)
{
	struct al *al;

	ck_assert_int_eq(al_create(64, 22, VOL, 1, &al), 0);
	for (uint32_t e = 0; e < 64; e++)
		al_begin_io(al, (uint64_t)e * 4 * MiB, 4096);
	commit(al, NULL);
	for (uint32_t e = 0; e < 64; e++)
		ck_assert_int_eq(al_begin_io(al, (uint64_t)e * 4 * MiB, 4096), 1);
	/* Every slot is referenced: nothing can be evicted and nothing is queued. */
	ck_assert_int_eq(al_begin_io(al, 200 * 4 * MiB, 4096), 0);
	ck_assert(!al_tr_pending(al));
	ck_assert(al_end_io(al, 5 * 4 * MiB, 4096));
	ck_assert_int_eq(al_begin_io(al, 200 * 4 * MiB, 4096), 0);
	ck_assert(al_tr_pending(al));
	commit(al, NULL);
	ck_assert_int_eq(al_begin_io(al, 200 * 4 * MiB, 4096), 1);
	al_free(al);
}
END_TEST

START_TEST(wide_request_range)
{
	struct al *al;
	struct al_recovered rec;
	char err[256];

	memset(ring, 0, sizeof(ring));
	ck_assert_int_eq(al_create(64, 22, VOL, 1, &al), 0);
	/* A 1 GiB TRIM spans 256 extents, more than the table: it takes a range slot. */
	ck_assert_int_eq(al_begin_io(al, 0, 1ull << 30), 0);
	commit(al, NULL);
	ck_assert_int_eq(al_begin_io(al, 0, 1ull << 30), 1);
	al_ref_io(al, 0, 1ull << 30);
	ck_assert_int_eq(al_recover(ring, &rec, err, sizeof(err)), 0);
	ck_assert_uint_eq(rec.n_ext, 256);
	ck_assert(recovered_has(&rec, 255));
	al_recovered_free(&rec);
	ck_assert(!al_end_io(al, 0, 1ull << 30));
	ck_assert(al_end_io(al, 0, 1ull << 30));
	bool ev;
	commit(al, &ev);
	ck_assert(ev); /* the range left the disk: the caller persists the bitmap first */
	ck_assert_int_eq(al_recover(ring, &rec, err, sizeof(err)), 0);
	ck_assert_uint_eq(rec.n_ext, 0);
	al_recovered_free(&rec);
	al_free(al);
}
END_TEST

/* Writes the peer acknowledged but has not made stable keep their extents hot: a double power
 * loss must find them in the ring (or in the bitmap). */
START_TEST(pinned_until_stable)
{
	struct al *al;
	struct al_stats st;
	bool ev;

	ck_assert_int_eq(al_create(64, 22, VOL, 1, &al), 0);
	for (uint32_t e = 0; e < 64; e++)
		al_begin_io(al, (uint64_t)e * 4 * MiB, 4096);
	commit(al, NULL);
	/* Each extent gets one write, pinned by transfer-log sequence 100 + e, then completes. */
	for (uint32_t e = 0; e < 64; e++) {
		ck_assert_int_eq(al_begin_io(al, (uint64_t)e * 4 * MiB, 4096), 1);
		al_pin(al, (uint64_t)e * 4 * MiB, 4096, 100 + e);
		ck_assert(!al_end_io(al, (uint64_t)e * 4 * MiB, 4096)); /* pinned: not evictable */
	}
	al_stats(al, &st);
	ck_assert_uint_eq(st.busy, 0);
	ck_assert_uint_eq(st.unstable, 64);
	/* No slot for a cold extent, and nothing queued, while every write is unstable. */
	ck_assert_int_eq(al_begin_io(al, 200 * 4 * MiB, 4096), 0);
	ck_assert(!al_tr_pending(al));
	/* A stable mark below every pin changes nothing. */
	ck_assert(al_stable(al, 100));
	ck_assert_int_eq(al_begin_io(al, 200 * 4 * MiB, 4096), 0);
	ck_assert(!al_tr_pending(al));
	ck_assert(!al_stable(al, 100)); /* the mark did not move */
	/* Sequences 100 and 101 stable: extents 0 and 1 may go, the least recently used first. */
	ck_assert(al_stable(al, 102));
	al_stats(al, &st);
	ck_assert_uint_eq(st.unstable, 62);
	ck_assert_int_eq(al_begin_io(al, 200 * 4 * MiB, 4096), 0);
	ck_assert(al_tr_pending(al));
	commit(al, &ev);
	ck_assert(ev);
	ck_assert_int_eq(al_begin_io(al, 200 * 4 * MiB, 4096), 1);
	ck_assert_int_eq(al_begin_io(al, 1 * 4 * MiB, 4096), 1); /* still hot */
	ck_assert_int_eq(al_begin_io(al, 2 * 4 * MiB, 4096), 1); /* still hot */
	ck_assert_int_eq(al_begin_io(al, 0 * 4 * MiB, 4096), 0); /* evicted */
	/* A newer pin replaces an older one: extent 2 written again at 500 stays past 102. */
	al_pin(al, 2 * 4 * MiB, 4096, 500);
	al_end_io(al, 2 * 4 * MiB, 4096);
	ck_assert(al_stable(al, 200));
	al_stats(al, &st);
	ck_assert_uint_eq(st.unstable, 1);
	ck_assert(al_stable(al, 501));
	al_stats(al, &st);
	ck_assert_uint_eq(st.unstable, 0);
	al_free(al);
}
END_TEST

/* A wide request's range stays in the ring while pinned, and leaves once stable. */
START_TEST(pinned_range)
{
	struct al *al;
	struct al_recovered rec;
	char err[256];
	bool ev;

	memset(ring, 0, sizeof(ring));
	ck_assert_int_eq(al_create(64, 22, VOL, 1, &al), 0);
	ck_assert_int_eq(al_begin_io(al, 0, 1ull << 30), 0);
	commit(al, NULL);
	ck_assert_int_eq(al_begin_io(al, 0, 1ull << 30), 1);
	al_pin(al, 0, 1ull << 30, 7);
	ck_assert(!al_end_io(al, 0, 1ull << 30));
	commit(al, &ev);
	ck_assert(!ev);
	ck_assert_int_eq(al_recover(ring, &rec, err, sizeof(err)), 0);
	ck_assert_uint_eq(rec.n_ext, 256);
	al_recovered_free(&rec);
	/* The same range again while pinned: hot at once, no transaction. */
	ck_assert_int_eq(al_begin_io(al, 0, 1ull << 30), 1);
	ck_assert(!al_end_io(al, 0, 1ull << 30));
	ck_assert(al_stable(al, 8));
	commit(al, &ev);
	ck_assert(ev);
	ck_assert_int_eq(al_recover(ring, &rec, err, sizeof(err)), 0);
	ck_assert_uint_eq(rec.n_ext, 0);
	al_recovered_free(&rec);
	al_free(al);
}
END_TEST

START_TEST(codec_roundtrip_and_corruption)
{
	struct al *al;
	struct al_tr tr;
	uint8_t buf[AL_TR_SIZE];
	bool ev;
	char why[256];

	ck_assert_int_eq(al_create(1237, 22, VOL, 41, &al), 0);
	al_begin_io(al, 7 * 4 * MiB, 4096);
	unsigned slot = al_tr_build(al, buf, &ev);
	ck_assert_uint_eq(slot, 41 % AL_RING_SLOTS);
	ck_assert_int_eq(al_tr_decode(buf, &tr, why, sizeof(why)), 0);
	ck_assert_uint_eq(tr.seq, 41);
	ck_assert_uint_eq(tr.n_slots, 1237);
	ck_assert_uint_eq(tr.shift, 22);
	ck_assert_uint_eq(tr.n_updates, 1);
	ck_assert_uint_eq(tr.upd_ext[0], 7);
	ck_assert_uint_eq(tr.n_context, AL_CTX_MAX);
	/* One flipped bit anywhere is caught by the checksum. */
	buf[2000] ^= 0x10;
	ck_assert_int_eq(al_tr_decode(buf, &tr, why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "checksum"));
	buf[2000] ^= 0x10;
	memset(buf, 0, 8);
	ck_assert_int_eq(al_tr_decode(buf, &tr, why, sizeof(why)), -1);
	al_tr_committed(al);
	al_free(al);
}
END_TEST

/* Fill a ring through many transactions; the recovered set must equal the hot set. */
static struct al *ring_with_history(uint32_t n_slots, uint32_t writes)
{
	struct al *al;

	memset(ring, 0, sizeof(ring));
	ck_assert_int_eq(al_create(n_slots, 22, VOL, 1, &al), 0);
	/* Startup: enough transactions to describe every slot. */
	for (uint32_t i = 0; i < (n_slots + AL_CTX_MAX - 1) / AL_CTX_MAX; i++)
		commit(al, NULL);
	for (uint32_t w = 0; w < writes; w++) {
		uint64_t off = (uint64_t)((w * 7919u) % 16000u) * 4 * MiB;

		if (al_begin_io(al, off, 4096) == 0) {
			commit(al, NULL);
			ck_assert_int_eq(al_begin_io(al, off, 4096), 1);
		}
		al_end_io(al, off, 4096);
	}
	return al;
}

START_TEST(recover_latest)
{
	struct al_recovered rec;
	char err[256];
	struct al *al = ring_with_history(1237, 3000);
	struct al_stats st;

	al_stats(al, &st);
	ck_assert_int_eq(al_recover(ring, &rec, err, sizeof(err)), 0);
	ck_assert(!rec.blank);
	ck_assert_uint_eq(rec.seq, st.seq);
	ck_assert_uint_eq(rec.n_ext, 1237);
	/* The last 1237 distinct extents written are exactly the hot set. */
	for (uint32_t w = 3000 - 1237; w < 3000; w++)
		ck_assert(recovered_has(&rec, (w * 7919u) % 16000u));
	al_recovered_free(&rec);
	ck_assert_uint_eq(al_ring_last_seq(ring), st.seq);
	al_free(al);
}
END_TEST

START_TEST(recover_torn_newest)
{
	struct al_recovered rec;
	char err[256];
	struct al *al = ring_with_history(1237, 3000);
	struct al_stats st;

	al_stats(al, &st);
	/* The next transaction is torn: half of it reached the disk. */
	uint8_t buf[AL_TR_SIZE];
	bool ev;
	al_begin_io(al, 16001ull * 4 * MiB, 4096);
	unsigned slot = al_tr_build(al, buf, &ev);
	memcpy(ring + (size_t)slot * AL_TR_SIZE, buf, AL_TR_SIZE / 2);
	ck_assert_int_eq(al_recover(ring, &rec, err, sizeof(err)), 0);
	ck_assert_uint_eq(rec.seq, st.seq); /* the previous one is the newest valid */
	ck_assert_uint_eq(rec.invalid_trs, 1);
	ck_assert(!recovered_has(&rec, 16001));
	ck_assert(recovered_has(&rec, (2999 * 7919u) % 16000u));
	al_recovered_free(&rec);
	al_free(al);
}
END_TEST

START_TEST(recover_corrupt_slots)
{
	struct al_recovered rec;
	char err[256];
	struct al *al = ring_with_history(1237, 3000);

	/* One old slot rotted: the remaining 15 still cover all slots. */
	uint64_t last = al_ring_last_seq(ring);
	ring[(size_t)((last + 3) % AL_RING_SLOTS) * AL_TR_SIZE + 100] ^= 1;
	ck_assert_int_eq(al_recover(ring, &rec, err, sizeof(err)), 0);
	ck_assert_uint_eq(rec.n_ext, 1237);
	al_recovered_free(&rec);
	/* Every slot garbage: unreadable, the caller must assume the worst. */
	for (unsigned i = 0; i < AL_RING_SLOTS; i++)
		ring[(size_t)i * AL_TR_SIZE + 50] ^= 0xff;
	ck_assert_int_eq(al_recover(ring, &rec, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "no valid transaction"));
	al_free(al);
}
END_TEST

START_TEST(recover_incomplete_coverage)
{
	struct al_recovered rec;
	char err[256];
	struct al *al;
	uint32_t n = AL_SLOTS_MAX; /* needs 14 consecutive transactions to cover */

	memset(ring, 0, sizeof(ring));
	ck_assert_int_eq(al_create(n, 22, VOL, 1, &al), 0);
	for (int i = 0; i < 14; i++)
		commit(al, NULL);
	ck_assert_int_eq(al_recover(ring, &rec, err, sizeof(err)), 0);
	al_recovered_free(&rec);
	/* Lose one transaction in the middle: some slots are described nowhere. */
	memset(ring + 5 * AL_TR_SIZE, 0x5a, AL_TR_SIZE);
	ck_assert_int_eq(al_recover(ring, &rec, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "do not cover"));
	al_free(al);
}
END_TEST

START_TEST(recover_blank)
{
	struct al_recovered rec;
	char err[256];

	memset(ring, 0, sizeof(ring));
	ck_assert_int_eq(al_recover(ring, &rec, err, sizeof(err)), 0);
	ck_assert(rec.blank);
	ck_assert_uint_eq(rec.n_ext, 0);
	ck_assert_uint_eq(al_ring_last_seq(ring), 0);
}
END_TEST

/* Which crash rules the activity log turns from full into bitmap resyncs. */
START_TEST(crash_rule_table)
{
	static const struct {
		int rule;
		bool sc, st, pc, pt, full;
	} t[] = {
	    {GEN_RULE_CRASHED_SELF, 1, 1, 0, 0, false},
	    {GEN_RULE_CRASHED_SELF, 1, 0, 0, 0, true},
	    {GEN_RULE_CRASHED_PEER, 0, 0, 1, 1, false},
	    {GEN_RULE_CRASHED_PEER, 0, 0, 1, 0, true},
	    {GEN_RULE_BITMAP_SELF_CRASHED_PEER, 0, 0, 1, 1, false},
	    {GEN_RULE_BITMAP_SELF_CRASHED_SELF, 1, 1, 0, 0, false},
	    {GEN_RULE_BITMAP_PEER_CRASHED_SELF, 1, 0, 0, 0, true},
	    {GEN_RULE_BITMAP_PEER_CRASHED_PEER, 0, 0, 1, 1, false},
	    {GEN_RULE_BITMAP_PEER_CRASHED_PEER, 1, 0, 1, 1, true},
	    {GEN_RULE_SELF_FRESH, 0, 0, 0, 0, true},
	    {GEN_RULE_HISTORY_SELF, 1, 1, 1, 1, true},
	    {GEN_RULE_MISSED_FINISH_PEER, 0, 0, 0, 0, true},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ck_assert_msg(al_crash_needs_full(t[i].rule, t[i].sc, t[i].st, t[i].pc, t[i].pt) ==
		                  t[i].full,
		              "row %zu", i);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("al");
	TCase *t = tcase_create("core");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, create_limits);
	tcase_add_test(t, cold_then_hot);
	tcase_add_test(t, batching);
	tcase_add_test(t, lru_eviction);
	tcase_add_test(t, all_busy_waits);
	tcase_add_test(t, wide_request_range);
	tcase_add_test(t, pinned_until_stable);
	tcase_add_test(t, pinned_range);
	tcase_add_test(t, codec_roundtrip_and_corruption);
	tcase_add_test(t, recover_latest);
	tcase_add_test(t, recover_torn_newest);
	tcase_add_test(t, recover_corrupt_slots);
	tcase_add_test(t, recover_incomplete_coverage);
	tcase_add_test(t, recover_blank);
	tcase_add_test(t, crash_rule_table);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
