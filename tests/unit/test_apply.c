/* SPDX-License-Identifier: MIT */
/*
 * The secondary's apply side (repl/apply.c), driven without sockets: a real secondary on a temp
 * file (tests/unit/support/replfix.h) receives the frames a primary would send, injected by the
 * test; the test reads the acks it answers with and checks the disk.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "io/io.h"
#include "lib/crc32c.h"
#include "meta/bitmap.h"
#include "support/replfix.h"

#define K4 4096u

static uint64_t io_submitted(const struct replfix *f)
{
	struct io_stats st;
	io_engine_stats(f->eng, &st);
	return st.submitted;
}

/* The WRITE_ACK for id: status 0, exactly one. */
static void check_write_ack(const struct replfix *f, uint64_t id)
{
	const struct mem_frame *a = rf_find_id(&f->meta, WIRE_WRITE_ACK, id);
	ck_assert_msg(a != NULL, "no WRITE_ACK for %llu", (unsigned long long)id);
	ck_assert_uint_eq(rf_status(a), 0);
	size_t n = 0;
	for (size_t i = 0; i < f->meta.n_frames; i++)
		n +=
		    f->meta.frames[i].hdr.type == WIRE_WRITE_ACK && rf_id(&f->meta.frames[i]) == id;
	ck_assert_uint_eq(n, 1);
}

/* DATA is written and answered with a WRITE_ACK (id, status 0) once written; with
 * WIRE_F_RECV_ACK a RECV_ACK goes at once. Loop 1: with a crc (WIRE_F_CRC). */
START_TEST(data_written_and_acked)
{
	uint16_t crc = _i == 1 ? WIRE_F_CRC : 0;
	struct replfix *f = rf_open(&(struct rf_opts){.integrity = _i == 1});
	rf_connect_secondary(f);
	uint8_t buf[2 * K4];

	rf_pattern(buf, sizeof(buf), 1);
	rf_inject_io(f, WIRE_DATA, crc, 41, 2 * K4, sizeof(buf), buf);
	ck_assert_uint_eq(f->r->apply_count, 1);
	memwire_flush(&f->meta);
	ck_assert_uint_eq(f->meta.n_frames, 0); /* not written yet, no receipt asked */
	rf_until(f, rf_count(&f->meta, WIRE_WRITE_ACK) == 1);
	check_write_ack(f, 41);
	ck_assert_uint_eq(rf_count(&f->meta, WIRE_RECV_ACK), 0);
	ck_assert(rf_disk_is(f, 2 * K4, sizeof(buf), 1));
	ck_assert_uint_eq(f->r->apply_count, 0);
	ck_assert_uint_eq(f->r->apply_bytes, 0);

	rf_clear(f);
	rf_pattern(buf, sizeof(buf), 2);
	rf_inject_io(f, WIRE_DATA, crc | WIRE_F_RECV_ACK, 42, 8 * K4, K4, buf);
	memwire_flush(&f->meta);
	ck_assert_uint_eq(f->meta.n_frames, 1);
	const struct mem_frame *ra = &f->meta.frames[0];
	ck_assert_uint_eq(ra->hdr.type, WIRE_RECV_ACK);
	ck_assert_uint_eq(ra->hdr.len, WIRE_ID_SIZE);
	ck_assert_uint_eq(rf_id(ra), 42);
	rf_until(f, rf_count(&f->meta, WIRE_WRITE_ACK) == 1);
	check_write_ack(f, 42);
	ck_assert(rf_disk_is(f, 8 * K4, K4, 2));
	/* Nothing else went back, and the bitmap of a secondary stays clean. */
	ck_assert_uint_eq(f->data.n_frames, 0);
	ck_assert_uint_eq(rf_oos_bytes(f), 0);
}
END_TEST

/* Overlapping writes apply in arrival order (a later one waits for the earlier, a waiter behind
 * a waiter keeps its place, and one that overlaps only a waiter waits too); non-overlapping
 * ones go at once. */
