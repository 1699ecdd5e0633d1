/* SPDX-License-Identifier: MIT */
/*
 * The primary's send side (repl/ship.c), driven without sockets: a real primary on a temp file
 * (tests/unit/support/replfix.h) whose peer is played by the test. Requests come in through
 * volume_submit as NBD's would; the test reads the frames the primary sends, injects the peer's
 * acks, and checks when each request is answered, the bitmap, the transfer log and the disk.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "lib/crc32c.h"
#include "meta/bitmap.h"
#include "support/replfix.h"

#define K4 4096u
/* Slots of requests in flight: the epoch timer may have added a barrier of its own meanwhile. */
#define PENDING(f) ((f)->r->pend_count - (f)->r->auto_barriers)

/* The one DATA frame for request q: id, range, flags and payload as the client sent them. */
static void check_data(const struct mem_frame *fr, const struct rf_req *q, uint16_t flags)
{
	struct rf_io io;
	ck_assert_ptr_nonnull(fr);
	ck_assert_uint_eq(fr->hdr.type, WIRE_DATA);
	rf_io_of(fr, &io);
	ck_assert_uint_eq(io.id, q->vio.rid);
	ck_assert_uint_eq(io.off, q->vio.off);
	ck_assert_uint_eq(io.len, q->vio.len);
	ck_assert_uint_eq(io.flags, flags);
	ck_assert_ptr_nonnull(io.data);
	ck_assert_int_eq(memcmp(io.data, q->buf, q->vio.len), 0);
	if (flags & WIRE_F_CRC)
		ck_assert_uint_eq(io.crc, crc32c_update(0, q->buf, q->vio.len));
}

/* sync: one DATA frame; the answer waits for the local write and the WRITE_ACK (err 0). With
 * data-integrity (loop 1) the frame carries the payload's crc32c. */
START_TEST(sync_write_waits_for_write_ack)
{
	bool integrity = _i == 1;
	struct replfix *f = rf_open(&(struct rf_opts){.integrity = integrity});
	rf_connect_primary(f);

	struct rf_req *q = rf_submit(f, VOL_WRITE, 8192, 2 * K4, 1, 0);
	ck_assert_uint_eq(q->vio.rid, 1); /* the first slot of the connection */
	memwire_flush(&f->data);
	ck_assert_uint_eq(f->data.n_frames, 1);
	check_data(&f->data.frames[0], q, integrity ? WIRE_F_CRC : 0);
	ck_assert(!f->data.frames[0].lazy);
	ck_assert_uint_eq(f->meta.n_frames, 0);
	ck_assert(q->vio.rq & RQ_NET_WAIT);
	ck_assert_uint_eq(f->r->pend_count, 1);

	/* On the local disk, not yet on the peer's: not answered. */
	rf_until(f, q->vio.rq & RQ_LOCAL_DONE);
	rf_run_for(f, 0.02);
	ck_assert_int_eq(q->answers, 0);
	ck_assert(rf_disk_is(f, 8192, 2 * K4, 1));

	rf_inject_ack(f, WIRE_WRITE_ACK, q->vio.rid, 0);
	ck_assert_int_eq(q->answers, 1);
	ck_assert_int_eq(q->err, 0);
	ck_assert(req_peer_ok(&q->vio));
	ck_assert_uint_eq(PENDING(f), 0);
	ck_assert_uint_eq(rf_oos_bytes(f), 0);
	/* Acknowledged, not yet flushed by the peer: the transfer log keeps it. */
	ck_assert_uint_eq(tlog_used(&f->r->tl), 1);
	ck_assert(f->r->connected);
}
END_TEST

/* The ack may come before the local write: the answer then waits for the local side. */
START_TEST(sync_ack_before_local_write)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_primary(f);
	struct rf_req *q = rf_submit(f, VOL_WRITE, 0, K4, 2, 0);
	ck_assert(q->vio.rq & RQ_LOCAL);
	rf_inject_ack(f, WIRE_WRITE_ACK, q->vio.rid, 0);
	ck_assert_int_eq(q->answers, 0);
	ck_assert(req_peer_ok(&q->vio));
	rf_until(f, q->answers == 1);
	ck_assert_int_eq(q->err, 0);
	ck_assert(rf_disk_is(f, 0, K4, 2));
}
END_TEST

