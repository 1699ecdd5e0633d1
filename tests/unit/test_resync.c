/* SPDX-License-Identifier: MIT */
/*
 * Bitmap exchange and bitmap-driven resync (repl/resync.c, and apply.c on the target), driven
 * without sockets: a real node on a temp file (tests/unit/support/replfix.h) as source or as
 * target, the other side played by the test. The test follows the frames: the bitmaps, the runs
 * (RS_DATA, holes without payload), their acks, RS_DONE; and checks the bitmap at each step.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "lib/endian.h"
#include "meta/bitmap.h"
#include "support/replfix.h"

#define K4 4096u
#define M1 (1u << 20)

static uint64_t io_submitted(const struct replfix *f)
{
	struct io_stats st;
	io_engine_stats(f->eng, &st);
	return st.submitted;
}

/* The BITMAP frames on the data stream carry exactly the node's bitmap; BITMAP_DONE is last. */
static void check_bitmap_sent(const struct replfix *f)
{
	size_t nw;
	const uint64_t *words = bitmap_words(f->r->bm, &nw);
	uint64_t *got = calloc(nw, sizeof(*got));
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_ge(f->data.n_frames, 1);
	for (size_t i = 0; i + 1 < f->data.n_frames; i++) {
		const struct mem_frame *fr = &f->data.frames[i];
		ck_assert_uint_eq(fr->hdr.type, WIRE_BITMAP);
		uint64_t first = wire_get_id(fr->payload);
		size_t n = (fr->hdr.len - 8) / 8;
		ck_assert_uint_le(first + n, nw);
		for (size_t k = 0; k < n; k++) {
			uint64_t le;
			memcpy(&le, fr->payload + 8 + 8 * k, 8);
			got[first + k] = le64toh(le);
		}
	}
	ck_assert_uint_eq(f->data.frames[f->data.n_frames - 1].hdr.type, WIRE_BITMAP_DONE);
	ck_assert_int_eq(memcmp(got, words, nw * sizeof(*got)), 0);
	free(got);
}

/* The source: dirty ranges from writes while disconnected (a new generation) and from the
 * peer's bitmap go as RS_DATA runs covering exactly them, holes without payload; an application
 * write to a run being read waits until the run is queued; bits clear only on a good RS_ACK; a
 * failed run comes again; RS_DONE once the bitmap is empty. */
