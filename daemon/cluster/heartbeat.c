/* SPDX-License-Identifier: MIT */
/*
 * Heartbeats: the packet codec, the replay window, the key file, and the runtime thread. See
 * heartbeat.h for the packet layout and the threading contract.
 */
#include "heartbeat.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster.h"
#include "conf/config.h"
#include "ctl/events.h"
#include "keyring.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/endian.h"
#include "loopthread.h"

static const char *const verdict_names[HB_VERDICT_COUNT] = {
    "ok",        "bad-size",        "bad-magic", "bad-version", "bad-mac",
    "bad-field", "old-incarnation", "replay",    "stale",
};

const char *hb_verdict_name(enum hb_verdict v)
{
	return (unsigned)v < HB_VERDICT_COUNT ? verdict_names[v] : "unknown";
}

/* ---- codec ---- */

static const struct hb_frame hb_frame = {HB_MAGIC, HB_VERSION, HB_PKT_SIZE, HB_MAC_OFFSET};

/* HMAC-SHA256 of buf[0..len) under key. 0, or -1 with errno EIO. */
static int hb_mac(const struct key_bytes *key, const uint8_t *buf, size_t len, uint8_t out[32])
{
	unsigned mdlen = 0;

	if (key->len == 0 || key->len > KEYFILE_MAX ||
	    !HMAC(EVP_sha256(), key->bytes, (int)key->len, buf, len, out, &mdlen) || mdlen != 32) {
		errno = EIO;
		return -1;
	}
	return 0;
}

int hb_frame_seal(const struct hb_frame *f, const struct key_bytes *key, uint8_t *buf)
{
	be_put32(buf, f->magic);
	buf[4] = f->version;
	return hb_mac(key, buf, f->mac_offset, buf + f->mac_offset);
}

enum hb_verdict hb_frame_check(const struct hb_frame *f, const uint8_t *buf, size_t len,
                               const struct key_bytes *key)
{
	uint8_t want[32];

	if (len != f->size)
		return HB_BAD_SIZE;
	if (be_get32(buf) != f->magic)
		return HB_BAD_MAGIC;
	if (buf[4] != f->version)
		return HB_BAD_VERSION;
	/* Nothing else is trusted before the MAC: a forger must not learn which field it hit. */
	if (hb_mac(key, buf, f->mac_offset, want) < 0 ||
	    CRYPTO_memcmp(want, buf + f->mac_offset, sizeof(want)) != 0)
		return HB_BAD_MAC;
	return HB_OK;
}

int hb_encode(const struct hb_msg *m, const struct key_bytes *key, uint8_t buf[HB_PKT_SIZE])
{
	buf[5] = m->path;
	buf[6] = m->role;
	buf[7] = m->disk;
	be_put32(buf + 8, m->cluster_id);
	be_put32(buf + 12, m->node_id);
	be_put64(buf + 16, m->incarnation);
	be_put64(buf + 24, m->seq);
	be_put64(buf + 32, m->time_ms);
	be_put16(buf + 40, m->flags);
	be_put16(buf + 42, m->stale);
	be_put64(buf + 44, m->echo_seq);
	be_put32(buf + 52, m->echo_hold_us);
	return hb_frame_seal(&hb_frame, key, buf);
}

enum hb_verdict hb_decode(const uint8_t *buf, size_t len, const struct key_bytes *key,
                          struct hb_msg *m)
{
	enum hb_verdict v = hb_frame_check(&hb_frame, buf, len, key);

	if (v != HB_OK)
		return v;
	if (buf[5] >= HB_MAX_PATHS || buf[6] > CLUSTER_PRIMARY || buf[7] >= CLUSTER_DISK_COUNT ||
	    (be_get16(buf + 40) & ~HB_F_ALL))
		return HB_BAD_FIELD;
	m->path = buf[5];
	m->role = buf[6];
	m->disk = buf[7];
	m->cluster_id = be_get32(buf + 8);
	m->node_id = be_get32(buf + 12);
	m->incarnation = be_get64(buf + 16);
	m->seq = be_get64(buf + 24);
	m->time_ms = be_get64(buf + 32);
	m->flags = be_get16(buf + 40);
	m->stale = be_get16(buf + 42);
	m->echo_seq = be_get64(buf + 44);
	m->echo_hold_us = be_get32(buf + 52);
	return HB_OK;
}