/* memsync: DATA asks for a RECV_ACK, and that answers the request (once written locally); a FLUSH
 * is local. */
START_TEST(memsync_answers_on_recv_ack)
{
	struct replfix *f = rf_open(&(struct rf_opts){.mode = HAK_MODE_MEMSYNC});
	rf_connect_primary(f);

	struct rf_req *q = rf_submit(f, VOL_WRITE, 4 * K4, K4, 3, 0);
	memwire_flush(&f->data);
	ck_assert_uint_eq(f->data.n_frames, 1);
	check_data(&f->data.frames[0], q, WIRE_F_RECV_ACK);
	rf_until(f, q->vio.rq & RQ_LOCAL_DONE);
	ck_assert_int_eq(q->answers, 0);
	rf_inject_id(f, &f->meta, WIRE_RECV_ACK, q->vio.rid);
	ck_assert_int_eq(q->answers, 1);
	ck_assert_int_eq(q->err, 0);
	ck_assert(!req_peer_ok(&q->vio)); /* received is not written */
	/* The slot waits for the WRITE_ACK still. */
	ck_assert_uint_eq(PENDING(f), 1);
	rf_inject_ack(f, WIRE_WRITE_ACK, q->vio.rid, 0);
	ck_assert_uint_eq(PENDING(f), 0);
	ck_assert_int_eq(q->answers, 1);

	/* RECV_ACK before the local write: the answer waits for the disk. */
	struct rf_req *q2 = rf_submit(f, VOL_WRITE, 8 * K4, K4, 4, 0);
	rf_inject_id(f, &f->meta, WIRE_RECV_ACK, q2->vio.rid);
	ck_assert_int_eq(q2->answers, 0);
	rf_until(f, q2->answers == 1);
	ck_assert_int_eq(q2->err, 0);
	ck_assert(rf_disk_is(f, 8 * K4, K4, 4));
	rf_inject_ack(f, WIRE_WRITE_ACK, q2->vio.rid, 0);
	ck_assert_uint_eq(PENDING(f), 0);

	/* A FLUSH is answered on the local fdatasync alone (the peer has the writes; its disk is
	 * not promised), and closes the epoch: a barrier of our own covers the writes so far. */
	memwire_flush(&f->data);
	size_t barriers = rf_count(&f->data, WIRE_BARRIER);
	struct rf_req *fl = rf_submit(f, VOL_FLUSH, 0, 0, 0, 0);
	ck_assert_uint_eq(fl->vio.rid, UINT64_MAX);
	rf_until(f, fl->answers == 1);
	ck_assert_int_eq(fl->err, 0);
	memwire_flush(&f->data);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_BARRIER), barriers + 1);
	ck_assert_uint_eq(tlog_used(&f->r->tl), 2);
	const struct mem_frame *bar = rf_nth(&f->data, WIRE_BARRIER, barriers);
	rf_inject_id(f, &f->meta, WIRE_BARRIER_ACK, rf_id(bar));
	ck_assert_uint_eq(tlog_used(&f->r->tl), 0);
	ck_assert_uint_eq(PENDING(f), 0);
}
END_TEST

/* async: answered on the local write alone; the DATA frame goes lazily, from a copy the client's
 * buffer no longer affects; a FLUSH stays local. */
