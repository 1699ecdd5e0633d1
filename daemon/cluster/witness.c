/* SPDX-License-Identifier: MIT */
/*
 * The witness: codec, grant decision, the server (hakd --witness) and the node-side client.
 * See witness.h for the protocol and the lease rules.
 */
#include "loopthread.h"
#include "witness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ev.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf/config.h"
#include "ctl/events.h"
#include "keyring.h"
#include "ctl/sdnotify.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/endian.h"

#define WIT_SEND_RING 64u /* requests whose send time the client remembers */

static const char *const decision_names[WIT_DECISION_COUNT] = {
    "grant", "renew", "deny", "release", "query", "drop",
};

const char *wit_decision_name(enum wit_decision d)
{
	return (unsigned)d < WIT_DECISION_COUNT ? decision_names[d] : "unknown";
}

/* ---- codec ---- */

static const struct hb_frame wit_frame = {WIT_MAGIC, WIT_VERSION, WIT_PKT_SIZE, WIT_MAC_OFFSET};

int wit_encode(const struct wit_msg *m, const struct key_bytes *key, uint8_t buf[WIT_PKT_SIZE])
{
	buf[5] = m->type;
	be_put16(buf + 6, m->flags);
	be_put32(buf + 8, m->cluster_id);
	be_put32(buf + 12, m->node_id);
	be_put64(buf + 16, m->incarnation);
	be_put64(buf + 24, m->seq);
	be_put32(buf + 32, m->holder);
	be_put32(buf + 36, m->lease_ms);
	return hb_frame_seal(&wit_frame, key, buf);
}

enum hb_verdict wit_decode(const uint8_t *buf, size_t len, const struct key_bytes *key,
                           struct wit_msg *m)
{
	enum hb_verdict v = hb_frame_check(&wit_frame, buf, len, key);
	uint16_t flags;

	if (v != HB_OK)
		return v;
	flags = be_get16(buf + 6);
	if ((buf[5] != WIT_REQUEST && buf[5] != WIT_REPLY) || (flags & ~WIT_F_ALL) ||
	    be_get32(buf + 12) < 1 || be_get32(buf + 12) > 2 || be_get32(buf + 32) > 2)
		return HB_BAD_FIELD;
	m->type = buf[5];
	m->flags = flags;
	m->cluster_id = be_get32(buf + 8);
	m->node_id = be_get32(buf + 12);
	m->incarnation = be_get64(buf + 16);
	m->seq = be_get64(buf + 24);
	m->holder = be_get32(buf + 32);
	m->lease_ms = be_get32(buf + 36);
	return HB_OK;
}

/* ---- the grant decision ---- */

enum wit_decision wit_grant(struct wit_state *s, const struct wit_msg *req, int64_t now_ms,
                            int64_t lease_ms, struct wit_msg *reply)
{
	enum wit_decision d;
	bool running, self_out;
	uint8_t self_bit, peer_bit;
	uint32_t peer;

	if (req->type != WIT_REQUEST || req->cluster_id != s->cluster_id || req->node_id < 1 ||
	    req->node_id > 2 ||
	    hb_replay_check(&s->rp[req->node_id - 1], req->incarnation, req->seq) != HB_OK)
		return WIT_DROP;
	running = s->holder != 0 && now_ms < s->expires_ms;
	if (!running)
		s->holder = 0;
	peer = 3 - req->node_id;
	self_bit = (uint8_t)(1u << (req->node_id - 1));
	peer_bit = (uint8_t)(1u << (peer - 1));
	self_out = s->outdated & self_bit;
	/* Only a node with current data may outdate its peer or vouch for it again, and never
	 * the node the vote is with: the holder may be promoting this very moment. */
	if (!self_out && (req->flags & WIT_F_OUTDATE_PEER) && !(running && s->holder == peer))
		s->outdated |= peer_bit;
	else if (!self_out && (req->flags & WIT_F_PEER_CURRENT))
		s->outdated &= (uint8_t)~peer_bit;
	s->primary_until[req->node_id - 1] =
	    (req->flags & WIT_F_PRIMARY) && !self_out ? now_ms + lease_ms / 2 : 0;
	if (req->flags & WIT_F_WANT) {
		if (self_out) {
			d = WIT_DENY; /* its data is not the newest: it must never serve */
		} else if (!running && now_ms < s->quiet_until) {
			d = WIT_DENY;
		} else if (!running && now_ms < s->primary_until[peer - 1]) {
			d = WIT_DENY; /* the primary still asks: it keeps the volume (witness.h) */
		} else if (!running) {
			d = WIT_GRANT;
		} else if (s->holder == req->node_id) {
			d = WIT_RENEW;
		} else {
			d = WIT_DENY;
		}
		if (d != WIT_DENY) {
			s->holder = req->node_id;
			s->expires_ms = now_ms + lease_ms;
		}
	} else if (running && s->holder == req->node_id) {
		d = WIT_RELEASE;
		s->holder = 0;
	} else {
		d = WIT_QUERY;
	}
	*reply = (struct wit_msg){
	    .type = WIT_REPLY,
	    .flags = (uint16_t)((s->holder == req->node_id ? WIT_F_GRANTED : 0) |
	                        ((s->outdated & self_bit) ? WIT_F_OUTDATED : 0) |
	                        ((s->outdated & peer_bit) ? WIT_F_PEER_OUTDATED : 0)),
	    .cluster_id = s->cluster_id,
	    .node_id = req->node_id,
	    .incarnation = req->incarnation,
	    .seq = req->seq,
	    .holder = s->holder,
	    .lease_ms = s->holder ? (uint32_t)(s->expires_ms - now_ms) : 0,
	};
	return d;
}

