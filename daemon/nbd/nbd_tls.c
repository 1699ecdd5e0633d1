/* SPDX-License-Identifier: MIT */
#include "nbd_tls.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/outq.h"

#define PSK_FILE_MAX (64u * 1024u)
#define PSK_USER_MAX 128u
#define PSK_KEY_MAX  64u    /* bytes: psktool's default is 32 */
#define STAGE_SIZE   16384u /* one full TLS record */
#define STAGE_DIRECT 4096u  /* payloads this big go to SSL_write without a copy */

struct psk_entry {
	char user[PSK_USER_MAX + 1];
	unsigned char key[PSK_KEY_MAX];
	size_t key_len;
};

struct nbd_tls_ctx {
	SSL_CTX *ssl;
	struct psk_entry *psk;
	size_t n_psk;
};

struct nbd_tls {
	SSL *ssl;
	char peer[96];
	char psk_user[PSK_USER_MAX + 1]; /* whom the PSK callback found; "" for certificates */
	bool up;                         /* the handshake completed */
	bool closed;                     /* nbd_tls_close() ran: the socket is gone */
	/* Small items are gathered here into one record; SSL_write is retried on the same bytes. */
	uint8_t stage[STAGE_SIZE];
	size_t stage_len, stage_pos;
};

/* OpenSSL's queued errors as one reason (the first), and the queue emptied. */
static void tls_reason(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();
	if (e)
		ERR_error_string_n(e, buf, len);
	else
		snprintf(buf, len, "no further detail from OpenSSL");
	ERR_clear_error();
}

/* ---- pre-shared keys ---------------------------------------------------------------------- */

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* One "username:hexkey" line into e; a sentence in err when it is not one. */
static int psk_parse_line(const char *line, size_t len, struct psk_entry *e, char *err,
                          size_t errlen)
{
	const char *colon = memchr(line, ':', len);
	size_t ul = colon ? (size_t)(colon - line) : 0, hl = colon ? len - ul - 1 : 0;

	if (!colon || ul == 0 || ul > PSK_USER_MAX || hl == 0 || hl % 2 || hl / 2 > PSK_KEY_MAX) {
		snprintf(
		    err, errlen,
		    "is not 'username:hexkey' (a user of 1 to %u characters, a key of 1 to %u "
		    "bytes in an even number of hex digits; 'psktool -u NAME -p FILE' writes one)",
		    PSK_USER_MAX, PSK_KEY_MAX);
		return -1;
	}
	memcpy(e->user, line, ul);
	e->user[ul] = '\0';
	for (size_t i = 0; i < hl / 2; i++) {
		int hi = hexval((unsigned char)colon[1 + 2 * i]),
		    lo = hexval((unsigned char)colon[2 + 2 * i]);
		if (hi < 0 || lo < 0) {
			snprintf(err, errlen, "has a key that is not hexadecimal");
			return -1;
		}
		e->key[i] = (unsigned char)(hi << 4 | lo);
	}
	e->key_len = hl / 2;
	return 0;
}

static int psk_parse(struct nbd_tls_ctx *ctx, const char *text, size_t len, const char *path,
                     char *err, size_t errlen)
{
	char why[200];
	unsigned lineno = 0;

	for (size_t pos = 0; pos < len;) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t ll = nl ? (size_t)(nl - (text + pos)) : len - pos;
		const char *line = text + pos;
		pos += ll + (nl ? 1 : 0);
		lineno++;
		if (ll && line[ll - 1] == '\r')
			ll--;
		if (ll == 0 || line[0] == '#')
			continue;
		struct psk_entry *e = &ctx->psk[ctx->n_psk];
		if (psk_parse_line(line, ll, e, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "Line %u of the NBD TLS PSK file %s %s.", lineno,
			         path, why);
			errno = EINVAL;
			return -1;
		}
		ctx->n_psk++;
	}
	if (ctx->n_psk == 0) {
		snprintf(err, errlen, "The NBD TLS PSK file %s holds no 'username:hexkey' line.",
		         path);
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* The file is a secret like the replication key: its owner alone may read it. */
static int psk_load(struct nbd_tls_ctx *ctx, const char *path, char *err, size_t errlen)
{
	char *text = NULL;
	struct stat st;
	ssize_t n = -1;
	int rc = -1, e = 0, fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0) {
		e = errno;
		snprintf(err, errlen, "Cannot open the NBD TLS PSK file %s: %s.", path,
		         strerror(e));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & 077) || st.st_size > PSK_FILE_MAX) {
		e = EPERM;
		snprintf(err, errlen,
		         "The NBD TLS PSK file %s must be a regular file of at most %u bytes "
		         "readable by its owner only; run 'chmod 600 %s'.",
		         path, PSK_FILE_MAX, path);
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	ctx->psk = calloc((size_t)st.st_size / 4 + 1, sizeof(*ctx->psk));
	if (!text || !ctx->psk) {
		e = ENOMEM;
		snprintf(err, errlen, "Out of memory reading the NBD TLS PSK file %s.", path);
		goto out;
	}
	n = read(fd, text, (size_t)st.st_size);
	if (n < 0) {
		e = errno;
		snprintf(err, errlen, "Cannot read the NBD TLS PSK file %s: %s.", path,
		         strerror(e));
		goto out;
	}
	rc = psk_parse(ctx, text, (size_t)n, path, err, errlen);
	e = errno;
out:
	if (fd >= 0)
		close(fd);
	if (text)
		OPENSSL_cleanse(text, (size_t)st.st_size);
	free(text);
	if (rc < 0)
		errno = e;
	return rc;
}