START_TEST(async_answers_on_local_write)
{
	struct replfix *f = rf_open(&(struct rf_opts){.mode = HAK_MODE_ASYNC});
	rf_connect_primary(f);
	ck_assert(f->data.lazy_delay == ASYNC_DATA_DELAY);
	ck_assert(f->meta.lazy_delay == ASYNC_ACK_DELAY);

	struct rf_req *q = rf_submit(f, VOL_WRITE, 0, 2 * K4, 5, 0);
	ck_assert(!(q->vio.rq & RQ_NET_WAIT));
	ck_assert_uint_eq(f->r->async_bytes, 2 * K4);
	/* Run the loop without writing the streams: the answer needs no peer. */
	struct rf_bound b = rf_bound_start();
	while (q->answers == 0) {
		ck_assert_msg(rf_bound_ok(&b), "the async write was not answered");
		ev_run(f->loop, EVRUN_NOWAIT);
	}
	ck_assert_int_eq(q->err, 0);
	ck_assert(rf_disk_is(f, 0, 2 * K4, 5));
	uint8_t orig[2 * K4];
	memcpy(orig, q->buf, sizeof(orig));
	memset(q->buf, 0xee, 2 * K4); /* the client reuses its buffer */

	memwire_flush(&f->data);
	const struct mem_frame *d = rf_nth(&f->data, WIRE_DATA, 0);
	ck_assert_ptr_nonnull(d);
	ck_assert(d->lazy);
	struct rf_io io;
	rf_io_of(d, &io);
	ck_assert_uint_eq(io.id, q->vio.rid);
	ck_assert_uint_eq(io.off, 0);
	ck_assert_uint_eq(io.len, 2 * K4);
	ck_assert_uint_eq(io.flags, 0);
	ck_assert_int_eq(memcmp(io.data, orig, sizeof(orig)), 0);

	/* A flush is local in async mode: no BARRIER for it (the epoch timer may have sent one
	 * of its own while the loop ran). */
	size_t barriers = rf_count(&f->data, WIRE_BARRIER);
	struct rf_req *fl = rf_submit(f, VOL_FLUSH, 0, 0, 0, 0);
	memwire_flush(&f->data);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_BARRIER), barriers);
	ck_assert_uint_eq(fl->vio.rid, UINT64_MAX);
	rf_until(f, fl->answers == 1);
	ck_assert_int_eq(fl->err, 0);

	rf_inject_ack(f, WIRE_WRITE_ACK, q->vio.rid, 0);
	ck_assert_uint_eq(f->r->async_bytes, 0);
	ck_assert_int_eq(q->answers, 1);
}
END_TEST

/* FLUSH: a BARRIER that covers the writes before it; answered on BARRIER_ACK, which empties the
 * transfer log. */
START_TEST(flush_sends_barrier)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_primary(f);

	struct rf_req *w = rf_submit(f, VOL_WRITE, 0, K4, 6, 0);
	struct rf_req *fl = rf_submit(f, VOL_FLUSH, 0, 0, 0, 0);
	memwire_flush(&f->data);
	ck_assert_uint_eq(f->data.n_frames, 2);
	check_data(&f->data.frames[0], w, 0);
	const struct mem_frame *bar = &f->data.frames[1];
	ck_assert_uint_eq(bar->hdr.type, WIRE_BARRIER);
	ck_assert_uint_eq(bar->hdr.len, WIRE_ID_SIZE);
	ck_assert_uint_eq(rf_id(bar), fl->vio.rid);
	ck_assert_uint_eq(fl->vio.rid, w->vio.rid + 1);
	ck_assert_uint_eq(tlog_used(&f->r->tl), 1);

	rf_until(f, (w->vio.rq & RQ_LOCAL_DONE) && (fl->vio.rq & RQ_LOCAL_DONE));
	ck_assert_int_eq(fl->answers, 0);
	rf_inject_ack(f, WIRE_WRITE_ACK, w->vio.rid, 0);
	ck_assert_int_eq(w->answers, 1);
	ck_assert_int_eq(fl->answers, 0);
	ck_assert_uint_eq(tlog_used(&f->r->tl), 1); /* acked, not stable */

	rf_inject_id(f, &f->meta, WIRE_BARRIER_ACK, fl->vio.rid);
	ck_assert_int_eq(fl->answers, 1);
	ck_assert_int_eq(fl->err, 0);
	ck_assert_uint_eq(tlog_used(&f->r->tl), 0);
	ck_assert_uint_eq(f->r->pend_count, 0);

	/* Stable writes stay out of the bitmap when the peer goes. */
	memwire_inject_error(&f->meta, "the test cut the link");
	ck_assert(!f->r->connected);
	ck_assert_uint_eq(rf_oos_bytes(f), 0);
}
END_TEST