int wit_addr_parse(const char *text, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = text ? strrchr(text, ':') : NULL;
	char *end;
	size_t hl;
	unsigned long port;

	memset(ss, 0, sizeof(*ss));
	if (!colon || colon == text)
		goto bad;
	hl = (size_t)(colon - text);
	if (text[0] == '[') {
		if (hl < 3 || text[hl - 1] != ']')
			goto bad;
		text++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		goto bad;
	memcpy(host, text, hl);
	host[hl] = '\0';
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || port < 1 || port > 65535)
		goto bad;
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		*len = sizeof(*in);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
		return 0;
	}
bad:
	errno = EINVAL;
	return -1;
}

static int udp_bind(const struct sockaddr_storage *ss, socklen_t len)
{
	int fd = socket(ss->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd >= 0 && len && bind(fd, (const struct sockaddr *)ss, len) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		fd = -1;
	}
	return fd;
}

/* ---- the server ---- */

struct wit_server {
	struct wit_state st;
	struct keyring kr; /* both nodes must be seen on a new key before the old one goes */
	int64_t lease_ms;
	int fd;
	uint64_t rx_bad, dropped;
	char state_path[512]; /* the Outdated marks */
};

/*
 * The Outdated marks in STATE-DIR/witness-CLUSTER.state ("outdated MASK\n"), replaced whole
 * (write, fsync, rename) so a crash leaves the old or the new marks. The witness does nothing
 * else, so this short synchronous write on its loop delays no other work.
 */
static int server_save(const struct wit_server *sv)
{
	char tmp[600], text[32];
	int fd, n, rc = -1;

	snprintf(tmp, sizeof(tmp), "%s.tmp", sv->state_path);
	n = snprintf(text, sizeof(text), "outdated %u\n", (unsigned)sv->st.outdated);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		goto out;
	if (write(fd, text, (size_t)n) == n && fsync(fd) == 0 && rename(tmp, sv->state_path) == 0)
		rc = 0;
	close(fd);
out:
	if (rc < 0)
		log_err("Witness: cannot save the Outdated marks in %s: %s; they hold until the "
		        "witness restarts.",
		        sv->state_path, strerror(errno));
	return rc;
}

/* The marks saved by an earlier run; none when there is no file. */
static int server_load(struct wit_server *sv)
{
	FILE *f = fopen(sv->state_path, "re");
	unsigned mask = 0;
	int rc = 0;

	if (!f)
		return errno == ENOENT ? 0 : -1;
	if (fscanf(f, "outdated %u", &mask) != 1 || mask > 3) {
		errno = EINVAL;
		rc = -1;
	} else {
		sv->st.outdated = (uint8_t)mask;
	}
	fclose(f);
	return rc;
}

