/* SPDX-License-Identifier: MIT */
#include "peerauth.h"

#include <errno.h>
#include <ev.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/buf.h"
#include "lib/endian.h"
#include "lib/log.h"

#define PA_LABEL        "hak-repl-auth-1"
#define PA_LOG_WINDOW_S 10.0
#define PA_LOG_BURST    8u /* failures logged per window; the rest are counted */

enum { PA_CONNECTOR = 0, PA_ACCEPTOR = 1 };

struct pa_listener;
struct pa_connect;

/* One connection authenticating, on either side. */
struct pa_conn {
	struct tauth *a;
	struct ev_loop *loop;
	struct tstream *s;
	struct pa_listener *l; /* the acceptor's listener, or NULL */
	struct pa_connect *c;  /* the connector's attempt, or NULL */
	ev_timer timer;
	uint8_t nonce[WIRE_AUTH_NONCE], peer_nonce[WIRE_AUTH_NONCE];
	bool got_chal;
	const struct key_bytes *key; /* the key this exchange runs under (a->key or a->prev) */
	char from[64];               /* the remote end, HOST:PORT */
	struct pa_conn *next;
};

struct pa_listener {
	struct tlistener base;
	struct tlistener *inner;
	struct tlisten_params p; /* the owner's */
	struct pa_conn *head;    /* oldest first */
	unsigned n;
};

struct pa_connect {
	struct tconnect base;
	struct tconnect *inner; /* until the transport connected */
	struct tconnect_params p;
	struct pa_conn conn; /* from then on */
	bool in_done;
};

extern const struct transport_ops transport_peerauth;

void peerauth_init(struct tauth *a, const struct key_bytes *key, const char *self, const char *peer,
                   const char *volume)
{
	memset(a, 0, sizeof(*a));
	a->key = *key;
	snprintf(a->self, sizeof(a->self), "%s", self);
	snprintf(a->peer, sizeof(a->peer), "%s", peer);
	snprintf(a->volume, sizeof(a->volume), "%s", volume);
	a->timeout = 5.0;
	a->max_pending = 16;
	a->max_per_source = 4;
}

int peerauth_refresh_key(struct tauth *a)
{
	struct file_stamp st;
	char err[300];
	int rc = 0;
	if (!a->key_file)
		return 0;
	if (keyfile_stamp(a->key_file, &st) < 0) {
		log_msg(LOG_LVL_WARN,
		        "Volume %s: cannot check the replication key file %s (%s); the key read "
		        "before stays in use.",
		        a->volume, a->key_file, strerror(errno));
		return -1;
	}
	if (file_stamp_same(&st, &a->key_stamp))
		return 0;
	struct key_bytes *k = malloc(sizeof(*k));
	if (!k || keyfile_load(a->key_file, "replication key", k, err, sizeof(err)) < 0) {
		log_msg(LOG_LVL_WARN, "Volume %s: %s The key read before stays in use.", a->volume,
		        k ? err : "Out of memory reading the replication key.");
		rc = -1;
	} else {
		bool first = a->key_stamp.ino == 0 && a->key_stamp.mtime_ns == 0;
		rc = first || a->key.len != k->len || CRYPTO_memcmp(a->key.bytes, k->bytes, k->len);
		if (rc && !first) {
			a->prev = a->key;
			a->has_prev = true;
		}
		a->key = *k;
		a->key_stamp = st;
		if (rc && !first)
			log_msg(LOG_LVL_NOTICE,
			        "Volume %s: the replication key file %s changed; new connections "
			        "authenticate with the new key, or the old one until the peer "
			        "proves it has the new one.",
			        a->volume, a->key_file);
		rc = rc && !first;
	}
	if (k)
		OPENSSL_cleanse(k, sizeof(*k));
	free(k);
	return rc;
}