/* Two overlapping writes leave in submission order: the second starts (locally and to the peer)
 * only once the first's local write is done; a write overlapping only the held one waits behind
 * it; a write overlapping nothing goes at once. */
START_TEST(overlapping_writes_in_order)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_primary(f);

	struct rf_req *a = rf_submit(f, VOL_WRITE, 0, 2 * K4, 11, 0);
	struct rf_req *b = rf_submit(f, VOL_WRITE, K4, 2 * K4, 12, 0);
	struct rf_req *c = rf_submit(f, VOL_WRITE, 16 * K4, K4, 13, 0);
	struct rf_req *d = rf_submit(f, VOL_WRITE, 2 * K4, K4, 14, 0);
	ck_assert(a->vio.rq & RQ_LOCAL);
	ck_assert(c->vio.rq & RQ_LOCAL);
	for (struct rf_req *h = b; h; h = h == b ? d : NULL) {
		ck_assert(h->vio.rq & RQ_HELD);
		ck_assert(!(h->vio.rq & (RQ_LOCAL | RQ_LOCAL_DONE)));
		ck_assert_ptr_eq(h->vio.range.owner, &f->r->writes_held);
		ck_assert_uint_eq(h->vio.rid, UINT64_MAX); /* never sent */
	}
	memwire_flush(&f->data);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_DATA), 2);
	check_data(&f->data.frames[0], a, 0);
	check_data(&f->data.frames[1], c, 0);

	/* a's local write ends: b goes (d still waits behind b). */
	rf_until(f, a->vio.rq & RQ_LOCAL_DONE);
	ck_assert(!(b->vio.rq & RQ_HELD));
	ck_assert(b->vio.rq & (RQ_LOCAL | RQ_LOCAL_DONE));
	ck_assert(d->vio.rq & RQ_HELD);
	ck_assert_ptr_eq(d->vio.range.owner, &f->r->writes_held);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_DATA), 3);
	check_data(rf_nth(&f->data, WIRE_DATA, 2), b, 0);

	rf_until(f, b->vio.rq & RQ_LOCAL_DONE);
	rf_until(f, rf_count(&f->data, WIRE_DATA) == 4);
	check_data(rf_nth(&f->data, WIRE_DATA, 3), d, 0);
	rf_until(f, d->vio.rq & RQ_LOCAL_DONE);

	/* The local disk holds them in that order, as the peer applies them. */
	ck_assert(rf_disk_is(f, 0, K4, 11));
	uint8_t want[2 * K4], got[3 * K4];
	rf_pattern(want, 2 * K4, 12);
	rf_disk_read(f, 0, got, sizeof(got));
	ck_assert_int_eq(memcmp(got + K4, want, K4), 0);
	ck_assert(rf_disk_is(f, 2 * K4, K4, 14));
	ck_assert(rf_disk_is(f, 16 * K4, K4, 13));

	for (struct rf_req *q = f->reqs; q; q = q->next) {
		ck_assert_int_eq(q->answers, 0);
		rf_inject_ack(f, WIRE_WRITE_ACK, q->vio.rid, 0);
		ck_assert_int_eq(q->answers, 1);
		ck_assert_int_eq(q->err, 0);
	}
	ck_assert_uint_eq(PENDING(f), 0);
}
END_TEST

/* An epoch closes with a BARRIER of hakd's own after max-epoch-size writes, and after
 * EPOCH_MAX_AGE when fewer came; its ack makes the writes stable. */