enum hb_verdict hb_replay_check(struct hb_replay *w, uint64_t incarnation, uint64_t seq)
{
	if (w->seen && incarnation < w->incarnation)
		return HB_OLD_INCARNATION;
	if (w->seen && incarnation == w->incarnation) {
		if (seq == w->seq)
			return HB_REPLAY;
		if (seq < w->seq)
			return HB_STALE;
	}
	w->seen = true;
	w->incarnation = incarnation;
	w->seq = seq;
	return HB_OK;
}

/* ---- key ---- */

/* ---- configuration ---- */

static void hb_sockaddr(const struct hak_hb_addr *a, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;
		in->sin_family = AF_INET;
		in->sin_port = htons(a->port);
		inet_pton(AF_INET, a->host, &in->sin_addr);
		*len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(a->port);
		inet_pton(AF_INET6, a->host, &in6->sin6_addr);
		*len = sizeof(*in6);
	}
}

int hb_config_build(struct hb_config *out, const struct hak_config *cfg,
                    const struct hak_node_cfg *self, const struct hak_node_cfg *peer, char *err,
                    size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!cfg->cluster.present || cfg->n_nodes != 2 || !self || !peer || self == peer ||
	    self->n_heartbeat != peer->n_heartbeat || self->n_heartbeat > HB_MAX_PATHS) {
		snprintf(err, errlen,
		         "No heartbeats without a cluster section and two nodes with matching "
		         "heartbeat-address lists.");
		errno = EINVAL;
		return -1;
	}
	out->cluster_id = cfg->cluster.cluster_id;
	out->node_id = self == &cfg->nodes[0] ? 1 : 2;
	out->peer_id = 3 - out->node_id;
	out->n_paths = self->n_heartbeat;
	out->interval = cfg->cluster.heartbeat_interval;
	out->deadtime = cfg->cluster.deadtime;
	for (unsigned i = 0; i < out->n_paths; i++) {
		struct hb_path_cfg *p = &out->paths[i];
		hb_sockaddr(&self->heartbeat[i], &p->local, &p->local_len);
		hb_sockaddr(&peer->heartbeat[i], &p->peer, &p->peer_len);
	}
	out->key_file = cfg->cluster.auth_key_file;
	return keyfile_load(cfg->cluster.auth_key_file, "heartbeat key", &out->key, err, errlen);
}

/* ---- runtime ---- */

struct hb {
	struct hb_config cfg;
	int fds[HB_MAX_PATHS];
	struct loopthread lt;
	ev_timer tick;
	ev_timer expiry; /* when the first alive path goes dead if nothing more arrives */
	ev_async kick;   /* main loop -> thread: the local state changed, send it now */
	ev_io rx[HB_MAX_PATHS];
	hb_notify_fn notify;
	void *arg;
	atomic_bool first_sent; /* the thread sent its first round (hb_joined) */
	/* heartbeat thread only */
	struct hb_replay replay[HB_MAX_PATHS];
	uint64_t seq, incarnation;
	struct keyring kr; /* the key(s) packets go out and are checked under */
	/* the round trip (heartbeat.h, echo): when the recent sequences left, and per path the
	 * newest sequence accepted from the peer and when it arrived */
	uint64_t sent_seq[HB_SENT_RING];
	int64_t sent_us[HB_SENT_RING];
	uint64_t echo_seq[HB_MAX_PATHS];
	int64_t echo_at_us[HB_MAX_PATHS];
	/* shared, under mu */
	pthread_mutex_t mu;
	uint8_t role, disk;
	uint16_t flags, stale;
	struct hb_path_state paths[HB_MAX_PATHS];
	int64_t heard_at[HB_MAX_PATHS]; /* monotonic ms; -1: never */
	bool peer_known;
	struct hb_msg peer;
	uint64_t generation;
	const char *key_rotation; /* keyring_state(&kr) as of the last tick */
	uint64_t key_rotations;
	/* main thread only: what the last notification reported, for the events */
	struct hb_snapshot seen;
};

ssize_t hb_recv(int fd, uint8_t *buf, size_t len, struct sockaddr_storage *from, socklen_t *flen)
{
	ssize_t n;

	*flen = sizeof(*from);
	n = recvfrom(fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)from, flen);
	if (n >= 0)
		memset((char *)from + *flen, 0, sizeof(*from) - *flen);
	return n;
}

bool hb_same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
		return x->sin6_port == y->sin6_port &&
		       memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
	}
	return false;
}