static void pa_mac(const struct key_bytes *key, const struct tauth *a, uint8_t role,
                   const uint8_t chal[WIRE_AUTH_NONCE], const uint8_t own[WIRE_AUTH_NONCE],
                   const char *sender, const char *receiver, uint8_t out[WIRE_AUTH_MAC_SIZE])
{
	unsigned int len = WIRE_AUTH_MAC_SIZE;
	uint8_t msg[sizeof(PA_LABEL) + 1 + 2 * WIRE_AUTH_NONCE + 3 * WIRE_NAME_MAX];
	size_t o = 0;
	memcpy(msg, PA_LABEL, sizeof(PA_LABEL));
	o += sizeof(PA_LABEL);
	msg[o++] = role;
	memcpy(msg + o, chal, WIRE_AUTH_NONCE);
	o += WIRE_AUTH_NONCE;
	memcpy(msg + o, own, WIRE_AUTH_NONCE);
	o += WIRE_AUTH_NONCE;
	const char *names[3] = {sender, receiver, a->volume};
	for (int i = 0; i < 3; i++) {
		memset(msg + o, 0, WIRE_NAME_MAX);
		memcpy(msg + o, names[i], strnlen(names[i], WIRE_NAME_MAX));
		o += WIRE_NAME_MAX;
	}
	/* HMAC() cannot fail with SHA-256 and a key that fits an int; a zero MAC on a failure
	 * that should not happen only makes the exchange fail. */
	if (!HMAC(EVP_sha256(), key->bytes, (int)key->len, msg, o, out, &len))
		memset(out, 0, WIRE_AUTH_MAC_SIZE);
}

void peerauth_mac(const struct tauth *a, uint8_t role, const uint8_t chal[WIRE_AUTH_NONCE],
                  const uint8_t own[WIRE_AUTH_NONCE], const char *sender, const char *receiver,
                  uint8_t out[WIRE_AUTH_MAC_SIZE])
{
	pa_mac(&a->key, a, role, chal, own, sender, receiver, out);
}

void peerauth_chal_encode(uint8_t out[WIRE_AUTH_CHAL_SIZE], uint8_t role,
                          const uint8_t nonce[WIRE_AUTH_NONCE])
{
	out[0] = WIRE_AUTH_VERSION;
	out[1] = role;
	out[2] = out[3] = 0;
	memcpy(out + 4, nonce, WIRE_AUTH_NONCE);
}

int peerauth_chal_decode(const uint8_t *in, size_t len, uint8_t *role,
                         uint8_t nonce[WIRE_AUTH_NONCE], char *err, size_t errlen)
{
	if (len != WIRE_AUTH_CHAL_SIZE)
		snprintf(err, errlen, "its challenge has %zu bytes instead of %u", len,
		         WIRE_AUTH_CHAL_SIZE);
	else if (in[0] != WIRE_AUTH_VERSION)
		snprintf(err, errlen, "it speaks authentication version %u, this node %u", in[0],
		         WIRE_AUTH_VERSION);
	else if (in[1] > PA_ACCEPTOR || in[2] || in[3])
		snprintf(err, errlen, "its challenge has a bad role or reserved field");
	else {
		*role = in[1];
		memcpy(nonce, in + 4, WIRE_AUTH_NONCE);
		return 0;
	}
	errno = EINVAL;
	return -1;
}

/* ---- one connection ---------------------------------------------------------------------- */

static void pa_frame(void *ctx, struct tstream *s, const struct wire_hdr *h, uint8_t *payload);
static void pa_error(void *ctx, struct tstream *s, const char *why);
static const struct tstream_ops pa_stream_ops = {pa_frame, pa_error};

static void pa_log_fail(struct pa_conn *k, const char *why)
{
	struct tauth *a = k->a;
	double now = ev_now(k->loop);
	a->refused++;
	if (now - a->fail_window >= PA_LOG_WINDOW_S) {
		a->fail_window = now;
		a->fail_logged = 0;
	}
	if (a->fail_logged >= PA_LOG_BURST) {
		a->fail_quiet++;
		return;
	}
	char more[96] = "";
	if (a->fail_quiet)
		snprintf(more, sizeof(more), " (%u more failed without a message before this one)",
		         a->fail_quiet);
	log_msg(LOG_LVL_WARN,
	        "Volume %s: the replication connection %s %s failed to authenticate: %s%s.",
	        a->volume, k->l ? "from" : "to", k->from, why, more);
	a->fail_logged++;
	a->fail_quiet = 0;
}

static void pa_unlink(struct pa_conn *k)
{
	struct pa_listener *l = k->l;
	for (struct pa_conn **pp = &l->head; *pp; pp = &(*pp)->next)
		if (*pp == k) {
			*pp = k->next;
			l->n--;
			return;
		}
}

