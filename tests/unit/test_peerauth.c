/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the replication link's peer authentication (transport/peerauth.h), over the
 * in-memory transport: the test plays the other end frame by frame. Both sides complete a good
 * exchange and only then hand the stream over; a wrong key, a reflected challenge, a frame out
 * of turn, an oversized frame and silence are each refused and never reach the owner; a
 * recorded answer does not work on a new connection; a listener keeps at most max_per_source
 * connections from one address (the oldest goes).
 */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/buf.h"
#include "support/memtransport.h"
#include "transport/peerauth.h"
#include "transport/transport.h"
#include "transport/wire.h"

#define ADDR "192.0.2.2:7789"

static struct ev_loop *loop;
static struct tauth beta_auth, alpha_auth, wrong_auth;

/* What the owner (replication) saw. */
static struct {
	struct tstream *accepted, *done_s;
	int done_err, n_accepted, n_done, frames;
	uint16_t last_type;
} seen;

static void own_frame(void *ctx, struct tstream *s, const struct wire_hdr *h, uint8_t *payload)
{
	(void)ctx;
	(void)s;
	seen.frames++;
	seen.last_type = h->type;
	buf_put(payload, h->len);
}

static void own_error(void *ctx, struct tstream *s, const char *why)
{
	(void)ctx;
	(void)why;
	tstream_close(s);
}

static const struct tstream_ops own_ops = {own_frame, own_error};

static void on_accepted(void *ctx, struct tlistener *l, struct tstream *s)
{
	(void)ctx;
	(void)l;
	seen.accepted = s;
	seen.n_accepted++;
}

static void on_done(void *ctx, struct tconnect *c, struct tstream *s, int err)
{
	(void)ctx;
	(void)c;
	seen.done_s = s;
	seen.done_err = err;
	seen.n_done++;
}

static void key_of(struct key_bytes *k, const char *text)
{
	k->len = strlen(text);
	memcpy(k->bytes, text, k->len);
}

static void setup(void)
{
	struct key_bytes k, other;
	key_of(&k, "a shared secret of some length");
	key_of(&other, "another secret, not the pair's");
	loop = ev_loop_new(EVFLAG_AUTO);
	peerauth_init(&beta_auth, &k, "beta", "alpha", "db");
	peerauth_init(&alpha_auth, &k, "alpha", "beta", "db");
	peerauth_init(&wrong_auth, &other, "alpha", "beta", "db");
	memset(&seen, 0, sizeof(seen));
}

static void teardown(void)
{
	ev_loop_destroy(loop);
}

static struct tlistener *listen_beta(void)
{
	struct tlisten_params p = {.loop = loop,
	                           .auth = &beta_auth,
	                           .addr = ADDR,
	                           .ops = &own_ops,
	                           .accepted = on_accepted};
	struct tlistener *l = NULL;
	ck_assert_int_eq(tlistener_open(&memtransport, &p, &l), 0);
	return l;
}

/* The frame the module sent last on w, which must be of type. */
static const struct mem_frame *last_sent(struct memwire *w, uint16_t type)
{
	memwire_flush(w);
	ck_assert_uint_ge(w->n_frames, 1);
	const struct mem_frame *f = &w->frames[w->n_frames - 1];
	ck_assert_uint_eq(f->hdr.type, type);
	return f;
}

/* Accept a connection at beta's listener and read beta's challenge nonce. */
static void accept_one(struct memwire *w, uint8_t na[WIRE_AUTH_NONCE])
{
	uint8_t role;
	char err[100];
	ck_assert_int_eq(memlistener_accept(memtransport_listener(ADDR), w), 0);
	const struct mem_frame *f = last_sent(w, WIRE_AUTH_CHALLENGE);
	ck_assert_int_eq(peerauth_chal_decode(f->payload, f->hdr.len, &role, na, err, sizeof(err)),
	                 0);
	ck_assert_uint_eq(role, 1);
}

static void send_chal(struct memwire *w, uint8_t role, const uint8_t nonce[WIRE_AUTH_NONCE])
{
	uint8_t c[WIRE_AUTH_CHAL_SIZE];
	peerauth_chal_encode(c, role, nonce);
	memwire_inject(w, WIRE_AUTH_CHALLENGE, 0, c, sizeof(c));
}

