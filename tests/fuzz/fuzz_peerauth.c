/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: what a stranger sends to a replication listener before it authenticates.
 * The input is a script of frames for one accepted connection (in-memory transport): each step
 * is a selector byte, a length byte and that many bytes, and injects a challenge, a response
 * with the right MAC (the harness knows the key), a response of raw bytes, any frame, or a
 * transport error. A model of the exchange says whether the script authenticates (a valid
 * connector challenge, then the right MAC, nothing else before); the listener must hand the
 * stream over exactly then, and never send its own proof before it. Leaks show at exit.
 */
#include <ev.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/support/memtransport.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "transport/peerauth.h"
#include "transport/wire.h"

#define ADDR "192.0.2.2:7789"

static struct ev_loop *loop;
static struct tauth auth, peer;
static int accepted;
static struct tstream *handed;

static void own_frame(void *ctx, struct tstream *s, const struct wire_hdr *h, uint8_t *payload)
{
	(void)ctx;
	(void)s;
	buf_put(payload, h->len);
}

static void own_error(void *ctx, struct tstream *s, const char *why)
{
	(void)ctx;
	(void)why;
	tstream_close(s);
	handed = NULL;
}

static const struct tstream_ops own_ops = {own_frame, own_error};

static void on_accepted(void *ctx, struct tlistener *l, struct tstream *s)
{
	(void)ctx;
	(void)l;
	accepted++;
	handed = s;
}

static void init_once(void)
{
	struct key_bytes k = {.len = 24};
	memcpy(k.bytes, "the pair's shared secret", 24);
	loop = ev_loop_new(EVFLAG_AUTO);
	log_set_level(LOG_LVL_ERR);
	peerauth_init(&auth, &k, "beta", "alpha", "db");
	peerauth_init(&peer, &k, "alpha", "beta", "db");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!loop)
		init_once();
	struct tlisten_params p = {
	    .loop = loop, .auth = &auth, .addr = ADDR, .ops = &own_ops, .accepted = on_accepted};
	struct tlistener *l = NULL;
	struct memwire w = {0};
	uint8_t na[WIRE_AUTH_NONCE] = {0}, nc[WIRE_AUTH_NONCE] = {0}, role;
	char err[160];
	int state = 0; /* model: 0 wants a challenge, 1 wants the MAC, 2 authenticated, 3 refused */
	accepted = 0;
	handed = NULL;
	if (tlistener_open(&memtransport, &p, &l) < 0 ||
	    memlistener_accept(memtransport_listener(ADDR), &w) < 0)
		abort();
	memwire_flush(&w);
	if (w.n_frames != 1 || w.frames[0].hdr.type != WIRE_AUTH_CHALLENGE ||
	    peerauth_chal_decode(w.frames[0].payload, w.frames[0].hdr.len, &role, na, err,
	                         sizeof(err)) < 0)
		abort();
	size_t pos = 0;
	while (size - pos >= 2 && !w.closed) {
		uint8_t sel = data[pos] % 5, len = data[pos + 1];
		pos += 2;
		if (len > size - pos)
			len = (uint8_t)(size - pos);
		const uint8_t *b = data + pos;
		pos += len;
		uint8_t buf[256] = {0}, mac[WIRE_AUTH_MAC_SIZE];
		memcpy(buf, b, len);
		uint16_t type;
		uint32_t plen;
		if (sel == 0) { /* a challenge: role from the input, nonce from the input */
			uint8_t n[WIRE_AUTH_NONCE] = {0}, r = len ? b[0] & 1 : 0;
			if (len > 1)
				memcpy(n, b + 1, len - 1u < sizeof(n) ? len - 1u : sizeof(n));
			type = WIRE_AUTH_CHALLENGE;
			peerauth_chal_encode(buf, r, n);
			plen = WIRE_AUTH_CHAL_SIZE;
		} else if (sel == 1) { /* the right answer to the acceptor's challenge */
			type = WIRE_AUTH_RESPONSE;
			peerauth_mac(&peer, 0, na, nc, "alpha", "beta", mac);
			memcpy(buf, mac, sizeof(mac));
			plen = WIRE_AUTH_MAC_SIZE;
		} else if (sel == 2) { /* an answer of raw bytes */
			type = WIRE_AUTH_RESPONSE;
			plen = WIRE_AUTH_MAC_SIZE;
		} else if (sel == 3) { /* any frame */
			type = (uint16_t)(buf[0] % (WIRE_TYPE_MAX + 2));
			plen = len;
		} else {
			memwire_inject_error(&w, "the fuzzer cut the connection");
			state = state == 2 ? 2 : 3;
			break;
		}
		/* The model, from what is injected. */
		if (state == 0) {
			uint8_t r, n[WIRE_AUTH_NONCE];
			if (type == WIRE_AUTH_CHALLENGE &&
			    peerauth_chal_decode(buf, plen, &r, n, err, sizeof(err)) == 0 &&
			    r == 0) {
				memcpy(nc, n, sizeof(nc));
				state = 1;
			} else {
				state = 3;
			}
		} else if (state == 1) {
			peerauth_mac(&peer, 0, na, nc, "alpha", "beta", mac);
			state = type == WIRE_AUTH_RESPONSE && plen == WIRE_AUTH_MAC_SIZE &&
			                memcmp(buf, mac, sizeof(mac)) == 0
			            ? 2
			            : 3;
		}
		memwire_inject(&w, type, 0, buf, plen);
		memwire_flush(&w);
		/* The acceptor's proof leaves only once the connector proved itself. */
		if (state != 2 && w.n_frames != 1)
			abort();
		if ((state == 2) != (accepted == 1) || accepted > 1)
			abort();
	}
	if (state == 3 && (!w.closed || accepted))
		abort();
	if (handed)
		tstream_close(handed);
	tlistener_close(l);
	memwire_free(&w);
	return 0;
}
