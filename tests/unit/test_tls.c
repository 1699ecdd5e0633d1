/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the TLS transport over loopback, with certificates and keys made per run by
 * tests/tls-certs.sh: a good pair carries frames both ways (large payloads, many small frames,
 * paused reading); certificates from another CA, the wrong name and the wrong pre-shared key are
 * refused; a client that never speaks is closed after the handshake timeout; bad files fail
 * tls_ctx_create with a sentence. The stream contract itself runs on TLS in test_transport.
 */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/net.h"
#include "support/tlspair.h"
#include "transport/tls.h"
#include "transport/transport.h"
#include "transport/wire.h"

/* What one end received. */
struct rx {
	unsigned frames, pings, errors;
	uint64_t bytes;
	bool corrupt; /* a DATA payload differed from its pattern */
	char why[256];
};

static uint8_t pattern(uint32_t i)
{
	return (uint8_t)(i * 13 + 5);
}

static void rx_frame(void *ctx, struct tstream *s, const struct wire_hdr *h, uint8_t *payload)
{
	struct rx *r = ctx;
	(void)s;
	r->frames++;
	r->bytes += h->len;
	if (h->type == WIRE_PING)
		r->pings++;
	if (h->type == WIRE_DATA)
		for (uint32_t i = WIRE_IO_SIZE; i < h->len; i++)
			if (payload[i] != pattern(i - WIRE_IO_SIZE))
				r->corrupt = true;
	if (payload)
		buf_put(payload, h->len);
}

static void rx_error(void *ctx, struct tstream *s, const char *why)
{
	struct rx *r = ctx;
	(void)s;
	r->errors++;
	snprintf(r->why, sizeof(r->why), "%s", why);
}

static const struct tstream_ops rx_ops = {.frame = rx_frame, .error = rx_error};

static char dir[64];

static void files_setup(void)
{
	ck_assert_int_eq(tlspair_files(dir, sizeof(dir)), 0);
}

static void files_teardown(void)
{
	tlspair_files_remove(dir);
}

/* A heap DATA frame of len pattern bytes, freed when sent. */
static struct outq_item *data_item(uint32_t len)
{
	struct outq_item *it = calloc(1, sizeof(*it));
	uint8_t *d = malloc(len);
	struct wire_io io = {.id = 1, .off = 0, .len = len};
	ck_assert(it && d);
	for (uint32_t i = 0; i < len; i++)
		d[i] = pattern(i);
	wire_hdr_encode(it->hdr, WIRE_DATA, 0, WIRE_IO_SIZE + len);
	wire_io_encode(it->hdr + WIRE_HDR_SIZE, &io);
	it->hdr_len = WIRE_HDR_SIZE + WIRE_IO_SIZE;
	it->data = d;
	it->data_len = len;
	it->sent = outq_free_item_and_data;
	return it;
}

static void pings(struct tstream *s, unsigned n)
{
	uint8_t id[WIRE_ID_SIZE] = {0};
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(tstream_send_small(s, WIRE_PING, 0, id, sizeof(id)), 0);
}

/* Spin until cond or about 10 s. */
#define SPIN_UNTIL(loop, cond)                                                                     \
	do {                                                                                       \
		for (int i_ = 0; i_ < 1000 && !(cond); i_++)                                       \
			tlspair_spin(loop, 0.01);                                                  \
	} while (0)

/* Connect server (beta) and client (alpha) contexts; the caller checks what came of it. */
struct run {
	struct ev_loop *loop;
	struct tls_ctx *sc, *cc;
	struct rx srx, crx;
	struct tlspair tp;
};

static void run_connect(struct run *r, struct tls_ctx *sc, struct tls_ctx *cc)
{
	memset(r, 0, sizeof(*r));
	ck_assert_ptr_nonnull(sc);
	ck_assert_ptr_nonnull(cc);
	r->loop = ev_loop_new(EVFLAG_AUTO);
	r->sc = sc;
	r->cc = cc;
	ck_assert_int_eq(tlspair_connect(r->loop, sc, cc, &rx_ops, &r->srx, &r->crx, &r->tp), 0);
	ck_assert_uint_eq(r->tp.done, 1);
}