/* Under mu: refresh every path's alive flag; true if one changed. */
static bool update_liveness(struct hb *hb, int64_t now)
{
	int64_t dead_ms = (int64_t)(hb->cfg.deadtime * 1000.0 + 0.5);
	bool changed = false;

	for (unsigned i = 0; i < hb->cfg.n_paths; i++) {
		bool alive = hb->heard_at[i] >= 0 && now - hb->heard_at[i] < dead_ms;
		if (alive != hb->paths[i].alive) {
			hb->paths[i].alive = alive;
			changed = true;
		}
	}
	return changed;
}

static void send_all(struct hb *hb)
{
	struct hb_msg m = {.cluster_id = hb->cfg.cluster_id,
	                   .node_id = hb->cfg.node_id,
	                   .incarnation = hb->incarnation,
	                   .time_ms = clock_wall_ms()};
	uint8_t pkt[HB_PKT_SIZE];

	pthread_mutex_lock(&hb->mu);
	m.role = hb->role;
	m.disk = hb->disk;
	m.flags = hb->flags;
	m.stale = hb->stale;
	pthread_mutex_unlock(&hb->mu);
	/* while a key rotation waits for the peer, once under each key (keyring.h) */
	const struct key_bytes *keys[2];
	unsigned nk = keyring_send_keys(&hb->kr, keys);
	for (unsigned i = 0; i < hb->cfg.n_paths; i++) {
		const struct hb_path_cfg *p = &hb->cfg.paths[i];
		m.path = (uint8_t)i;
		for (unsigned k = 0; k < nk; k++) {
			int64_t now_us = clock_mono_us(), held = now_us - hb->echo_at_us[i];
			m.echo_seq = hb->echo_seq[i];
			m.echo_hold_us = !m.echo_seq         ? 0
			                 : held > UINT32_MAX ? UINT32_MAX
			                                     : (uint32_t)held;
			m.seq = ++hb->seq;
			hb->sent_seq[m.seq % HB_SENT_RING] = m.seq;
			hb->sent_us[m.seq % HB_SENT_RING] = now_us;
			bool ok = hb_encode(&m, keys[k], pkt) == 0 &&
			          sendto(hb->fds[i], pkt, sizeof(pkt), MSG_DONTWAIT,
			                 (const struct sockaddr *)&p->peer,
			                 p->peer_len) == (ssize_t)sizeof(pkt);
			pthread_mutex_lock(&hb->mu);
			if (ok)
				hb->paths[i].tx_ok++;
			else
				hb->paths[i].tx_err++;
			pthread_mutex_unlock(&hb->mu);
		}
	}
}

/*
 * Liveness is checked again at the moment the first alive path would go dead, not only at the
 * next tick: the peer is declared dead deadtime after its last heartbeat, instead of up to one
 * interval later. Hb thread only (it is the sole writer of heard_at and the alive flags).
 */
static void arm_expiry(struct hb *hb)
{
	int64_t dead_ms = (int64_t)(hb->cfg.deadtime * 1000.0 + 0.5), next = -1,
	        now = clock_mono_ms();

	for (unsigned i = 0; i < hb->cfg.n_paths; i++) {
		int64_t t = hb->heard_at[i] + dead_ms;
		if (hb->paths[i].alive && hb->heard_at[i] >= 0 && (next < 0 || t < next))
			next = t;
	}
	ev_timer_stop(hb->lt.loop, &hb->expiry);
	if (next < 0)
		return;
	ev_timer_set(&hb->expiry, (double)(next > now ? next - now : 0) / 1000.0 + 0.001, 0.0);
	ev_timer_start(hb->lt.loop, &hb->expiry);
}

/* Refresh the paths' liveness now, tell the main loop if it changed, and re-arm the expiry. */
static void check_liveness(struct hb *hb)
{
	bool changed;

	pthread_mutex_lock(&hb->mu);
	changed = update_liveness(hb, clock_mono_ms());
	if (changed)
		hb->generation++;
	pthread_mutex_unlock(&hb->mu);
	if (changed)
		loopthread_notify(&hb->lt);
	arm_expiry(hb);
}

static void expiry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	check_liveness(w->data);
}

/* A new role, disk or flag (an outdate request, a freeze) reaches the peer at once, not at the
 * next interval: a fence waits for the peer's answer to it. */
static void kick_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)revents;
	send_all(w->data);
}

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct hb *hb = w->data;

	(void)loop;
	(void)revents;
	keyring_refresh(&hb->kr, clock_mono_ms());
	pthread_mutex_lock(&hb->mu);
	hb->key_rotation = keyring_state(&hb->kr);
	hb->key_rotations = hb->kr.rotations;
	pthread_mutex_unlock(&hb->mu);
	send_all(hb);
	check_liveness(hb);
}