static void server_rx_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct wit_server *sv = w->data;

	(void)loop;
	(void)revents;
	for (int i = 0; i < 64; i++) {
		uint8_t buf[WIT_PKT_SIZE + 1];
		struct sockaddr_storage from;
		socklen_t flen;
		struct wit_msg req, rep;
		ssize_t n = hb_recv(sv->fd, buf, sizeof(buf), &from, &flen);
		if (n < 0)
			break;
		keyring_refresh(&sv->kr, clock_mono_ms());
		const struct key_bytes *keys[2];
		unsigned nk = keyring_recv_keys(&sv->kr, keys), k;
		enum hb_verdict v = HB_BAD_MAC;
		for (k = 0; k < nk && v != HB_OK; k++)
			v = wit_decode(buf, (size_t)n, keys[k], &req);
		if (v != HB_OK) {
			sv->rx_bad++;
			continue;
		}
		k--; /* the key it came under; the reply goes under the same one */
		uint32_t before =
		    sv->st.holder && clock_mono_ms() < sv->st.expires_ms ? sv->st.holder : 0;
		uint8_t out_before = sv->st.outdated;
		enum wit_decision d = wit_grant(&sv->st, &req, clock_mono_ms(), sv->lease_ms, &rep);
		if (d == WIT_DROP) {
			sv->dropped++;
			continue;
		}
		keyring_seen(&sv->kr, k, 1u << (req.node_id - 1), clock_mono_ms());
		if (sv->st.outdated != out_before) {
			/* persisted before the reply confirms it: a confirmed mark is never lost */
			if (server_save(sv) < 0)
				rep.flags &= (uint16_t)~WIT_F_PEER_OUTDATED;
			log_notice("Witness: node %" PRIu32 " %s node %" PRIu32
			           "; Outdated nodes now: mask %u.",
			           req.node_id,
			           (sv->st.outdated & ~out_before) ? "outdated"
			                                           : "made current again",
			           3 - req.node_id, (unsigned)sv->st.outdated);
			events_emit("witness-outdated", "node:%" PRIu32 " outdated:%s by:%" PRIu32,
			            3 - req.node_id,
			            (sv->st.outdated & (1u << (2 - req.node_id))) ? "yes" : "no",
			            req.node_id);
		}
		if (sv->st.holder != before || d == WIT_DENY)
			log_notice("Witness: node %" PRIu32
			           " %s the vote (%s); holder is now %" PRIu32 ".",
			           req.node_id, (req.flags & WIT_F_WANT) ? "asked for" : "gave up",
			           wit_decision_name(d), sv->st.holder);
		if (sv->st.holder != before)
			events_emit("witness-vote", "holder:%" PRIu32 " decision:%s node:%" PRIu32,
			            sv->st.holder, wit_decision_name(d), req.node_id);
		if (wit_encode(&rep, keys[k], buf) == 0)
			(void)sendto(sv->fd, buf, WIT_PKT_SIZE, MSG_DONTWAIT,
			             (const struct sockaddr *)&from, flen);
	}
}

static void server_sig_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)revents;
	log_notice("Witness: signal %d received; exiting.", w->signum);
	sdnotify_stopping();
	ev_break(loop, EVBREAK_ALL);
}