START_TEST(overlapping_in_arrival_order)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_secondary(f);
	uint8_t a[4 * K4], b[K4], c[K4], d[K4], x[2 * K4], y[2 * K4], z[K4];
	rf_pattern(a, sizeof(a), 11);
	rf_pattern(b, sizeof(b), 12);
	rf_pattern(c, sizeof(c), 13);
	rf_pattern(d, sizeof(d), 14);
	rf_pattern(x, sizeof(x), 15);
	rf_pattern(y, sizeof(y), 16);
	rf_pattern(z, sizeof(z), 17);

	uint64_t sub0 = io_submitted(f);
	rf_inject_io(f, WIRE_DATA, 0, 1, 0, sizeof(a), a);
	rf_inject_io(f, WIRE_DATA, 0, 2, K4, sizeof(b), b);
	rf_inject_io(f, WIRE_DATA, 0, 3, 16 * K4, sizeof(c), c);
	rf_inject_io(f, WIRE_DATA, 0, 4, K4, sizeof(d), d);
	/* 6 overlaps 5; 7 overlaps only 6, which waits */
	rf_inject_io(f, WIRE_DATA, 0, 5, 24 * K4, sizeof(x), x);
	rf_inject_io(f, WIRE_DATA, 0, 6, 25 * K4, sizeof(y), y);
	rf_inject_io(f, WIRE_DATA, 0, 7, 26 * K4, sizeof(z), z);
	ck_assert_uint_eq(f->r->apply_count, 7);
	/* 1, 3 and 5 are being written, 2, 4, 6 and 7 wait (in that order) */
	ck_assert_uint_eq(io_submitted(f) - sub0, 3);
	ck_assert_uint_eq(f->r->applying.count, 3);
	ck_assert_uint_eq(f->r->apply_waiting.count, 4);
	static const uint64_t waiting[] = {2, 4, 6, 7};
	struct range *w = f->r->apply_waiting.head;
	for (int i = 0; i < 4; i++, w = w->next)
		ck_assert_uint_eq(range_entry(w, struct apply, range)->id, waiting[i]);

	rf_until(f, rf_count(&f->meta, WIRE_WRITE_ACK) == 7);
	for (uint64_t id = 1; id <= 7; id++)
		check_write_ack(f, id);
	size_t p1 = rf_pos(&f->meta, rf_find_id(&f->meta, WIRE_WRITE_ACK, 1));
	size_t p2 = rf_pos(&f->meta, rf_find_id(&f->meta, WIRE_WRITE_ACK, 2));
	size_t p4 = rf_pos(&f->meta, rf_find_id(&f->meta, WIRE_WRITE_ACK, 4));
	ck_assert_uint_lt(p1, p2);
	ck_assert_uint_lt(p2, p4);

	uint8_t got[4 * K4];
	rf_disk_read(f, 0, got, sizeof(got));
	ck_assert_int_eq(memcmp(got, a, K4), 0);
	ck_assert_int_eq(memcmp(got + K4, d, K4), 0); /* the last one to arrive */
	ck_assert_int_eq(memcmp(got + 2 * K4, a + 2 * K4, 2 * K4), 0);
	ck_assert(rf_disk_is(f, 16 * K4, K4, 13));
	uint8_t got2[3 * K4];
	rf_disk_read(f, 24 * K4, got2, sizeof(got2));
	ck_assert_int_eq(memcmp(got2, x, K4), 0);
	ck_assert_int_eq(memcmp(got2 + K4, y, K4), 0);
	ck_assert_int_eq(memcmp(got2 + 2 * K4, z, K4), 0); /* 7 after 6 */
	ck_assert_uint_lt(rf_pos(&f->meta, rf_find_id(&f->meta, WIRE_WRITE_ACK, 6)),
	                  rf_pos(&f->meta, rf_find_id(&f->meta, WIRE_WRITE_ACK, 7)));
	ck_assert(rangelock_empty(&f->r->applying));
	ck_assert(rangelock_empty(&f->r->apply_waiting));
}
END_TEST

