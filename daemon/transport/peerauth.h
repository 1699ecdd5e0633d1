/* SPDX-License-Identifier: MIT */
/*
 * Peer authentication on the replication link, before replication sees a connection (as DRBD's
 * cram-hmac-alg): each side sends a random challenge and proves it holds the shared key by
 * answering the other's with an HMAC-SHA-256.
 *
 *   connector -> acceptor   AUTH_CHALLENGE(role 0, Nc)      sent at once by both sides
 *   acceptor  -> connector  AUTH_CHALLENGE(role 1, Na)
 *   connector -> acceptor   AUTH_RESPONSE(MAC(0, Na, Nc, connector, acceptor))
 *   acceptor checks it, then AUTH_RESPONSE(MAC(1, Nc, Na, acceptor, connector))
 *   connector checks it.
 *
 * MAC(role, challenge, own nonce, sender, receiver) = HMAC-SHA-256(key, "hak-repl-auth-1" | role
 * | challenge | own nonce | sender | receiver | volume), names zero-padded to WIRE_NAME_MAX.
 * The acceptor answers only after the connector has proved itself, so a stranger never obtains
 * a MAC computed by this node; the role and the two names make a response useless on another
 * connection or reflected back at its author (the two nodes have different names); fresh
 * nonces make a recorded exchange useless later.
 *
 * tlistener_open() and tconnect_start() run it when their params carry a struct tauth: accepted()
 * sees only streams that authenticated, done() only an authenticated stream or err EACCES
 * (refused) / ETIMEDOUT (no answer in time). Until then a connection may send only these two
 * small frames (anything else, and any frame larger than a HELLO, is refused before a buffer is
 * allocated for it), for at most `timeout` seconds, and a listener keeps at most `max_pending`
 * of them (`max_per_source` from one address).
 *
 * This proves who is at the other end when the connection starts. Without TLS, whoever can
 * rewrite the TCP stream later can still take it over (docs/security.md).
 */
#ifndef HAK_PEERAUTH_H
#define HAK_PEERAUTH_H

#include <hak/wire.h>
#include <stdint.h>

#include "lib/keyfile.h"
#include "transport.h"

struct tauth {
	struct key_bytes key;
	/* Where the key came from, or NULL. It is read again when the file changed (another inode,
	 * size or mtime) before each new connection, so a key is rotated by replacing the file on
	 * both nodes, without a restart: connections already up are not affected. A file that no
	 * longer loads keeps the old key, with a warning. */
	const char *key_file;
	struct file_stamp key_stamp;
	/* The key before the last replacement, while has_prev: the peer may not have its new file
	 * yet. An acceptor takes an answer under either key; a connector tries the new one and,
	 * once the peer refused it, the old one (use_prev) until that worked. Forgotten once the
	 * peer proved it holds the new key. */
	struct key_bytes prev;
	bool has_prev;
	bool use_prev;
	char self[WIRE_NAME_MAX + 1]; /* this node's name */
	char peer[WIRE_NAME_MAX + 1]; /* the only node allowed at the other end */
	char volume[WIRE_NAME_MAX + 1];
	double timeout;          /* seconds a connection has to authenticate, on both sides */
	unsigned max_pending;    /* accepted connections authenticating at once, per listener */
	unsigned max_per_source; /* of those, from one address */
	/* Kept by this module: a peer with the wrong key retries every connect-interval, so
	 * failures are logged up to 8 per 10 s and then counted. */
	double fail_window;   /* start of the current 10 s window */
	unsigned fail_logged; /* failures logged in it (at most 8) */
	unsigned fail_quiet;  /* failures not logged since the last message */
	uint64_t refused;     /* connections refused so far (status) */
};

/* Fill a with defaults (timeout 5 s, 16 pending, 4 per source) for these names and key. */
void peerauth_init(struct tauth *a, const struct key_bytes *key, const char *self, const char *peer,
                   const char *volume);
/* Read a->key_file if it changed since the last load (see key_file). 1 when the key changed, 0
 * when not, -1 (logged) when the file does not load (the key stays). */
int peerauth_refresh_key(struct tauth *a);
/* MAC(role, challenge, own nonce, sender, receiver) of the exchange above. */
void peerauth_mac(const struct tauth *a, uint8_t role, const uint8_t chal[WIRE_AUTH_NONCE],
                  const uint8_t own[WIRE_AUTH_NONCE], const char *sender, const char *receiver,
                  uint8_t out[WIRE_AUTH_MAC_SIZE]);
/* Encode / decode an AUTH_CHALLENGE payload. decode: -1 with a sentence fragment in err. */
void peerauth_chal_encode(uint8_t out[WIRE_AUTH_CHAL_SIZE], uint8_t role,
                          const uint8_t nonce[WIRE_AUTH_NONCE]);
int peerauth_chal_decode(const uint8_t *in, size_t len, uint8_t *role,
                         uint8_t nonce[WIRE_AUTH_NONCE], char *err, size_t errlen);

/* For transport.c: tlistener_open / tconnect_start with p->auth set. */
int peerauth_listen(const struct transport_ops *t, const struct tlisten_params *p,
                    struct tlistener **out);
int peerauth_connect(const struct transport_ops *t, const struct tconnect_params *p,
                     struct tconnect **out);

#endif
