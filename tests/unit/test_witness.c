/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the witness: the codec (round trip, every single-bit flip, wrong key, bad
 * fields under a valid MAC), the grant decision as a table (grant, renew, deny during the lease,
 * grant after expiry, release, stale and replayed requests, foreign clusters), the address
 * parser, and a client against a loopback witness that grants, is seen holding, and releases.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cluster/heartbeat.h"
#include "cluster/witness.h"
#include "lib/clock.h"

static const char key_text[] = "correct horse battery staple 42";

static struct key_bytes test_key(const char *text)
{
	struct key_bytes k;
	char err[256];

	ck_assert_int_eq(keyfile_parse((const uint8_t *)text, strlen(text), "heartbeat key", &k,
	                               err, sizeof(err)),
	                 0);
	return k;
}

static struct wit_msg sample(void)
{
	return (struct wit_msg){.type = WIT_REPLY,
	                        .flags = WIT_F_GRANTED,
	                        .cluster_id = 0xc1057e12,
	                        .node_id = 2,
	                        .incarnation = 0x0102030405060708ull,
	                        .seq = 77,
	                        .holder = 2,
	                        .lease_ms = 1999};
}

START_TEST(codec_roundtrip_and_flips)
{
	struct key_bytes k = test_key(key_text), other = test_key("another key of enough length");
	struct wit_msg m = sample(), d;
	uint8_t pkt[WIT_PKT_SIZE];

	ck_assert_int_eq(wit_encode(&m, &k, pkt), 0);
	ck_assert_int_eq(wit_decode(pkt, sizeof(pkt), &k, &d), HB_OK);
	ck_assert_int_eq(d.type, WIT_REPLY);
	ck_assert_int_eq(d.flags, WIT_F_GRANTED);
	ck_assert_uint_eq(d.cluster_id, 0xc1057e12);
	ck_assert_uint_eq(d.node_id, 2);
	ck_assert_uint_eq(d.incarnation, 0x0102030405060708ull);
	ck_assert_uint_eq(d.seq, 77);
	ck_assert_uint_eq(d.holder, 2);
	ck_assert_uint_eq(d.lease_ms, 1999);
	ck_assert_int_eq(wit_decode(pkt, sizeof(pkt), &other, &d), HB_BAD_MAC);
	ck_assert_int_eq(wit_decode(pkt, sizeof(pkt) - 1, &k, &d), HB_BAD_SIZE);
	for (unsigned bit = 0; bit < WIT_PKT_SIZE * 8; bit++) {
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		ck_assert_msg(wit_decode(pkt, sizeof(pkt), &k, &d) != HB_OK,
		              "bit %u flipped was accepted", bit);
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
}
END_TEST

START_TEST(codec_fields_checked)
{
	struct key_bytes k = test_key(key_text);
	struct wit_msg d;
	uint8_t pkt[WIT_PKT_SIZE];
	struct {
		struct wit_msg m;
		const char *what;
	} bad[] = {
	    {{.type = 3, .node_id = 1}, "type 3"},
	    {{.type = WIT_REQUEST, .node_id = 0}, "node 0"},
	    {{.type = WIT_REQUEST, .node_id = 3}, "node 3"},
	    {{.type = WIT_REQUEST, .node_id = 1, .flags = WIT_F_ALL + 1}, "unknown flag"},
	    {{.type = WIT_REPLY, .node_id = 1, .holder = 3}, "holder 3"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(wit_encode(&bad[i].m, &k, pkt), 0);
		ck_assert_msg(wit_decode(pkt, sizeof(pkt), &k, &d) == HB_BAD_FIELD, "%s accepted",
		              bad[i].what);
	}
}
END_TEST

/* One step of the grant table. */
struct step {
	int64_t now;
	uint32_t node;
	uint64_t inc, seq;
	bool want;
	enum wit_decision want_d;
	uint32_t want_holder; /* after the step */
	uint32_t want_lease;  /* in the reply */
	bool granted;         /* the reply's GRANTED flag */
};

START_TEST(grant_table)
{
	const int64_t lease = 2000;
	/* node 1 = alpha, node 2 = beta; incarnations 100 and 200 */
	static const struct step steps[] = {
	    {0, 2, 200, 1, false, WIT_QUERY, 0, 0, false},       /* nobody holds it */
	    {10, 1, 100, 1, true, WIT_GRANT, 1, 2000, true},     /* first asker wins */
	    {20, 2, 200, 2, true, WIT_DENY, 1, 1990, false},     /* denied during the lease */
	    {500, 1, 100, 2, true, WIT_RENEW, 1, 2000, true},    /* the holder renews */
	    {2400, 2, 200, 3, true, WIT_DENY, 1, 100, false},    /* the renewal counted */
	    {2400, 2, 200, 3, true, WIT_DROP, 1, 0, false},      /* replayed: no answer */
	    {2400, 2, 200, 2, true, WIT_DROP, 1, 0, false},      /* stale: no answer */
	    {2501, 2, 200, 4, true, WIT_GRANT, 2, 2000, true},   /* expired without renewal */
	    {2600, 1, 100, 3, true, WIT_DENY, 2, 1901, false},   /* the old holder is denied */
	    {2700, 1, 99, 50, true, WIT_DROP, 2, 0, false},      /* an older incarnation */
	    {2800, 1, 101, 1, false, WIT_QUERY, 2, 1701, false}, /* restarted, does not want */
	    {2900, 2, 200, 5, false, WIT_RELEASE, 0, 0, false},  /* the holder gives it up */
	    {2950, 1, 101, 2, true, WIT_GRANT, 1, 2000, true},   /* free again at once */
	    {3000, 2, 201, 1, true, WIT_DENY, 1, 1950, false},   /* restarted peer: still denied */
	};
	struct wit_state s = {.cluster_id = 7};

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		const struct step *t = &steps[i];
		struct wit_msg req = {.type = WIT_REQUEST,
		                      .flags = t->want ? WIT_F_WANT : 0,
		                      .cluster_id = 7,
		                      .node_id = t->node,
		                      .incarnation = t->inc,
		                      .seq = t->seq},
		               rep = {0};
		enum wit_decision d = wit_grant(&s, &req, t->now, lease, &rep);

		ck_assert_msg(d == t->want_d, "step %zu: %s, expected %s", i, wit_decision_name(d),
		              wit_decision_name(t->want_d));
		ck_assert_msg(s.holder == t->want_holder, "step %zu: holder %u, expected %u", i,
		              s.holder, t->want_holder);
		if (d == WIT_DROP)
			continue;
		ck_assert_int_eq(rep.type, WIT_REPLY);
		ck_assert_uint_eq(rep.node_id, t->node);
		ck_assert_uint_eq(rep.incarnation, t->inc);
		ck_assert_uint_eq(rep.seq, t->seq);
		ck_assert_uint_eq(rep.holder, t->want_holder);
		ck_assert_msg(rep.lease_ms == t->want_lease, "step %zu: lease %u, expected %u", i,
		              rep.lease_ms, t->want_lease);
		ck_assert_int_eq(!!(rep.flags & WIT_F_GRANTED), t->granted);
	}
}
END_TEST

/* The primary keeps the volume when only the pair's links break: while it asks (WIT_F_PRIMARY),
 * its peer is denied; half a lease after its last request, the peer may have the vote. */
START_TEST(grant_prefers_primary)
{
	const int64_t lease = 2000;
	struct wit_state s = {.cluster_id = 7};
	struct wit_msg rep;
	uint64_t seq1 = 0, seq2 = 0;
#define ASK(node, t, f)                                                                            \
	wit_grant(&s,                                                                              \
	          &(struct wit_msg){.type = WIT_REQUEST,                                           \
	                            .flags = (f),                                                  \
	                            .cluster_id = 7,                                               \
	                            .node_id = (node),                                             \
	                            .incarnation = 9,                                              \
	                            .seq = (node) == 1 ? ++seq1 : ++seq2},                         \
	          (t), lease, &rep)

	ck_assert_int_eq(ASK(1, 0, WIT_F_PRIMARY), WIT_QUERY); /* alpha primary, pair fine */
	ck_assert_int_eq(ASK(2, 200, WIT_F_WANT), WIT_DENY);   /* beta lost alpha first */
	ck_assert_uint_eq(s.holder, 0);
	ck_assert_int_eq(ASK(1, 250, WIT_F_PRIMARY | WIT_F_WANT), WIT_GRANT);
	ck_assert_int_eq(ASK(2, 900, WIT_F_WANT), WIT_DENY); /* the lease now */
	/* alpha dies: its lease runs out, and beta then gets the vote */
	ck_assert_int_eq(ASK(2, 2251, WIT_F_WANT), WIT_GRANT);
	ck_assert_uint_eq(s.holder, 2);
	ck_assert_int_eq(ASK(2, 2500, WIT_F_PRIMARY | WIT_F_WANT), WIT_RENEW);
	ck_assert_int_eq(ASK(2, 2600, WIT_F_PRIMARY), WIT_RELEASE); /* the pair hears itself */
	/* beta primary stops asking (dead, or cut from the witness): 1000 ms later alpha may */
	ck_assert_int_eq(ASK(1, 3500, WIT_F_WANT), WIT_DENY);
	ck_assert_int_eq(ASK(1, 3601, WIT_F_WANT), WIT_GRANT);
	ck_assert_int_eq(ASK(1, 3700, 0), WIT_RELEASE);
	/* a primary that says it is no longer primary stops holding its peer back at once */
	ck_assert_int_eq(ASK(2, 3800, WIT_F_PRIMARY), WIT_QUERY);
	ck_assert_int_eq(ASK(2, 3900, 0), WIT_QUERY);
	ck_assert_int_eq(ASK(1, 3950, WIT_F_WANT), WIT_GRANT);
	ck_assert_int_eq(ASK(1, 4000, 0), WIT_RELEASE);
	/* an Outdated node's claim to be primary holds nobody back */
	s.outdated = 2;
	ck_assert_int_eq(ASK(2, 4100, WIT_F_PRIMARY), WIT_QUERY);
	ck_assert_int_eq(ASK(1, 4200, WIT_F_WANT), WIT_GRANT);
#undef ASK
}
END_TEST

START_TEST(grant_refuses_foreign)
{
	struct wit_state s = {.cluster_id = 7};
	struct wit_msg rep, req = {.type = WIT_REQUEST,
	                           .flags = WIT_F_WANT,
	                           .cluster_id = 8,
	                           .node_id = 1,
	                           .incarnation = 1,
	                           .seq = 1};

	ck_assert_int_eq(wit_grant(&s, &req, 0, 1000, &rep), WIT_DROP); /* other cluster */
	req.cluster_id = 7;
	req.type = WIT_REPLY; /* a reflected reply is not a request */
	ck_assert_int_eq(wit_grant(&s, &req, 0, 1000, &rep), WIT_DROP);
	req.type = WIT_REQUEST;
	ck_assert_int_eq(wit_grant(&s, &req, 0, 1000, &rep), WIT_GRANT);
	ck_assert_uint_eq(s.holder, 1);
}
END_TEST

START_TEST(grant_quiet_after_start)
{
	struct wit_state s = {.cluster_id = 7, .quiet_until = 1000};
	struct wit_msg rep, req = {.type = WIT_REQUEST,
	                           .flags = WIT_F_WANT,
	                           .cluster_id = 7,
	                           .node_id = 2,
	                           .incarnation = 1,
	                           .seq = 1};

	ck_assert_int_eq(wit_grant(&s, &req, 999, 1000, &rep), WIT_DENY);
	ck_assert_uint_eq(s.holder, 0);
	ck_assert_uint_eq(rep.holder, 0);
	req.seq = 2;
	ck_assert_int_eq(wit_grant(&s, &req, 1000, 1000, &rep), WIT_GRANT);
	ck_assert_uint_eq(s.holder, 2);
}
END_TEST

/* One request of node at now with flags; its decision, the reply in *rep. */
static enum wit_decision ask(struct wit_state *s, uint32_t node, uint64_t *seq, int64_t now,
                             uint16_t flags, struct wit_msg *rep)
{
	struct wit_msg req = {.type = WIT_REQUEST,
	                      .flags = flags,
	                      .cluster_id = 7,
	                      .node_id = node,
	                      .incarnation = 100 * node,
	                      .seq = ++*seq};
	return wit_grant(s, &req, now, 1000, rep);
}

/*
 * The Outdated marks: a primary outdates its peer, who is then denied the vote and told so in
 * every reply; an Outdated node cannot outdate or clear anybody; the holder of a running lease
 * cannot be outdated; the mark goes only when the node that is current vouches for its peer.
 */
START_TEST(grant_outdated_marks)
{
	struct wit_state s = {.cluster_id = 7};
	struct wit_msg rep;
	uint64_t q1 = 0, q2 = 0;

	/* alpha (1) lost beta (2): it asks to outdate it, and gets the confirmation */
	ck_assert_int_eq(ask(&s, 1, &q1, 0, WIT_F_OUTDATE_PEER, &rep), WIT_QUERY);
	ck_assert_uint_eq(s.outdated, 2);
	ck_assert(rep.flags & WIT_F_PEER_OUTDATED);
	ck_assert(!(rep.flags & WIT_F_OUTDATED));
	/* beta asks for the vote: denied, and told it is Outdated, with nobody holding it */
	ck_assert_int_eq(ask(&s, 2, &q2, 10, WIT_F_WANT, &rep), WIT_DENY);
	ck_assert_uint_eq(s.holder, 0);
	ck_assert(rep.flags & WIT_F_OUTDATED);
	ck_assert(!(rep.flags & WIT_F_GRANTED));
	/* an Outdated beta can neither outdate alpha nor clear its own mark */
	ck_assert_int_eq(ask(&s, 2, &q2, 20, WIT_F_OUTDATE_PEER, &rep), WIT_QUERY);
	ck_assert_int_eq(ask(&s, 2, &q2, 30, WIT_F_PEER_CURRENT, &rep), WIT_QUERY);
	ck_assert_uint_eq(s.outdated, 2);
	/* still denied long after any lease: the mark does not expire */
	ck_assert_int_eq(ask(&s, 2, &q2, 100000, WIT_F_WANT, &rep), WIT_DENY);
	/* alpha vouches for beta after the resync: the mark goes, beta may get the vote */
	ck_assert_int_eq(ask(&s, 1, &q1, 100010, WIT_F_PEER_CURRENT, &rep), WIT_QUERY);
	ck_assert_uint_eq(s.outdated, 0);
	ck_assert(!(rep.flags & WIT_F_PEER_OUTDATED));
	ck_assert_int_eq(ask(&s, 2, &q2, 100020, WIT_F_WANT, &rep), WIT_GRANT);
	/* beta holds a running lease: alpha's outdate request is refused (beta may be promoting) */
	ck_assert_int_eq(ask(&s, 1, &q1, 100030, WIT_F_OUTDATE_PEER | WIT_F_WANT, &rep), WIT_DENY);
	ck_assert_uint_eq(s.outdated, 0);
	ck_assert(!(rep.flags & WIT_F_PEER_OUTDATED));
	/* once the lease expired, it is granted */
	ck_assert_int_eq(ask(&s, 1, &q1, 101100, WIT_F_OUTDATE_PEER, &rep), WIT_QUERY);
	ck_assert_uint_eq(s.outdated, 2);
}
END_TEST

START_TEST(addr_parse)
{
	struct sockaddr_storage ss;
	socklen_t len;

	ck_assert_int_eq(wit_addr_parse("192.0.2.30:7791", &ss, &len), 0);
	ck_assert_int_eq(ss.ss_family, AF_INET);
	ck_assert_int_eq(wit_addr_parse("[2001:db8::1]:7791", &ss, &len), 0);
	ck_assert_int_eq(ss.ss_family, AF_INET6);
	const char *bad[] = {"192.0.2.30", "192.0.2.30:0", "192.0.2.30:70000", "host:1",
	                     ":7791",      "[::1:7791",    "2001:db8::1:x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(wit_addr_parse(bad[i], &ss, &len) < 0 && errno == EINVAL,
		              "'%s' accepted", bad[i]);
}
END_TEST

/* ---- loopback: a witness socket driven by the test with wit_grant, and a real client ---- */

struct fake_witness {
	int fd;
	struct key_bytes key;
	struct wit_state st;
	volatile bool stop;
	unsigned answered;
};

static void *fake_witness_run(void *arg)
{
	struct fake_witness *w = arg;

	while (!w->stop) {
		uint8_t buf[WIT_PKT_SIZE];
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		struct wit_msg req, rep;
		ssize_t n = recvfrom(w->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		if (n < 0 || wit_decode(buf, (size_t)n, &w->key, &req) != HB_OK ||
		    wit_grant(&w->st, &req, clock_mono_ms(), 1000, &rep) == WIT_DROP)
			continue;
		if (wit_encode(&rep, &w->key, buf) == 0 &&
		    sendto(w->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, fl) > 0)
			w->answered++;
	}
	return NULL;
}

static void noop_notify(void *arg)
{
	(*(unsigned *)arg)++;
}

/* Run the main loop until cond holds on the client's state or timeout seconds pass. */
static bool wait_state(struct ev_loop *loop, struct wit_client *c, bool reachable, bool holds,
                       double timeout)
{
	struct wit_client_state s;
	double end = ev_time() + timeout;

	while (ev_time() < end) {
		ev_run(loop, EVRUN_NOWAIT);
		wit_client_state(c, &s);
		if (s.reachable == reachable && s.holds == holds)
			return true;
		usleep(10000);
	}
	return false;
}

START_TEST(client_loopback)
{
	struct fake_witness w = {.key = test_key(key_text), .st = {.cluster_id = 9}};
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
	socklen_t al = sizeof(a);
	struct timeval tv = {.tv_usec = 50000};
	struct hb_config hc = {.cluster_id = 9,
	                       .node_id = 2,
	                       .peer_id = 1,
	                       .interval = 0.05,
	                       .deadtime = 0.5,
	                       .key = w.key};
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct wit_client_state s;
	char addr[64], err[256];
	unsigned notes = 0;
	pthread_t th;

	w.fd = socket(AF_INET, SOCK_DGRAM, 0);
	ck_assert_int_ge(w.fd, 0);
	ck_assert_int_eq(bind(w.fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(w.fd, (struct sockaddr *)&a, &al), 0);
	setsockopt(w.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(a.sin_port));
	ck_assert_int_eq(pthread_create(&th, NULL, fake_witness_run, &w), 0);

	struct wit_client *c =
	    wit_client_start(&hc, addr, loop, noop_notify, &notes, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert(wait_state(loop, c, true, false, 2.0)); /* reachable, not holding */
	wit_client_want(c, true);
	ck_assert(wait_state(loop, c, true, true, 2.0)); /* granted */
	wit_client_state(c, &s);
	ck_assert_uint_eq(s.holder, 2);
	ck_assert_uint_eq(w.st.holder, 2);
	wit_client_want(c, false);
	ck_assert(wait_state(loop, c, true, false, 2.0)); /* released */
	ck_assert_uint_eq(w.st.holder, 0);
	wit_client_want(c, true);
	ck_assert(wait_state(loop, c, true, true, 2.0));
	/* the witness goes silent: unreachable after deadtime, and no vote without it */
	w.stop = true;
	pthread_join(th, NULL);
	ck_assert(wait_state(loop, c, false, false, 2.0));
	ck_assert_uint_gt(notes, 2);
	wit_client_stop(c);
	close(w.fd);
	ev_loop_destroy(loop);
}
END_TEST

START_TEST(client_bad_address)
{
	struct hb_config hc = {.cluster_id = 9, .node_id = 1, .interval = 0.05, .deadtime = 0.5};
	char err[256] = "";

	hc.key = test_key(key_text);
	ck_assert_ptr_null(
	    wit_client_start(&hc, "nowhere", EV_DEFAULT, NULL, NULL, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "witness-address"));
}
END_TEST

static Suite *witness_suite(void)
{
	Suite *s = suite_create("witness");
	TCase *tc = tcase_create("pure");

	tcase_add_test(tc, codec_roundtrip_and_flips);
	tcase_add_test(tc, codec_fields_checked);
	tcase_add_test(tc, grant_table);
	tcase_add_test(tc, grant_prefers_primary);
	tcase_add_test(tc, grant_refuses_foreign);
	tcase_add_test(tc, grant_quiet_after_start);
	tcase_add_test(tc, grant_outdated_marks);
	tcase_add_test(tc, addr_parse);
	suite_add_tcase(s, tc);
	tc = tcase_create("runtime");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, client_loopback);
	tcase_add_test(tc, client_bad_address);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(witness_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