/* A BARRIER is answered only once every write received before it is done and a flush ran after
 * them; writes received after it do not hold it up. */
START_TEST(barrier_after_writes_and_flush)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_secondary(f);
	uint8_t a[K4], b[K4];
	rf_pattern(a, sizeof(a), 21);
	rf_pattern(b, sizeof(b), 22);

	uint64_t sub0 = io_submitted(f);
	rf_inject_io(f, WIRE_DATA, 0, 1, 0, K4, a);
	rf_inject_id(f, &f->data, WIRE_BARRIER, 100);
	ck_assert_uint_eq(f->r->nbarriers, 1);
	ck_assert_uint_eq(f->r->barriers[0].pending, 1);
	ck_assert_uint_eq(f->r->barriers_flushing, 0);
	ck_assert_uint_eq(io_submitted(f) - sub0, 1); /* no flush before the write is done */

	/* The write completes: its ack goes, the flush starts, the barrier is not answered. */
	rf_until(f, rf_count(&f->meta, WIRE_WRITE_ACK) == 1);
	ck_assert_uint_eq(rf_count(&f->meta, WIRE_BARRIER_ACK), 0);
	ck_assert_uint_eq(f->r->barriers_flushing, 1);
	ck_assert_uint_eq(f->r->barriers[0].pending, 0);
	ck_assert_uint_eq(io_submitted(f) - sub0, 2);

	rf_until(f, rf_count(&f->meta, WIRE_BARRIER_ACK) == 1);
	const struct mem_frame *ba = rf_nth(&f->meta, WIRE_BARRIER_ACK, 0);
	ck_assert_uint_eq(ba->hdr.len, WIRE_ID_SIZE);
	ck_assert_uint_eq(rf_id(ba), 100);
	ck_assert_uint_lt(rf_pos(&f->meta, rf_find_id(&f->meta, WIRE_WRITE_ACK, 1)),
	                  rf_pos(&f->meta, ba));
	ck_assert_uint_eq(f->r->nbarriers, 0);
	ck_assert(rf_disk_is(f, 0, K4, 21));

	/* Barrier 101 with nothing before it still flushes first; a write after it waits behind
	 * an overlapping one (103 behind 102) and neither holds the barrier up. */
	rf_clear(f);
	uint8_t big[4 * K4];
	rf_pattern(big, sizeof(big), 23);
	rf_inject_id(f, &f->data, WIRE_BARRIER, 101);
	rf_inject_io(f, WIRE_DATA, 0, 102, 8 * K4, sizeof(big), big);
	rf_inject_io(f, WIRE_DATA, 0, 103, 8 * K4, K4, b);
	ck_assert_uint_eq(f->r->barriers[0].pending, 0);
	ck_assert_uint_eq(f->r->barriers_flushing, 1);
	memwire_flush(&f->meta);
	ck_assert_uint_eq(rf_count(&f->meta, WIRE_BARRIER_ACK), 0);
	rf_until(f, rf_count(&f->meta, WIRE_BARRIER_ACK) == 1 &&
	                rf_count(&f->meta, WIRE_WRITE_ACK) == 2);
	ck_assert_uint_eq(rf_id(rf_nth(&f->meta, WIRE_BARRIER_ACK, 0)), 101);
	check_write_ack(f, 102);
	check_write_ack(f, 103);
	ck_assert(rf_disk_is(f, 8 * K4, K4, 22));

	/* Two barriers in a row with a write between: answered in order, each after its writes. */
	rf_clear(f);
	rf_inject_id(f, &f->data, WIRE_BARRIER, 200);
	rf_inject_io(f, WIRE_DATA, 0, 201, 20 * K4, K4, a);
	rf_inject_id(f, &f->data, WIRE_BARRIER, 202);
	ck_assert_uint_eq(f->r->nbarriers, 2);
	ck_assert_uint_eq(f->r->barriers[0].pending, 0);
	ck_assert_uint_eq(f->r->barriers[1].pending, 1);
	rf_until(f, rf_count(&f->meta, WIRE_BARRIER_ACK) == 2);
	const struct mem_frame *b0 = rf_nth(&f->meta, WIRE_BARRIER_ACK, 0);
	const struct mem_frame *b1 = rf_nth(&f->meta, WIRE_BARRIER_ACK, 1);
	ck_assert_uint_eq(rf_id(b0), 200);
	ck_assert_uint_eq(rf_id(b1), 202);
	ck_assert_uint_lt(rf_pos(&f->meta, rf_find_id(&f->meta, WIRE_WRITE_ACK, 201)),
	                  rf_pos(&f->meta, b1));
}
END_TEST