/* Checks everything but the packet itself; returns the counter to bump, NULL to accept. */
static uint64_t *classify(struct hb *hb, unsigned path, const struct sockaddr_storage *from,
                          const uint8_t *buf, ssize_t n, struct hb_msg *m)
{
	struct hb_path_state *ps = &hb->paths[path];
	const struct key_bytes *keys[2];
	unsigned nk = keyring_recv_keys(&hb->kr, keys), k;
	enum hb_verdict v = HB_BAD_MAC;

	if (!hb_same_addr(from, &hb->cfg.paths[path].peer))
		return &ps->rx_foreign;
	for (k = 0; k < nk && v != HB_OK; k++)
		v = hb_decode(buf, (size_t)n, keys[k], m);
	if (v != HB_OK)
		return &ps->rx_bad;
	if (m->cluster_id != hb->cfg.cluster_id || m->node_id != hb->cfg.peer_id || m->path != path)
		return &ps->rx_foreign;
	if (hb_replay_check(&hb->replay[path], m->incarnation, m->seq) != HB_OK)
		return &ps->rx_replay;
	keyring_seen(&hb->kr, k - 1, 1, clock_mono_ms());
	return NULL;
}

/*
 * Under mu, on the heartbeat thread: the packet echoes one of ours, so the path's round trip is
 * the time since ours left less the time the peer held it. A sequence of a previous incarnation
 * that happens to match a new one gives one wrong sample at most; nothing depends on it.
 */
static void measure_rtt(struct hb *hb, unsigned path, const struct hb_msg *m)
{
	int64_t now_us = clock_mono_us();
	unsigned slot = (unsigned)(m->echo_seq % HB_SENT_RING);

	hb->echo_seq[path] = m->seq;
	hb->echo_at_us[path] = now_us;
	if (m->echo_seq && hb->sent_seq[slot] == m->echo_seq) {
		int64_t rtt = now_us - hb->sent_us[slot] - (int64_t)m->echo_hold_us;
		if (rtt >= 0)
			hb->paths[path].rtt_us = rtt;
	}
}

/* Under mu: record an accepted message; true if the peer's state or a path changed. */
static bool accept_msg(struct hb *hb, unsigned path, const struct hb_msg *m, int64_t now)
{
	bool changed = !hb->peer_known || m->role != hb->peer.role || m->disk != hb->peer.disk ||
	               m->flags != hb->peer.flags || m->stale != hb->peer.stale ||
	               m->incarnation != hb->peer.incarnation;

	hb->paths[path].rx_ok++;
	hb->heard_at[path] = now;
	measure_rtt(hb, path, m);
	/* the newest by sequence: paths deliver out of order relative to each other */
	if (!hb->peer_known || m->incarnation != hb->peer.incarnation || m->seq > hb->peer.seq)
		hb->peer = *m;
	else
		changed = false;
	hb->peer_known = true;
	return update_liveness(hb, now) || changed;
}

static void rx_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct hb *hb = w->data;
	unsigned path = (unsigned)(w - hb->rx);
	bool changed = false;

	(void)loop;
	(void)revents;
	/* bounded, so a flood on one path cannot starve the timer */
	for (int i = 0; i < 64; i++) {
		uint8_t buf[HB_PKT_SIZE + 1];
		struct sockaddr_storage from;
		socklen_t flen;
		struct hb_msg m;
		ssize_t n = hb_recv(w->fd, buf, sizeof(buf), &from, &flen);
		if (n < 0)
			break;
		uint64_t *bad = classify(hb, path, &from, buf, n, &m);
		pthread_mutex_lock(&hb->mu);
		if (bad) {
			(*bad)++;
		} else if (accept_msg(hb, path, &m, clock_mono_ms())) {
			hb->generation++;
			changed = true;
		}
		pthread_mutex_unlock(&hb->mu);
	}
	if (changed)
		loopthread_notify(&hb->lt);
	arm_expiry(hb);
}

/* The first thing the heartbeat thread does: the peer need not wait an interval to hear us. */
static void hb_first(void *arg)
{
	struct hb *hb = arg;

	send_all(hb);
	atomic_store(&hb->first_sent, true);
}

