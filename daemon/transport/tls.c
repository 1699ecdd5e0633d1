/* SPDX-License-Identifier: MIT */
#include "tls.h"

#include <errno.h>
#include <ev.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/keyfile.h"
#include "lib/log.h"
#include "lib/net.h"
#include "tcp.h"

#define TLS_RECORD       16384u /* the most plaintext one TLS record carries */
#define TLS_IOV          512    /* enough iovecs to fill a record with the smallest frames */
#define TLS_READ_BUF     (128u * 1024u) /* what one read() of the socket may bring */
#define TLS_PSK_IDENTITY "hak-repl"
#define TLS_PSK_LABEL    "hak replication TLS pre-shared key v1"
#define TLS_HS_TIMEOUT   5.0
/* Handshakes a listener runs at once: beyond, new connections are refused, so a flood of silent
 * clients holds a bounded number of sockets until their timeout. */
#define TLS_HS_MAX 32

enum { TLS_FILES = 4 }; /* ca, cert, key, psk */

struct tls_ctx {
	SSL_CTX *ssl;
	char *peer_name; /* certificates: the name the peer's must carry; NULL with a PSK */
	bool psk_mode;
	uint8_t psk[48]; /* SHA-384 */
	double timeout;
	/* What the context was made from, to make it again when a file is replaced: a new
	 * certificate or key serves the next handshake, without a restart (docs/security.md). */
	char *files[TLS_FILES];
	struct file_stamp stamps[TLS_FILES];
};

/* A stream's TLS layer. */
struct tls_conn {
	SSL *ssl;
	bool ktls;             /* both directions: the layer steps aside */
	bool ktls_tx, ktls_rx; /* each direction (OpenSSL 3.0 and TLS 1.3: sending at most) */
	bool starved; /* the last read wanted more from the socket: what is buffered is partial */
	uint8_t out[TLS_RECORD]; /* small frames gathered into one record */
};

static const struct tcp_io tls_io, tls_ktls_io;

/* OpenSSL's reason for the last error, for a sentence; clears the error queue. */
static const char *tls_reason(void)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	ERR_clear_error();
	return r ? r : "an unknown TLS error";
}

/* ---- context ------------------------------------------------------------------------------ */

static const struct tls_ctx *ctx_of(SSL *ssl)
{
	return SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
}

/* The external PSK as a session, as TLS 1.3 resumption would have one. */
static SSL_SESSION *psk_session(SSL *ssl)
{
	static const unsigned char aes256[2] = {0x13, 0x02}; /* TLS_AES_256_GCM_SHA384 */
	const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, aes256);
	SSL_SESSION *sess = SSL_SESSION_new();
	const struct tls_ctx *c = ctx_of(ssl);

	if (!cipher || !sess || !SSL_SESSION_set1_master_key(sess, c->psk, sizeof(c->psk)) ||
	    !SSL_SESSION_set_cipher(sess, cipher) ||
	    !SSL_SESSION_set_protocol_version(sess, TLS1_3_VERSION)) {
		SSL_SESSION_free(sess);
		return NULL;
	}
	return sess;
}

static int psk_use_cb(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
                      SSL_SESSION **sess)
{
	SSL_SESSION *s = psk_session(ssl);
	if (!s)
		return 0;
	/* A retry after HelloRetryRequest fixes the hash: ours must be it. */
	if (md && SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(s)) != md) {
		SSL_SESSION_free(s);
		s = NULL;
	}
	*id = (const unsigned char *)TLS_PSK_IDENTITY;
	*idlen = strlen(TLS_PSK_IDENTITY);
	*sess = s;
	return 1;
}

static int psk_find_cb(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
	*sess = NULL;
	if (idlen != strlen(TLS_PSK_IDENTITY) || memcmp(id, TLS_PSK_IDENTITY, idlen) != 0)
		return 1; /* not ours: the handshake fails for want of a key */
	*sess = psk_session(ssl);
	return *sess ? 1 : 0;
}