/* Group commit: barriers whose writes are all done share one flush; one that becomes ready
 * while a flush runs waits for the next. Acks stay in order. */
START_TEST(barriers_share_a_flush)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_secondary(f);
	uint8_t a[K4];
	rf_pattern(a, sizeof(a), 31);
	uint64_t sub0 = io_submitted(f);
	rf_inject_io(f, WIRE_DATA, 0, 1, 0, K4, a);
	for (uint64_t id = 10; id < 14; id++)
		rf_inject_id(f, &f->data, WIRE_BARRIER, id);
	ck_assert_uint_eq(f->r->nbarriers, 4);
	ck_assert_uint_eq(f->r->barriers_flushing, 0); /* all wait for the write */
	rf_until(f, rf_count(&f->meta, WIRE_BARRIER_ACK) == 4);
	ck_assert_uint_eq(f->r->barrier_flushes, 1);
	ck_assert_uint_eq(f->r->barriers_acked, 4);
	ck_assert_uint_eq(io_submitted(f) - sub0, 2); /* the write and one flush */
	for (unsigned i = 0; i < 4; i++)
		ck_assert_uint_eq(rf_id(rf_nth(&f->meta, WIRE_BARRIER_ACK, i)), 10 + i);
	ck_assert_uint_lt(rf_pos(&f->meta, rf_find_id(&f->meta, WIRE_WRITE_ACK, 1)),
	                  rf_pos(&f->meta, rf_nth(&f->meta, WIRE_BARRIER_ACK, 0)));

	/* A barrier arriving while the flush runs is not answered by it. */
	rf_clear(f);
	rf_inject_id(f, &f->data, WIRE_BARRIER, 20);
	ck_assert_uint_eq(f->r->barriers_flushing, 1);
	rf_inject_id(f, &f->data, WIRE_BARRIER, 21);
	rf_inject_id(f, &f->data, WIRE_BARRIER, 22);
	ck_assert_uint_eq(f->r->barriers_flushing, 1);
	rf_until(f, rf_count(&f->meta, WIRE_BARRIER_ACK) == 3);
	ck_assert_uint_eq(f->r->barrier_flushes, 3);
	ck_assert_uint_eq(f->r->barriers_acked, 7);
	for (unsigned i = 0; i < 3; i++)
		ck_assert_uint_eq(rf_id(rf_nth(&f->meta, WIRE_BARRIER_ACK, i)), 20 + i);
	/* The timings count what happened: a wait for writes and a queue time per barrier, one
	 * fsync time per flush, and the four that waited for a write waited longer than none. */
	const struct barrier_lat *bl = &f->r->bar_lat;
	ck_assert_uint_eq(bl->writes.count, 7);
	ck_assert_uint_eq(bl->queue.count, 7);
	ck_assert_uint_eq(bl->total.count, 7);
	ck_assert_uint_eq(bl->fsync.count, 3);
	ck_assert_uint_gt(bl->writes.sum_ns, 0);
	ck_assert_uint_ge(bl->total.sum_ns, bl->fsync.sum_ns);
}
END_TEST

