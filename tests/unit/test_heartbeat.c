/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for heartbeats: the packet codec (round trip, every single-bit flip, wrong key,
 * truncation, out-of-range fields under a valid MAC), the replay window, the key file, and the
 * runtime on loopback: two instances see each other on both paths within a second, the loss of
 * one path leaves the peer alive, and a stopped instance is declared dead between deadtime and
 * deadtime + 2 intervals after its last packet.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "conf/config.h"
#include "cluster/heartbeat.h"
#include "cluster/keyring.h"
#include "lib/clock.h"

static const char key_text[] = "correct horse battery staple 42";

static struct key_bytes test_key(const char *text)
{
	struct key_bytes k;
	char err[256];

	ck_assert_int_eq(keyfile_parse((const uint8_t *)text, strlen(text), "heartbeat key", &k,
	                               err, sizeof(err)),
	                 0);
	return k;
}

static struct hb_msg sample(void)
{
	struct hb_msg m = {.path = 1,
	                   .role = CLUSTER_PRIMARY,
	                   .disk = CLUSTER_DISK_UPTODATE,
	                   .cluster_id = 0xc1057e12,
	                   .node_id = 2,
	                   .incarnation = 0x0102030405060708ull,
	                   .seq = 41,
	                   .time_ms = 1790000000123ull,
	                   .flags = HB_F_ELIGIBLE | HB_F_IO_FROZEN,
	                   .stale = 0x8001,
	                   .echo_seq = 0x1122334455667788ull,
	                   .echo_hold_us = 0xa0b0c0d0u};
	return m;
}

START_TEST(roundtrip)
{
	struct key_bytes k = test_key(key_text);
	struct hb_msg m = sample(), d;
	uint8_t pkt[HB_PKT_SIZE];

	ck_assert_int_eq(hb_encode(&m, &k, pkt), 0);
	ck_assert_int_eq(hb_decode(pkt, sizeof(pkt), &k, &d), HB_OK);
	ck_assert(d.path == m.path && d.role == m.role && d.disk == m.disk &&
	          d.cluster_id == m.cluster_id && d.node_id == m.node_id &&
	          d.incarnation == m.incarnation && d.seq == m.seq && d.time_ms == m.time_ms &&
	          d.flags == m.flags && d.stale == m.stale && d.echo_seq == m.echo_seq &&
	          d.echo_hold_us == m.echo_hold_us);
	/* the layout is the documented one */
	ck_assert_int_eq(memcmp(pkt, "HAKH\x02\x01\x01\x00", 8), 0);
	ck_assert_int_eq(pkt[15], 2);
	ck_assert_int_eq(pkt[31], 41);
	ck_assert_int_eq(memcmp(pkt + 44, "\x11\x22\x33\x44\x55\x66\x77\x88\xa0\xb0\xc0\xd0", 12),
	                 0);
}
END_TEST

START_TEST(every_bit_flip_rejected)
{
	struct key_bytes k = test_key(key_text);
	struct hb_msg m = sample(), d;
	uint8_t pkt[HB_PKT_SIZE], bad[HB_PKT_SIZE];

	ck_assert_int_eq(hb_encode(&m, &k, pkt), 0);
	for (unsigned bit = 0; bit < HB_PKT_SIZE * 8; bit++) {
		memcpy(bad, pkt, sizeof(bad));
		bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		enum hb_verdict want = bit < 32   ? HB_BAD_MAGIC
		                       : bit < 40 ? HB_BAD_VERSION
		                                  : HB_BAD_MAC;
		enum hb_verdict got = hb_decode(bad, sizeof(bad), &k, &d);
		ck_assert_msg(got == want, "bit %u: %s, expected %s", bit, hb_verdict_name(got),
		              hb_verdict_name(want));
	}
}
END_TEST