START_TEST(epoch_closes_with_barrier)
{
	struct replfix *f = rf_open(&(struct rf_opts){.max_epoch = 4});
	rf_connect_primary(f);

	struct rf_req *w[4];
	for (int i = 0; i < 3; i++)
		w[i] = rf_submit(f, VOL_WRITE, (uint64_t)i * 4 * K4, K4, 20u + (unsigned)i, 0);
	memwire_flush(&f->data);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_DATA), 3);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_BARRIER), 0);
	w[3] = rf_submit(f, VOL_WRITE, 12 * K4, K4, 23, 0);
	memwire_flush(&f->data);
	ck_assert_uint_eq(f->data.n_frames, 5);
	check_data(&f->data.frames[3], w[3], 0);
	const struct mem_frame *bar = &f->data.frames[4];
	ck_assert_uint_eq(bar->hdr.type, WIRE_BARRIER);
	uint64_t bid = rf_id(bar);
	ck_assert_uint_eq(bid, w[3]->vio.rid + 1);
	ck_assert_uint_eq(f->r->auto_barriers, 1);
	ck_assert_uint_eq(f->r->tl.epoch_writes, 0);

	rf_until(f, (w[3]->vio.rq & RQ_LOCAL_DONE) && (w[0]->vio.rq & RQ_LOCAL_DONE));
	for (int i = 0; i < 4; i++) {
		rf_until(f, w[i]->vio.rq & RQ_LOCAL_DONE);
		rf_inject_ack(f, WIRE_WRITE_ACK, w[i]->vio.rid, 0);
		ck_assert_int_eq(w[i]->answers, 1); /* nobody waits for hakd's own barrier */
	}
	ck_assert_uint_eq(tlog_used(&f->r->tl), 4);
	rf_inject_id(f, &f->meta, WIRE_BARRIER_ACK, bid);
	ck_assert_uint_eq(f->r->auto_barriers, 0);
	ck_assert_uint_eq(tlog_used(&f->r->tl), 0);
	ck_assert_uint_eq(f->r->pend_count, 0);

	/* One write and no more: its epoch gets old and closes by itself. */
	rf_clear(f);
	struct rf_req *q = rf_submit(f, VOL_WRITE, 20 * K4, K4, 24, 0);
	memwire_flush(&f->data);
	ck_assert_uint_eq(f->data.n_frames, 1);
	rf_until(f, rf_count(&f->data, WIRE_BARRIER) == 1);
	bar = rf_nth(&f->data, WIRE_BARRIER, 0);
	ck_assert_uint_eq(rf_pos(&f->data, bar), 1);
	ck_assert_uint_eq(rf_id(bar), q->vio.rid + 1);
	rf_until(f, q->vio.rq & RQ_LOCAL_DONE);
	rf_inject_ack(f, WIRE_WRITE_ACK, q->vio.rid, 0);
	rf_inject_id(f, &f->meta, WIRE_BARRIER_ACK, rf_id(bar));
	ck_assert_uint_eq(tlog_used(&f->r->tl), 0);
	ck_assert_int_eq(q->answers, 1);
}
END_TEST

/* The link drops with writes in flight: they are answered (err 0: sync mode, no fencing yet),
 * and every block the peer may lack is in the bitmap: unacknowledged ones, and acknowledged ones
 * no barrier made stable. Stable ones are not. */