static int ctx_setup_psk(struct tls_ctx *c, const struct tls_params *p, char *err, size_t errlen)
{
	struct key_bytes *k = malloc(sizeof(*k));
	unsigned mdlen = 0;
	int rc = -1;
	EVP_MD_CTX *md = NULL;

	if (!k) {
		snprintf(err, errlen, "Out of memory reading %s.", p->psk_file);
		errno = ENOMEM;
		goto out;
	}
	if (keyfile_load(p->psk_file, "TLS pre-shared key", k, err, errlen) < 0)
		goto out;
	md = EVP_MD_CTX_new();
	if (!md || !EVP_DigestInit_ex(md, EVP_sha384(), NULL) ||
	    !EVP_DigestUpdate(md, TLS_PSK_LABEL, sizeof(TLS_PSK_LABEL)) ||
	    !EVP_DigestUpdate(md, k->bytes, k->len) || !EVP_DigestFinal_ex(md, c->psk, &mdlen) ||
	    mdlen != sizeof(c->psk)) {
		snprintf(err, errlen, "Cannot derive the TLS pre-shared key from %s: %s.",
		         p->psk_file, tls_reason());
		errno = EINVAL;
		goto out;
	}
	c->psk_mode = true;
	SSL_CTX_set_psk_use_session_callback(c->ssl, psk_use_cb);
	SSL_CTX_set_psk_find_session_callback(c->ssl, psk_find_cb);
	SSL_CTX_set_verify(c->ssl, SSL_VERIFY_NONE, NULL);
	rc = SSL_CTX_set_ciphersuites(c->ssl, "TLS_AES_256_GCM_SHA384") ? 0 : -1;
	if (rc < 0) {
		snprintf(err, errlen, "Cannot select the TLS cipher suite: %s.", tls_reason());
		errno = EINVAL;
	}
out:
	EVP_MD_CTX_free(md);
	if (k)
		OPENSSL_cleanse(k, sizeof(*k));
	free(k);
	return rc;
}

/* Load the CA, certificate and key; the sentence of the first problem in err, or "". */
static void ctx_load_certs(struct tls_ctx *c, const struct tls_params *p, char *err, size_t errlen)
{
	const char *const whats[] = {"CA file", "certificate", "key"};
	const char *const files[] = {p->ca_file, p->cert_file, p->key_file};
	const char *what = NULL, *file = NULL;

	/* OpenSSL says only "system lib" for a file it cannot open. */
	for (int i = 0; i < 3; i++)
		if (access(files[i], R_OK) < 0) {
			snprintf(err, errlen, "Cannot read the TLS %s %s: %s.", whats[i], files[i],
			         strerror(errno));
			return;
		}
	if (!SSL_CTX_load_verify_locations(c->ssl, p->ca_file, NULL))
		what = "CA file", file = p->ca_file;
	else if (!SSL_CTX_use_certificate_chain_file(c->ssl, p->cert_file))
		what = "certificate", file = p->cert_file;
	else if (!SSL_CTX_use_PrivateKey_file(c->ssl, p->key_file, SSL_FILETYPE_PEM))
		what = "key", file = p->key_file;
	/* Loading the key already compares it with the certificate: say so plainly. */
	if ((what && ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) ||
	    (!what && !SSL_CTX_check_private_key(c->ssl)))
		snprintf(err, errlen, "The TLS key %s does not match the certificate %s.",
		         p->key_file, p->cert_file);
	else if (what)
		snprintf(err, errlen, "Cannot load the TLS %s %s: %s.", what, file, tls_reason());
	ERR_clear_error();
}