static void emit_changes(struct hb *hb, const struct hb_snapshot *s)
{
	const struct hb_snapshot *o = &hb->seen;

	for (unsigned i = 0; i < s->n_paths; i++)
		if (s->paths[i].alive != o->paths[i].alive)
			events_emit("heartbeat-path", "path:%u state:%s peer:%" PRIu32, i,
			            s->paths[i].alive ? "alive" : "dead", hb->cfg.peer_id);
	if (s->peer_alive != o->peer_alive)
		events_emit("peer", "node:%" PRIu32 " state:%s paths:%u", hb->cfg.peer_id,
		            s->peer_alive ? "alive" : "dead", s->n_paths);
	if (s->peer_known &&
	    (!o->peer_known || s->peer.role != o->peer.role || s->peer.disk != o->peer.disk ||
	     s->peer.flags != o->peer.flags || s->peer.stale != o->peer.stale))
		events_emit("peer-state", "node:%" PRIu32 " role:%s disk:%s flags:0x%x stale:0x%x",
		            hb->cfg.peer_id, s->peer.role ? "primary" : "secondary",
		            cluster_disk_name(s->peer.disk), (unsigned)s->peer.flags,
		            (unsigned)s->peer.stale);
	hb->seen = *s;
}

/* In the main loop, after the heartbeat thread saw a change. */
static void hb_main_notify(void *arg)
{
	struct hb *hb = arg;
	struct hb_snapshot s;

	hb_snapshot(hb, &s);
	emit_changes(hb, &s);
	if (hb->notify)
		hb->notify(hb->arg);
}

static char *addr_text(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
		snprintf(buf, len, "%s:%u", host, port);
	} else {
		const struct sockaddr_in6 *a = (const void *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
		snprintf(buf, len, "[%s]:%u", host, port);
	}
	return buf;
}