START_TEST(connection_loss_marks_bitmap)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_primary(f);

	/* stable: acked, and a barrier after it acked */
	struct rf_req *s = rf_submit(f, VOL_WRITE, 0, K4, 30, 0);
	struct rf_req *fl = rf_submit(f, VOL_FLUSH, 0, 0, 0, 0);
	rf_until(f, (s->vio.rq & RQ_LOCAL_DONE) && (fl->vio.rq & RQ_LOCAL_DONE));
	rf_inject_ack(f, WIRE_WRITE_ACK, s->vio.rid, 0);
	rf_inject_id(f, &f->meta, WIRE_BARRIER_ACK, fl->vio.rid);
	ck_assert_int_eq(s->answers + fl->answers, 2);

	/* unstable: acked, no barrier since */
	struct rf_req *u = rf_submit(f, VOL_WRITE, 8 * K4, 2 * K4, 31, 0);
	rf_until(f, u->vio.rq & RQ_LOCAL_DONE);
	rf_inject_ack(f, WIRE_WRITE_ACK, u->vio.rid, 0);
	ck_assert_int_eq(u->answers, 1);
	/* unacked, written locally */
	struct rf_req *n = rf_submit(f, VOL_WRITE, 16 * K4, K4, 32, 0);
	rf_until(f, n->vio.rq & RQ_LOCAL_DONE);
	ck_assert_int_eq(n->answers, 0);
	/* unacked, its local write still in flight */
	struct rf_req *l = rf_submit(f, VOL_WRITE, 24 * K4, K4, 33, 0);
	ck_assert(l->vio.rq & RQ_LOCAL);
	ck_assert_uint_eq(rf_oos_bytes(f), 0);

	memwire_inject_error(&f->data, "the test cut the link");
	ck_assert(!f->r->connected);
	ck_assert(f->meta.closed);
	ck_assert_int_eq(repl_link_state(f->r), LINK_CONNECTING);
	ck_assert_int_eq(n->answers, 1);
	ck_assert_int_eq(n->err, 0);
	ck_assert_int_eq(l->answers, 0); /* still waits for its local write */
	rf_until(f, l->answers == 1);
	ck_assert_int_eq(l->err, 0);
	ck_assert_uint_eq(f->r->pend_count, 0);
	ck_assert_uint_eq(tlog_used(&f->r->tl), 0);

	ck_assert(rf_bits(f, 0, K4, false));
	ck_assert(rf_bits(f, 8 * K4, 2 * K4, true));
	ck_assert(rf_bits(f, 16 * K4, K4, true));
	ck_assert(rf_bits(f, 24 * K4, K4, true));
	ck_assert_uint_eq(rf_oos_bytes(f), 4 * K4);
	ck_assert(rf_log_has(f, "Marked 16384 bytes in 3 ranges out of sync"));
	ck_assert(rf_log_has(f, "Lost the connection to alpha: the test cut the link."));
	/* The primary moved on to a new generation; the peer's is the bitmap's. */
	ck_assert_uint_ne(f->r->sb.gen_current, f->gen);
	ck_assert_uint_eq(f->r->sb.gen_bitmap, f->gen);

	/* Writes go on, into the bitmap. */
	struct rf_req *w = rf_submit(f, VOL_WRITE, 32 * K4, K4, 34, 0);
	rf_until(f, w->answers == 1);
	ck_assert_int_eq(w->err, 0);
	ck_assert_uint_eq(w->vio.rid, UINT64_MAX);
	ck_assert(rf_bits(f, 32 * K4, K4, true));
	ck_assert_uint_eq(rf_oos_bytes(f), 5 * K4);
}
END_TEST

/* A WRITE_ACK with an error: the client still gets the local result, the block goes into the
 * bitmap, the link stays. */
START_TEST(write_ack_error_marks_range)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_primary(f);
	struct rf_req *q = rf_submit(f, VOL_WRITE, 40 * K4, 2 * K4, 40, 0);
	rf_until(f, q->vio.rq & RQ_LOCAL_DONE);
	rf_inject_ack(f, WIRE_WRITE_ACK, q->vio.rid, EIO);
	ck_assert_int_eq(q->answers, 1);
	ck_assert_int_eq(q->err, 0);
	ck_assert(!req_peer_ok(&q->vio));
	ck_assert(rf_bits(f, 40 * K4, 2 * K4, true));
	ck_assert_uint_eq(rf_oos_bytes(f), 2 * K4);
	ck_assert(rf_log_has(f, "The peer failed to write 8192 bytes at 163840 (error 5)"));
	ck_assert(f->r->connected);
	ck_assert_uint_eq(PENDING(f), 0);
}
END_TEST

/* Acks for ids that were never sent (or already answered) are logged and ignored. */
START_TEST(unknown_ack_ignored)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_primary(f);
	struct rf_req *q = rf_submit(f, VOL_WRITE, 0, K4, 50, 0);
	rf_until(f, q->vio.rq & RQ_LOCAL_DONE);

	rf_inject_ack(f, WIRE_WRITE_ACK, 999, 0);
	rf_inject_id(f, &f->meta, WIRE_RECV_ACK, 998);
	rf_inject_id(f, &f->meta, WIRE_BARRIER_ACK, 997);
	ck_assert(rf_log_has(f, "The peer acknowledged unknown request 999 (WRITE_ACK)"));
	ck_assert(rf_log_has(f, "unknown request 998"));
	ck_assert(rf_log_has(f, "unknown request 997"));
	ck_assert(f->r->connected);
	ck_assert(!f->data.closed && !f->meta.closed);
	ck_assert_uint_eq(PENDING(f), 1);
	ck_assert_int_eq(q->answers, 0);

	/* The real ack still works, and a second one for the same id is unknown by then. */
	rf_inject_ack(f, WIRE_WRITE_ACK, q->vio.rid, 0);
	ck_assert_int_eq(q->answers, 1);
	rf_inject_ack(f, WIRE_WRITE_ACK, q->vio.rid, 0);
	ck_assert_int_eq(q->answers, 1);
	ck_assert(f->r->connected);
	ck_assert_uint_eq(rf_oos_bytes(f), 0);
}
END_TEST