static int ctx_setup_certs(struct tls_ctx *c, const struct tls_params *p, char *err, size_t errlen)
{
	err[0] = '\0';
	if (!p->ca_file || !p->cert_file || !p->key_file || !p->peer_name)
		snprintf(
		    err, errlen,
		    "TLS needs a pre-shared key file, or a CA file, a certificate, its key and "
		    "the peer's name.");
	else
		ctx_load_certs(c, p, err, errlen);
	if (!err[0] && !(c->peer_name = strdup(p->peer_name)))
		snprintf(err, errlen, "Out of memory.");
	/* Both sides insist on the other's certificate. */
	SSL_CTX_set_verify(c->ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	if (!err[0] &&
	    !SSL_CTX_set_ciphersuites(c->ssl, "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256"))
		snprintf(err, errlen, "Cannot select the TLS cipher suites: %s.", tls_reason());
	if (err[0])
		errno = EINVAL;
	return err[0] ? -1 : 0;
}

static int ctx_remember(struct tls_ctx *c, const struct tls_params *p);

int tls_ctx_create(const struct tls_params *p, struct tls_ctx **out, char *err, size_t errlen)
{
	struct tls_ctx *c = calloc(1, sizeof(*c));
	int rc = -1;

	if (!c) {
		snprintf(err, errlen, "Out of memory.");
		errno = ENOMEM;
		return -1;
	}
	c->timeout = p->handshake_timeout > 0 ? p->handshake_timeout : TLS_HS_TIMEOUT;
	c->ssl = SSL_CTX_new(TLS_method());
	if (!c->ssl || !SSL_CTX_set_min_proto_version(c->ssl, TLS1_3_VERSION)) {
		snprintf(err, errlen, "Cannot set up TLS 1.3: %s.", tls_reason());
		errno = ENOMEM;
		goto out;
	}
	SSL_CTX_set_app_data(c->ssl, c);
	SSL_CTX_set_mode(c->ssl,
	                 SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* No tickets: nothing resumes (every connection authenticates afresh), and no record
	 * after the handshake may reach a socket the kernel's TLS reads. An end of stream without
	 * close_notify is the peer closing: frames are self-delimiting, truncation shows. */
	SSL_CTX_set_options(c->ssl, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET);
	/* Opt-in: in the one kernel measured (a guest), kTLS sending made the replicated 4 KiB
	 * write slower than OpenSSL's own records (docs/security.md). */
	if (p->kernel)
		SSL_CTX_set_options(c->ssl, SSL_OP_ENABLE_KTLS);
	SSL_CTX_set_num_tickets(c->ssl, 0);
	SSL_CTX_set_session_cache_mode(c->ssl, SSL_SESS_CACHE_OFF);
	/* Read ahead into a large buffer: one read() brings several records, where reading
	 * exactly one record costs two (its header, then its body). */
	SSL_CTX_set_read_ahead(c->ssl, 1);
	SSL_CTX_set_default_read_buffer_len(c->ssl, TLS_READ_BUF);
	if (p->psk_file && (p->ca_file || p->cert_file || p->key_file)) {
		snprintf(err, errlen,
		         "TLS takes either a pre-shared key file (%s) or certificates, not both.",
		         p->psk_file);
		errno = EINVAL;
		goto out;
	}
	if ((p->psk_file ? ctx_setup_psk(c, p, err, errlen) : ctx_setup_certs(c, p, err, errlen)) <
	    0)
		goto out;
	if (ctx_remember(c, p) < 0) {
		snprintf(err, errlen, "Out of memory.");
		errno = ENOMEM;
		goto out;
	}
	*out = c;
	rc = 0;
out:
	if (rc < 0)
		tls_ctx_free(c);
	return rc;
}

/* The files of p, in struct tls_ctx's order. */
static void ctx_files(const struct tls_params *p, const char *f[TLS_FILES])
{
	f[0] = p->ca_file;
	f[1] = p->cert_file;
	f[2] = p->key_file;
	f[3] = p->psk_file;
}

static void ctx_stamps(char *const files[TLS_FILES], struct file_stamp st[TLS_FILES])
{
	for (int i = 0; i < TLS_FILES; i++)
		if (keyfile_stamp(files[i], &st[i]) < 0)
			memset(&st[i], 0xff, sizeof(st[i])); /* unreadable: differs from any file */
}

/* Remember p's files and their stamps in c. -1 when memory ran out. */
static int ctx_remember(struct tls_ctx *c, const struct tls_params *p)
{
	const char *f[TLS_FILES];
	ctx_files(p, f);
	for (int i = 0; i < TLS_FILES; i++)
		if (f[i] && !(c->files[i] = strdup(f[i])))
			return -1;
	ctx_stamps(c->files, c->stamps);
	return 0;
}

/*
 * Before a handshake: if a file of c was replaced, make the context again from the files and
 * use it from now on (streams already up keep theirs: each SSL holds its SSL_CTX). A set of
 * files that does not load leaves the old context in use, with a warning once per change.
 */
static void ctx_refresh(struct tls_ctx *c)
{
	struct file_stamp now[TLS_FILES];
	struct tls_ctx *n = NULL;
	char err[512];
	ctx_stamps(c->files, now);
	if (memcmp(now, c->stamps, sizeof(now)) == 0)
		return;
	memcpy(c->stamps, now, sizeof(now));
	struct tls_params p = {.ca_file = c->files[0],
	                       .cert_file = c->files[1],
	                       .key_file = c->files[2],
	                       .psk_file = c->files[3],
	                       .peer_name = c->peer_name,
	                       .handshake_timeout = c->timeout};
	if (tls_ctx_create(&p, &n, err, sizeof(err)) < 0) {
		log_msg(LOG_LVL_WARN,
		        "The replication link's TLS files changed but do not load: %s The ones "
		        "loaded before stay in use.",
		        err);
		return;
	}
	SSL_CTX *old = c->ssl;
	c->ssl = n->ssl;
	n->ssl = old;
	SSL_CTX_set_app_data(c->ssl, c);
	memcpy(c->psk, n->psk, sizeof(c->psk));
	tls_ctx_free(n);
	log_msg(LOG_LVL_NOTICE, "The replication link's TLS %s changed: new connections use %s.",
	        c->psk_mode ? "pre-shared key" : "certificate or key files",
	        c->psk_mode ? "the new key" : "them");
}

void tls_ctx_free(struct tls_ctx *c)
{
	if (!c)
		return;
	SSL_CTX_free(c->ssl);
	free(c->peer_name);
	for (int i = 0; i < TLS_FILES; i++)
		free(c->files[i]);
	OPENSSL_cleanse(c->psk, sizeof(c->psk));
	free(c);
}

/* ---- the stream's layer ------------------------------------------------------------------- */

/* A failed SSL_read/SSL_write as tcp_io wants it. */
static ssize_t conn_error(SSL *ssl, int r, const char *what, char *why, size_t whylen)
{
	int saved = errno;
	switch (SSL_get_error(ssl, r)) {
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_WANT_READ:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		errno = EINPROGRESS;
		return -1;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		if (!saved)
			return 0;
		errno = saved;
		return -1;
	default:
		snprintf(why, whylen, "%s failed: TLS says %s", what, tls_reason());
		errno = EPROTO;
		return -1;
	}
}

static ssize_t conn_read(void *ctx, void *buf, size_t len, char *why, size_t whylen)
{
	struct tls_conn *t = ctx;
	size_t n = 0;
	ERR_clear_error();
	errno = 0; /* SSL_ERROR_SYSCALL with errno 0 is an end of stream */
	t->starved = false;
	if (SSL_read_ex(t->ssl, buf, len, &n) > 0)
		return (ssize_t)n;
	ssize_t r = conn_error(t->ssl, 0, "receiving", why, whylen);
	t->starved = r < 0 && errno == EAGAIN;
	return r;
}

/* The queue's first bytes for one record: the head item's own data when it fills one (no copy;
 * the same pointer again if SSL_write must be retried), else copies gathered into t->out. */
static size_t conn_next_record(struct tls_conn *t, const struct outq *q, const void **p)
{
	struct iovec iov[TLS_IOV];
	int n = outq_iov(q, iov, TLS_IOV);
	size_t len = 0;

	if (iov[0].iov_len >= TLS_RECORD) {
		*p = iov[0].iov_base;
		return TLS_RECORD;
	}
	for (int i = 0; i < n && len < TLS_RECORD; i++) {
		size_t take = iov[i].iov_len < TLS_RECORD - len ? iov[i].iov_len : TLS_RECORD - len;
		memcpy(t->out + len, iov[i].iov_base, take);
		len += take;
	}
	*p = t->out;
	return len;
}

static int conn_flush(void *ctx, struct outq *q, char *why, size_t whylen)
{
	struct tls_conn *t = ctx;
	while (q->head) {
		const void *p;
		size_t len = conn_next_record(t, q, &p), n = 0;
		ERR_clear_error();
		errno = 0; /* SSL_ERROR_SYSCALL with errno 0 is an end of stream */
		if (SSL_write_ex(t->ssl, p, len, &n) > 0) {
			outq_advance(q, n);
			continue;
		}
		if (conn_error(t->ssl, 0, "sending", why, whylen) == 0) {
			errno = EPIPE;
			return -1;
		}
		if (errno == EAGAIN)
			return 2; /* a record must be read first */
		return errno == EINPROGRESS ? 1 : -1;
	}
	return 0;
}

static bool conn_pending(void *ctx)
{
	const struct tls_conn *t = ctx;
	/* Decrypted bytes, or records read ahead from the socket, unless the last read found only
	 * part of one (the socket signals the rest). */
	return SSL_pending(t->ssl) > 0 || (!t->starved && SSL_has_pending(t->ssl));
}

static void conn_free(void *ctx)
{
	struct tls_conn *t = ctx;
	/* A close_notify if the socket takes it at once; after a fatal alert it sends nothing. */
	if (!t->ktls)
		(void)SSL_shutdown(t->ssl);
	SSL_free(t->ssl);
	ERR_clear_error();
	free(t);
}

static const struct tcp_io tls_io = {.transport = &transport_tls,
                                     .read = conn_read,
                                     .flush = conn_flush,
                                     .pending = conn_pending,
                                     .free = conn_free};
/* The kernel does the records: plain syscalls, the SSL kept for status. */
static const struct tcp_io tls_ktls_io = {.transport = &transport_tls, .free = conn_free};

int tls_stream_info(const struct tstream *s, bool *ktls_tx, bool *ktls_rx, const char **cipher)
{
	const struct tls_conn *t = NULL;
	if (s->t == &transport_tls) {
		t = tcp_stream_io(s, &tls_io);
		if (!t)
			t = tcp_stream_io(s, &tls_ktls_io);
	}
	if (!t)
		return -1;
	*ktls_tx = t->ktls_tx;
	*ktls_rx = t->ktls_rx;
	*cipher = SSL_get_cipher_name(t->ssl);
	return 0;
}

/* ---- handshake ---------------------------------------------------------------------------- */

struct tls_hs;
/* The end of a handshake: s, or NULL with err and why. h is already freed. */
typedef void (*tls_hs_end_fn)(void *owner, const char *peer, struct tstream *s, int err,
                              const char *why);

struct tls_hs {
	struct ev_loop *loop;
	int fd;
	SSL *ssl;
	ev_io io;
	ev_timer timer;
	char peer[64];
	const struct tstream_ops *ops; /* the stream's owner */
	void *ctx;
	tls_hs_end_fn end;
	void *owner;
	struct tls_hs *next, **pprev; /* a listener's handshakes */
};

static void hs_free(struct tls_hs *h)
{
	ev_io_stop(h->loop, &h->io);
	ev_timer_stop(h->loop, &h->timer);
	if (h->pprev) {
		*h->pprev = h->next;
		if (h->next)
			h->next->pprev = h->pprev;
	}
	SSL_free(h->ssl);
	if (h->fd >= 0)
		close(h->fd);
	free(h);
}

/* Why the handshake failed, as a sentence fragment. */
static void hs_describe(SSL *ssl, int e, char *why, size_t len)
{
	long v = SSL_get_verify_result(ssl);
	if (v != X509_V_OK)
		snprintf(why, len, "its certificate failed verification: %s",
		         X509_verify_cert_error_string(v));
	else if (e == SSL_ERROR_SYSCALL && errno)
		snprintf(why, len, "the TLS handshake failed: %s", strerror(errno));
	else if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN)
		snprintf(why, len, "the peer closed the connection during the TLS handshake");
	else
		snprintf(why, len, "the TLS handshake failed: %s", tls_reason());
	ERR_clear_error();
}

static void hs_end(struct tls_hs *h, struct tstream *s, int err, const char *why)
{
	char peer[sizeof(h->peer)];
	tls_hs_end_fn end = h->end;
	void *owner = h->owner;
	snprintf(peer, sizeof(peer), "%s", h->peer);
	if (s) {
		h->ssl = NULL; /* the stream's now, and the fd */
		h->fd = -1;
	}
	hs_free(h);
	end(owner, peer, s, err, why);
}

/* The handshake is done: make the stream, the kernel's TLS or ours. */
static void hs_finish(struct tls_hs *h)
{
	struct tls_conn *t = calloc(1, sizeof(*t));
	struct tstream *s = NULL;
	if (!t) {
		hs_end(h, NULL, ENOMEM, "out of memory for a TLS stream");
		return;
	}
	t->ssl = h->ssl;
#ifndef OPENSSL_NO_KTLS
	/* With sending alone offloaded the layer stays, and SSL_write hands plaintext to the
	 * kernel, which makes the records. */
	t->ktls_tx = BIO_get_ktls_send(SSL_get_wbio(h->ssl));
	t->ktls_rx = BIO_get_ktls_recv(SSL_get_rbio(h->ssl));
	t->ktls = t->ktls_tx && t->ktls_rx;
#endif
	if (tcp_stream_create_io(h->loop, h->fd, t->ktls ? &tls_ktls_io : &tls_io, t, h->ops,
	                         h->ctx, &s) < 0) {
		free(t);
		hs_end(h, NULL, ENOMEM, "out of memory for a TLS stream");
		return;
	}
	hs_end(h, s, 0, NULL);
}

static void hs_step(struct tls_hs *h)
{
	ERR_clear_error();
	errno = 0; /* SSL_ERROR_SYSCALL with errno 0 is an end of stream */
	int r = SSL_do_handshake(h->ssl);
	if (r == 1) {
		hs_finish(h);
		return;
	}
	int e = SSL_get_error(h->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		ev_io_stop(h->loop, &h->io);
		ev_io_set(&h->io, h->fd, e == SSL_ERROR_WANT_READ ? EV_READ : EV_WRITE);
		ev_io_start(h->loop, &h->io);
		return;
	}
	char why[300];
	int err = e == SSL_ERROR_SYSCALL && errno ? errno : EACCES;
	hs_describe(h->ssl, e, why, sizeof(why));
	hs_end(h, NULL, err, why);
}

static void hs_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	hs_step(w->data);
}