static int open_path(struct hb *hb, unsigned i, char *err, size_t errlen)
{
	const struct hb_path_cfg *p = &hb->cfg.paths[i];
	int fam = p->local.ss_family, tos = IPTOS_PREC_INTERNETCONTROL, e;
	char a[INET6_ADDRSTRLEN + 8];

	if ((fam != AF_INET && fam != AF_INET6) || p->peer.ss_family != fam) {
		snprintf(err, errlen,
		         "Heartbeat path %u needs a local and a peer address of one family (IPv4 "
		         "or IPv6).",
		         i);
		errno = EINVAL;
		return -1;
	}
	hb->fds[i] = socket(fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (hb->fds[i] < 0)
		goto fail;
	/* Best effort: a network that honours precedence queues heartbeats before bulk data. */
	if (fam == AF_INET)
		(void)setsockopt(hb->fds[i], IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	else
		(void)setsockopt(hb->fds[i], IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos));
	if (bind(hb->fds[i], (const struct sockaddr *)&p->local, p->local_len) < 0)
		goto fail;
	return 0;
fail:
	e = errno;
	snprintf(err, errlen, "Cannot open heartbeat path %u on %s: %s.", i,
	         addr_text(&p->local, a, sizeof(a)), strerror(e));
	errno = e;
	return -1;
}

static int check_cfg(const struct hb_config *cfg, char *err, size_t errlen)
{
	if (cfg->n_paths < 1 || cfg->n_paths > HB_MAX_PATHS || cfg->key.len < KEYFILE_MIN ||
	    cfg->key.len > KEYFILE_MAX || !(cfg->interval >= 0.001) ||
	    !(cfg->deadtime > cfg->interval) || cfg->node_id == cfg->peer_id) {
		snprintf(
		    err, errlen,
		    "Bad heartbeat configuration: %u paths (1 to %u), key of %zu bytes, "
		    "interval %.3fs, deadtime %.3fs (must exceed the interval), node ids %" PRIu32
		    " and %" PRIu32 " (must differ).",
		    cfg->n_paths, HB_MAX_PATHS, cfg->key.len, cfg->interval, cfg->deadtime,
		    cfg->node_id, cfg->peer_id);
		errno = EINVAL;
		return -1;
	}
	return 0;
}

static int setup(struct hb *hb, char *err, size_t errlen)
{
	for (unsigned i = 0; i < hb->cfg.n_paths; i++) {
		if (open_path(hb, i, err, errlen) < 0)
			return -1;
		hb->heard_at[i] = -1;
		hb->paths[i].rtt_us = -1;
		ev_io_init(&hb->rx[i], rx_cb, hb->fds[i], EV_READ);
		hb->rx[i].data = hb;
		ev_io_start(hb->lt.loop, &hb->rx[i]);
	}
	ev_timer_init(&hb->tick, tick_cb, hb->cfg.interval, hb->cfg.interval);
	hb->tick.data = hb;
	ev_timer_start(hb->lt.loop, &hb->tick);
	ev_timer_init(&hb->expiry, expiry_cb, 1.0, 0.0);
	hb->expiry.data = hb;
	ev_async_init(&hb->kick, kick_cb);
	hb->kick.data = hb;
	ev_async_start(hb->lt.loop, &hb->kick);
	if (loopthread_start(&hb->lt, hb_first) < 0) {
		snprintf(err, errlen, "Cannot start the heartbeat thread: %s.", strerror(errno));
		return -1;
	}
	return 0;
}

/* The key ring starts from the file when there is one (so a replacement is noticed), else
 * from the key given. */
static int init_keyring(struct hb *hb, char *err, size_t errlen)
{
	hb->key_rotation = "none";
	if (!hb->cfg.key_file) {
		keyring_init_key(&hb->kr, &hb->cfg.key, 1);
		return 0;
	}
	return keyring_init(&hb->kr, hb->cfg.key_file, "cluster key", 1, err, errlen);
}

struct hb *hb_start(const struct hb_config *cfg, struct ev_loop *main_loop, hb_notify_fn notify,
                    void *arg, char *err, size_t errlen)
{
	struct hb *hb = NULL;
	int e;

	if (check_cfg(cfg, err, errlen) < 0)
		return NULL;
	hb = calloc(1, sizeof(*hb));
	if (!hb) {
		snprintf(err, errlen, "Out of memory starting the heartbeats.");
		errno = ENOMEM;
		return NULL;
	}
	hb->cfg = *cfg;
	if (init_keyring(hb, err, errlen) < 0)
		goto fail;
	hb->cfg.key_file = NULL; /* the keyring holds its own copy of the name */
	hb->notify = notify;
	hb->arg = arg;
	hb->incarnation = clock_wall_us();
	hb->seen.n_paths = hb->cfg.n_paths;
	pthread_mutex_init(&hb->mu, NULL);
	for (unsigned i = 0; i < HB_MAX_PATHS; i++)
		hb->fds[i] = -1;
	hb->lt.name = "heartbeat";
	if (loopthread_init(&hb->lt, main_loop, hb_main_notify, hb) < 0) {
		snprintf(err, errlen, "Cannot create the heartbeat event loop.");
		goto fail;
	}
	if (setup(hb, err, errlen) < 0)
		goto fail;
	return hb;
fail:
	e = errno;
	hb_stop(hb);
	errno = e;
	return NULL;
}

bool hb_joined(struct hb *hb)
{
	return hb && atomic_load(&hb->first_sent);
}

void hb_set_local(struct hb *hb, uint8_t role, uint8_t disk, uint16_t flags, uint16_t stale)
{
	bool changed;

	pthread_mutex_lock(&hb->mu);
	changed = hb->role != role || hb->disk != disk || hb->flags != (flags & HB_F_ALL) ||
	          hb->stale != stale;
	hb->role = role;
	hb->disk = disk;
	hb->flags = flags & HB_F_ALL;
	hb->stale = stale;
	pthread_mutex_unlock(&hb->mu);
	if (changed)
		ev_async_send(hb->lt.loop, &hb->kick);
}

void hb_snapshot(struct hb *hb, struct hb_snapshot *out)
{
	int64_t now = clock_mono_ms();

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&hb->mu);
	out->n_paths = hb->cfg.n_paths;
	for (unsigned i = 0; i < hb->cfg.n_paths; i++) {
		out->paths[i] = hb->paths[i];
		out->paths[i].last_heard_ms = hb->heard_at[i] < 0 ? -1 : now - hb->heard_at[i];
		out->peer_alive |= hb->paths[i].alive;
	}
	out->peer_known = hb->peer_known;
	out->peer = hb->peer;
	out->generation = hb->generation;
	out->key_rotation = hb->key_rotation;
	out->key_rotations = hb->key_rotations;
	pthread_mutex_unlock(&hb->mu);
}

void hb_stop(struct hb *hb)
{
	if (!hb)
		return;
	loopthread_stop(&hb->lt);
	for (unsigned i = 0; i < HB_MAX_PATHS; i++)
		if (hb->fds[i] >= 0)
			close(hb->fds[i]);
	pthread_mutex_destroy(&hb->mu);
	OPENSSL_cleanse(&hb->cfg.key, sizeof(hb->cfg.key));
	keyring_clear(&hb->kr);
	free(hb);
}