/* An ack of the wrong kind is a protocol violation: a BARRIER_ACK must not count a write as
 * flushed, a WRITE_ACK must not count a barrier as flushed. The connection drops, and what the
 * peer did not confirm goes into the bitmap. */
START_TEST(wrong_ack_kind_drops)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_primary(f);
	struct rf_req *w = rf_submit(f, VOL_WRITE, 0, K4, 51, 0);
	rf_until(f, w->vio.rq & RQ_LOCAL_DONE);
	rf_inject_id(f, &f->meta, WIRE_BARRIER_ACK, w->vio.rid);
	ck_assert(rf_log_has(f, "the peer answered DATA"));
	ck_assert(!f->r->connected);
	ck_assert_int_eq(w->answers, 1);
	ck_assert(!req_peer_ok(&w->vio));
	ck_assert(rf_bits(f, 0, K4, true));
}
END_TEST

START_TEST(write_ack_for_barrier_drops)
{
	struct replfix *f = rf_open(NULL);
	rf_connect_primary(f);
	struct rf_req *fl = rf_submit(f, VOL_FLUSH, 0, 0, 0, 0);
	rf_until(f, rf_count(&f->data, WIRE_BARRIER) == 1);
	rf_inject_ack(f, WIRE_WRITE_ACK, rf_id(rf_nth(&f->data, WIRE_BARRIER, 0)), 0);
	ck_assert(rf_log_has(f, "the peer answered BARRIER"));
	ck_assert(!f->r->connected);
	rf_until(f, fl->answers == 1);
	ck_assert(!req_peer_ok(&fl->vio));
}
END_TEST

/* With the activity log on, a write waits for its transaction, then goes as without. */
START_TEST(activity_log_gates_then_sends)
{
	struct replfix *f = rf_open(&(struct rf_opts){.al = true});
	rf_connect_primary(f);
	ck_assert_ptr_nonnull(f->r->alio);
	struct rf_req *q = rf_submit(f, VOL_WRITE, 0, K4, 60, 0);
	rf_until(f, rf_count(&f->data, WIRE_DATA) == 1);
	check_data(rf_nth(&f->data, WIRE_DATA, 0), q, 0);
	rf_until(f, q->vio.rq & RQ_LOCAL_DONE);
	ck_assert_int_eq(q->answers, 0);
	rf_inject_ack(f, WIRE_WRITE_ACK, q->vio.rid, 0);
	ck_assert_int_eq(q->answers, 1);
	ck_assert_int_eq(q->err, 0);
	ck_assert(rf_disk_is(f, 0, K4, 60));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ship");
	TCase *t = tcase_create("primary");
	tcase_add_checked_fixture(t, NULL, rf_close);
	tcase_set_timeout(t, 30);
	tcase_add_loop_test(t, sync_write_waits_for_write_ack, 0, 2);
	tcase_add_test(t, sync_ack_before_local_write);
	tcase_add_test(t, memsync_answers_on_recv_ack);
	tcase_add_test(t, async_answers_on_local_write);
	tcase_add_test(t, flush_sends_barrier);
	tcase_add_test(t, overlapping_writes_in_order);
	tcase_add_test(t, epoch_closes_with_barrier);
	tcase_add_test(t, connection_loss_marks_bitmap);
	tcase_add_test(t, write_ack_error_marks_range);
	tcase_add_test(t, unknown_ack_ignored);
	tcase_add_test(t, wrong_ack_kind_drops);
	tcase_add_test(t, write_ack_for_barrier_drops);
	tcase_add_test(t, activity_log_gates_then_sends);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