static void hs_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tls_hs *h = w->data;
	char why[96];
	(void)loop;
	(void)revents;
	snprintf(why, sizeof(why), "no TLS handshake within %.1f s", h->timer.repeat);
	hs_end(h, NULL, ETIMEDOUT, why);
}

/* Start the handshake on fd (taken, also on -1). */
static struct tls_hs *hs_start(struct tls_ctx *c, struct ev_loop *loop, int fd, bool server,
                               const struct tstream_ops *ops, void *ctx)
{
	struct tls_hs *h = calloc(1, sizeof(*h));
	if (!h) {
		close(fd);
		return NULL;
	}
	h->loop = loop;
	h->fd = fd;
	h->ops = ops;
	h->ctx = ctx;
	ctx_refresh(c);
	if (net_peer_name(fd, h->peer, sizeof(h->peer)) < 0)
		snprintf(h->peer, sizeof(h->peer), "an unknown address");
	h->ssl = SSL_new(c->ssl);
	if (!h->ssl || !SSL_set_fd(h->ssl, fd) ||
	    (c->peer_name && (!SSL_set1_host(h->ssl, c->peer_name) ||
	                      (!server && !SSL_set_tlsext_host_name(h->ssl, c->peer_name))))) {
		ERR_clear_error();
		hs_free(h);
		return NULL;
	}
	SSL_set_hostflags(h->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (server)
		SSL_set_accept_state(h->ssl);
	else
		SSL_set_connect_state(h->ssl);
	ev_io_init(&h->io, hs_io_cb, fd, server ? EV_READ : EV_WRITE);
	ev_timer_init(&h->timer, hs_timer_cb, c->timeout, c->timeout);
	h->io.data = h->timer.data = h;
	ev_timer_start(loop, &h->timer);
	ev_io_start(loop, &h->io);
	return h;
}

/* ---- listen ------------------------------------------------------------------------------- */

struct tls_listener {
	struct tlistener base;
	struct tlisten_params p; /* addr is not kept */
	struct tcp_acceptor a;
	struct tls_hs *hs; /* handshakes running */
	unsigned n_hs;
};

static void listener_hs_end(void *owner, const char *peer, struct tstream *s, int err,
                            const char *why)
{
	struct tls_listener *l = owner;
	(void)err;
	l->n_hs--;
	if (!s) {
		log_warn("Refused the replication connection from %s: %s.", peer, why);
		return;
	}
	l->p.accepted(l->p.ctx, &l->base, s);
}

static void listener_take(struct tcp_acceptor *a, int fd)
{
	struct tls_listener *l = a->owner;
	if (l->n_hs >= TLS_HS_MAX) {
		char peer[64];
		if (net_peer_name(fd, peer, sizeof(peer)) < 0)
			snprintf(peer, sizeof(peer), "an unknown address");
		log_warn("Refused the replication connection from %s: %d TLS handshakes are "
		         "already running.",
		         peer, TLS_HS_MAX);
		close(fd);
		return;
	}
	struct tls_hs *h = hs_start(l->p.topts, a->loop, fd, true, l->p.ops, l->p.ctx);
	if (!h)
		return;
	h->end = listener_hs_end;
	h->owner = l;
	h->next = l->hs;
	if (l->hs)
		l->hs->pprev = &h->next;
	h->pprev = &l->hs;
	l->hs = h;
	l->n_hs++;
}

static int tls_listen(const struct tlisten_params *p, struct tlistener **out)
{
	/* Without a context there is nothing to authenticate with. */
	struct tls_listener *l = p->topts ? calloc(1, sizeof(*l)) : NULL;
	int e = p->topts ? ENOMEM : EINVAL;

	if (l &&
	    tcp_acceptor_open(&l->a, p->loop, p->addr, p->port_offset, listener_take, l) == 0) {
		l->base.t = &transport_tls;
		l->p = *p;
		l->p.addr = NULL;
		*out = &l->base;
		return 0;
	}
	if (l)
		e = errno;
	free(l);
	errno = e;
	return -1;
}

static void tls_listener_close(struct tlistener *tl)
{
	struct tls_listener *l = (struct tls_listener *)tl;
	while (l->hs)
		hs_free(l->hs);
	tcp_acceptor_close(&l->a);
	free(l);
}

/* ---- connect ------------------------------------------------------------------------------ */

struct tls_connect {
	struct tconnect base;
	struct tconnect_params p; /* addr and bind_host are not kept */
	struct tcp_connector k;
	struct tls_hs *hs; /* once TCP connected */
	bool in_done;      /* done() is running: a cancel from inside it is too late */
};

static void connect_finish(struct tls_connect *c, struct tstream *s, int err)
{
	c->in_done = true;
	c->p.done(c->p.ctx, &c->base, s, err);
	free(c);
}

static void connect_hs_end(void *owner, const char *peer, struct tstream *s, int err,
                           const char *why)
{
	struct tls_connect *c = owner;
	c->hs = NULL;
	if (!s)
		log_warn("The TLS handshake with %s failed: %s.", peer, why);
	connect_finish(c, s, err);
}

static void connect_tcp_done(struct tcp_connector *k, int fd, int err)
{
	struct tls_connect *c = k->owner;
	if (err) {
		connect_finish(c, NULL, err);
		return;
	}
	c->hs = hs_start(c->p.topts, k->loop, fd, false, c->p.ops, c->p.ctx);
	if (!c->hs) {
		connect_finish(c, NULL, ENOMEM);
		return;
	}
	c->hs->end = connect_hs_end;
	c->hs->owner = c;
}

static int tls_connect(const struct tconnect_params *p, struct tconnect **out)
{
	struct tls_connect *c = p->topts ? calloc(1, sizeof(*c)) : NULL;
	int e = p->topts ? ENOMEM : EINVAL;

	if (c && tcp_connector_start(&c->k, p, connect_tcp_done, c) == 0) {
		c->base.t = &transport_tls;
		c->p = *p;
		c->p.addr = c->p.bind_host = NULL;
		*out = &c->base;
		return 0;
	}
	if (c)
		e = errno;
	free(c);
	errno = e;
	return -1;
}

static void tls_connect_cancel(struct tconnect *tc)
{
	struct tls_connect *c = (struct tls_connect *)tc;
	if (c->in_done)
		return;
	if (c->hs)
		hs_free(c->hs);
	else
		tcp_connector_cancel(&c->k);
	free(c);
}

const struct transport_ops transport_tls = {
    .name = "tls",
    .listen = tls_listen,
    .listener_close = tls_listener_close,
    .connect = tls_connect,
    .connect_cancel = tls_connect_cancel,
    TCP_STREAM_OPS,
};