START_TEST(acceptor_good_exchange)
{
	struct tlistener *l = listen_beta();
	struct memwire w = {0};
	uint8_t na[WIRE_AUTH_NONCE], nc[WIRE_AUTH_NONCE], mac[WIRE_AUTH_MAC_SIZE];
	memset(nc, 0x5a, sizeof(nc));
	accept_one(&w, na);
	send_chal(&w, 0, nc);
	memwire_flush(&w);
	ck_assert_uint_eq(w.n_frames, 1); /* the acceptor answers only after our proof */
	peerauth_mac(&alpha_auth, 0, na, nc, "alpha", "beta", mac);
	memwire_inject(&w, WIRE_AUTH_RESPONSE, 0, mac, sizeof(mac));
	ck_assert_int_eq(seen.n_accepted, 1);
	ck_assert_ptr_eq(seen.accepted, w.s);
	const struct mem_frame *f = last_sent(&w, WIRE_AUTH_RESPONSE);
	peerauth_mac(&alpha_auth, 1, nc, na, "beta", "alpha", mac);
	ck_assert_mem_eq(f->payload, mac, sizeof(mac));
	/* From now on frames go to the owner, of any size. */
	uint8_t big[4096] = {0};
	memwire_inject(&w, WIRE_DATA, 0, big, sizeof(big));
	ck_assert_int_eq(seen.frames, 1);
	ck_assert_uint_eq(seen.last_type, WIRE_DATA);
	ck_assert_uint_eq(beta_auth.refused, 0);
	tstream_close(seen.accepted);
	tlistener_close(l);
	memwire_free(&w);
}
END_TEST

/* Each bad answer is refused; the owner never hears of the connection. */
static void refused_case(int which)
{
	struct tlistener *l = listen_beta();
	struct memwire w = {0};
	uint8_t na[WIRE_AUTH_NONCE], nc[WIRE_AUTH_NONCE], mac[WIRE_AUTH_MAC_SIZE];
	memset(nc, 0x11, sizeof(nc));
	accept_one(&w, na);
	switch (which) {
	case 0: /* the wrong key */
		send_chal(&w, 0, nc);
		peerauth_mac(&wrong_auth, 0, na, nc, "alpha", "beta", mac);
		memwire_inject(&w, WIRE_AUTH_RESPONSE, 0, mac, sizeof(mac));
		break;
	case 1: /* reflection: beta's own challenge and a MAC in beta's role */
		send_chal(&w, 1, na);
		break;
	case 2: /* the right key, but claiming to be beta itself */
		send_chal(&w, 0, nc);
		peerauth_mac(&beta_auth, 0, na, nc, "beta", "alpha", mac);
		memwire_inject(&w, WIRE_AUTH_RESPONSE, 0, mac, sizeof(mac));
		break;
	case 3: { /* an unauthenticated peer: a HELLO first */
		uint8_t hello[WIRE_HELLO_SIZE] = {0};
		memwire_inject(&w, WIRE_HELLO, 0, hello, sizeof(hello));
		break;
	}
	case 4: /* a response before any challenge */
		memset(mac, 0, sizeof(mac));
		memwire_inject(&w, WIRE_AUTH_RESPONSE, 0, mac, sizeof(mac));
		break;
	case 5: { /* a bad challenge: wrong version */
		uint8_t c[WIRE_AUTH_CHAL_SIZE];
		peerauth_chal_encode(c, 0, nc);
		c[0] = 7;
		memwire_inject(&w, WIRE_AUTH_CHALLENGE, 0, c, sizeof(c));
		break;
	}
	case 6: /* the transport fails */
		memwire_inject_error(&w, "the peer closed the connection");
		break;
	case 7: { /* a frame larger than the exchange's, before authenticating */
		uint8_t big[4096] = {0};
		memwire_inject(&w, WIRE_DATA, 0, big, sizeof(big));
		break;
	}
	}
	ck_assert_int_eq(seen.n_accepted, 0);
	ck_assert(w.closed);
	ck_assert_uint_eq(beta_auth.refused, 1);
	/* beta never proved itself to a stranger: only its challenge left */
	memwire_flush(&w);
	ck_assert_uint_eq(w.n_frames, 1);
	tlistener_close(l);
	memwire_free(&w);
}

START_TEST(acceptor_refuses)
{
	refused_case(_i);
}
END_TEST

