/* SPDX-License-Identifier: MIT */
/* Unit tests for the replication transport: framing over a socketpair and lazy (coalesced)
 * sends. */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/buf.h"
#include "transport/tcp.h"
#include "transport/transport.h"
#include "transport/wire.h"

struct sink {
	unsigned frames;
	uint16_t last_type;
	unsigned errors;
};

static void on_frame(void *ctx, struct tstream *s, const struct wire_hdr *h, uint8_t *payload)
{
	struct sink *k = ctx;
	(void)s;
	k->frames++;
	k->last_type = h->type;
	if (payload)
		buf_put(payload, h->len);
}

static void on_error(void *ctx, struct tstream *s, const char *why)
{
	struct sink *k = ctx;
	(void)s;
	(void)why;
	k->errors++;
}

static const struct tstream_ops ops = {.frame = on_frame, .error = on_error};

struct pair {
	struct ev_loop *loop;
	struct tstream *tx, *rx;
	struct sink tx_sink, rx_sink;
};

static void pair_open(struct pair *p)
{
	int sv[2];
	memset(p, 0, sizeof(*p));
	p->loop = ev_loop_new(EVFLAG_AUTO);
	ck_assert_ptr_nonnull(p->loop);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(tcp_stream_create(p->loop, sv[0], &ops, &p->tx_sink, &p->tx), 0);
	ck_assert_int_eq(tcp_stream_create(p->loop, sv[1], &ops, &p->rx_sink, &p->rx), 0);
}

static void pair_close(struct pair *p)
{
	tstream_close(p->tx);
	tstream_close(p->rx);
	ev_loop_destroy(p->loop);
}

/* Runs loop iterations without sleeping for about `seconds`. */
static void spin(struct pair *p, double seconds)
{
	ev_now_update(p->loop);
	double end = ev_now(p->loop) + seconds;
	for (int i = 0; i < 100000; i++) {
		ev_run(p->loop, EVRUN_NOWAIT);
		usleep(1000);
		ev_now_update(p->loop);
		if (ev_now(p->loop) >= end)
			break;
	}
}

static void send_pings(struct pair *p, unsigned n, bool lazy)
{
	uint8_t id[WIRE_ID_SIZE] = {0};
	for (unsigned i = 0; i < n; i++) {
		id[7] = (uint8_t)i;
		if (lazy)
			ck_assert_int_eq(
			    tstream_send_small_lazy(p->tx, WIRE_PING, 0, id, sizeof(id)), 0);
		else
			ck_assert_int_eq(tstream_send_small(p->tx, WIRE_PING, 0, id, sizeof(id)),
			                 0);
	}
}

START_TEST(eager_sends_go_at_once)
{
	struct pair p;
	pair_open(&p);
	send_pings(&p, 3, false);
	spin(&p, 0.02);
	ck_assert_uint_eq(p.rx_sink.frames, 3);
	ck_assert_uint_eq(p.rx_sink.last_type, WIRE_PING);
	ck_assert_uint_eq(p.rx_sink.errors + p.tx_sink.errors, 0);
	pair_close(&p);
}
END_TEST

START_TEST(lazy_without_setting_is_eager)
{
	struct pair p;
	pair_open(&p);
	send_pings(&p, 2, true);
	spin(&p, 0.02);
	ck_assert_uint_eq(p.rx_sink.frames, 2);
	pair_close(&p);
}
END_TEST

START_TEST(lazy_waits_for_the_delay)
{
	struct pair p;
	pair_open(&p);
	tstream_set_lazy(p.tx, 0.3, 1u << 20);
	send_pings(&p, 5, true);
	spin(&p, 0.1);
	/* Held: neither the delay nor the byte limit is reached. */
	ck_assert_uint_eq(p.rx_sink.frames, 0);
	ck_assert_uint_gt(tstream_queued(p.tx), 0);
	spin(&p, 0.4);
	ck_assert_uint_eq(p.rx_sink.frames, 5);
	ck_assert_uint_eq(tstream_queued(p.tx), 0);
	pair_close(&p);
}
END_TEST

START_TEST(lazy_goes_at_the_byte_limit)
{
	struct pair p;
	pair_open(&p);
	/* Each PING frame is WIRE_HDR_SIZE + 8 bytes: four of them reach the limit. */
	tstream_set_lazy(p.tx, 10.0, 4 * (WIRE_HDR_SIZE + WIRE_ID_SIZE));
	send_pings(&p, 3, true);
	spin(&p, 0.05);
	ck_assert_uint_eq(p.rx_sink.frames, 0);
	send_pings(&p, 1, true);
	spin(&p, 0.05);
	ck_assert_uint_eq(p.rx_sink.frames, 4);
	pair_close(&p);
}
END_TEST

START_TEST(eager_send_takes_lazy_ones_along)
{
	struct pair p;
	pair_open(&p);
	tstream_set_lazy(p.tx, 10.0, 1u << 20);
	send_pings(&p, 3, true);
	spin(&p, 0.05);
	ck_assert_uint_eq(p.rx_sink.frames, 0);
	send_pings(&p, 1, false);
	spin(&p, 0.05);
	/* In order, all four. */
	ck_assert_uint_eq(p.rx_sink.frames, 4);
	pair_close(&p);
}
END_TEST

START_TEST(close_with_lazy_items_queued)
{
	/* The timer must not fire on a freed stream (ASan would see it). */
	struct pair p;
	pair_open(&p);
	tstream_set_lazy(p.tx, 0.05, 1u << 20);
	send_pings(&p, 2, true);
	tstream_close(p.tx);
	p.tx = NULL;
	spin(&p, 0.1);
	ck_assert_uint_eq(p.rx_sink.frames, 0);
	pair_close(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("transport");
	TCase *t = tcase_create("lazy");
	tcase_add_test(t, eager_sends_go_at_once);
	tcase_add_test(t, lazy_without_setting_is_eager);
	tcase_add_test(t, lazy_waits_for_the_delay);
	tcase_add_test(t, lazy_goes_at_the_byte_limit);
	tcase_add_test(t, eager_send_takes_lazy_ones_along);
	tcase_add_test(t, close_with_lazy_items_queued);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