static void run_close(struct run *r)
{
	tstream_close(r->tp.client);
	tstream_close(r->tp.server);
	tls_ctx_free(r->sc);
	tls_ctx_free(r->cc);
	ev_loop_destroy(r->loop);
}

/* The client's handshake ended but the server refused it: TLS 1.3 finishes the client's side
 * before the server checked the client's certificate, so the refusal reaches the client as its
 * stream's first error; either way no frame reaches anyone. */
static void assert_refused_by_server(struct run *r)
{
	ck_assert_uint_eq(r->tp.accepted, 0);
	ck_assert_ptr_null(r->tp.server);
	if (r->tp.client) {
		pings(r->tp.client, 1);
		SPIN_UNTIL(r->loop, r->crx.errors);
		ck_assert_uint_eq(r->crx.errors, 1);
		ck_assert_ptr_nonnull(strstr(r->crx.why, "TLS says"));
	} else {
		ck_assert_int_eq(r->tp.client_err, EACCES);
	}
	ck_assert_uint_eq(r->srx.frames + r->crx.frames, 0);
}

static void assert_refused_by_client(struct run *r)
{
	ck_assert_ptr_null(r->tp.client);
	ck_assert_int_eq(r->tp.client_err, EACCES);
	ck_assert_uint_eq(r->tp.accepted, 0);
}

START_TEST(certificates_carry_frames_both_ways)
{
	struct run r;
	run_connect(&r, tlspair_cert_ctx(dir, "ca", "beta", "alpha"),
	            tlspair_cert_ctx(dir, "ca", "alpha", "beta"));
	ck_assert_int_eq(r.tp.client_err, 0);
	ck_assert_ptr_nonnull(r.tp.client);
	ck_assert_ptr_nonnull(r.tp.server);
	ck_assert_str_eq(r.tp.client->t->name, "tls");
	bool ktls_tx = true, ktls_rx = true;
	const char *cipher = NULL;
	ck_assert_int_eq(tls_stream_info(r.tp.client, &ktls_tx, &ktls_rx, &cipher), 0);
	ck_assert_ptr_nonnull(strstr(cipher, "TLS_AES_"));
	/* Large payloads (several records each, read straight into the payload) and a burst of
	 * small frames gathered into records, both ways at once. */
	uint32_t big = 4u << 20;
	tstream_send(r.tp.client, data_item(big));
	pings(r.tp.client, 5000);
	tstream_send(r.tp.client, data_item(100000));
	tstream_send(r.tp.server, data_item(big));
	pings(r.tp.server, 3000);
	SPIN_UNTIL(r.loop, r.srx.frames == 5002 && r.crx.frames == 3001);
	ck_assert_uint_eq(r.srx.frames, 5002);
	ck_assert_uint_eq(r.srx.pings, 5000);
	ck_assert_uint_eq(r.crx.frames, 3001);
	ck_assert(!r.srx.corrupt && !r.crx.corrupt);
	ck_assert_uint_eq(tstream_queued(r.tp.client) + tstream_queued(r.tp.server), 0);
	/* Paused reading holds frames, also those TLS already decrypted; resume delivers them. */
	tstream_pause(r.tp.server, true);
	pings(r.tp.client, 100);
	tstream_send(r.tp.client, data_item(300000));
	tlspair_spin(r.loop, 0.2);
	ck_assert_uint_eq(r.srx.frames, 5002);
	tstream_pause(r.tp.server, false);
	SPIN_UNTIL(r.loop, r.srx.frames == 5103);
	ck_assert_uint_eq(r.srx.frames, 5103);
	ck_assert(!r.srx.corrupt);
	ck_assert_uint_eq(r.srx.errors + r.crx.errors, 0);
	ck_assert_double_lt(tstream_idle(r.tp.server), 1.0);
	char peer[64];
	ck_assert_int_eq(tstream_peer_name(r.tp.server, peer, sizeof(peer)), 0);
	ck_assert_ptr_nonnull(strstr(peer, "127.0.0.1:"));
	/* A close reaches the other side as the peer closing. */
	tstream_close(r.tp.client);
	r.tp.client = NULL;
	SPIN_UNTIL(r.loop, r.srx.errors);
	ck_assert_str_eq(r.srx.why, "the peer closed the connection");
	run_close(&r);
}
END_TEST

