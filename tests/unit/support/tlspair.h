/* SPDX-License-Identifier: MIT */
/*
 * TLS for the unit tests: certificates and keys made by tests/tls-certs.sh in a temporary
 * directory, contexts from them, and a connection over loopback between two contexts whose
 * handshakes have ended one way or the other.
 */
#ifndef HAK_TLSPAIR_H
#define HAK_TLSPAIR_H

#include <stddef.h>

#include "transport/tls.h"

struct ev_loop;

/* A fresh directory with tls-certs.sh's files (names alpha and beta): 0, or -1. */
int tlspair_files(char *dir, size_t len);
/* Remove it. */
void tlspair_files_remove(const char *dir);
/* A certificate context: DIR/cert.crt and .key, CA DIR/ca.crt, expecting peer's name; NULL on
 * failure (the reason is printed). */
struct tls_ctx *tlspair_cert_ctx(const char *dir, const char *ca, const char *cert,
                                 const char *peer);
/* A pre-shared key context from DIR/file. */
struct tls_ctx *tlspair_psk_ctx(const char *dir, const char *file);

/* What a connection between two contexts gave each side. */
struct tlspair {
	struct tstream *server, *client;
	int client_err; /* done()'s err */
	unsigned accepted, done;
};

/*
 * Listen on a free loopback port with server, connect with client, and run loop until the
 * client's done() ran and the server accepted or had time to refuse. The streams' owners are
 * ops with sctx and cctx. Returns 0 when the listener opened (whatever the handshake gave), -1
 * otherwise.
 */
int tlspair_connect(struct ev_loop *loop, struct tls_ctx *server, struct tls_ctx *client,
                    const struct tstream_ops *ops, void *sctx, void *cctx, struct tlspair *out);
/* A loopback "127.0.0.1:PORT" nobody listens on. */
void tlspair_free_port(char *addr, size_t len);
/* Run loop iterations without sleeping long, for about seconds. */
void tlspair_spin(struct ev_loop *loop, double seconds);

#endif