/* The end of an attempt: err 0 hands the stream to its owner, anything else closes it. */
static void pa_finish(struct pa_conn *k, int err, const char *why)
{
	struct tstream *s = k->s;
	ev_timer_stop(k->loop, &k->timer);
	/* refused after our answer, mid-rotation: try the other key next time (once, though
	 * both streams of the link may fail on the same key) */
	struct tauth *a = k->a;
	if (err && k->c && k->got_chal && a->has_prev &&
	    k->key == (a->use_prev ? &a->prev : &a->key))
		a->use_prev = !a->use_prev;
	if (err) {
		pa_log_fail(k, why);
		tstream_close(s);
		s = NULL;
	} else {
		s->max_payload = 0;
	}
	if (k->l) {
		struct pa_listener *l = k->l;
		pa_unlink(k);
		free(k);
		if (s) {
			tstream_set_owner(s, l->p.ops, l->p.ctx);
			l->p.accepted(l->p.ctx, &l->base, s); /* last: it may close the listener */
		}
		return;
	}
	struct pa_connect *c = k->c;
	if (s)
		tstream_set_owner(s, c->p.ops, c->p.ctx);
	c->in_done = true;
	c->p.done(c->p.ctx, &c->base, s, err);
	free(c);
}

static void pa_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct pa_conn *k = w->data;
	char why[96];
	(void)loop;
	(void)revents;
	snprintf(why, sizeof(why), "it did not complete the exchange within %.1f s", k->a->timeout);
	pa_finish(k, ETIMEDOUT, why);
}

static void pa_send_mac(struct pa_conn *k, uint8_t role)
{
	uint8_t mac[WIRE_AUTH_MAC_SIZE];
	pa_mac(k->key, k->a, role, k->peer_nonce, k->nonce, k->a->self, k->a->peer, mac);
	tstream_send_small(k->s, WIRE_AUTH_RESPONSE, 0, mac, sizeof(mac));
}

/* Is mac the peer's answer (of role) under the exchange's key? An acceptor, which has not
 * chosen one yet, tries the current key and then the one before a rotation. */
static bool pa_check_mac(struct pa_conn *k, uint8_t role, const uint8_t *mac)
{
	uint8_t want[WIRE_AUTH_MAC_SIZE];
	const struct key_bytes *keys[2] = {&k->a->key, &k->a->prev};
	unsigned n = k->l ? (k->a->has_prev ? 2 : 1) : 1;

	for (unsigned i = 0; i < n; i++) {
		const struct key_bytes *key = k->l ? keys[i] : k->key;
		pa_mac(key, k->a, role, k->nonce, k->peer_nonce, k->a->peer, k->a->self, want);
		if (CRYPTO_memcmp(want, mac, sizeof(want)) == 0) {
			k->key = key;
			return true;
		}
	}
	return false;
}

/* The exchange succeeded: under the new key, the rotation is over for this link. */
static void pa_key_proven(struct pa_conn *k)
{
	struct tauth *a = k->a;

	/* the next link (after a loss) tries the new key first again: the peer may have it by then
	 */
	if (k->c && k->key == &a->prev)
		a->use_prev = false;
	if (!a->has_prev || k->key != &a->key)
		return;
	OPENSSL_cleanse(&a->prev, sizeof(a->prev));
	a->has_prev = false;
	log_msg(LOG_LVL_NOTICE,
	        "Volume %s: node '%s' authenticated with the new replication key; the old key is "
	        "no longer accepted.",
	        a->volume, a->peer);
}