START_TEST(wrong_key_and_truncation)
{
	struct key_bytes k = test_key(key_text), k2 = test_key("correct horse battery staple 43");
	struct hb_msg m = sample(), d;
	uint8_t pkt[HB_PKT_SIZE + 1];

	ck_assert_int_eq(hb_encode(&m, &k, pkt), 0);
	ck_assert_int_eq(hb_decode(pkt, HB_PKT_SIZE, &k2, &d), HB_BAD_MAC);
	for (size_t len = 0; len < HB_PKT_SIZE; len++)
		ck_assert_int_eq(hb_decode(pkt, len, &k, &d), HB_BAD_SIZE);
	pkt[HB_PKT_SIZE] = 0;
	ck_assert_int_eq(hb_decode(pkt, HB_PKT_SIZE + 1, &k, &d), HB_BAD_SIZE);
}
END_TEST

START_TEST(fields_checked_after_mac)
{
	struct key_bytes k = test_key(key_text);
	struct hb_msg d;
	uint8_t pkt[HB_PKT_SIZE];
	struct {
		uint8_t path, role, disk;
		uint16_t flags;
	} bad[] = {{HB_MAX_PATHS, 0, 0, 0},
	           {0, CLUSTER_PRIMARY + 1, 0, 0},
	           {0, 0, CLUSTER_DISK_COUNT, 0},
	           {0, 0, 0, HB_F_ALL + 1}};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct hb_msg m = sample();
		m.path = bad[i].path;
		m.role = bad[i].role;
		m.disk = bad[i].disk;
		m.flags = bad[i].flags;
		ck_assert_int_eq(hb_encode(&m, &k, pkt), 0);
		ck_assert_int_eq(hb_decode(pkt, sizeof(pkt), &k, &d), HB_BAD_FIELD);
	}
	ck_assert_str_eq(hb_verdict_name(HB_VERDICT_COUNT), "unknown");
}
END_TEST

START_TEST(replay_window)
{
	struct hb_replay w = {0};

	ck_assert_int_eq(hb_replay_check(&w, 100, 5), HB_OK);
	ck_assert_int_eq(hb_replay_check(&w, 100, 5), HB_REPLAY);
	ck_assert_int_eq(hb_replay_check(&w, 100, 4), HB_STALE);
	ck_assert_int_eq(hb_replay_check(&w, 100, 9), HB_OK); /* gaps are lost datagrams */
	ck_assert_int_eq(hb_replay_check(&w, 100, 6), HB_STALE);
	ck_assert_int_eq(hb_replay_check(&w, 100, 9), HB_REPLAY);
	/* the sender restarted: its sequence starts again */
	ck_assert_int_eq(hb_replay_check(&w, 200, 1), HB_OK);
	ck_assert_int_eq(hb_replay_check(&w, 100, 10), HB_OLD_INCARNATION);
	ck_assert_int_eq(hb_replay_check(&w, 200, 1), HB_REPLAY);
	ck_assert_int_eq(hb_replay_check(&w, 200, 2), HB_OK);
	ck_assert(w.incarnation == 200 && w.seq == 2);
}
END_TEST