START_TEST(source_sends_dirty_runs)
{
	struct replfix *f = rf_open(NULL);
	char err[512];

	/* Promoted alone: a new generation, writes go into the bitmap only. */
	ck_assert_msg(repl_promote(f->r, false, err, sizeof(err)) == 0, "%s", err);
	uint64_t gen_new = f->r->sb.gen_current;
	ck_assert_uint_ne(gen_new, f->gen);
	ck_assert_uint_eq(f->r->sb.gen_bitmap, f->gen);
	struct rf_req *w1 = rf_submit(f, VOL_WRITE, 0, 2 * K4, 1, 0);
	struct rf_req *t1 = rf_submit(f, VOL_TRIM, 16 * K4, K4, 0, 0);
	struct rf_req *w2 = rf_submit(f, VOL_WRITE, M1, 300 * 1024, 2, 0);
	rf_until(f, w1->answers && t1->answers && w2->answers);
	ck_assert_int_eq(w1->err + t1->err + w2->err, 0);
	ck_assert_uint_eq(bitmap_count(f->r->bm), 2 + 1 + 75);

	/* The peer still has the old generation: this node is the source of a bitmap resync. */
	struct wire_hello h;
	rf_hello(f, &h);
	rf_connect(f, &h);
	ck_assert(f->r->connected);
	ck_assert_int_eq(repl_link_state(f->r), LINK_SYNC_SOURCE);
	ck_assert(rf_log_has(f, "sync-source by rule bitmap-self"));
	check_bitmap_sent(f);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_BITMAP_DONE), 1);
	ck_assert(!f->r->resync_running); /* not before the peer's bitmap is in */
	/* (and long enough for the writes above to be past: an idle volume resyncs at full
	 * speed, so every run starts at once) */
	rf_run_for(f, RSCTL_BUSY_HOLD + 0.05);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_RS_DATA), 0);
	rf_clear(f);

	/* The peer's bitmap adds block 32 (128 KiB). */
	uint64_t peer_word = 1ull << 32;
	rf_inject_bitmap(f, 0, &peer_word, 1);
	ck_assert_uint_eq(bitmap_count(f->r->bm), 79);
	rf_inject_id(f, &f->data, WIRE_BITMAP_DONE, 0);
	ck_assert(f->r->resync_running);
	/* Five runs: [0,8K) [64K] [128K] and the 300 KiB write in chunks of RS_CHUNK; only
	 * RS_READS_MAX of them are read at once, the fifth once one of those is done. */
	ck_assert_uint_eq(f->r->rs_reading.count, RS_READS_MAX);

	/* An application write to a run being read waits for the run. */
	struct rf_req *a = rf_submit(f, VOL_WRITE, K4, K4, 9, 0);
	ck_assert(a->vio.rq & RQ_HELD);
	ck_assert_ptr_eq(a->vio.range.owner, &f->r->writes_held);
	memwire_flush(&f->data);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_DATA), 0);

	rf_until(f, rf_count(&f->data, WIRE_RS_DATA) == 5 && rf_count(&f->data, WIRE_DATA) == 1);
	static const struct {
		uint64_t off;
		uint32_t len;
		unsigned seed; /* 0: a hole */
		uint32_t at;   /* where in the written pattern */
	} runs[] = {
	    {0, 2 * K4, 1, 0},
	    {16 * K4, K4, 0, 0},
	    {32 * K4, K4, 0, 0},
	    {M1, RS_CHUNK, 2, 0},
	    {M1 + RS_CHUNK, 300 * 1024 - RS_CHUNK, 2, RS_CHUNK},
	};
	uint64_t ids[5], total = 0;
	uint8_t *want = malloc(300 * 1024);
	ck_assert_ptr_nonnull(want);
	for (int i = 0; i < 5; i++) {
		const struct mem_frame *fr = rf_find_io(&f->data, WIRE_RS_DATA, runs[i].off);
		struct rf_io io;
		rf_io_of(fr, &io);
		ck_assert_uint_eq(io.off, runs[i].off);
		ck_assert_uint_eq(io.len, runs[i].len);
		ids[i] = io.id;
		for (int k = 0; k < i; k++)
			ck_assert_uint_ne(ids[k], io.id);
		total += io.len;
		if (!runs[i].seed) {
			ck_assert_uint_eq(io.flags, WIRE_F_HOLE);
			ck_assert_uint_eq(fr->hdr.len, WIRE_IO_SIZE);
			ck_assert_ptr_null(io.data);
			continue;
		}
		ck_assert_uint_eq(io.flags, 0);
		rf_pattern(want, 300 * 1024, runs[i].seed);
		ck_assert_int_eq(memcmp(io.data, want + runs[i].at, io.len), 0);
	}
	free(want);
	ck_assert_uint_eq(total, 79 * K4);
	/* The held write went after the run that covered it, with its own data. */
	const struct mem_frame *d = rf_nth(&f->data, WIRE_DATA, 0);
	struct rf_io dio;
	rf_io_of(d, &dio);
	ck_assert_uint_eq(dio.off, K4);
	ck_assert_uint_eq(dio.id, a->vio.rid);
	ck_assert_uint_gt(rf_pos(&f->data, d),
	                  rf_pos(&f->data, rf_find_io(&f->data, WIRE_RS_DATA, 0)));
	uint8_t buf[K4];
	rf_pattern(buf, K4, 9);
	ck_assert_int_eq(memcmp(dio.data, buf, K4), 0);

	/* Sent is not done: every bit stays until its RS_ACK. */
	ck_assert_uint_eq(bitmap_count(f->r->bm), 79);
	ck_assert_uint_eq(rf_oos_bytes(f), 79 * K4);
	rf_inject_ack(f, WIRE_RS_ACK, ids[3], 0);
	ck_assert(rf_bits(f, M1, RS_CHUNK, false));
	ck_assert_uint_eq(bitmap_count(f->r->bm), 15);
	rf_inject_ack(f, WIRE_RS_ACK, ids[1], EIO); /* the peer failed that one */
	ck_assert(rf_bits(f, 16 * K4, K4, true));
	ck_assert(rf_log_has(f, "The peer failed to write resync run 65536+4096 (error 5)"));
	rf_inject_ack(f, WIRE_RS_ACK, ids[0], 0);
	rf_inject_ack(f, WIRE_RS_ACK, ids[2], 0);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_RS_DONE), 0);
	rf_inject_ack(f, WIRE_RS_ACK, ids[4], 0);
	ck_assert_uint_eq(bitmap_count(f->r->bm), 1);
	ck_assert(rf_bits(f, 16 * K4, K4, true));

	/* The failed run comes again; its ack empties the bitmap, and RS_DONE follows. */
	rf_until(f, rf_count(&f->data, WIRE_RS_DATA) == 6);
	struct rf_io again;
	rf_io_of(rf_nth(&f->data, WIRE_RS_DATA, 5), &again);
	ck_assert_uint_eq(again.off, 16 * K4);
	ck_assert_uint_eq(again.len, K4);
	ck_assert_uint_eq(again.flags, WIRE_F_HOLE);
	for (int k = 0; k < 5; k++)
		ck_assert_uint_ne(again.id, ids[k]);
	rf_run_for(f, 0.02);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_RS_DONE), 0);
	rf_inject_ack(f, WIRE_RS_ACK, again.id, 0);
	ck_assert_uint_eq(bitmap_count(f->r->bm), 0);
	memwire_flush(&f->data);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_RS_DONE), 1);
	ck_assert_int_eq(repl_link_state(f->r), LINK_SYNC_SOURCE); /* the target records first */

	rf_inject_id(f, &f->data, WIRE_RS_DONE, 0);
	ck_assert_int_eq(repl_link_state(f->r), LINK_CONNECTED);
	ck_assert(!f->r->resync_running);
	ck_assert_uint_eq(f->r->resyncs_completed, 1);
	ck_assert_uint_eq(f->r->sb.gen_current, gen_new);
	ck_assert_uint_eq(f->r->sb.gen_bitmap, 0);
	ck_assert_uint_eq(f->r->sb.gen_history[0], f->gen);
	ck_assert(f->r->connected);

	rf_inject_ack(f, WIRE_WRITE_ACK, a->vio.rid, 0);
	rf_until(f, a->answers == 1);
	ck_assert_int_eq(a->err, 0);
	ck_assert_uint_eq(rf_oos_bytes(f), 0);
}
END_TEST