/* A challenge or a response; anything else before the end is a refusal. */
static void pa_step(struct pa_conn *k, const struct wire_hdr *h, const uint8_t *payload)
{
	uint8_t me = k->l ? PA_ACCEPTOR : PA_CONNECTOR, role;
	char why[256];
	if (h->type == WIRE_AUTH_CHALLENGE && !k->got_chal) {
		if (peerauth_chal_decode(payload, h->len, &role, k->peer_nonce, why, sizeof(why)) <
		    0) {
			pa_finish(k, EACCES, why);
			return;
		}
		if (role == me) {
			pa_finish(k, EACCES,
			          "it claims the same side of the connection as this node");
			return;
		}
		k->got_chal = true;
		if (me == PA_CONNECTOR) /* the acceptor answers only once we proved ourselves */
			pa_send_mac(k, me);
		return;
	}
	if (h->type == WIRE_AUTH_RESPONSE && k->got_chal) {
		if (!pa_check_mac(k, (uint8_t)!me, payload)) {
			snprintf(why, sizeof(why),
			         "its answer does not prove it is node '%s' holding this volume's "
			         "auth key (a different key, or not the peer)",
			         k->a->peer);
			pa_finish(k, EACCES, why);
			return;
		}
		if (me == PA_ACCEPTOR)
			pa_send_mac(k, me);
		pa_key_proven(k);
		pa_finish(k, 0, NULL);
		return;
	}
	snprintf(why, sizeof(why),
	         "it sent a frame of type %s where the authentication exchange expects %s",
	         wire_type_name(h->type), k->got_chal ? "its answer" : "its challenge");
	if (h->type == WIRE_HELLO)
		snprintf(why + strlen(why), sizeof(why) - strlen(why),
		         " (is it set to insecure-no-auth?)");
	pa_finish(k, EACCES, why);
}

static void pa_frame(void *ctx, struct tstream *s, const struct wire_hdr *h, uint8_t *payload)
{
	(void)s;
	pa_step(ctx, h, payload);
	buf_put(payload, h->len);
}

static void pa_error(void *ctx, struct tstream *s, const char *why)
{
	struct pa_conn *k = ctx;
	(void)s;
	if (k->c && k->got_chal)
		why =
		    "the peer hung up after this node's answer: it does not accept this node's key "
		    "(a different auth key?)";
	pa_finish(k, ECONNRESET, why);
}

/* Start the exchange on k->s: take its frames, limit them, send our challenge, start the clock. */
static int pa_start(struct pa_conn *k)
{
	peerauth_refresh_key(k->a);
	/* While a rotation is not proven, the acceptor may or may not have its new file yet: a
	 * connector tries the new key, and the old one once the new one was refused (the streams
	 * of one link start together and so agree). */
	k->key = k->c && k->a->has_prev && k->a->use_prev ? &k->a->prev : &k->a->key;
	if (RAND_bytes(k->nonce, sizeof(k->nonce)) != 1) {
		errno = EIO;
		return -1;
	}
	tstream_peer_name(k->s, k->from, sizeof(k->from));
	tstream_set_owner(k->s, &pa_stream_ops, k);
	/* Room for a HELLO, the first frame of a peer set to insecure-no-auth, so its refusal can
	 * say why; nothing larger until the exchange is over. */
	k->s->max_payload = WIRE_HELLO_SIZE;
	uint8_t chal[WIRE_AUTH_CHAL_SIZE];
	peerauth_chal_encode(chal, k->l ? PA_ACCEPTOR : PA_CONNECTOR, k->nonce);
	if (tstream_send_small(k->s, WIRE_AUTH_CHALLENGE, 0, chal, sizeof(chal)) < 0)
		return -1;
	ev_timer_init(&k->timer, pa_timeout, k->a->timeout, 0.);
	k->timer.data = k;
	ev_timer_start(k->loop, &k->timer);
	return 0;
}

/* ---- the acceptor ------------------------------------------------------------------------ */

/* The host part of HOST:PORT or [V6]:PORT, for the per-source limit. */
static size_t host_len(const char *from)
{
	const char *colon = strrchr(from, ':');
	return colon ? (size_t)(colon - from) : strlen(from);
}

/*
 * Room for k: at most max_per_source connections from one address and max_pending in all. The
 * oldest goes, never the newcomer: it has had the longest to authenticate, and the newest may be
 * the peer reconnecting from the address a stranger fills.
 */