/* TRIM and ZERO (punched, or kept allocated with NO_HOLE, or with FUA) zero their range only. */
START_TEST(trim_and_zero)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_secondary(f);
	uint8_t buf[16 * K4];
	rf_pattern(buf, sizeof(buf), 31);
	rf_inject_io(f, WIRE_DATA, 0, 1, 0, sizeof(buf), buf);
	rf_until(f, rf_count(&f->meta, WIRE_WRITE_ACK) == 1);
	ck_assert(rf_disk_is(f, 0, sizeof(buf), 31));

	rf_inject_io(f, WIRE_TRIM, 0, 2, K4, 2 * K4, NULL);
	rf_inject_io(f, WIRE_ZERO, WIRE_F_NO_HOLE, 3, 4 * K4, 2 * K4, NULL);
	rf_inject_io(f, WIRE_ZERO, WIRE_F_FUA, 4, 8 * K4, 2 * K4, NULL);
	rf_until(f, rf_count(&f->meta, WIRE_WRITE_ACK) == 4);
	for (uint64_t id = 2; id <= 4; id++)
		check_write_ack(f, id);
	uint8_t got[16 * K4];
	rf_disk_read(f, 0, got, sizeof(got));
	for (unsigned blk = 0; blk < 16; blk++) {
		bool zeroed = blk == 1 || blk == 2 || blk == 4 || blk == 5 || blk == 8 || blk == 9;
		for (unsigned i = 0; i < K4; i++) {
			uint8_t want = zeroed ? 0 : buf[blk * K4 + i];
			ck_assert_msg(got[blk * K4 + i] == want, "block %u byte %u: %u, want %u",
			              blk, i, got[blk * K4 + i], want);
		}
	}
}
END_TEST

/* A payload that fails its crc: nothing is written, no ack, the connection is reset. */
START_TEST(bad_crc_drops_connection)
{
	struct replfix *f = rf_open(&(struct rf_opts){.integrity = true});
	rf_connect_secondary(f);
	uint8_t good[K4], bad[K4];
	rf_pattern(good, sizeof(good), 41);
	rf_pattern(bad, sizeof(bad), 42);
	rf_inject_io(f, WIRE_DATA, WIRE_F_CRC, 1, 0, K4, good);
	rf_until(f, rf_count(&f->meta, WIRE_WRITE_ACK) == 1);

	rf_inject_io_crc(f, 0, 2, 0, K4, bad, crc32c_update(0, good, K4));
	ck_assert(!f->r->connected);
	ck_assert(f->data.closed && f->meta.closed);
	ck_assert_uint_eq(f->r->integrity_errors, 1);
	ck_assert(rf_log_has(f, "Integrity error in DATA from alpha: 4096 bytes at offset 0"));
	ck_assert(rf_log_has(f, "a payload failed its integrity check"));
	ck_assert_uint_eq(f->r->apply_count, 0);
	rf_run_for(f, 0.05);
	ck_assert(rf_disk_is(f, 0, K4, 41));
	ck_assert_uint_eq(rf_count(&f->meta, WIRE_WRITE_ACK), 1);
	ck_assert_uint_eq(rf_oos_bytes(f), 0);
}
END_TEST

/* Malformed writes cost the connection, with a log line saying why, and change nothing. */
static const struct {
	const char *what;
	uint16_t type;
	uint64_t off;
	uint32_t len;
	const char *log;
} bad_frames[] = {
    {"past the end", WIRE_DATA, RF_SIZE - K4, 2 * K4, "is outside the volume"},
    {"zero length", WIRE_TRIM, 0, 0, "is outside the volume"},
    {"misaligned", WIRE_DATA, 100, 512, "is not aligned to 512 bytes"},
    {"misaligned length", WIRE_ZERO, 0, 1000, "is not aligned to 512 bytes"},
    {"to a primary", WIRE_DATA, 0, K4, "the peer sent writes to a primary"},
};