/* The source reads no further ahead of the socket than RS_UNSENT_MAX, however large the window:
 * with 12 MiB dirty and a data stream that takes nothing, reading stops once that much waits;
 * each run the socket takes lets another be read, and every byte still goes, once. */
START_TEST(source_reads_bounded_ahead_of_socket)
{
	struct replfix *f = rf_open(NULL);
	char err[512];
	const uint64_t dirty = 12 * M1, nruns = dirty / RS_CHUNK;
	ck_assert_uint_gt(dirty, 2 * RS_UNSENT_MAX); /* else the bound is not reached */
	ck_assert_uint_ge(f->vc->resync_fill, dirty);
	ck_assert_int_eq(repl_promote(f->r, false, err, sizeof(err)), 0);
	for (unsigned i = 0; i < dirty / M1; i++) {
		struct rf_req *w = rf_submit(f, VOL_WRITE, (uint64_t)i * M1, M1, 20 + i, 0);
		rf_until(f, w->answers == 1);
		ck_assert_int_eq(w->err, 0);
	}
	struct wire_hello h;
	rf_hello(f, &h);
	rf_connect(f, &h);
	rf_run_for(f, RSCTL_BUSY_HOLD + 0.05); /* the volume is idle: the whole window is open */
	rf_clear(f);
	rf_inject_id(f, &f->data, WIRE_BITMAP_DONE, 0);
	ck_assert(f->r->resync_running);

	/* The loop alone, without the test taking what the source sends. */
	for (unsigned i = 0; i < 20000 && f->r->rs_reading.count > 0; i++) {
		ev_run(f->loop, EVRUN_NOWAIT);
		usleep(50);
	}
	ck_assert_uint_eq(f->r->rs_reading.count, 0);
	ck_assert_uint_ge(f->r->rs_unsent, RS_UNSENT_MAX);
	ck_assert_uint_lt(f->r->rs_unsent, RS_UNSENT_MAX + RS_READS_MAX * RS_CHUNK);
	ck_assert_uint_eq(f->r->rs_unsent, f->r->rs_inflight);
	ck_assert_uint_ge(tstream_queued(f->data.s), f->r->rs_unsent);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_RS_DATA), 0);

	/* The socket takes it all: reading goes on, and every run goes out exactly once. */
	memwire_flush(&f->data);
	ck_assert_uint_eq(f->r->rs_unsent, 0);
	uint64_t first = rf_count(&f->data, WIRE_RS_DATA);
	ck_assert_uint_eq(first * RS_CHUNK, f->r->rs_inflight);
	rf_until(f, rf_count(&f->data, WIRE_RS_DATA) == nruns);
	uint8_t *want = malloc(M1);
	ck_assert_ptr_nonnull(want);
	for (uint64_t k = 0; k < nruns; k++) {
		struct rf_io io;
		const struct mem_frame *fr = rf_find_io(&f->data, WIRE_RS_DATA, k * RS_CHUNK);
		ck_assert_ptr_nonnull(fr);
		rf_io_of(fr, &io);
		ck_assert_uint_eq(io.len, RS_CHUNK);
		rf_pattern(want, M1, 20 + (unsigned)(k * RS_CHUNK / M1));
		ck_assert_int_eq(memcmp(io.data, want + k * RS_CHUNK % M1, RS_CHUNK), 0);
		rf_inject_ack(f, WIRE_RS_ACK, io.id, 0);
	}
	free(want);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_RS_DATA), nruns);
	ck_assert_uint_eq(bitmap_count(f->r->bm), 0);
	ck_assert_uint_eq(f->r->rs_unsent, 0);
	rf_until(f, rf_count(&f->data, WIRE_RS_DONE) == 1);
}
END_TEST