static void pa_admit(struct pa_listener *l, const struct pa_conn *k)
{
	unsigned same = 0;
	struct pa_conn *oldest_same = NULL;
	size_t hl = host_len(k->from);
	char why[160];
	for (struct pa_conn *o = l->head; o; o = o->next)
		if (host_len(o->from) == hl && memcmp(o->from, k->from, hl) == 0) {
			oldest_same = oldest_same ? oldest_same : o;
			same++;
		}
	if (same >= k->a->max_per_source) {
		snprintf(why, sizeof(why),
		         "it was the oldest of %u waiting from one address and made room for %s",
		         same, k->from);
		pa_finish(oldest_same, EBUSY, why);
	} else if (l->n >= k->a->max_pending && l->head) {
		snprintf(why, sizeof(why), "it was the oldest of %u waiting and made room for %s",
		         l->n, k->from);
		pa_finish(l->head, EBUSY, why);
	}
}

static void pa_accepted(void *ctx, struct tlistener *inner, struct tstream *s)
{
	struct pa_listener *l = ctx;
	struct pa_conn *k = calloc(1, sizeof(*k));
	(void)inner;
	if (!k) {
		tstream_close(s);
		return;
	}
	k->a = l->p.auth;
	k->loop = l->p.loop;
	k->s = s;
	tstream_peer_name(s, k->from, sizeof(k->from));
	pa_admit(l, k);
	k->l = l;
	struct pa_conn **pp = &l->head;
	while (*pp)
		pp = &(*pp)->next;
	*pp = k;
	l->n++;
	if (pa_start(k) < 0)
		pa_finish(k, errno, "this node could not start the exchange");
}

int peerauth_listen(const struct transport_ops *t, const struct tlisten_params *p,
                    struct tlistener **out)
{
	struct pa_listener *l = calloc(1, sizeof(*l));
	if (!l) {
		errno = ENOMEM;
		return -1;
	}
	l->base.t = &transport_peerauth;
	l->p = *p;
	struct tlisten_params ip = *p;
	ip.auth = NULL;
	ip.ops = &pa_stream_ops;
	ip.ctx = l;
	ip.accepted = pa_accepted;
	if (t->listen(&ip, &l->inner) < 0) {
		int e = errno;
		free(l);
		errno = e;
		return -1;
	}
	l->p.addr = NULL;
	*out = &l->base;
	return 0;
}

static void pa_listener_close(struct tlistener *tl)
{
	struct pa_listener *l = (struct pa_listener *)tl;
	tlistener_close(l->inner);
	while (l->head) {
		struct pa_conn *k = l->head;
		l->head = k->next;
		ev_timer_stop(k->loop, &k->timer);
		tstream_close(k->s);
		free(k);
	}
	free(l);
}

/* ---- the connector ----------------------------------------------------------------------- */

static void pa_connected(void *ctx, struct tconnect *inner, struct tstream *s, int err)
{
	struct pa_connect *c = ctx;
	(void)inner;
	c->inner = NULL;
	if (!err) {
		c->conn.s = s;
		if (pa_start(&c->conn) == 0)
			return;
		err = errno;
		tstream_close(s);
	}
	c->in_done = true;
	c->p.done(c->p.ctx, &c->base, NULL, err);
	free(c);
}

int peerauth_connect(const struct transport_ops *t, const struct tconnect_params *p,
                     struct tconnect **out)
{
	struct pa_connect *c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return -1;
	}
	c->base.t = &transport_peerauth;
	c->p = *p;
	c->conn.a = p->auth;
	c->conn.loop = p->loop;
	c->conn.c = c;
	struct tconnect_params ip = *p;
	ip.auth = NULL;
	ip.ops = &pa_stream_ops;
	ip.ctx = c;
	ip.done = pa_connected;
	if (t->connect(&ip, &c->inner) < 0) {
		int e = errno;
		free(c);
		errno = e;
		return -1;
	}
	c->p.addr = c->p.bind_host = NULL;
	*out = &c->base;
	return 0;
}

static void pa_connect_cancel(struct tconnect *tc)
{
	struct pa_connect *c = (struct pa_connect *)tc;
	if (c->in_done)
		return; /* inside done(): freed after it returns */
	if (c->inner) {
		tconnect_cancel(c->inner);
	} else {
		ev_timer_stop(c->conn.loop, &c->conn.timer);
		tstream_close(c->conn.s);
	}
	free(c);
}

/* Only the calls that reach a listener or a connect attempt; streams keep their transport. */
const struct transport_ops transport_peerauth = {
    .name = "peerauth",
    .listener_close = pa_listener_close,
    .connect_cancel = pa_connect_cancel,
};