START_TEST(key_file)
{
	char path[] = "/tmp/hak-hbkey-XXXXXX", err[256];
	struct key_bytes k;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "0123456789abcdef\n", 17), 17);
	close(fd);
	ck_assert_int_eq(keyfile_load(path, "heartbeat key", &k, err, sizeof(err)), 0);
	ck_assert_uint_eq(k.len, 16); /* the newline is not key material */
	ck_assert_int_eq(memcmp(k.bytes, "0123456789abcdef", 16), 0);
	ck_assert_int_eq(chmod(path, 0644), 0);
	ck_assert_int_eq(keyfile_load(path, "heartbeat key", &k, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_ptr_nonnull(strstr(err, "chmod 600"));
	ck_assert_int_eq(chmod(path, 0600), 0);
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(write(fd, "short key\n", 10), 10);
	close(fd);
	ck_assert_int_eq(keyfile_load(path, "heartbeat key", &k, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "9 bytes"));
	unlink(path);
	ck_assert_int_eq(keyfile_load(path, "heartbeat key", &k, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(config_from_hak_conf)
{
	char key[] = "/tmp/hak-hbkey-XXXXXX", text[1024], err[512];
	struct hak_config *cfg = NULL;
	struct hb_config hc;
	int fd = mkstemp(key);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, key_text, strlen(key_text)), (ssize_t)strlen(key_text));
	close(fd);
	snprintf(text, sizeof(text),
	         "node a {\n address 192.0.2.1:7789\n"
	         " heartbeat-address 192.0.2.1:7790 [2001:db8::1]:7790\n}\n"
	         "node b {\n address 192.0.2.2:7789\n"
	         " heartbeat-address 192.0.2.2:7791 [2001:db8::2]:7792\n}\n"
	         "cluster {\n cluster-id 9\n heartbeat-interval 100ms\n deadtime 700ms\n"
	         " auth-key-file %s\n}\n",
	         key);
	ck_assert_msg(config_parse(text, strlen(text), "t.conf", &cfg, err, sizeof(err)) == 0, "%s",
	              err);
	ck_assert_msg(hb_config_build(&hc, cfg, &cfg->nodes[1], &cfg->nodes[0], err, sizeof(err)) ==
	                  0,
	              "%s", err);
	ck_assert(hc.cluster_id == 9 && hc.node_id == 2 && hc.peer_id == 1 && hc.n_paths == 2);
	ck_assert_double_eq(hc.interval, 0.1);
	ck_assert_double_eq(hc.deadtime, 0.7);
	ck_assert_uint_eq(hc.key.len, strlen(key_text));
	const struct sockaddr_in *l0 = (const void *)&hc.paths[0].local;
	const struct sockaddr_in *p0 = (const void *)&hc.paths[0].peer;
	ck_assert(l0->sin_family == AF_INET && ntohs(l0->sin_port) == 7791 &&
	          l0->sin_addr.s_addr == inet_addr("192.0.2.2") && ntohs(p0->sin_port) == 7790);
	const struct sockaddr_in6 *l1 = (const void *)&hc.paths[1].local;
	ck_assert(l1->sin6_family == AF_INET6 && ntohs(l1->sin6_port) == 7792 &&
	          hc.paths[1].local_len == sizeof(*l1) && l1->sin6_addr.s6_addr[15] == 2);
	unlink(key);
	ck_assert_int_eq(
	    hb_config_build(&hc, cfg, &cfg->nodes[0], &cfg->nodes[1], err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	config_free(cfg);
}
END_TEST

/* ---- runtime on loopback ---- */

#define INTERVAL 0.2
#define DEADTIME 1.0

/* A loopback UDP port that was free a moment ago. */
static uint16_t free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void set_addr(struct sockaddr_storage *ss, socklen_t *len, uint16_t port)
{
	struct sockaddr_in *a = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a->sin_port = htons(port);
	*len = sizeof(*a);
}

/* Two nodes 1 and 2 with two paths each; ports[path][node]. */
static void pair_cfg(struct hb_config cfg[2], const uint16_t ports[2][2])
{
	for (int n = 0; n < 2; n++) {
		memset(&cfg[n], 0, sizeof(cfg[n]));
		cfg[n].cluster_id = 7;
		cfg[n].node_id = (uint32_t)n + 1;
		cfg[n].peer_id = (uint32_t)(2 - n);
		cfg[n].n_paths = 2;
		cfg[n].interval = INTERVAL;
		cfg[n].deadtime = DEADTIME;
		cfg[n].key = test_key(key_text);
		for (int p = 0; p < 2; p++) {
			set_addr(&cfg[n].paths[p].local, &cfg[n].paths[p].local_len, ports[p][n]);
			set_addr(&cfg[n].paths[p].peer, &cfg[n].paths[p].peer_len, ports[p][!n]);
		}
	}
}

struct watch {
	struct hb *hb[2];
	unsigned notified[2];
	double t_dead; /* when node 0's notification first said the peer is dead */
	int phase;     /* 0: waiting for alive; 1: waiting for dead */
	double deadline;
	ev_timer poll;
};

static struct watch W;

static void on_notify(void *arg)
{
	int n = (int)(intptr_t)arg;
	struct hb_snapshot s;

	W.notified[n]++;
	if (n == 0 && W.phase == 1 && W.t_dead == 0) {
		hb_snapshot(W.hb[0], &s);
		if (!s.peer_alive)
			W.t_dead = clock_mono();
	}
}

static bool both_alive(void)
{
	for (int n = 0; n < 2; n++) {
		struct hb_snapshot s;
		hb_snapshot(W.hb[n], &s);
		if (!s.paths[0].alive || !s.paths[1].alive)
			return false;
	}
	return true;
}

static void poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)w;
	(void)revents;
	/*
	 * The snapshot is updated by the heartbeat thread before the loop hears of it (an
	 * ev_async), so "alive" needs the notifications too, or the check below races the wake-up.
	 */
	if ((W.phase == 0 && both_alive() && W.notified[0] > 0 && W.notified[1] > 0) ||
	    (W.phase == 1 && W.t_dead > 0) || clock_mono() > W.deadline)
		ev_break(loop, EVBREAK_ALL);
}

static void run_until(struct ev_loop *loop, int phase, double max_s)
{
	W.phase = phase;
	W.deadline = clock_mono() + max_s;
	ev_timer_init(&W.poll, poll_cb, 0.01, 0.01);
	ev_timer_start(loop, &W.poll);
	ev_run(loop, 0);
	ev_timer_stop(loop, &W.poll);
}

START_TEST(loopback_alive_then_dead)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	uint16_t ports[2][2] = {{free_port(), free_port()}, {free_port(), free_port()}};
	struct hb_config cfg[2];
	struct hb_snapshot s;
	char err[256];
	double t0;

	memset(&W, 0, sizeof(W));
	pair_cfg(cfg, ports);
	t0 = clock_mono();
	for (int n = 0; n < 2; n++) {
		W.hb[n] = hb_start(&cfg[n], loop, on_notify, (void *)(intptr_t)n, err, sizeof(err));
		ck_assert_msg(W.hb[n] != NULL, "%s", err);
	}
	hb_set_local(W.hb[1], CLUSTER_PRIMARY, CLUSTER_DISK_UPTODATE, HB_F_ELIGIBLE, 0x5);
	run_until(loop, 0, 3.0);
	ck_assert_msg(both_alive(), "not alive on both paths after %.2fs", clock_mono() - t0);
	ck_assert_msg(clock_mono() - t0 < 1.0, "alive only after %.2fs", clock_mono() - t0);
	ck_assert(W.notified[0] > 0 && W.notified[1] > 0);
	/* node 1's state reaches node 0 with the next heartbeat */
	run_until(loop, 2, 2 * INTERVAL + 0.1);
	hb_snapshot(W.hb[0], &s);
	ck_assert(s.peer_known && s.peer.node_id == 2 && s.peer.role == CLUSTER_PRIMARY &&
	          s.peer.flags == HB_F_ELIGIBLE && s.peer.stale == 0x5);
	ck_assert(s.paths[0].rx_ok > 0 && s.paths[1].rx_ok > 0);
	ck_assert(s.paths[0].rx_bad + s.paths[0].rx_replay + s.paths[0].rx_foreign == 0);
	/*
	 * Each path's round trip, from the peer's echo: measured, and loopback-short. Without the
	 * hold subtracted, each of the four would be spread over the 200 ms interval: all four
	 * under 50 ms would then happen once in 256 runs.
	 */
	for (int n = 0; n < 2; n++) {
		hb_snapshot(W.hb[n], &s);
		for (int p = 0; p < 2; p++)
			ck_assert_msg(s.paths[p].rtt_us >= 0 && s.paths[p].rtt_us < 50000,
			              "node %d path %d: round trip %" PRId64 " us", n + 1, p,
			              s.paths[p].rtt_us);
	}
	printf("Heartbeat round trip on loopback: %" PRId64 " us.\n", s.paths[0].rtt_us);

	/*
	 * A main loop that does not run for longer than deadtime (a CPU-bound verify) must not
	 * stop the heartbeats: the threads keep sending and receiving.
	 */
	uint64_t rx_before = s.paths[0].rx_ok;
	for (double t = clock_mono(); clock_mono() - t < DEADTIME * 1.5;)
		;
	hb_snapshot(W.hb[0], &s);
	ck_assert_msg(s.peer_alive && s.paths[0].alive && s.paths[1].alive &&
	                  s.paths[0].rx_ok >= rx_before + 5,
	              "heartbeats stalled while the main loop was busy: %" PRIu64 " then %" PRIu64,
	              rx_before, s.paths[0].rx_ok);

	/* node 1 stops: node 0 must declare it dead deadtime after its last packet, not later */
	hb_snapshot(W.hb[0], &s);
	double t_stop = clock_mono();
	int64_t age = s.paths[0].last_heard_ms < s.paths[1].last_heard_ms
	                  ? s.paths[0].last_heard_ms
	                  : s.paths[1].last_heard_ms;
	hb_stop(W.hb[1]);
	W.hb[1] = NULL;
	double t_last = t_stop - (double)age / 1000.0;
	run_until(loop, 1, DEADTIME + 4 * INTERVAL + 1.0);
	ck_assert_msg(W.t_dead > 0, "the peer was never declared dead");
	double took = W.t_dead - t_last;
	ck_assert_msg(took >= DEADTIME - 0.005 && took <= DEADTIME + 2 * INTERVAL,
	              "declared dead %.3fs after the last packet; expected %.1f to %.1f", took,
	              DEADTIME, DEADTIME + 2 * INTERVAL);
	printf("Peer declared dead %.3fs after its last heartbeat (deadtime %.1fs, interval "
	       "%.1fs).\n",
	       took, DEADTIME, INTERVAL);
	hb_snapshot(W.hb[0], &s);
	ck_assert(!s.peer_alive && !s.paths[0].alive && !s.paths[1].alive);
	hb_stop(W.hb[0]);
	ev_loop_destroy(loop);
}
END_TEST

/* Replace path's contents the way an operator should: a new file renamed over the old one. */
static void write_key(const char *path, const char *text)
{
	char tmp[300];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(rename(tmp, path), 0);
}

/*
 * The cluster key is replaced on node 1, then 1.5 s later on node 2 (two operators, or one
 * going from host to host): neither node ever declares the other dead, the first one sends
 * under both keys meanwhile (the second rejects the packets it cannot verify yet), and both
 * end on the new key alone with the old one in its grace period.
 */
START_TEST(loopback_key_rotation)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	uint16_t ports[2][2] = {{free_port(), free_port()}, {free_port(), free_port()}};
	struct hb_config cfg[2];
	struct hb_snapshot s[2];
	char dir[] = "/tmp/hak-hbkey-XXXXXX", path[2][300], err[256];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	memset(&W, 0, sizeof(W));
	pair_cfg(cfg, ports);
	for (int n = 0; n < 2; n++) {
		snprintf(path[n], sizeof(path[n]), "%s/key%d", dir, n);
		write_key(path[n], key_text);
		cfg[n].key_file = path[n];
		W.hb[n] = hb_start(&cfg[n], loop, on_notify, (void *)(intptr_t)n, err, sizeof(err));
		ck_assert_msg(W.hb[n] != NULL, "%s", err);
	}
	run_until(loop, 0, 3.0);
	ck_assert(both_alive());
	hb_snapshot(W.hb[0], &s[0]);
	ck_assert_str_eq(s[0].key_rotation, "none");

	write_key(path[0], "the new cluster key, rotated today");
	run_until(loop, 1, 1.5 + KEYRING_CHECK_MS / 1000.0);
	ck_assert_msg(W.t_dead == 0, "node 1 declared node 2 dead while only it had the new key");
	ck_assert(both_alive());
	hb_snapshot(W.hb[0], &s[0]);
	hb_snapshot(W.hb[1], &s[1]);
	ck_assert_str_eq(s[0].key_rotation, "waiting");
	ck_assert_str_eq(s[1].key_rotation, "none");
	ck_assert_uint_eq(s[0].key_rotations, 1);
	ck_assert_msg(s[1].paths[0].rx_bad > 0, "node 2 never saw a packet under the new key");
	uint64_t bad_before = s[1].paths[0].rx_bad;

	write_key(path[1], "the new cluster key, rotated today");
	run_until(loop, 1, 1.5 + KEYRING_CHECK_MS / 1000.0);
	ck_assert_msg(W.t_dead == 0, "a node was declared dead during the rotation");
	ck_assert(both_alive());
	for (int n = 0; n < 2; n++) {
		hb_snapshot(W.hb[n], &s[n]);
		ck_assert_msg(strcmp(s[n].key_rotation, "grace") == 0, "node %d: rotation %s",
		              n + 1, s[n].key_rotation);
	}
	/* on the new key alone: nothing more node 2 cannot verify, and no replays from the
	 * doubled packets */
	uint64_t bad_mid = s[1].paths[0].rx_bad, rx_mid = s[1].paths[0].rx_ok;
	ck_assert_uint_ge(bad_mid, bad_before);
	run_until(loop, 1, 1.0);
	hb_snapshot(W.hb[1], &s[1]);
	ck_assert_uint_eq(s[1].paths[0].rx_bad, bad_mid);
	ck_assert_uint_ge(s[1].paths[0].rx_ok, rx_mid + 5);
	ck_assert_uint_eq(s[1].paths[0].rx_replay, 0);
	for (int n = 0; n < 2; n++) {
		hb_stop(W.hb[n]);
		unlink(path[n]);
	}
	rmdir(dir);
	ev_loop_destroy(loop);
}
END_TEST