int wit_serve(const struct hak_config *cfg)
{
	struct wit_server sv = {.fd = -1};
	struct sockaddr_storage ss;
	socklen_t len = 0;
	char err[512];
	struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
	ev_io rx;
	ev_signal s_term, s_int;
	int rc = 1;

	if (!cfg->cluster.present || !cfg->cluster.witness_address) {
		log_err("hakd --witness needs a cluster section with witness-address IP:PORT in "
		        "%s.",
		        cfg->file ? cfg->file : "the configuration");
		goto out;
	}
	if (keyring_init(&sv.kr, cfg->cluster.auth_key_file, "cluster key", 3, err, sizeof(err)) <
	    0) {
		log_err("%s", err);
		goto out;
	}
	if (wit_addr_parse(cfg->cluster.witness_address, &ss, &len) < 0 ||
	    (sv.fd = udp_bind(&ss, len)) < 0) {
		log_err("The witness cannot listen on %s: %s.", cfg->cluster.witness_address,
		        strerror(errno));
		goto out;
	}
	sv.st.cluster_id = cfg->cluster.cluster_id;
	snprintf(sv.state_path, sizeof(sv.state_path), "%s/witness-%" PRIu32 ".state",
	         cfg->state_dir, sv.st.cluster_id);
	if (server_load(&sv) < 0) {
		log_err("The witness cannot read its Outdated marks from %s: %s; refusing to start "
		        "without them.",
		        sv.state_path, strerror(errno));
		goto out;
	}
	sv.lease_ms = (int64_t)(2 * cfg->cluster.deadtime * 1000.0 + 0.5);
	sv.st.quiet_until = clock_mono_ms() + sv.lease_ms;
	ev_io_init(&rx, server_rx_cb, sv.fd, EV_READ);
	rx.data = &sv;
	ev_io_start(loop, &rx);
	ev_signal_init(&s_term, server_sig_cb, SIGTERM);
	ev_signal_init(&s_int, server_sig_cb, SIGINT);
	ev_signal_start(loop, &s_term);
	ev_signal_start(loop, &s_int);
	log_notice("Witness for cluster %" PRIu32 " listening on %s, lease %" PRId64
	           " ms, Outdated nodes mask %u (%s).",
	           sv.st.cluster_id, cfg->cluster.witness_address, sv.lease_ms,
	           (unsigned)sv.st.outdated, sv.state_path);
	/* Listening: the nodes' requests are answered from now on. The watchdog needs no thread
	 * check here: the witness is this one loop, which feeds it. */
	sdnotify_init(loop);
	sdnotify_ready();
	sdnotify_status("witness: listening");
	ev_run(loop, 0);
	sdnotify_shutdown();
	log_notice("Witness stopped: %" PRIu64 " bad and %" PRIu64
	           " stale or foreign requests were dropped.",
	           sv.rx_bad, sv.dropped);
	rc = 0;
out:
	if (sv.fd >= 0)
		close(sv.fd);
	keyring_clear(&sv.kr);
	return rc;
}

/* ---- the client ---- */

struct wit_client {
	struct keyring kr; /* thread only */
	uint32_t cluster_id, node_id;
	uint64_t incarnation, seq;
	int64_t lease_ms, dead_ms;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	int fd;
	struct loopthread lt;
	ev_timer tick;
	ev_io rx;
	ev_async kick;                  /* main loop -> thread: send a request now */
	int64_t sent_ms[WIT_SEND_RING]; /* thread only: send time of seq % ring */
	uint64_t last_rx_seq;           /* thread only */
	/* shared, under mu */
	pthread_mutex_t mu;
	bool want;
	uint16_t peer_flags; /* WIT_F_OUTDATE_PEER or WIT_F_PEER_CURRENT */
	bool primary;        /* WIT_F_PRIMARY */
	uint16_t reply_flags;
	int64_t reply_at;    /* monotonic ms of the last valid reply; -1 never */
	int64_t holds_until; /* monotonic ms: this node's own bound on its lease */
	uint32_t holder;
	uint64_t tx, rx_ok, rx_bad;
	const char *key_rotation;        /* keyring_state(&kr) as of the last tick */
	bool seen_reachable, seen_holds; /* what the main loop was last told */
	bool seen_outdated, seen_peer_outdated;
	uint32_t seen_holder;
};

/* Under mu. */
static void client_eval(struct wit_client *c, int64_t now, struct wit_client_state *s)
{
	s->configured = true;
	s->reachable = c->reply_at >= 0 && now - c->reply_at < c->dead_ms;
	s->holds = s->reachable && c->holder == c->node_id && now < c->holds_until;
	s->holder = s->reachable ? c->holder : 0;
	s->last_reply_ms = c->reply_at < 0 ? -1 : now - c->reply_at;
	s->want = c->want;
	s->outdated = s->reachable && (c->reply_flags & WIT_F_OUTDATED);
	s->peer_outdated = s->reachable && (c->reply_flags & WIT_F_PEER_OUTDATED);
	s->tx = c->tx;
	s->rx_ok = c->rx_ok;
	s->rx_bad = c->rx_bad;
	s->key_rotation = c->key_rotation;
}