/* The target: the peer's bitmap is merged and persisted; RS_DATA runs (data and holes) are
 * written, and RS_ACK goes only after a flush covered them, which is when the bits clear;
 * RS_DONE makes the disk UpToDate with the source's generation. */
START_TEST(target_acks_after_flush)
{
	struct replfix *f = rf_open(NULL);
	rf_disk_write(f, 0, 4 * K4, 7); /* the old copy */
	rf_disk_write(f, 16 * K4, K4, 8);
	const uint64_t src_gen = 0x0123456789abcdefull;

	struct wire_hello h;
	rf_hello(f, &h);
	h.role = WIRE_ROLE_PRIMARY;
	h.gen[0] = src_gen;
	h.gen[1] = f->gen; /* the peer moved on from this node's generation */
	rf_connect(f, &h);
	ck_assert_int_eq(repl_link_state(f->r), LINK_SYNC_TARGET);
	ck_assert_int_eq(repl_disk_state(f->r), DISK_INCONSISTENT);
	ck_assert(f->r->sb.flags & META_F_RESYNC_TARGET);
	const struct mem_frame *st = rf_nth(&f->meta, WIRE_STATE, 0);
	ck_assert_ptr_nonnull(st);
	ck_assert_uint_eq(st->payload[0], ROLE_SECONDARY);
	ck_assert_uint_eq(st->payload[1], DISK_INCONSISTENT);
	ck_assert_uint_eq(f->data.n_frames, 1); /* an empty bitmap: BITMAP_DONE alone */
	ck_assert_uint_eq(f->data.frames[0].hdr.type, WIRE_BITMAP_DONE);
	rf_clear(f);

	uint64_t word = 0xfull | 1ull << 16; /* blocks 0-3 and 16 */
	rf_inject_bitmap(f, 0, &word, 1);
	rf_inject_id(f, &f->data, WIRE_BITMAP_DONE, 0);
	ck_assert_uint_eq(bitmap_count(f->r->bm), 5);
	ck_assert_uint_eq(bitmap_dirty_pages(f->r->bm), 0); /* persisted before any run */

	uint8_t run[4 * K4];
	rf_pattern(run, sizeof(run), 9);
	uint64_t sub0 = io_submitted(f);
	rf_inject_io(f, WIRE_RS_DATA, 0, 1, 0, sizeof(run), run);
	rf_inject_io(f, WIRE_RS_DATA, WIRE_F_HOLE, 2, 16 * K4, K4, NULL);
	ck_assert_uint_eq(f->r->rs_applying, 2);
	ck_assert_uint_eq(io_submitted(f) - sub0, 2);

	/* Both written, the flush under way: no ack yet, every bit still set. */
	rf_until(f, f->r->rs_syncing != NULL);
	ck_assert_uint_eq(f->r->rs_applying, 0);
	ck_assert_uint_eq(rf_count(&f->meta, WIRE_RS_ACK), 0);
	ck_assert_uint_eq(bitmap_count(f->r->bm), 5);
	/* the flush went out (after a direct write the store refused, a buffered retry too) */
	ck_assert_uint_ge(io_submitted(f) - sub0, 3);

	rf_until(f, rf_count(&f->meta, WIRE_RS_ACK) == 2);
	for (uint64_t id = 1; id <= 2; id++) {
		const struct mem_frame *ack = rf_find_id(&f->meta, WIRE_RS_ACK, id);
		ck_assert_ptr_nonnull(ack);
		ck_assert_uint_eq(rf_status(ack), 0);
	}
	ck_assert_uint_eq(rf_count(&f->meta, WIRE_WRITE_ACK), 0);
	ck_assert_uint_eq(bitmap_count(f->r->bm), 0);
	ck_assert(rf_disk_is(f, 0, sizeof(run), 9));
	ck_assert(rf_disk_zero(f, 16 * K4, K4));
	ck_assert_uint_eq(f->r->rs_done_bytes, 5 * K4);
	ck_assert_int_eq(repl_disk_state(f->r), DISK_INCONSISTENT);

	rf_clear(f);
	rf_inject_id(f, &f->data, WIRE_RS_DONE, 0);
	ck_assert_int_eq(repl_link_state(f->r), LINK_CONNECTED);
	ck_assert_int_eq(repl_disk_state(f->r), DISK_UPTODATE);
	ck_assert(!(f->r->sb.flags & META_F_RESYNC_TARGET));
	ck_assert_uint_eq(f->r->sb.gen_current, src_gen);
	memwire_flush(&f->data);
	memwire_flush(&f->meta);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_RS_DONE), 1);
	st = rf_nth(&f->meta, WIRE_STATE, 0);
	ck_assert_ptr_nonnull(st);
	ck_assert_uint_eq(st->payload[1], DISK_UPTODATE);
	ck_assert(f->r->connected);
}
END_TEST