/* A recorded exchange does not open a second connection: the new challenge differs. */
START_TEST(acceptor_refuses_replay)
{
	struct tlistener *l = listen_beta();
	struct memwire w1 = {0}, w2 = {0};
	uint8_t na1[WIRE_AUTH_NONCE], na2[WIRE_AUTH_NONCE], nc[WIRE_AUTH_NONCE];
	uint8_t mac[WIRE_AUTH_MAC_SIZE];
	memset(nc, 0x22, sizeof(nc));
	accept_one(&w1, na1);
	send_chal(&w1, 0, nc);
	peerauth_mac(&alpha_auth, 0, na1, nc, "alpha", "beta", mac);
	memwire_inject(&w1, WIRE_AUTH_RESPONSE, 0, mac, sizeof(mac));
	ck_assert_int_eq(seen.n_accepted, 1);
	tstream_close(seen.accepted);
	accept_one(&w2, na2);
	ck_assert(memcmp(na1, na2, sizeof(na1)) != 0);
	send_chal(&w2, 0, nc);
	memwire_inject(&w2, WIRE_AUTH_RESPONSE, 0, mac, sizeof(mac));
	ck_assert_int_eq(seen.n_accepted, 1);
	ck_assert(w2.closed);
	tlistener_close(l);
	memwire_free(&w1);
	memwire_free(&w2);
}
END_TEST

/* A connection that says nothing is closed after the timeout. */
START_TEST(acceptor_times_out)
{
	beta_auth.timeout = 0.02;
	struct tlistener *l = listen_beta();
	struct memwire w = {0};
	uint8_t na[WIRE_AUTH_NONCE];
	accept_one(&w, na);
	for (int i = 0; i < 100 && !w.closed; i++)
		ev_run(loop, EVRUN_ONCE);
	ck_assert(w.closed);
	ck_assert_int_eq(seen.n_accepted, 0);
	ck_assert_uint_eq(beta_auth.refused, 1);
	tlistener_close(l);
	memwire_free(&w);
}
END_TEST

/* At most max_per_source from one address (the in-memory streams all share one): the oldest
 * goes, the newcomer stays. Closing the listener closes the rest. */
START_TEST(acceptor_limits_per_source)
{
	struct tlistener *l = listen_beta();
	struct memwire w[6] = {{0}};
	uint8_t na[WIRE_AUTH_NONCE];
	for (int i = 0; i < 6; i++)
		accept_one(&w[i], na);
	ck_assert(w[0].closed && w[1].closed);
	for (int i = 2; i < 6; i++)
		ck_assert(!w[i].closed);
	tlistener_close(l);
	for (int i = 0; i < 6; i++) {
		ck_assert(w[i].closed);
		memwire_free(&w[i]);
	}
}
END_TEST

static struct tconnect *connect_alpha(struct tauth *a)
{
	struct tconnect_params p = {
	    .loop = loop, .auth = a, .addr = ADDR, .ops = &own_ops, .done = on_done};
	struct tconnect *c = NULL;
	ck_assert_int_eq(tconnect_start(&memtransport, &p, &c), 0);
	return c;
}

/* The connector's side: it answers the challenge, checks the acceptor's proof, then done(). */
START_TEST(connector_exchange)
{
	int bad = _i;
	connect_alpha(&alpha_auth);
	struct memwire w = {0};
	uint8_t nc[WIRE_AUTH_NONCE], na[WIRE_AUTH_NONCE], role, mac[WIRE_AUTH_MAC_SIZE];
	char err[100];
	memset(na, 0x77, sizeof(na));
	ck_assert_int_eq(memconnect_finish(memtransport_connecting(), &w, 0), 0);
	ck_assert_int_eq(seen.n_done, 0);
	const struct mem_frame *f = last_sent(&w, WIRE_AUTH_CHALLENGE);
	ck_assert_int_eq(peerauth_chal_decode(f->payload, f->hdr.len, &role, nc, err, sizeof(err)),
	                 0);
	ck_assert_uint_eq(role, 0);
	send_chal(&w, 1, na);
	f = last_sent(&w, WIRE_AUTH_RESPONSE);
	peerauth_mac(&beta_auth, 0, na, nc, "alpha", "beta", mac);
	ck_assert_mem_eq(f->payload, mac, sizeof(mac));
	peerauth_mac(bad ? &wrong_auth : &beta_auth, 1, nc, na, "beta", "alpha", mac);
	memwire_inject(&w, WIRE_AUTH_RESPONSE, 0, mac, sizeof(mac));
	ck_assert_int_eq(seen.n_done, 1);
	if (bad) {
		ck_assert_ptr_null(seen.done_s);
		ck_assert_int_eq(seen.done_err, EACCES);
		ck_assert(w.closed);
	} else {
		ck_assert_int_eq(seen.done_err, 0);
		ck_assert_ptr_eq(seen.done_s, w.s);
		memwire_inject(&w, WIRE_PING, 0, "12345678", 8);
		ck_assert_int_eq(seen.frames, 1);
		tstream_close(seen.done_s);
	}
	memwire_free(&w);
}
END_TEST