START_TEST(loopback_one_path_lost)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	uint16_t ports[2][2] = {{free_port(), free_port()}, {free_port(), free_port()}};
	uint16_t nowhere = free_port();
	struct hb_config cfg[2];
	struct hb_snapshot s;
	char err[256];

	memset(&W, 0, sizeof(W));
	pair_cfg(cfg, ports);
	/*
	 * Node 1's path 1 points at a port nobody owns: node 0 never hears it there, and node 0's
	 * packets on that path come from an address node 1 does not expect (foreign).
	 */
	set_addr(&cfg[1].paths[1].peer, &cfg[1].paths[1].peer_len, nowhere);
	for (int n = 0; n < 2; n++) {
		W.hb[n] = hb_start(&cfg[n], loop, on_notify, (void *)(intptr_t)n, err, sizeof(err));
		ck_assert_msg(W.hb[n] != NULL, "%s", err);
	}
	run_until(loop, 2, DEADTIME + 2 * INTERVAL);
	hb_snapshot(W.hb[0], &s);
	ck_assert(s.peer_alive && s.paths[0].alive && !s.paths[1].alive);
	ck_assert_int_eq(s.paths[1].last_heard_ms, -1);
	hb_snapshot(W.hb[1], &s);
	ck_assert(s.peer_alive && s.paths[0].alive && !s.paths[1].alive);
	ck_assert_uint_gt(s.paths[1].rx_foreign, 0);
	hb_stop(W.hb[0]);
	hb_stop(W.hb[1]);
	ev_loop_destroy(loop);
}
END_TEST