START_TEST(lazy_sends_coalesce)
{
	struct run r;
	run_connect(&r, tlspair_psk_ctx(dir, "psk"), tlspair_psk_ctx(dir, "psk"));
	ck_assert_ptr_nonnull(r.tp.client);
	tstream_set_lazy(r.tp.client, 0.2, 1u << 20);
	uint8_t id[WIRE_ID_SIZE] = {0};
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(tstream_send_small_lazy(r.tp.client, WIRE_PING, 0, id, sizeof(id)),
		                 0);
	tlspair_spin(r.loop, 0.05);
	ck_assert_uint_eq(r.srx.frames, 0); /* waiting for the delay */
	ck_assert_uint_gt(tstream_queued(r.tp.client), 0);
	SPIN_UNTIL(r.loop, r.srx.frames == 10);
	ck_assert_uint_eq(r.srx.frames, 10);
	run_close(&r);
}
END_TEST

START_TEST(another_ca_is_refused_on_both_sides)
{
	struct run r;
	/* The client shows a certificate of the right name from another CA. */
	run_connect(&r, tlspair_cert_ctx(dir, "ca", "beta", "alpha"),
	            tlspair_cert_ctx(dir, "ca", "impostor-alpha", "beta"));
	assert_refused_by_server(&r);
	run_close(&r);
	/* The server does. */
	run_connect(&r, tlspair_cert_ctx(dir, "ca", "impostor-alpha", "beta"),
	            tlspair_cert_ctx(dir, "ca", "beta", "alpha"));
	assert_refused_by_client(&r);
	run_close(&r);
	/* A client that trusts only the other CA refuses the real server. */
	run_connect(&r, tlspair_cert_ctx(dir, "ca", "beta", "alpha"),
	            tlspair_cert_ctx(dir, "other-ca", "impostor-alpha", "beta"));
	assert_refused_by_client(&r);
	run_close(&r);
}
END_TEST

START_TEST(wrong_name_is_refused)
{
	struct run r;
	/* The client expects gamma, the server is beta. */
	run_connect(&r, tlspair_cert_ctx(dir, "ca", "beta", "alpha"),
	            tlspair_cert_ctx(dir, "ca", "alpha", "gamma"));
	assert_refused_by_client(&r);
	run_close(&r);
	/* The server expects gamma, the client is alpha. */
	run_connect(&r, tlspair_cert_ctx(dir, "ca", "beta", "gamma"),
	            tlspair_cert_ctx(dir, "ca", "alpha", "beta"));
	assert_refused_by_server(&r);
	run_close(&r);
}
END_TEST

START_TEST(wrong_psk_is_refused)
{
	struct run r;
	run_connect(&r, tlspair_psk_ctx(dir, "psk"), tlspair_psk_ctx(dir, "psk-wrong"));
	assert_refused_by_client(&r);
	run_close(&r);
	/* A certificate client finds no key to agree on with a PSK server. */
	run_connect(&r, tlspair_psk_ctx(dir, "psk"), tlspair_cert_ctx(dir, "ca", "alpha", "beta"));
	ck_assert_ptr_null(r.tp.server);
	ck_assert_ptr_null(r.tp.client);
	run_close(&r);
}
END_TEST