/* RS_DONE from a source while this target still has bits set: it stays Inconsistent. */
START_TEST(target_refuses_early_done)
{
	struct replfix *f = rf_open(NULL);
	struct wire_hello h;
	rf_hello(f, &h);
	h.role = WIRE_ROLE_PRIMARY;
	h.gen[0] = 0x0123456789abcdefull;
	h.gen[1] = f->gen;
	rf_connect(f, &h);
	uint64_t word = 1ull << 3;
	rf_inject_bitmap(f, 0, &word, 1);
	rf_inject_id(f, &f->data, WIRE_BITMAP_DONE, 0);
	rf_clear(f);
	rf_inject_id(f, &f->data, WIRE_RS_DONE, 0);
	ck_assert_int_eq(repl_disk_state(f->r), DISK_INCONSISTENT);
	ck_assert_int_eq(repl_link_state(f->r), LINK_SYNC_TARGET);
	ck_assert_uint_eq(f->r->sb.gen_current, f->gen);
	ck_assert(rf_log_has(f, "1 blocks are still marked out of sync here"));
	memwire_flush(&f->data);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_RS_DONE), 0);
}
END_TEST

/* The target pauses reading once RS_APPLY_MAX_BYTES of runs wait for its disk, whatever the
 * source's window, and resumes when half has drained; every run is written and acknowledged.
 * More runs than the volume holds: the last ones overwrite the first, in arrival order. */
