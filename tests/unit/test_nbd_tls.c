/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for nbd_tls: the PSK file's checks, and a real session over a socketpair with an
 * OpenSSL PSK client: the non-blocking handshake, a flush of an output queue larger than the
 * socket buffer (so SSL_write must wait and be retried on the same bytes), reads, close_notify.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/outq.h"
#include "nbd/nbd_tls.h"

static const char KEY_HEX[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/* A file in a fresh temporary directory, with the given mode; returns its path (static). */
static const char *temp_file(const char *text, mode_t mode)
{
	static char path[256];
	char dir[] = "/tmp/test_nbd_tls.XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/keys.psk", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
	return path;
}

static void remove_temp(const char *path)
{
	char dir[256];
	snprintf(dir, sizeof(dir), "%s", path);
	unlink(path);
	*strrchr(dir, '/') = '\0';
	rmdir(dir);
}

/* Loading the PSK text must fail with a message containing want. */
static void psk_refused(const char *text, mode_t mode, const char *want)
{
	struct nbd_tls_files f = {.psk_file = temp_file(text, mode)};
	struct nbd_tls_ctx *ctx = NULL;
	char err[512] = "";
	ck_assert_int_eq(nbd_tls_ctx_create(&f, "vol", &ctx, err, sizeof(err)), -1);
	ck_assert_ptr_null(ctx);
	ck_assert_msg(strstr(err, want), "'%s' not in '%s'", want, err);
	ck_assert_msg(strstr(err, "Volume 'vol' cannot offer NBD over TLS."), "%s", err);
	remove_temp(f.psk_file);
}

START_TEST(psk_file_checks)
{
	char ok[256];
	psk_refused("", 0600, "holds no 'username:hexkey' line");
	psk_refused("# only a comment\n\n", 0600, "holds no");
	psk_refused("alice\n", 0600, "Line 1 of the NBD TLS PSK file");
	psk_refused("alice:0011\n:0011\n", 0600, "Line 2 of");
	psk_refused("alice:001\n", 0600, "even number of hex digits");
	psk_refused("alice:zz11\n", 0600, "not hexadecimal");
	snprintf(ok, sizeof(ok), "alice:%s\n", KEY_HEX);
	psk_refused(ok, 0644, "readable by its owner only");

	struct nbd_tls_files missing = {.psk_file = "/nonexistent/keys.psk"};
	struct nbd_tls_files nocert = {.cert_file = "/nonexistent/c.pem",
	                               .key_file = "/nonexistent/k.pem"};
	struct nbd_tls_ctx *ctx = NULL;
	char err[512];
	ck_assert_int_eq(nbd_tls_ctx_create(&missing, "vol", &ctx, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_msg(strstr(err, "Cannot open the NBD TLS PSK file /nonexistent/keys.psk"), "%s",
	              err);
	ck_assert_int_eq(nbd_tls_ctx_create(&nocert, "vol", &ctx, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "Cannot read the NBD TLS file /nonexistent/c.pem"), "%s", err);

	/* Comments, blank lines and CRLF are fine. */
	snprintf(ok, sizeof(ok), "# users\r\n\r\nbob:%s\r\nalice:%s\n", KEY_HEX, KEY_HEX);
	struct nbd_tls_files good = {.psk_file = temp_file(ok, 0600)};
	ck_assert_int_eq(nbd_tls_ctx_create(&good, "vol", &ctx, err, sizeof(err)), 0);
	nbd_tls_ctx_free(ctx);
	remove_temp(good.psk_file);
}
END_TEST

/* ---- a session over a socketpair --------------------------------------------------------- */

static unsigned int client_psk_cb(SSL *ssl, const char *hint, char *identity,
                                  unsigned int max_identity, unsigned char *psk,
                                  unsigned int max_psk)
{
	(void)ssl;
	(void)hint;
	ck_assert_uint_ge(max_identity, 6);
	ck_assert_uint_ge(max_psk, 32);
	strcpy(identity, "alice");
	for (unsigned i = 0; i < 32; i++)
		sscanf(KEY_HEX + 2 * i, "%2hhx", &psk[i]);
	return 32;
}

static int sent_calls;
static void count_sent(struct outq_item *it, int err)
{
	(void)it;
	ck_assert_int_eq(err, 0);
	sent_calls++;
}

/* Both ends' handshakes, alternating, until both are done (bounded). */
static void handshake(struct nbd_tls *srv, SSL *cli)
{
	enum nbd_tls_want want;
	char err[512];
	int s = 1, c = 0;
	for (int i = 0; i < 100 && (s != 0 || c != 1); i++) {
		if (s != 0)
			s = nbd_tls_handshake(srv, &want, err, sizeof(err));
		ck_assert_msg(s >= 0, "%s", err);
		if (c != 1)
			c = SSL_do_handshake(cli);
		ck_assert(c == 1 || SSL_get_error(cli, c) == SSL_ERROR_WANT_READ);
	}
	ck_assert_int_eq(s, 0);
	ck_assert_int_eq(c, 1);
}

START_TEST(psk_session)
{
	char text[256], err[512], desc[256];
	snprintf(text, sizeof(text), "alice:%s\n", KEY_HEX);
	struct nbd_tls_files f = {.psk_file = temp_file(text, 0600)};
	struct nbd_tls_ctx *ctx = NULL;
	int sv[2], small = 4096;
	ck_assert_int_eq(nbd_tls_ctx_create(&f, "vol", &ctx, err, sizeof(err)), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	/* Small buffers: the flush below must hit WANT_WRITE and retry. */
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));

	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_psk_client_callback(cctx, client_psk_cb);
	SSL_CTX_set_cipher_list(cctx, "PSK");
	SSL *cli = SSL_new(cctx);
	SSL_set_fd(cli, sv[1]);
	SSL_set_connect_state(cli);
	struct nbd_tls *srv = nbd_tls_new(ctx, sv[0], "test peer");
	ck_assert_ptr_nonnull(srv);
	handshake(srv, cli);
	nbd_tls_describe(srv, desc, sizeof(desc));
	ck_assert_msg(strstr(desc, "PSK user alice"), "%s", desc);

	/* A small header, a 1 MiB payload, another small item: byte-exact at the client. */
	size_t big = 1u << 20, total = 0, got = 0;
	uint8_t *payload = malloc(big), *rx = malloc(big + 64);
	for (size_t i = 0; i < big; i++)
		payload[i] = (uint8_t)(i * 7 + 3);
	struct outq q = {0};
	struct outq_item items[3];
	memset(items, 0, sizeof(items));
	memcpy(items[0].hdr, "HEADER-1", 8);
	items[0].hdr_len = 8;
	items[1].data = payload;
	items[1].data_len = big;
	memcpy(items[2].hdr, "TRAILER", 7);
	items[2].hdr_len = 7;
	for (int i = 0; i < 3; i++) {
		items[i].sent = count_sent;
		outq_push(&q, &items[i]);
		total += items[i].hdr_len + items[i].data_len;
	}
	enum nbd_tls_want want;
	int waits = 0, rc = 1;
	for (int i = 0; i < 100000 && (rc != 0 || got < total); i++) {
		if (rc != 0) {
			rc = nbd_tls_flush(srv, &q, &want);
			ck_assert_int_ge(rc, 0);
			if (rc == 1) {
				ck_assert_int_eq(want, NBD_TLS_WANT_WRITE);
				waits++;
			}
		}
		size_t n = 0;
		if (SSL_read_ex(cli, rx + got, big + 64 - got, &n) == 1)
			got += n;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(got, total);
	ck_assert_int_gt(waits, 0);
	ck_assert_int_eq(sent_calls, 3);
	ck_assert(!nbd_tls_unsent(srv));
	ck_assert_int_eq(memcmp(rx, "HEADER-1", 8), 0);
	ck_assert_int_eq(memcmp(rx + 8, payload, big), 0);
	ck_assert_int_eq(memcmp(rx + 8 + big, "TRAILER", 7), 0);

	/* The other way, in a small buffer: what stays inside the session is "pending". */
	size_t n = 0;
	ck_assert_int_eq(SSL_write_ex(cli, "0123456789", 10, &n), 1);
	char buf[4];
	ssize_t r = -1;
	for (int i = 0; i < 100 && r < 0; i++)
		r = nbd_tls_read(srv, buf, sizeof(buf), &want, err, sizeof(err));
	ck_assert_int_eq(r, 4);
	ck_assert_int_eq(memcmp(buf, "0123", 4), 0);
	ck_assert(nbd_tls_pending(srv));
	r = nbd_tls_read(srv, buf, sizeof(buf), &want, err, sizeof(err));
	ck_assert_int_eq(r, 4);
	r = nbd_tls_read(srv, buf, sizeof(buf), &want, err, sizeof(err));
	ck_assert_int_eq(r, 2);
	r = nbd_tls_read(srv, buf, sizeof(buf), &want, err, sizeof(err));
	ck_assert_int_eq(r, -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_int_eq(want, NBD_TLS_WANT_READ);

	/* close: close_notify reaches the client, later calls fail without the socket. */
	nbd_tls_close(srv);
	ck_assert_int_eq(SSL_read_ex(cli, buf, sizeof(buf), &n), 0);
	ck_assert_int_eq(SSL_get_error(cli, 0), SSL_ERROR_ZERO_RETURN);
	ck_assert_int_eq(nbd_tls_flush(srv, &q, &want), -1);
	ck_assert_int_eq(errno, EBADF);
	ck_assert_int_eq(nbd_tls_read(srv, buf, sizeof(buf), &want, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EBADF);

	nbd_tls_free(srv);
	SSL_free(cli);
	SSL_CTX_free(cctx);
	nbd_tls_ctx_free(ctx);
	close(sv[0]);
	close(sv[1]);
	free(payload);
	free(rx);
	remove_temp(f.psk_file);
}
END_TEST

/* A client that speaks no TLS: the handshake fails with a sentence naming it. */
START_TEST(garbage_handshake)
{
	char text[256], err[512] = "";
	snprintf(text, sizeof(text), "alice:%s\n", KEY_HEX);
	struct nbd_tls_files f = {.psk_file = temp_file(text, 0600)};
	struct nbd_tls_ctx *ctx = NULL;
	int sv[2];
	ck_assert_int_eq(nbd_tls_ctx_create(&f, "vol", &ctx, err, sizeof(err)), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	struct nbd_tls *srv = nbd_tls_new(ctx, sv[0], "192.0.2.7:4242");
	enum nbd_tls_want want;
	ck_assert_int_eq(nbd_tls_handshake(srv, &want, err, sizeof(err)), 1);
	ck_assert_int_eq(want, NBD_TLS_WANT_READ);
	ck_assert_int_eq(write(sv[1], "GET / HTTP/1.0\r\n\r\n", 18), 18);
	ck_assert_int_eq(nbd_tls_handshake(srv, &want, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "TLS handshake with client 192.0.2.7:4242 failed"), "%s", err);
	nbd_tls_close(srv);
	nbd_tls_free(srv);
	/* And one that hangs up. */
	close(sv[0]);
	close(sv[1]);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	close(sv[1]);
	srv = nbd_tls_new(ctx, sv[0], "192.0.2.7:4242");
	ck_assert_int_eq(nbd_tls_handshake(srv, &want, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "hung up during the TLS handshake"), "%s", err);
	nbd_tls_free(srv);
	close(sv[0]);
	nbd_tls_ctx_free(ctx);
	remove_temp(f.psk_file);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nbd_tls");
	TCase *t = tcase_create("core");
	tcase_add_test(t, psk_file_checks);
	tcase_add_test(t, psk_session);
	tcase_add_test(t, garbage_handshake);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
