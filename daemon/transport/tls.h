/* SPDX-License-Identifier: MIT */
/*
 * The TLS transport ("tls"): TLS 1.3 only, over the TCP transport's sockets and streams. Each
 * listener and connect gets a struct tls_ctx in its params' topts; the handshake runs inside the
 * transport, so accepted() and done() only ever see authenticated streams. A handshake that fails
 * or does not finish within the context's timeout closes the socket with one log line naming the
 * address and the reason; a connect's done() then gets EACCES (refused: the certificate, its
 * name, the key, or the peer's alert), ETIMEDOUT (no handshake in time) or the socket's errno.
 * One case cannot reach done(): in TLS 1.3 the client's handshake ends before the server has
 * checked the client's certificate, so a server refusing it shows on the client as the stream's
 * first error ("receiving failed: TLS says ... alert ..."); the server logs the reason.
 *
 * Two ways to authenticate, both mutual:
 *  - certificates: a CA file, this node's certificate and key, and the name the peer's
 *    certificate must carry (a DNS subjectAltName, or the common name without one). Each side
 *    verifies the other's chain and name.
 *  - a pre-shared key: TLS 1.3 external PSK (identity "hak-repl", TLS_AES_256_GCM_SHA384, with an
 *    (EC)DHE exchange, so recorded traffic stays secret if the key leaks later). The key file has
 *    the heartbeat key's format (lib/keyfile.h); the PSK is SHA-384 of a label and its bytes, so
 *    the same file used for another purpose gives an unrelated key.
 *
 * After the handshake a stream is a TCP stream (tcp.h) whose reads and writes go through the TLS
 * layer: SSL_read, and the output queue coalesced into records of up to 16 KiB for SSL_write. If
 * the kernel took over the record layer in both directions (kTLS), the layer steps aside and
 * the data path is the plain TCP one. OpenSSL 3.0 (Debian 12) offloads TLS 1.3 only when
 * sending: receive offload for 1.3 came later (openssl/openssl#17942, on master after 3.0), so
 * with 3.0 a TLS 1.3 stream keeps the userspace layer, as it does without the kernel's tls
 * module. Session tickets are off so that no record but application data follows the handshake,
 * which a kTLS socket could not take.
 *
 * OpenSSL writes to the socket with write(): the process must ignore SIGPIPE (hakd does), or a
 * peer gone at the wrong moment kills it.
 */
#ifndef HAK_TLS_H
#define HAK_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "transport.h"

extern const struct transport_ops transport_tls;

struct tls_ctx;

struct tls_params {
	/* Certificates: all four, or none of them with psk_file. PEM files. */
	const char *ca_file;
	const char *cert_file; /* this node's certificate (and chain) */
	const char *key_file;
	const char *peer_name; /* the name the peer's certificate must carry */
	/* Pre-shared key: a file readable by its owner only. */
	const char *psk_file;
	double handshake_timeout; /* seconds; 0: 5 */
	bool kernel; /* offer the record layer to the kernel (kTLS) when it has the tls module */
};

/* Load the files and check them (the key must match the certificate): 0, or -1 with errno and
 * a sentence in err. One context serves any number of listeners, connects and streams. */
int tls_ctx_create(const struct tls_params *p, struct tls_ctx **out, char *err, size_t errlen);
/* After every listener, connect and stream that uses c is closed. NULL is ignored. */
void tls_ctx_free(struct tls_ctx *c);

/* For status: whether s is a TLS stream, whether the kernel makes its records when sending
 * (ktls_tx) and reads them (ktls_rx), and its cipher suite name. -1 when s is not a TLS
 * stream. */
int tls_stream_info(const struct tstream *s, bool *ktls_tx, bool *ktls_rx, const char **cipher);

#endif