/* Copy dir/from over dir/to the way an operator replaces a key: a new file, mode 0600, renamed. */
static void replace_file(const char *from, const char *to)
{
	char src[300], dst[300], tmp[310], buf[4096];
	snprintf(src, sizeof(src), "%s/%s", dir, from);
	snprintf(dst, sizeof(dst), "%s/%s", dir, to);
	snprintf(tmp, sizeof(tmp), "%s.new", dst);
	int in = open(src, O_RDONLY), out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(out, 0);
	ssize_t n = read(in, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
	ck_assert_int_eq(rename(tmp, dst), 0);
}

/* A replaced key file serves the next handshake, without a new context (rotation). */
START_TEST(replaced_psk_serves_the_next_handshake)
{
	struct run r;
	replace_file("psk", "psk-rot");
	struct tls_ctx *sc = tlspair_psk_ctx(dir, "psk-rot");
	run_connect(&r, sc, tlspair_psk_ctx(dir, "psk-wrong"));
	assert_refused_by_client(&r);
	r.sc = NULL; /* the server's context lives on */
	run_close(&r);
	replace_file("psk-wrong", "psk-rot");
	run_connect(&r, sc, tlspair_psk_ctx(dir, "psk-wrong"));
	ck_assert_ptr_nonnull(r.tp.client);
	ck_assert_ptr_nonnull(r.tp.server);
	run_close(&r);
}
END_TEST

static void never_accepted(void *ctx, struct tlistener *l, struct tstream *s)
{
	(void)ctx;
	(void)l;
	(void)s;
	ck_abort_msg("a silent client was accepted");
}

START_TEST(silent_client_is_closed_after_the_timeout)
{
	char addr[64], psk[300];
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct tls_ctx *c;
	char err[256];
	snprintf(psk, sizeof(psk), "%s/psk", dir);
	struct tls_params tp = {.psk_file = psk, .handshake_timeout = 0.3};
	ck_assert_int_eq(tls_ctx_create(&tp, &c, err, sizeof(err)), 0);
	tlspair_free_port(addr, sizeof(addr));
	struct rx rx = {0};
	struct tlisten_params lp = {.loop = loop,
	                            .addr = addr,
	                            .ops = &rx_ops,
	                            .ctx = &rx,
	                            .accepted = never_accepted,
	                            .topts = c};
	struct tlistener *l;
	ck_assert_int_eq(tlistener_open(&transport_tls, &lp, &l), 0);
	int fds[3];
	for (int i = 0; i < 3; i++) {
		fds[i] = net_connect(addr, 0, NULL, NULL);
		ck_assert_int_ge(fds[i], 0);
	}
	/* One speaks garbage, which fails at once; the others say nothing. */
	tlspair_spin(loop, 0.05);
	ck_assert_int_eq(write(fds[0], "GET / HTTP/1.0\r\n\r\n", 18), 18);
	tlspair_spin(loop, 0.1);
	char b[64];
	ck_assert_int_le(read(fds[0], b, sizeof(b)), 7); /* at most an alert, then EOF */
	ck_assert_int_eq(read(fds[1], b, sizeof(b)), -1);
	ck_assert_int_eq(errno, EAGAIN); /* still open */
	tlspair_spin(loop, 0.4);
	for (int i = 1; i < 3; i++)
		ck_assert_int_eq(read(fds[i], b, sizeof(b)), 0);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	tlistener_close(l);
	tls_ctx_free(c);
	ev_loop_destroy(loop);
}
END_TEST

static void never_done(void *ctx, struct tconnect *c, struct tstream *s, int err)
{
	(void)ctx;
	(void)c;
	(void)s;
	ck_abort_msg("a cancelled connect finished with %d", err);
}

START_TEST(cancelled_connect_never_finishes)
{
	char addr[64];
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct tls_ctx *c = tlspair_psk_ctx(dir, "psk");
	struct rx rx = {0};
	struct tconnect *tc;
	ck_assert_ptr_nonnull(c);
	tlspair_free_port(addr, sizeof(addr));
	struct tconnect_params cp = {
	    .loop = loop, .addr = addr, .ops = &rx_ops, .ctx = &rx, .done = NULL, .topts = c};
	/* Without options the transport refuses at once. */
	struct tconnect_params bare = cp;
	bare.topts = NULL;
	ck_assert_int_eq(tconnect_start(&transport_tls, &bare, &tc), -1);
	ck_assert_int_eq(errno, EINVAL);
	/* Cancelled before the TCP connect finished: nothing runs later (ASan watches). */
	cp.done = never_done;
	ck_assert_int_eq(tconnect_start(&transport_tls, &cp, &tc), 0);
	tconnect_cancel(tc);
	tlspair_spin(loop, 0.05);
	tls_ctx_free(c);
	ev_loop_destroy(loop);
}
END_TEST

/* tls_ctx_create's err for p, which must fail. */
static void assert_ctx_fails(const struct tls_params *p, const char *needle)
{
	struct tls_ctx *c = NULL;
	char err[512] = "";
	ck_assert_int_eq(tls_ctx_create(p, &c, err, sizeof(err)), -1);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(err, needle), "'%s' lacks '%s'", err, needle);
	ck_assert_int_eq(err[strlen(err) - 1], '.');
}