/* Cancelling while the exchange runs closes the stream; done() never runs. */
START_TEST(connector_cancel)
{
	struct tconnect *c = connect_alpha(&alpha_auth);
	struct memwire w = {0};
	ck_assert_int_eq(memconnect_finish(memtransport_connecting(), &w, 0), 0);
	tconnect_cancel(c);
	ck_assert(w.closed);
	ck_assert_int_eq(seen.n_done, 0);
	/* and before the transport connected */
	c = connect_alpha(&alpha_auth);
	tconnect_cancel(c);
	ck_assert_ptr_null(memtransport_connecting());
	memwire_free(&w);
}
END_TEST

/* The MAC binds every input: change any one and it changes. */
START_TEST(mac_binds_everything)
{
	uint8_t n1[WIRE_AUTH_NONCE] = {1}, n2[WIRE_AUTH_NONCE] = {2};
	uint8_t m[7][WIRE_AUTH_MAC_SIZE];
	struct tauth other_vol = alpha_auth;
	snprintf(other_vol.volume, sizeof(other_vol.volume), "wal");
	peerauth_mac(&alpha_auth, 0, n1, n2, "alpha", "beta", m[0]);
	peerauth_mac(&alpha_auth, 1, n1, n2, "alpha", "beta", m[1]);
	peerauth_mac(&alpha_auth, 0, n2, n1, "alpha", "beta", m[2]);
	peerauth_mac(&alpha_auth, 0, n1, n2, "beta", "alpha", m[3]);
	peerauth_mac(&other_vol, 0, n1, n2, "alpha", "beta", m[4]);
	peerauth_mac(&wrong_auth, 0, n1, n2, "alpha", "beta", m[5]);
	peerauth_mac(&alpha_auth, 0, n1, n2, "alpha", "beta", m[6]);
	for (int i = 1; i < 6; i++)
		ck_assert(memcmp(m[0], m[i], WIRE_AUTH_MAC_SIZE) != 0);
	ck_assert_mem_eq(m[0], m[6], WIRE_AUTH_MAC_SIZE);
}
END_TEST

