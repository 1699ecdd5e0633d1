/* SPDX-License-Identifier: MIT */
/*
 * TLS for NBD connections (NBD_OPT_STARTTLS), with OpenSSL: one context per volume built from
 * its certificate or pre-shared key files, and per connection a non-blocking server session on
 * the connection's socket. nbd.c decides when to start it and moves the bytes through it; this
 * module knows nothing of the NBD protocol or of libev.
 *
 * Certificate mode: the server shows nbd-tls-cert-file; with nbd-tls-ca-file every client must
 * show a certificate that CA signed, or the handshake fails. PSK mode: clients name a user of
 * nbd-tls-psk-file ("username:hexkey" lines, the format of GnuTLS's psktool that libnbd, qemu
 * and nbdkit read) and prove they hold its key. TLS 1.2 at least; 1.3 when the client has it.
 */
#ifndef HAK_NBD_TLS_H
#define HAK_NBD_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct outq;
struct nbd_tls_ctx;
struct nbd_tls;

struct nbd_tls_files {
	const char *cert_file; /* with key_file, or NULL for PSK */
	const char *key_file;
	const char *ca_file;  /* NULL: client certificates are not asked for */
	const char *psk_file; /* NULL for certificates */
};

/* What a session needs to go on: the socket must become readable or writable first. */
enum nbd_tls_want {
	NBD_TLS_WANT_NONE = 0,
	NBD_TLS_WANT_READ,
	NBD_TLS_WANT_WRITE,
};

/*
 * Load the files of volume (named in messages) into a server context. Returns 0, or -1 with
 * errno and a sentence in err naming the file and what is wrong with it (missing, unreadable,
 * not PEM, a key that does not match the certificate, a malformed PSK line).
 */
int nbd_tls_ctx_create(const struct nbd_tls_files *f, const char *volume, struct nbd_tls_ctx **out,
                       char *err, size_t errlen);
void nbd_tls_ctx_free(struct nbd_tls_ctx *ctx);

/* A server session on the connected socket fd; peer names the client in messages. NULL with
 * errno ENOMEM. The fd stays the caller's. */
struct nbd_tls *nbd_tls_new(struct nbd_tls_ctx *ctx, int fd, const char *peer);
/*
 * Send close_notify if the session is up (best effort, never blocks); from then on the session
 * touches the socket no more and its calls fail with EBADF, so the caller may close the socket
 * even while a flush further up its stack still holds the session (a sent() callback may close
 * the connection). nbd_tls_free() releases it once nothing does.
 */
void nbd_tls_close(struct nbd_tls *t);
void nbd_tls_free(struct nbd_tls *t);

/*
 * Advance the handshake. 0 when it completed, 1 when it waits (*want says for what), -1 when
 * it failed, with a sentence naming the client and OpenSSL's reason in err.
 */
int nbd_tls_handshake(struct nbd_tls *t, enum nbd_tls_want *want, char *err, size_t errlen);
/* "TLSv1.3 TLS_AES_256_GCM_SHA384, PSK user alice" or "..., client certificate CN=x". */
void nbd_tls_describe(const struct nbd_tls *t, char *buf, size_t len);

/*
 * Read up to len decrypted bytes. >0 bytes, 0 at the end of the stream (close_notify or the
 * peer hung up), -1 with errno: EAGAIN (*want says what to wait for), EPROTO (a TLS error; a
 * sentence in err) or the socket's error.
 */
ssize_t nbd_tls_read(struct nbd_tls *t, void *buf, size_t len, enum nbd_tls_want *want, char *err,
                     size_t errlen);
/* Whether decrypted bytes wait inside the session: the socket will not signal them. */
bool nbd_tls_pending(const struct nbd_tls *t);

/*
 * Encrypt and write what the output queue holds, as outq_flush() does for plain sockets: 0 when
 * the queue is empty, 1 when the socket would block (*want says what to wait for), -1 with
 * errno. Small items are copied into one TLS record, so their sent() runs once copied;
 * nbd_tls_unsent() says whether such bytes still wait.
 */
int nbd_tls_flush(struct nbd_tls *t, struct outq *q, enum nbd_tls_want *want);
/* Whether bytes taken from the queue still wait in the session to be written. */
bool nbd_tls_unsent(const struct nbd_tls *t);

#endif