START_TEST(bad_files_fail_with_a_sentence)
{
	char ca[300], crt[300], key[300], other[300], psk[300], missing[300];
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	snprintf(crt, sizeof(crt), "%s/alpha.crt", dir);
	snprintf(key, sizeof(key), "%s/alpha.key", dir);
	snprintf(other, sizeof(other), "%s/beta.key", dir);
	snprintf(psk, sizeof(psk), "%s/psk", dir);
	snprintf(missing, sizeof(missing), "%s/nothing.crt", dir);
	struct tls_params p = {
	    .ca_file = ca, .cert_file = crt, .key_file = other, .peer_name = "b"};
	assert_ctx_fails(&p, "does not match the certificate");
	p.key_file = key;
	p.ca_file = missing;
	assert_ctx_fails(&p, "Cannot read the TLS CA file");
	assert_ctx_fails(&p, "No such file or directory");
	p.ca_file = key; /* a key is no CA certificate */
	assert_ctx_fails(&p, "Cannot load the TLS CA file");
	p.ca_file = ca;
	p.peer_name = NULL;
	assert_ctx_fails(&p, "the peer's name");
	p.peer_name = "b";
	p.psk_file = psk;
	assert_ctx_fails(&p, "not both");
	struct tls_params q = {.psk_file = psk};
	ck_assert_int_eq(chmod(psk, 0640), 0);
	assert_ctx_fails(&q, "chmod 600");
	ck_assert_int_eq(chmod(psk, 0600), 0);
	int fd = open(psk, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(write(fd, "too short\n", 10), 10);
	close(fd);
	assert_ctx_fails(&q, "The TLS pre-shared key has 9 bytes");
}
END_TEST

int main(void)
{
	/* A TLS stream's socket BIO writes with write(): a closed peer would kill the test. */
	signal(SIGPIPE, SIG_IGN);
	Suite *s = suite_create("tls");
	TCase *t = tcase_create("tls");
	tcase_add_checked_fixture(t, files_setup, files_teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, certificates_carry_frames_both_ways);
	tcase_add_test(t, lazy_sends_coalesce);
	tcase_add_test(t, another_ca_is_refused_on_both_sides);
	tcase_add_test(t, wrong_name_is_refused);
	tcase_add_test(t, wrong_psk_is_refused);
	tcase_add_test(t, replaced_psk_serves_the_next_handshake);
	tcase_add_test(t, silent_client_is_closed_after_the_timeout);
	tcase_add_test(t, cancelled_connect_never_finishes);
	tcase_add_test(t, bad_files_fail_with_a_sentence);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