/* Under mu: did what the main loop sees change? */
static bool client_changed(struct wit_client *c, int64_t now)
{
	struct wit_client_state s;
	bool ch;

	client_eval(c, now, &s);
	ch = s.reachable != c->seen_reachable || s.holds != c->seen_holds ||
	     s.holder != c->seen_holder || s.outdated != c->seen_outdated ||
	     s.peer_outdated != c->seen_peer_outdated;
	c->seen_outdated = s.outdated;
	c->seen_peer_outdated = s.peer_outdated;
	c->seen_reachable = s.reachable;
	c->seen_holds = s.holds;
	c->seen_holder = s.holder;
	return ch;
}

static void client_send(struct wit_client *c)
{
	struct wit_msg m = {.type = WIT_REQUEST,
	                    .cluster_id = c->cluster_id,
	                    .node_id = c->node_id,
	                    .incarnation = c->incarnation};
	uint8_t buf[WIT_PKT_SIZE];
	int64_t now = clock_mono_ms();
	bool ch;

	pthread_mutex_lock(&c->mu);
	m.flags = (uint16_t)((c->want ? WIT_F_WANT : 0) | (c->primary ? WIT_F_PRIMARY : 0) |
	                     c->peer_flags);
	ch = client_changed(c, now);
	pthread_mutex_unlock(&c->mu);
	/* while a key rotation waits for the witness, once under each key (keyring.h) */
	const struct key_bytes *keys[2];
	unsigned nk = keyring_send_keys(&c->kr, keys);
	for (unsigned k = 0; k < nk; k++) {
		pthread_mutex_lock(&c->mu);
		m.seq = ++c->seq;
		c->sent_ms[m.seq % WIT_SEND_RING] = now;
		c->tx++;
		pthread_mutex_unlock(&c->mu);
		if (wit_encode(&m, keys[k], buf) == 0)
			(void)sendto(c->fd, buf, sizeof(buf), MSG_DONTWAIT,
			             (const struct sockaddr *)&c->addr, c->addr_len);
	}
	if (ch)
		loopthread_notify(&c->lt);
}

static void client_tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct wit_client *c = w->data;

	(void)loop;
	(void)revents;
	keyring_refresh(&c->kr, clock_mono_ms());
	pthread_mutex_lock(&c->mu);
	c->key_rotation = keyring_state(&c->kr);
	pthread_mutex_unlock(&c->mu);
	client_send(c);
}

static void client_kick_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)revents;
	client_send(w->data);
}

static void client_rx_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct wit_client *c = w->data;
	bool ch = false;

	(void)loop;
	(void)revents;
	for (int i = 0; i < 16; i++) {
		uint8_t buf[WIT_PKT_SIZE + 1];
		struct wit_msg m;
		struct sockaddr_storage from;
		socklen_t fl;
		ssize_t n = hb_recv(c->fd, buf, sizeof(buf), &from, &fl);
		if (n < 0)
			break;
		const struct key_bytes *keys[2];
		unsigned nk = keyring_recv_keys(&c->kr, keys), k;
		enum hb_verdict v = HB_BAD_MAC;
		for (k = 0; k < nk && v != HB_OK && hb_same_addr(&from, &c->addr); k++)
			v = wit_decode(buf, (size_t)n, keys[k], &m);
		bool ok = v == HB_OK && m.type == WIT_REPLY && m.cluster_id == c->cluster_id &&
		          m.node_id == c->node_id && m.incarnation == c->incarnation;
		pthread_mutex_lock(&c->mu);
		/* only an answer to one of the recent requests, each once, in order */
		ok = ok && m.seq > c->last_rx_seq && m.seq <= c->seq &&
		     c->seq - m.seq < WIT_SEND_RING;
		if (!ok) {
			c->rx_bad++;
		} else {
			int64_t now = clock_mono_ms();
			c->last_rx_seq = m.seq;
			c->rx_ok++;
			c->reply_at = now;
			c->holder = m.holder;
			c->reply_flags = m.flags;
			/* the witness started the lease when it received the request, after it was
			 * sent: counting from the send time never outlives the witness's lease */
			if (m.flags & WIT_F_GRANTED)
				c->holds_until = c->sent_ms[m.seq % WIT_SEND_RING] + c->lease_ms;
			ch |= client_changed(c, now);
		}
		pthread_mutex_unlock(&c->mu);
		if (ok)
			keyring_seen(&c->kr, k - 1, 1, clock_mono_ms());
	}
	if (ch)
		loopthread_notify(&c->lt);
}

