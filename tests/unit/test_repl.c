/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the connection and handshake (repl/repl.c), driven without sockets through the
 * memory transport (support/replfix.h): the accepting side, the handshake's time limit.
 */
#include <check.h>

#include "support/replfix.h"

static void teardown(void)
{
	rf_close();
}

/* The acceptor waits a whole handshake time limit (at least 2 s) for the second stream's HELLO,
 * as the connector does, and then gives up with a log line. */
START_TEST(acceptor_waits_for_the_second_hello)
{
	struct rf_opts o = {.mode = HAK_MODE_SYNC};
	struct replfix *f = rf_open(&o);
	struct wire_hello h;
	struct tlistener *l = memtransport_listener(RF_SELF_ADDR);
	ck_assert_ptr_nonnull(l);
	rf_hello(f, &h);
	ck_assert_int_eq(memlistener_accept(l, &f->data), 0);
	ck_assert_int_eq(memlistener_accept(l, &f->meta), 0);
	h.stream = WIRE_STREAM_DATA;
	rf_inject_hello(&f->data, &h);
	rf_run_for(f, 1.0); /* a meta stream's SYN retransmit takes 1 s */
	ck_assert(!f->data.closed);
	ck_assert(!rf_log_has(f, "the handshake did not finish"));
	h.stream = WIRE_STREAM_META;
	rf_inject_hello(&f->meta, &h);
	rf_step(f);
	ck_assert(f->r->connected);
	ck_assert_int_eq(repl_link_state(f->r), LINK_CONNECTED);
}
END_TEST

START_TEST(acceptor_gives_up_on_a_half_handshake)
{
	struct rf_opts o = {.mode = HAK_MODE_SYNC};
	struct replfix *f = rf_open(&o);
	struct wire_hello h;
	struct tlistener *l = memtransport_listener(RF_SELF_ADDR);
	rf_hello(f, &h);
	ck_assert_int_eq(memlistener_accept(l, &f->data), 0);
	h.stream = WIRE_STREAM_DATA;
	rf_inject_hello(&f->data, &h);
	rf_until(f, f->data.closed);
	ck_assert(rf_log_has(f, "the handshake did not finish"));
	ck_assert(!f->r->connected);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("repl");
	TCase *t = tcase_create("handshake");
	tcase_add_checked_fixture(t, NULL, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, acceptor_waits_for_the_second_hello);
	tcase_add_test(t, acceptor_gives_up_on_a_half_handshake);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