/* OpenSSL asks for the key of the identity the client sent (TLS 1.2 and, as SHA-256, 1.3). */
static unsigned int psk_server_cb(SSL *ssl, const char *identity, unsigned char *psk,
                                  unsigned int max_len)
{
	const struct nbd_tls_ctx *ctx = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
	struct nbd_tls *t = SSL_get_app_data(ssl);

	for (size_t i = 0; identity && i < ctx->n_psk; i++) {
		const struct psk_entry *e = &ctx->psk[i];
		if (strcmp(e->user, identity) != 0 || e->key_len > max_len)
			continue;
		memcpy(psk, e->key, e->key_len);
		/* TLS 1.3 keeps no identity in the session: remember it for the messages. */
		snprintf(t->psk_user, sizeof(t->psk_user), "%s", e->user);
		return (unsigned int)e->key_len;
	}
	return 0; /* unknown user: the handshake fails */
}

/* ---- the context --------------------------------------------------------------------------- */

static int ctx_certs(struct nbd_tls_ctx *ctx, const struct nbd_tls_files *f, char *err,
                     size_t errlen)
{
	char why[256];
	struct stat st;
	const char *unreadable = access(f->cert_file, R_OK) < 0 ? f->cert_file
	                         : access(f->key_file, R_OK) < 0 || stat(f->key_file, &st) < 0
	                             ? f->key_file
	                             : NULL;
	if (unreadable) {
		snprintf(err, errlen, "Cannot read the NBD TLS file %s: %s.", unreadable,
		         strerror(errno));
		return -1;
	}
	/* Group access stays allowed: Debian's ssl-cert group shares keys that way. */
	if (st.st_mode & 007) {
		snprintf(
		    err, errlen,
		    "The NBD TLS key %s must not be accessible to others; run 'chmod o-rwx %s'.",
		    f->key_file, f->key_file);
		errno = EPERM;
		return -1;
	}
	if (SSL_CTX_use_certificate_chain_file(ctx->ssl, f->cert_file) != 1) {
		tls_reason(why, sizeof(why));
		snprintf(err, errlen, "The NBD TLS certificate %s is not a PEM certificate: %s.",
		         f->cert_file, why);
		return -1;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx->ssl, f->key_file, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx->ssl) != 1) {
		tls_reason(why, sizeof(why));
		snprintf(err, errlen,
		         "The NBD TLS key %s is not a PEM private key of the certificate %s: %s.",
		         f->key_file, f->cert_file, why);
		return -1;
	}
	if (!f->ca_file)
		return 0;
	STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(f->ca_file);
	if (!names || SSL_CTX_load_verify_locations(ctx->ssl, f->ca_file, NULL) != 1) {
		sk_X509_NAME_pop_free(names, X509_NAME_free);
		tls_reason(why, sizeof(why));
		snprintf(err, errlen, "The NBD TLS CA file %s holds no usable PEM certificate: %s.",
		         f->ca_file, why);
		return -1;
	}
	SSL_CTX_set_client_CA_list(ctx->ssl, names);
	SSL_CTX_set_verify(ctx->ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	return 0;
}

