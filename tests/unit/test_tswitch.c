/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the in-place move of a connection onto new streams (repl/tswitch.c), on the
 * accepting side, driven without sockets (support/replfix.h): the peer's switch HELLOs on two new
 * streams, hakd's answers and its SWITCH markers on the old ones; frames of the new data stream
 * held until the old one's marker (overlapping writes land in the peer's order); the old streams
 * closed once both markers passed; no reconnect; the apply backpressure pausing whichever stream
 * carries the data. A new stream's failure before the move closes
 * only the new streams; a marker outside a move, or a switch HELLO without a connection, is
 * refused.
 */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>

#include "lib/endian.h"
#include "repl/tswitch.h"
#include "support/replfix.h"

static struct memwire nd, nm; /* the new data and meta streams */

static void teardown(void)
{
	rf_close();
	memwire_free(&nd);
	memwire_free(&nm);
	memset(&nd, 0, sizeof(nd));
	memset(&nm, 0, sizeof(nm));
}

static void inject_switch_hello(struct replfix *f, struct memwire *w, uint8_t stream)
{
	struct wire_hello h;
	uint8_t b[WIRE_HELLO_SIZE];
	rf_hello(f, &h);
	h.role = WIRE_ROLE_PRIMARY;
	h.stream = stream;
	wire_hello_encode(b, &h);
	ck_assert_int_eq(memwire_inject(w, WIRE_HELLO, WIRE_F_SWITCH, b, sizeof(b)), 0);
}

static void inject_marker(struct memwire *w)
{
	uint8_t b[WIRE_ID_SIZE];
	be_put64(b, 1);
	ck_assert_int_eq(memwire_inject(w, WIRE_SWITCH, 0, b, sizeof(b)), 0);
}

/* The peer's write of rf_pattern(seed) at off on stream w. */
static void inject_write(struct memwire *w, uint64_t id, uint64_t off, unsigned seed)
{
	uint8_t p[WIRE_IO_SIZE + 4096];
	struct wire_io io = {.id = id, .off = off, .len = 4096};
	wire_io_encode(p, &io);
	rf_pattern(p + WIRE_IO_SIZE, 4096, seed);
	ck_assert_int_eq(memwire_inject(w, WIRE_DATA, 0, p, sizeof(p)), 0);
}

static void step(struct replfix *f)
{
	rf_step(f);
	memwire_flush(&nd);
	memwire_flush(&nm);
}

static bool acked_on(const struct memwire *w, uint64_t id)
{
	const struct mem_frame *fr = rf_find_id(w, WIRE_WRITE_ACK, id);
	return fr && rf_status(fr) == 0;
}

/* Connected as secondary, the new streams accepted from the listener. */
static struct replfix *connected(void)
{
	struct rf_opts o = {.mode = HAK_MODE_SYNC};
	struct replfix *f = rf_open(&o);
	rf_connect_secondary(f);
	struct tlistener *l = memtransport_listener(RF_SELF_ADDR);
	ck_assert_ptr_nonnull(l);
	ck_assert_int_eq(memlistener_accept(l, &nd), 0);
	ck_assert_int_eq(memlistener_accept(l, &nm), 0);
	return f;
}

static void assert_switch_hello(const struct memwire *w)
{
	ck_assert_uint_ge(w->n_frames, 1);
	ck_assert_uint_eq(w->frames[0].hdr.type, WIRE_HELLO);
	ck_assert_uint_eq(w->frames[0].hdr.flags, WIRE_F_SWITCH);
}

START_TEST(moves_in_place_in_stream_order)
{
	struct replfix *f = connected();
	uint64_t seq = f->r->conn_seq;
	inject_write(&f->data, 1, 0, 11);
	inject_switch_hello(f, &nd, WIRE_STREAM_DATA);
	step(f);
	assert_switch_hello(&nd);
	ck_assert(nd.paused); /* nothing of it before the old stream's marker */
	ck_assert_ptr_null(memtransport_connecting()); /* the acceptor only answers */
	ck_assert_ptr_null(f->r->sw_old[0]);
	inject_switch_hello(f, &nm, WIRE_STREAM_META);
	step(f);
	assert_switch_hello(&nm);
	/* Moved: the markers are the last frames on the old streams, the new ones are current. */
	ck_assert_ptr_eq(f->r->data, nd.s);
	ck_assert_ptr_eq(f->r->meta_s, nm.s);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_SWITCH), 1);
	ck_assert_uint_eq(f->data.frames[f->data.n_frames - 1].hdr.type, WIRE_SWITCH);
	ck_assert_uint_eq(f->meta.frames[f->meta.n_frames - 1].hdr.type, WIRE_SWITCH);
	/* The peer moved too: its next write (seed 22) came on the new stream before its last
	 * one on the old stream (seed 33, same block) and its marker. */
	inject_write(&nd, 2, 0, 22);
	ck_assert_uint_eq(nd.held, 1);
	inject_write(&f->data, 3, 0, 33);
	step(f);
	ck_assert_uint_eq(nd.held, 1);
	inject_marker(&f->data);
	ck_assert_uint_eq(nd.held, 0);
	ck_assert(!nd.paused);
	/* Write 1 is acknowledged on whichever meta stream was current when its I/O ended. */
	rf_until(f, (step(f), (acked_on(&f->meta, 1) || acked_on(&nm, 1)) && acked_on(&nm, 2) &&
	                          acked_on(&nm, 3)));
	ck_assert(rf_disk_is(f, 0, 4096, 22)); /* the peer's order: 1, 3, then 2 */
	ck_assert(!f->meta.closed);            /* the old meta stream waits for its marker */
	inject_marker(&f->meta);
	rf_until(f, (step(f), f->data.closed && f->meta.closed));
	ck_assert_uint_eq(f->data.cancelled + f->meta.cancelled, 0);
	ck_assert(f->r->connected);
	ck_assert_uint_eq(f->r->conn_seq, seq);
	ck_assert_uint_eq(f->r->switches, 1);
	ck_assert_uint_eq(f->r->connections, 1);
	ck_assert(rf_log_has(f, "in place (move 1)"));
	json_t *st = repl_status_json(f->r);
	ck_assert_int_eq(json_integer_value(json_object_get(st, "transport_switches")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(st, "connections")), 1);
	json_decref(st);
	/* A write on the current streams goes on as before. */
	inject_write(&nd, 4, 8192, 44);
	rf_until(f, (step(f), acked_on(&nm, 4)));
	ck_assert(rf_disk_is(f, 8192, 4096, 44));
}
END_TEST

