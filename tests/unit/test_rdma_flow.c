/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the device-free half of the RDMA transport (daemon/transport/rdma_flow.h):
 * receive credits (never a send without a posted receive, no deadlock when both sides send),
 * the message header, and frames cut into messages and joined again.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/outq.h"
#include "transport/rdma_flow.h"
#include "transport/transport.h"
#ifdef HAK_HAVE_RDMA
#include "transport/rdma.h"
#endif

static char why[256];

START_TEST(credits_basic)
{
	struct rdma_flow f;
	rdma_flow_init(&f, 8);
	int sent = 0;
	while (rdma_flow_can_send_data(&f)) {
		ck_assert_uint_eq(rdma_flow_take(&f), 0);
		sent++;
	}
	/* One credit is kept for returning credits. */
	ck_assert_int_eq(sent, 7);
	ck_assert_uint_eq(f.credits, 1);
	ck_assert(!rdma_flow_wants_credit_msg(&f));
	for (int i = 0; i < 3; i++)
		rdma_flow_reposted(&f);
	ck_assert(!rdma_flow_wants_credit_msg(&f)); /* 3 < depth / 2 */
	rdma_flow_reposted(&f);
	ck_assert(rdma_flow_wants_credit_msg(&f));
	ck_assert_uint_eq(rdma_flow_take(&f), 4);
	ck_assert_uint_eq(f.credits, 0);
	ck_assert_uint_eq(f.to_return, 0);
	/* The peer cannot owe more than the 8 we used. */
	errno = 0;
	ck_assert_int_eq(rdma_flow_granted(&f, 9), -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_int_eq(rdma_flow_granted(&f, 8), 0);
	ck_assert_uint_eq(f.credits, 8);
	ck_assert_int_eq(rdma_flow_granted(&f, 1), -1);
}
END_TEST

/* One side of the simulated link: its flow, the receives it has posted, data still to send, and
 * messages it received but has not read yet (a paused reader). */
struct side {
	struct rdma_flow f;
	int posted, to_send, unread, got_data;
};

/* Messages in flight from one side to the other, in order. */
struct wire_q {
	uint32_t credits[4096];
	bool data[4096];
	int head, n;
};

static void sim_send(struct side *s, struct wire_q *q, bool data)
{
	ck_assert_uint_gt(s->f.credits, 0);
	int t = (q->head + q->n) % 4096;
	q->data[t] = data;
	q->credits[t] = rdma_flow_take(&s->f);
	q->n++;
	if (data)
		s->to_send--;
}

static void sim_arrive(struct side *r, struct side *peer, struct wire_q *q)
{
	ck_assert_int_gt(r->posted, 0); /* a SEND never finds no receive posted */
	r->posted--;
	ck_assert_int_eq(rdma_flow_granted(&r->f, q->credits[q->head]), 0);
	if (q->data[q->head])
		r->got_data++;
	r->unread++;
	q->head = (q->head + 1) % 4096;
	q->n--;
	(void)peer;
}

static bool sim_try_send(struct side *s, struct wire_q *q)
{
	if (s->to_send && rdma_flow_can_send_data(&s->f)) {
		sim_send(s, q, true);
		return true;
	}
	if (rdma_flow_wants_credit_msg(&s->f)) {
		sim_send(s, q, false);
		return true;
	}
	return false;
}

static bool sim_read(struct side *s)
{
	if (!s->unread)
		return false;
	s->unread--;
	s->posted++;
	rdma_flow_reposted(&s->f);
	return true;
}

/* Both sides send a lot at once, the order of events random: every data message arrives, no
 * receive is overrun, and the link never stalls with data left (each step some event can run). */
START_TEST(credits_no_deadlock)
{
	const int depth = 6;
	srandom(1234 + (unsigned)_i);
	struct side s[2];
	struct wire_q q[2];
	memset(q, 0, sizeof(q));
	for (int i = 0; i < 2; i++) {
		rdma_flow_init(&s[i].f, depth);
		s[i].posted = depth;
		s[i].to_send = 500 + (int)(random() % 500);
		s[i].unread = s[i].got_data = 0;
	}
	int want[2] = {s[1].to_send, s[0].to_send}; /* what each side should receive */
	for (int step = 0; step < 100000; step++) {
		bool progress = false;
		/* Try the events in a random order until one runs. */
		int first = (int)(random() % 6);
		for (int k = 0; k < 6 && !progress; k++) {
			int e = (first + k) % 6, i = e % 2;
			switch (e / 2) {
			case 0:
				progress = sim_try_send(&s[i], &q[i]);
				break;
			case 1:
				if (q[i].n) {
					sim_arrive(&s[1 - i], &s[i], &q[i]);
					progress = true;
				}
				break;
			default:
				progress = sim_read(&s[i]);
				break;
			}
		}
		if (!progress)
			break;
	}
	ck_assert_int_eq(s[0].to_send, 0);
	ck_assert_int_eq(s[1].to_send, 0);
	ck_assert_int_eq(s[0].got_data, want[0]);
	ck_assert_int_eq(s[1].got_data, want[1]);
	ck_assert_int_eq(q[0].n + q[1].n, 0);
}
END_TEST

START_TEST(msg_header)
{
	uint8_t m[RDMA_MSG_HDR + 5];
	uint32_t credits, len;
	rdma_msg_encode(m, 17, 5);
	ck_assert_int_eq(rdma_msg_decode(m, sizeof(m), &credits, &len, why, sizeof(why)), 0);
	ck_assert_uint_eq(credits, 17);
	ck_assert_uint_eq(len, 5);
	ck_assert_int_eq(rdma_msg_decode(m, sizeof(m) - 1, &credits, &len, why, sizeof(why)), -1);
	ck_assert_str_eq(why, "an RDMA message of 12 bytes announces 5 bytes of data");
	ck_assert_int_eq(rdma_msg_decode(m, 3, &credits, &len, why, sizeof(why)), -1);
	ck_assert_str_eq(why, "an RDMA message of 3 bytes is shorter than its 8-byte header");
	m[0] ^= 1;
	ck_assert_int_eq(rdma_msg_decode(m, sizeof(m), &credits, &len, why, sizeof(why)), -1);
	ck_assert_str_eq(why, "an RDMA message has the magic 0x4952 instead of 0x4852");
}
END_TEST

static int sent_calls;
static void count_sent(struct outq_item *it, int err)
{
	ck_assert_int_eq(err, 0);
	sent_calls++;
	(void)it;
}

/* Frames through pack (cut at cap) and rx_feed: the same frames, payloads byte for byte. */
static void roundtrip(size_t cap)
{
	enum { BIG = 200 * 1024 + WIRE_IO_SIZE };
	uint8_t *big = malloc(BIG);
	for (size_t i = 0; i < BIG; i++)
		big[i] = (uint8_t)(i * 7 + 3);
	struct outq q = {0};
	struct outq_item items[3];
	memset(items, 0, sizeof(items));
	uint8_t ping[WIRE_ID_SIZE] = {1, 2, 3, 4, 5, 6, 7, 8};
	/* PING, DATA of BIG bytes (header inline, payload borrowed), BARRIER_ACK. */
	wire_hdr_encode(items[0].hdr, WIRE_PING, 0, WIRE_ID_SIZE);
	memcpy(items[0].hdr + WIRE_HDR_SIZE, ping, WIRE_ID_SIZE);
	items[0].hdr_len = WIRE_HDR_SIZE + WIRE_ID_SIZE;
	wire_hdr_encode(items[1].hdr, WIRE_DATA, 0, BIG);
	items[1].hdr_len = WIRE_HDR_SIZE;
	items[1].data = big;
	items[1].data_len = BIG;
	wire_hdr_encode(items[2].hdr, WIRE_BARRIER_ACK, 0, WIRE_ID_SIZE);
	memset(items[2].hdr + WIRE_HDR_SIZE, 9, WIRE_ID_SIZE);
	items[2].hdr_len = WIRE_HDR_SIZE + WIRE_ID_SIZE;
	sent_calls = 0;
	for (int i = 0; i < 3; i++) {
		items[i].sent = count_sent;
		outq_push(&q, &items[i]);
	}
	uint8_t *msg = malloc(cap);
	struct rdma_rx rx = {0};
	struct wire_hdr got[3];
	uint8_t *payload[3] = {0};
	int frames = 0, msgs = 0;
	while (q.head) {
		size_t n = rdma_pack(&q, msg, cap);
		ck_assert_uint_gt(n, 0);
		ck_assert_uint_le(n, cap);
		msgs++;
		size_t pos = 0;
		while (pos < n) {
			bool done;
			long k = rdma_rx_feed(&rx, msg + pos, n - pos, 0, &done, &got[frames],
			                      &payload[frames], why, sizeof(why));
			ck_assert_int_gt(k, 0);
			pos += (size_t)k;
			if (done)
				frames++;
		}
	}
	ck_assert_int_eq(sent_calls, 3);
	ck_assert_int_eq(frames, 3);
	ck_assert_uint_eq(q.bytes, 0);
	ck_assert_int_eq(msgs, (int)((BIG + 3 * WIRE_HDR_SIZE + 2 * WIRE_ID_SIZE + cap - 1) / cap));
	ck_assert_uint_eq(got[0].type, WIRE_PING);
	ck_assert_mem_eq(payload[0], ping, WIRE_ID_SIZE);
	ck_assert_uint_eq(got[1].type, WIRE_DATA);
	ck_assert_uint_eq(got[1].len, BIG);
	ck_assert_mem_eq(payload[1], big, BIG);
	ck_assert_uint_eq(got[2].type, WIRE_BARRIER_ACK);
	ck_assert_uint_eq(payload[2][7], 9);
	for (int i = 0; i < 3; i++)
		buf_put(payload[i], got[i].len);
	free(msg);
	free(big);
}

START_TEST(fragments_full_buffers)
{
	roundtrip(RDMA_MSG_SIZE - RDMA_MSG_HDR);
}
END_TEST

START_TEST(fragments_split_headers)
{
	/* 5-byte messages cut every header in three. */
	roundtrip(5);
}
END_TEST

START_TEST(rx_rejects)
{
	struct rdma_rx rx = {0};
	uint8_t h[WIRE_HDR_SIZE];
	bool done;
	struct wire_hdr hdr;
	uint8_t *p;
	wire_hdr_encode(h, WIRE_DATA, 0, 1000 + WIRE_IO_SIZE);
	/* Over the limit of a connection not yet authenticated: nothing allocated. */
	ck_assert_int_eq(rdma_rx_feed(&rx, h, sizeof(h), 512, &done, &hdr, &p, why, sizeof(why)),
	                 -1);
	ck_assert_str_eq(
	    why, "a DATA frame of 1020 bytes exceeds the 512 bytes this connection may send yet");
	rdma_rx_reset(&rx);
	h[0] ^= 0xff;
	ck_assert_int_eq(rdma_rx_feed(&rx, h, sizeof(h), 0, &done, &hdr, &p, why, sizeof(why)), -1);
	rdma_rx_reset(&rx);
	/* A half-received frame is released by reset (ASan would see a leak). */
	h[0] ^= 0xff;
	ck_assert_int_eq(rdma_rx_feed(&rx, h, sizeof(h), 0, &done, &hdr, &p, why, sizeof(why)),
	                 (long)sizeof(h));
	ck_assert(!done);
	ck_assert_ptr_nonnull(rx.payload);
	rdma_rx_reset(&rx);
	ck_assert_ptr_null(rx.payload);
}
END_TEST

/* The transport is there exactly when the build found rdma-core. */
START_TEST(transport_by_name)
{
	errno = 0;
#ifdef HAK_HAVE_RDMA
	ck_assert_ptr_eq(transport_find("rdma"), &transport_rdma);
	ck_assert_str_eq(transport_rdma.name, "rdma");
#else
	ck_assert_ptr_null(transport_find("rdma"));
	ck_assert_int_eq(errno, ENOENT);
#endif
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rdma_flow");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, credits_basic);
	tcase_add_loop_test(tc, credits_no_deadlock, 0, 20);
	tcase_add_test(tc, msg_header);
	tcase_add_test(tc, fragments_full_buffers);
	tcase_add_test(tc, fragments_split_headers);
	tcase_add_test(tc, rx_rejects);
	tcase_add_test(tc, transport_by_name);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