static void write_key(const char *path, const char *text)
{
	char tmp[256];
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	FILE *f = fopen(tmp, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_int_eq(chmod(tmp, 0600), 0);
	ck_assert_int_eq(rename(tmp, path), 0);
}

/* A key is rotated by replacing its file: read again when it changed, kept when the new one
 * does not load. */
START_TEST(key_file_rotation)
{
	char dir[] = "/tmp/hak-peerauth-XXXXXX", path[300];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/repl.key", dir);
	write_key(path, "the first key of the pair\n");
	struct tauth a;
	struct key_bytes none = {.len = 0};
	peerauth_init(&a, &none, "alpha", "beta", "db");
	a.key_file = path;
	ck_assert_int_eq(peerauth_refresh_key(&a), 0); /* the first load is no rotation */
	ck_assert_uint_eq(a.key.len, strlen("the first key of the pair"));
	ck_assert_int_eq(peerauth_refresh_key(&a), 0); /* unchanged */
	write_key(path, "the second key of the pair\n");
	ck_assert_int_eq(peerauth_refresh_key(&a), 1);
	ck_assert_mem_eq(a.key.bytes, "the second key of the pair", a.key.len);
	write_key(path, "short\n"); /* too short to be a key: the old one stays */
	ck_assert_int_eq(peerauth_refresh_key(&a), -1);
	ck_assert_mem_eq(a.key.bytes, "the second key of the pair", a.key.len);
	unlink(path);
	ck_assert_int_eq(peerauth_refresh_key(&a), -1);
	ck_assert_mem_eq(a.key.bytes, "the second key of the pair", a.key.len);
	rmdir(dir);
}
END_TEST

/* One acceptor exchange with an answer under key (as alpha); true if accepted. The acceptor's
 * own answer must be under the same key. */
static bool accept_under(const struct key_bytes *key)
{
	struct tlistener *l = listen_beta();
	struct memwire w = {0};
	struct tauth as = alpha_auth;
	uint8_t na[WIRE_AUTH_NONCE], nc[WIRE_AUTH_NONCE], mac[WIRE_AUTH_MAC_SIZE];
	int before = seen.n_accepted;
	as.key = *key;
	memset(nc, 0x3c, sizeof(nc));
	accept_one(&w, na);
	send_chal(&w, 0, nc);
	peerauth_mac(&as, 0, na, nc, "alpha", "beta", mac);
	memwire_inject(&w, WIRE_AUTH_RESPONSE, 0, mac, sizeof(mac));
	bool ok = seen.n_accepted == before + 1;
	if (ok) {
		const struct mem_frame *f = last_sent(&w, WIRE_AUTH_RESPONSE);
		peerauth_mac(&as, 1, nc, na, "beta", "alpha", mac);
		ck_assert_mem_eq(f->payload, mac, sizeof(mac));
		tstream_close(seen.accepted);
	}
	tlistener_close(l);
	memwire_free(&w);
	return ok;
}

/* The MAC a connector sends on its next attempt tells the key it chose; the acceptor (the
 * test) then accepts it, or refuses with a wrong answer. */
static bool connector_uses(struct tauth *a, const struct key_bytes *key, bool accept)
{
	struct tconnect *c = connect_alpha(a);
	struct memwire w = {0};
	struct tauth as = alpha_auth;
	uint8_t nc[WIRE_AUTH_NONCE], na[WIRE_AUTH_NONCE], role, mac[WIRE_AUTH_MAC_SIZE];
	char err[100];
	as.key = *key;
	memset(na, 0x11, sizeof(na));
	ck_assert_int_eq(memconnect_finish(memtransport_connecting(), &w, 0), 0);
	const struct mem_frame *f = last_sent(&w, WIRE_AUTH_CHALLENGE);
	ck_assert_int_eq(peerauth_chal_decode(f->payload, f->hdr.len, &role, nc, err, sizeof(err)),
	                 0);
	send_chal(&w, 1, na);
	f = last_sent(&w, WIRE_AUTH_RESPONSE);
	peerauth_mac(&as, 0, na, nc, "alpha", "beta", mac);
	bool same = memcmp(f->payload, mac, sizeof(mac)) == 0;
	if (!accept)
		memset(mac, 0, sizeof(mac));
	else
		peerauth_mac(&as, 1, nc, na, "beta", "alpha", mac);
	memwire_inject(&w, WIRE_AUTH_RESPONSE, 0, mac, sizeof(mac));
	ck_assert_int_eq(seen.done_err, accept ? 0 : EACCES);
	if (accept)
		tstream_close(seen.done_s);
	(void)c;
	memwire_free(&w);
	return same;
}

/*
 * A rotation of the replication key: a node whose file was replaced accepts the peer's answer
 * under the old key or the new one until the peer proves it has the new one, and as a connector
 * tries the new key and the old one in turn; once proven, the old key is refused.
 */
START_TEST(rotation_accepts_both_until_proven)
{
	struct key_bytes old = alpha_auth.key, fresh;
	key_of(&fresh, "the replacement secret for the pair");
	beta_auth.prev = old;
	beta_auth.key = fresh;
	beta_auth.has_prev = true;
	ck_assert(accept_under(&old));
	ck_assert(beta_auth.has_prev);
	ck_assert(accept_under(&fresh));
	ck_assert(!beta_auth.has_prev);
	ck_assert(!accept_under(&old));
	ck_assert_uint_eq(beta_auth.refused, 1);

	struct tauth a = alpha_auth;
	a.prev = old;
	a.key = fresh;
	a.has_prev = true;
	/* the new key first; refused, the old one; the next link tries the new key again */
	ck_assert(connector_uses(&a, &fresh, false));
	ck_assert(connector_uses(&a, &old, true));
	ck_assert(connector_uses(&a, &fresh, false));
	ck_assert(connector_uses(&a, &old, true));
	ck_assert(a.has_prev);
	/* the peer has the new key now: its success ends the rotation */
	ck_assert(connector_uses(&a, &fresh, true));
	ck_assert(!a.has_prev);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("peerauth");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, acceptor_good_exchange);
	tcase_add_loop_test(tc, acceptor_refuses, 0, 8);
	tcase_add_test(tc, acceptor_refuses_replay);
	tcase_add_test(tc, acceptor_times_out);
	tcase_add_test(tc, acceptor_limits_per_source);
	tcase_add_loop_test(tc, connector_exchange, 0, 2);
	tcase_add_test(tc, connector_cancel);
	tcase_add_test(tc, mac_binds_everything);
	tcase_add_test(tc, key_file_rotation);
	tcase_add_test(tc, rotation_accepts_both_until_proven);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