/* Settings of every session: modern protocols only, no resumption state, no renegotiation. */
static void ctx_policy(SSL_CTX *ssl)
{
	SSL_CTX_set_min_proto_version(ssl, TLS1_2_VERSION);
	/* A hang-up without close_notify is a hang-up, as on a plain socket: NBD's own framing
	 * already tells a cut request from a whole one. */
	SSL_CTX_set_options(ssl, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
	                             SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION |
	                             SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_num_tickets(ssl, 0);
	SSL_CTX_set_session_cache_mode(ssl, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

int nbd_tls_ctx_create(const struct nbd_tls_files *f, const char *volume, struct nbd_tls_ctx **out,
                       char *err, size_t errlen)
{
	struct nbd_tls_ctx *ctx = calloc(1, sizeof(*ctx));
	char sub[512] = "";
	int rc = -1, e = ENOMEM;

	if (!ctx || !(ctx->ssl = SSL_CTX_new(TLS_server_method()))) {
		snprintf(sub, sizeof(sub), "Out of memory creating the TLS context.");
		goto out;
	}
	ctx_policy(ctx->ssl);
	SSL_CTX_set_app_data(ctx->ssl, ctx);
	e = EINVAL;
	if (f->psk_file) {
		if (psk_load(ctx, f->psk_file, sub, sizeof(sub)) < 0) {
			e = errno;
			goto out;
		}
		SSL_CTX_set_psk_server_callback(ctx->ssl, psk_server_cb);
		/* TLS 1.2 needs the PSK suites named; 1.3 uses its default suites with PSK. */
		if (SSL_CTX_set_cipher_list(ctx->ssl, "ECDHE-PSK:DHE-PSK:PSK:!NULL:!aNULL:!RC4:"
		                                      "!3DES:!MD5:!SHA1:@STRENGTH") != 1)
			SSL_CTX_set_cipher_list(ctx->ssl, "PSK");
	} else if (ctx_certs(ctx, f, sub, sizeof(sub)) < 0) {
		goto out;
	}
	*out = ctx;
	ctx = NULL;
	rc = 0;
out:
	if (rc < 0) {
		snprintf(err, errlen, "Volume '%s' cannot offer NBD over TLS. %s", volume, sub);
		nbd_tls_ctx_free(ctx);
		errno = e;
	}
	return rc;
}

void nbd_tls_ctx_free(struct nbd_tls_ctx *ctx)
{
	if (!ctx)
		return;
	SSL_CTX_free(ctx->ssl);
	if (ctx->psk)
		OPENSSL_cleanse(ctx->psk, ctx->n_psk * sizeof(*ctx->psk));
	free(ctx->psk);
	free(ctx);
}

/* ---- sessions ------------------------------------------------------------------------------ */

struct nbd_tls *nbd_tls_new(struct nbd_tls_ctx *ctx, int fd, const char *peer)
{
	struct nbd_tls *t = calloc(1, sizeof(*t));

	if (!t || !(t->ssl = SSL_new(ctx->ssl)) || SSL_set_fd(t->ssl, fd) != 1) {
		if (t)
			SSL_free(t->ssl);
		free(t);
		ERR_clear_error();
		errno = ENOMEM;
		return NULL;
	}
	snprintf(t->peer, sizeof(t->peer), "%s", peer);
	SSL_set_app_data(t->ssl, t);
	SSL_set_accept_state(t->ssl);
	return t;
}

void nbd_tls_close(struct nbd_tls *t)
{
	if (!t || t->closed)
		return;
	if (t->up)
		(void)SSL_shutdown(t->ssl); /* one try at close_notify; the socket closes anyway */
	ERR_clear_error();
	t->closed = true;
}

void nbd_tls_free(struct nbd_tls *t)
{
	if (!t)
		return;
	SSL_free(t->ssl);
	ERR_clear_error();
	free(t);
}

/*
 * Classify a failed SSL call: 1 and *want for "try again", 0 for the peer's clean end of the
 * stream, -1 with errno and a sentence in err otherwise.
 */
static int tls_status(struct nbd_tls *t, int ret, const char *what, enum nbd_tls_want *want,
                      char *err, size_t errlen)
{
	char why[256];
	int saved = errno;

	switch (SSL_get_error(t->ssl, ret)) {
	case SSL_ERROR_WANT_READ:
		*want = NBD_TLS_WANT_READ;
		errno = EAGAIN;
		return 1;
	case SSL_ERROR_WANT_WRITE:
		*want = NBD_TLS_WANT_WRITE;
		errno = EAGAIN;
		return 1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		if (saved == 0 || saved == EAGAIN) /* EOF without close_notify */
			return 0;
		snprintf(err, errlen, "TLS %s with client %s failed: %s.", what, t->peer,
		         strerror(saved));
		errno = saved;
		return -1;
	default:
		tls_reason(why, sizeof(why));
		snprintf(err, errlen, "TLS %s with client %s failed: %s.", what, t->peer, why);
		errno = EPROTO;
		return -1;
	}
}

int nbd_tls_handshake(struct nbd_tls *t, enum nbd_tls_want *want, char *err, size_t errlen)
{
	int ret;

	*want = NBD_TLS_WANT_NONE;
	if (t->closed) {
		snprintf(err, errlen, "The connection of client %s is closed.", t->peer);
		errno = EBADF;
		return -1;
	}
	errno = 0;
	ret = SSL_do_handshake(t->ssl);
	if (ret == 1) {
		t->up = true;
		return 0;
	}
	switch (tls_status(t, ret, "handshake", want, err, errlen)) {
	case 1:
		return 1;
	case 0:
		snprintf(err, errlen, "Client %s hung up during the TLS handshake.", t->peer);
		errno = ECONNRESET;
		return -1;
	default:
		return -1;
	}
}

void nbd_tls_describe(const struct nbd_tls *t, char *buf, size_t len)
{
	const char *psk = t->psk_user[0] ? t->psk_user : NULL;
	X509 *cert = SSL_get0_peer_certificate(t->ssl);
	char subject[160] = "";

	if (cert)
		X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof(subject));
	snprintf(buf, len, "%s %s%s%s%s", SSL_get_version(t->ssl),
	         SSL_CIPHER_get_name(SSL_get_current_cipher(t->ssl)),
	         psk    ? ", PSK user "
	         : cert ? ", client certificate "
	                : "",
	         psk ? psk : subject, psk || cert ? "" : ", no client certificate");
}

ssize_t nbd_tls_read(struct nbd_tls *t, void *buf, size_t len, enum nbd_tls_want *want, char *err,
                     size_t errlen)
{
	size_t got = 0;

	*want = NBD_TLS_WANT_NONE;
	if (t->closed) {
		snprintf(err, errlen, "The connection of client %s is closed.", t->peer);
		errno = EBADF;
		return -1;
	}
	errno = 0;
	int ret = SSL_read_ex(t->ssl, buf, len, &got);
	if (ret == 1)
		return (ssize_t)got;
	int st = tls_status(t, ret, "read", want, err, errlen);
	return st == 0 ? 0 : -1;
}

bool nbd_tls_pending(const struct nbd_tls *t)
{
	return !t->closed && SSL_pending(t->ssl) > 0;
}

/* Copy the head items into the stage until it is full; each fully copied item is sent. */
static void stage_fill(struct nbd_tls *t, struct outq *q)
{
	while (q->head && t->stage_len < STAGE_SIZE && !t->closed) {
		struct outq_item *it = q->head;
		size_t off = it->sent_bytes;
		/* A big payload is written in place once the stage before it is out. */
		if (off >= it->hdr_len && it->data_len - (off - it->hdr_len) >= STAGE_DIRECT)
			break;
		size_t room = STAGE_SIZE - t->stage_len, take;
		if (off < it->hdr_len) {
			take = it->hdr_len - off < room ? it->hdr_len - off : room;
			memcpy(t->stage + t->stage_len, it->hdr + off, take);
		} else {
			size_t d = off - it->hdr_len;
			take = it->data_len - d < room ? it->data_len - d : room;
			memcpy(t->stage + t->stage_len, it->data + d, take);
		}
		t->stage_len += take;
		outq_advance(q, take);
	}
}

/* Write bytes with SSL_write: >0 written, else tls_status()'s 1 / 0 / -1. */
static int tls_write(struct nbd_tls *t, const void *p, size_t len, size_t *done,
                     enum nbd_tls_want *want)
{
	char err[256];

	errno = 0;
	if (SSL_write_ex(t->ssl, p, len, done) == 1)
		return 2;
	int st = tls_status(t, 0, "write", want, err, sizeof(err));
	if (st == 0) {
		errno = EPIPE;
		return -1;
	}
	return st;
}

/* The head item's payload goes to SSL_write without a copy; it leaves once all was taken. */
static int flush_direct(struct nbd_tls *t, struct outq *q, enum nbd_tls_want *want)
{
	struct outq_item *it = q->head;
	size_t d = it->sent_bytes - it->hdr_len, done = 0;
	int st = tls_write(t, it->data + d, it->data_len - d, &done, want);

	if (st != 2)
		return st;
	outq_advance(q, done);
	return 2;
}

int nbd_tls_flush(struct nbd_tls *t, struct outq *q, enum nbd_tls_want *want)
{
	*want = NBD_TLS_WANT_NONE;
	for (;;) {
		int st;
		if (t->closed) {
			errno = EBADF;
			return -1;
		}
		if (t->stage_pos == t->stage_len) {
			t->stage_pos = t->stage_len = 0;
			stage_fill(t, q);
		}
		if (t->stage_pos < t->stage_len) {
			size_t done = 0;
			st = tls_write(t, t->stage + t->stage_pos, t->stage_len - t->stage_pos,
			               &done, want);
			if (st == 2)
				t->stage_pos += done;
		} else if (q->head) {
			st = flush_direct(t, q, want);
		} else {
			return 0;
		}
		if (st != 2)
			return st;
	}
}

bool nbd_tls_unsent(const struct nbd_tls *t)
{
	return !t->closed && t->stage_pos < t->stage_len;
}