/* The apply side's backpressure pauses whichever stream carries the peer's data at that moment:
 * the old one up to its marker (which then waits with it), the new one after. */
START_TEST(backpressure_follows_the_data)
{
	struct replfix *f = connected();
	inject_switch_hello(f, &nd, WIRE_STREAM_DATA);
	inject_switch_hello(f, &nm, WIRE_STREAM_META);
	step(f);
	ck_assert_ptr_eq(f->r->data, nd.s);
	tswitch_data_pause(f->r, true);
	ck_assert(f->data.paused && nd.paused);
	inject_marker(&f->data);
	ck_assert_uint_eq(f->data.held, 1); /* read only when the apply side wants more */
	ck_assert(!f->r->sw_marker_rcvd[0]);
	tswitch_data_pause(f->r, false);
	ck_assert(f->r->sw_marker_rcvd[0]);
	ck_assert(!nd.paused);
	tswitch_data_pause(f->r, true);
	ck_assert(nd.paused);
	inject_write(&nd, 1, 0, 7);
	ck_assert_uint_eq(nd.held, 1);
	tswitch_data_pause(f->r, false);
	ck_assert_uint_eq(nd.held, 0);
	inject_marker(&f->meta);
	rf_until(f, (step(f), acked_on(&nm, 1) && f->data.closed && f->meta.closed));
	ck_assert(rf_disk_is(f, 0, 4096, 7));
	ck_assert(!nd.paused && f->r->connected);
}
END_TEST

START_TEST(a_new_stream_failing_closes_only_the_new_streams)
{
	struct replfix *f = connected();
	uint64_t seq = f->r->conn_seq;
	inject_switch_hello(f, &nd, WIRE_STREAM_DATA);
	step(f);
	memwire_inject_error(&nd, "connection reset by the peer");
	step(f);
	ck_assert(nd.closed);
	ck_assert_ptr_null(f->r->sw_new[0]);
	ck_assert_ptr_null(f->r->sw_new[1]);
	ck_assert(f->r->connected);
	ck_assert_uint_eq(f->r->conn_seq, seq);
	ck_assert(!f->data.closed && !f->meta.closed);
	ck_assert_uint_eq(rf_count(&f->data, WIRE_SWITCH), 0);
	ck_assert(rf_log_has(f, "onto mem failed: connection reset by the peer"));
	inject_write(&f->data, 1, 0, 5);
	rf_until(f, (rf_step(f), acked_on(&f->meta, 1)));
}
END_TEST

START_TEST(a_marker_outside_a_move_drops_the_connection)
{
	struct replfix *f = connected();
	inject_marker(&f->data);
	step(f);
	ck_assert(!f->r->connected);
	ck_assert(rf_log_has(f, "the peer sent a SWITCH marker outside a move"));
}
END_TEST

START_TEST(a_switch_hello_without_a_connection_is_refused)
{
	struct rf_opts o = {.mode = HAK_MODE_SYNC};
	struct replfix *f = rf_open(&o);
	struct tlistener *l = memtransport_listener(RF_SELF_ADDR);
	ck_assert_int_eq(memlistener_accept(l, &nd), 0);
	inject_switch_hello(f, &nd, WIRE_STREAM_DATA);
	step(f);
	ck_assert(nd.closed);
	ck_assert(rf_log_has(f, "joins a connection that is not up"));
	ck_assert(!f->r->connected);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tswitch");
	TCase *t = tcase_create("move");
	tcase_add_checked_fixture(t, NULL, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, moves_in_place_in_stream_order);
	tcase_add_test(t, backpressure_follows_the_data);
	tcase_add_test(t, a_new_stream_failing_closes_only_the_new_streams);
	tcase_add_test(t, a_marker_outside_a_move_drops_the_connection);
	tcase_add_test(t, a_switch_hello_without_a_connection_is_refused);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