START_TEST(malformed_frames_drop_connection)
{
	struct replfix *f = rf_open(NULL);
	bool primary = strcmp(bad_frames[_i].what, "to a primary") == 0;
	if (primary)
		rf_connect_primary(f);
	else
		rf_connect_secondary(f);
	uint8_t buf[2 * K4];
	rf_pattern(buf, sizeof(buf), 51);
	uint64_t sub0 = io_submitted(f);
	rf_inject_io(f, bad_frames[_i].type, 0, 7, bad_frames[_i].off, bad_frames[_i].len,
	             bad_frames[_i].type == WIRE_DATA ? buf : NULL);
	ck_assert_msg(!f->r->connected, "%s: still connected", bad_frames[_i].what);
	ck_assert(f->data.closed && f->meta.closed);
	ck_assert_msg(rf_log_has(f, bad_frames[_i].log), "%s: no log line '%s'",
	              bad_frames[_i].what, bad_frames[_i].log);
	ck_assert(rf_log_has(f, "Lost the connection to alpha"));
	ck_assert_uint_eq(f->r->apply_count, 0);
	rf_run_for(f, 0.05);
	ck_assert_uint_eq(io_submitted(f), sub0);
	ck_assert(rf_disk_zero(f, 0, 4 * K4));
	ck_assert(rf_disk_zero(f, RF_SIZE - 4 * K4, 4 * K4));
	ck_assert_uint_eq(rf_count(&f->meta, WIRE_WRITE_ACK), 0);
	ck_assert_uint_eq(rf_oos_bytes(f), 0);
	ck_assert_int_eq(repl_role(f->r), primary ? ROLE_PRIMARY : ROLE_SECONDARY);
}
END_TEST

/* Too much in flight pauses reading the data stream; it resumes once half has drained, and the
 * frames held meanwhile are applied. */
START_TEST(backpressure_pauses_data_stream)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_secondary(f);
	const unsigned n = APPLY_MAX + 3;
	const uint64_t stride = 2048; /* n of them fit the volume, none overlaps the next */
	uint8_t buf[512];

	for (unsigned i = 0; i < n; i++) {
		rf_pattern(buf, sizeof(buf), 100 + i);
		rf_inject_io(f, WIRE_DATA, 0, 1000 + i, (uint64_t)i * stride, sizeof(buf), buf);
		if (i + 1 < APPLY_MAX)
			ck_assert_msg(!f->data.paused, "paused after %u frames", i + 1);
	}
	ck_assert(f->data.paused);
	ck_assert(f->r->data_paused);
	ck_assert_uint_eq(f->r->apply_count, APPLY_MAX);
	ck_assert_uint_eq(f->data.held, 3);
	ck_assert(!f->meta.paused); /* acks still flow */

	rf_until(f, !f->data.paused);
	ck_assert_uint_le(f->r->apply_count, APPLY_MAX / 2 + 3);
	ck_assert_uint_eq(f->data.held, 0);
	rf_until(f, rf_count(&f->meta, WIRE_WRITE_ACK) == n);
	ck_assert_uint_eq(f->r->apply_count, 0);
	for (unsigned i = 0; i < n; i += 97)
		ck_assert(rf_disk_is(f, (uint64_t)i * stride, sizeof(buf), 100 + i));
	ck_assert(rf_disk_is(f, (uint64_t)(n - 1) * stride, sizeof(buf), 100 + n - 1));
	ck_assert(f->r->connected);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("apply");
	TCase *t = tcase_create("secondary");
	tcase_add_checked_fixture(t, NULL, rf_close);
	tcase_set_timeout(t, 30);
	tcase_add_loop_test(t, data_written_and_acked, 0, 2);
	tcase_add_test(t, overlapping_in_arrival_order);
	tcase_add_test(t, barrier_after_writes_and_flush);
	tcase_add_test(t, barriers_share_a_flush);
	tcase_add_test(t, trim_and_zero);
	tcase_add_test(t, bad_crc_drops_connection);
	tcase_add_loop_test(t, malformed_frames_drop_connection, 0,
	                    (int)(sizeof(bad_frames) / sizeof(bad_frames[0])));
	tcase_add_test(t, backpressure_pauses_data_stream);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