struct wit_client *wit_client_start(const struct hb_config *hb, const char *witness_addr,
                                    struct ev_loop *main_loop, void (*notify)(void *), void *arg,
                                    char *err, size_t errlen)
{
	struct wit_client *c = calloc(1, sizeof(*c));
	struct sockaddr_storage any = {0};

	if (!c) {
		snprintf(err, errlen, "Out of memory starting the witness client.");
		return NULL;
	}
	c->fd = -1;
	pthread_mutex_init(&c->mu, NULL);
	if (wit_addr_parse(witness_addr, &c->addr, &c->addr_len) < 0) {
		snprintf(err, errlen, "Bad witness-address '%.80s': write IP:PORT.", witness_addr);
		goto fail;
	}
	if (hb->key_file ? keyring_init(&c->kr, hb->key_file, "cluster key", 1, err, errlen) < 0
	                 : (keyring_init_key(&c->kr, &hb->key, 1), 0))
		goto fail;
	c->key_rotation = "none";
	c->cluster_id = hb->cluster_id;
	c->node_id = hb->node_id;
	c->incarnation = clock_wall_us();
	c->lease_ms = (int64_t)(2 * hb->deadtime * 1000.0 + 0.5);
	c->dead_ms = (int64_t)(hb->deadtime * 1000.0 + 0.5);
	c->reply_at = -1;
	any.ss_family = c->addr.ss_family;
	/* not connected: the source address follows the routes of each send, so a route to the
	 * witness added after the start (boot order) is used at once */
	if ((c->fd = udp_bind(&any, 0)) < 0) {
		snprintf(err, errlen, "Cannot open the witness socket towards %s: %s.",
		         witness_addr, strerror(errno));
		goto fail;
	}
	c->lt.name = "witness";
	if (loopthread_init(&c->lt, main_loop, notify, arg) < 0) {
		snprintf(err, errlen, "Cannot create the witness client's event loop.");
		goto fail;
	}
	ev_timer_init(&c->tick, client_tick_cb, 0.0, hb->interval);
	c->tick.data = c;
	ev_timer_start(c->lt.loop, &c->tick);
	ev_io_init(&c->rx, client_rx_cb, c->fd, EV_READ);
	c->rx.data = c;
	ev_io_start(c->lt.loop, &c->rx);
	ev_async_init(&c->kick, client_kick_cb);
	c->kick.data = c;
	ev_async_start(c->lt.loop, &c->kick);
	if (loopthread_start(&c->lt, NULL) < 0) {
		snprintf(err, errlen, "Cannot start the witness client thread: %s.",
		         strerror(errno));
		goto fail;
	}
	return c;
fail:
	wit_client_stop(c);
	return NULL;
}

void wit_client_want(struct wit_client *c, bool want)
{
	pthread_mutex_lock(&c->mu);
	c->want = want;
	pthread_mutex_unlock(&c->mu);
}

void wit_client_peer(struct wit_client *c, bool outdate, bool current)
{
	uint16_t f = outdate ? WIT_F_OUTDATE_PEER : current ? WIT_F_PEER_CURRENT : 0;
	bool changed;

	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	changed = c->peer_flags != f;
	c->peer_flags = f;
	pthread_mutex_unlock(&c->mu);
	if (changed)
		ev_async_send(c->lt.loop, &c->kick);
}

void wit_client_primary(struct wit_client *c, bool primary)
{
	bool changed;

	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	changed = c->primary != primary;
	c->primary = primary;
	pthread_mutex_unlock(&c->mu);
	if (changed)
		ev_async_send(c->lt.loop, &c->kick);
}

void wit_client_state(struct wit_client *c, struct wit_client_state *out)
{
	memset(out, 0, sizeof(*out));
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	client_eval(c, clock_mono_ms(), out);
	pthread_mutex_unlock(&c->mu);
}

void wit_client_stop(struct wit_client *c)
{
	if (!c)
		return;
	loopthread_stop(&c->lt);
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->mu);
	keyring_clear(&c->kr);
	free(c);
}