START_TEST(target_pauses_on_unwritten_runs)
{
	struct replfix *f = rf_open(NULL);
	const uint64_t src_gen = 0x0123456789abcdefull;
	const unsigned slots = RF_SIZE / RS_CHUNK, n = slots + slots / 4;
	struct wire_hello h;
	rf_hello(f, &h);
	h.role = WIRE_ROLE_PRIMARY;
	h.gen[0] = src_gen;
	h.gen[1] = f->gen;
	rf_connect(f, &h);
	ck_assert_int_eq(repl_link_state(f->r), LINK_SYNC_TARGET);
	rf_inject_id(f, &f->data, WIRE_BITMAP_DONE, 0);

	uint8_t *run = malloc(RS_CHUNK);
	ck_assert_ptr_nonnull(run);
	unsigned paused_at = 0;
	for (unsigned i = 0; i < n; i++) {
		rf_pattern(run, RS_CHUNK, 40 + i);
		/* Nothing completes between two frames: the loop does not run. */
		rf_inject_io(f, WIRE_RS_DATA, 0, 1 + i, (uint64_t)(i % slots) * RS_CHUNK, RS_CHUNK,
		             run);
		if (f->data.paused && !paused_at)
			paused_at = i + 1;
	}
	ck_assert_uint_gt(n * (uint64_t)RS_CHUNK, RS_APPLY_MAX_BYTES); /* else not reached */
	ck_assert_uint_eq(paused_at, RS_APPLY_MAX_BYTES / (RS_CHUNK + WIRE_IO_SIZE) + 1);
	ck_assert(f->r->data_paused);
	ck_assert_uint_eq(f->data.held, n - paused_at);
	ck_assert(!f->meta.paused);

	rf_until(f, !f->data.paused);
	/* (the frames held meanwhile came in at once, and may have paused it again) */
	ck_assert_uint_le(f->r->rs_apply_bytes, RS_APPLY_MAX_BYTES + RS_CHUNK + WIRE_IO_SIZE);
	rf_until(f, rf_count(&f->meta, WIRE_RS_ACK) == n);
	ck_assert_uint_eq(f->r->rs_apply_bytes, 0);
	for (unsigned i = 0; i < slots; i++)
		ck_assert(rf_disk_is(f, (uint64_t)i * RS_CHUNK, RS_CHUNK,
		                     40 + i + (i < n - slots ? slots : 0)));
	for (unsigned i = 0; i < n; i++)
		ck_assert_uint_eq(rf_status(rf_find_id(&f->meta, WIRE_RS_ACK, 1 + i)), 0);
	free(run);
}
END_TEST

/* An RS_ACK for a run never sent costs the connection; the bits stay. */
START_TEST(source_unknown_rs_ack_drops)
{
	struct replfix *f = rf_open(NULL);
	char err[512];
	ck_assert_int_eq(repl_promote(f->r, false, err, sizeof(err)), 0);
	struct rf_req *w = rf_submit(f, VOL_WRITE, 0, K4, 3, 0);
	rf_until(f, w->answers == 1);
	struct wire_hello h;
	rf_hello(f, &h);
	rf_connect(f, &h);
	rf_inject_id(f, &f->data, WIRE_BITMAP_DONE, 0);
	rf_until(f, rf_count(&f->data, WIRE_RS_DATA) == 1);
	rf_inject_ack(f, WIRE_RS_ACK, 4242, 0);
	ck_assert(!f->r->connected);
	ck_assert(rf_log_has(f, "the peer acknowledged a resync run that was never sent"));
	ck_assert_uint_eq(bitmap_count(f->r->bm), 1);
	ck_assert(!f->r->resync_running);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("resync");
	TCase *t = tcase_create("bitmap");
	tcase_add_checked_fixture(t, NULL, rf_close);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, source_sends_dirty_runs);
	tcase_add_test(t, source_reads_bounded_ahead_of_socket);
	tcase_add_test(t, target_acks_after_flush);
	tcase_add_test(t, target_pauses_on_unwritten_runs);
	tcase_add_test(t, target_refuses_early_done);
	tcase_add_test(t, source_unknown_rs_ack_drops);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