START_TEST(bad_config)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	uint16_t ports[2][2] = {{free_port(), free_port()}, {free_port(), free_port()}};
	struct hb_config cfg[2];
	char err[256];

	pair_cfg(cfg, ports);
	cfg[0].deadtime = cfg[0].interval;
	ck_assert_ptr_null(hb_start(&cfg[0], loop, NULL, NULL, err, sizeof(err)));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "deadtime 0.200s"));
	pair_cfg(cfg, ports);
	cfg[0].paths[1].local = cfg[0].paths[0].local; /* the same port twice */
	cfg[0].paths[1].local_len = cfg[0].paths[0].local_len;
	ck_assert_ptr_null(hb_start(&cfg[0], loop, NULL, NULL, err, sizeof(err)));
	ck_assert_int_eq(errno, EADDRINUSE);
	ck_assert_ptr_nonnull(strstr(err, "Cannot open heartbeat path 1 on 127.0.0.1:"));
	ev_loop_destroy(loop);
}
END_TEST

static Suite *heartbeat_suite(void)
{
	Suite *s = suite_create("heartbeat");
	TCase *tc = tcase_create("codec");

	tcase_add_test(tc, roundtrip);
	tcase_add_test(tc, every_bit_flip_rejected);
	tcase_add_test(tc, wrong_key_and_truncation);
	tcase_add_test(tc, fields_checked_after_mac);
	tcase_add_test(tc, replay_window);
	tcase_add_test(tc, key_file);
	tcase_add_test(tc, config_from_hak_conf);
	suite_add_tcase(s, tc);
	tc = tcase_create("runtime");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, loopback_alive_then_dead);
	tcase_add_test(tc, loopback_one_path_lost);
	tcase_add_test(tc, loopback_key_rotation);
	tcase_add_test(tc, bad_config);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(heartbeat_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
