/* SPDX-License-Identifier: MIT */
/*
 * hakctl: the operator's view of hakd. Talks JSON lines over hakd's control socket.
 * Exit codes: 0 ok, 1 usage, 2 cannot reach hakd, 3 hakd answered with an error.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>
#include <linux/fs.h>
#include <openssl/evp.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <hak/version.h>

#include "lib/clock.h"
#include "meta/al.h"
#include "conf/config.h"
#include "checkconf.h"
#include "ctl.h"
#include "drill.h"
#include "waitsync.h"
#include "meta/meta.h"

struct cli {
	const char *control;
	const char *config;
	const char *node;
	int json;
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: hakctl [--control SOCK] COMMAND [ARGS]\n"
	    "\n"
	    "Commands:\n"
	    "  status [--json]            roles, states, clients, counters, resync progress\n"
	    "  primary VOL [--force]      promote (--force: also an Inconsistent/Outdated disk)\n"
	    "  secondary VOL              demote (refused while NBD clients are connected)\n"
	    "  connect VOL | disconnect VOL\n"
	    "  detach VOL | attach VOL    drop the backing store (I/O goes through the peer), or\n"
	    "                             take it back and resync it fully from the peer\n"
	    "  resolve VOL --discard-local  after split brain: this node's changes are dropped\n"
	    "  verify VOL                 compare both copies block by block (progress in status)\n"
	    "  resync VOL                 resync the blocks marked out of sync (e.g. by verify)\n"
	    "  create-md VOL [--blank] [--force]  write fresh metadata (offline)\n"
	    "  dump-md VOL                print the metadata (offline)\n"
	    "  group start|stop|clear NAME  start or stop a service group; clear a blocked one\n"
	    "  events [--count N] [--timeout S]  print state changes as they happen, one line\n"
	    "                             each; stop after N lines or S seconds (exit 4 when\n"
	    "                             the timeout came before N lines)\n"
	    "  resync VOL pause|resume    hold or release resyncs (either node)\n"
	    "  switchover [--to NODE]     planned move of the primary role (default: to the peer)\n"
	    "  standby | unstandby        this node must not (may again) be primary; persistent\n"
	    "  failover --force           promote without vote, fence or UpToDate data\n"
	    "  drill SCENARIO --peer-socket SOCK [--check CMD] [--rpo-cmd CMD] [--timeout S]\n"
	    "        [--json]             inject a fault in the running pair (crash-primary,\n"
	    "                             crash-service, switchover; needs allow-drills yes)\n"
	    "                             and report detection, promotion, service and check\n"
	    "                             times (RTO) and the RPO printed by --rpo-cmd. SOCK is\n"
	    "                             the peer's control socket; from another host, forward\n"
	    "                             it: ssh -L /tmp/peer.ctl:/run/hak/hakd.sock PEER\n"
	    "  reload                     re-read the configuration file: apply what can change\n"
	    "                             live, name what needs a restart (exit 3 then)\n"
	    "  wait-sync [VOL] [--timeout S]  wait until VOL (default: every volume) is in sync\n"
	    "                             on both nodes, showing the resync's progress; exit 4\n"
	    "                             on timeout, 5 when it cannot sync without the operator\n"
	    "  check-config FILE          report every error of a configuration file (offline)\n"
	    "  version                    versions of hakctl and of the running hakd\n"
	    "\n"
	    "status, events, wait-sync and version only read: members of hakd's control-group may "
	    "run\n"
	    "them. Every other command that talks to hakd changes its state and needs root.\n"
	    "\n"
	    "  --control SOCK    hakd's control socket (default %s)\n"
	    "  --config FILE     configuration for create-md/dump-md (default /etc/hak/hak.conf)\n"
	    "  --node NAME       which node this is, for create-md/dump-md\n",
	    HAK_DEFAULT_CONTROL_SOCKET);
}

/* Send one request and read one reply line. Returns the parsed reply or NULL (message printed). */
static json_t *call(const struct cli *c, json_t *req, int *exit_code)
{
	return ctl_call(c->control, req, exit_code);
}

static json_int_t geti(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

static void print_verify(json_t *vf)
{
	if (!vf)
		return;
	double eta = json_real_value(json_object_get(vf, "eta_s"));
	printf("  verify (%s, %s): %.1f%% of %lld bytes, %.1f MiB/s, ETA %s%.0f s; %lld differing "
	       "blocks, %lld skipped while written\n",
	       json_is_true(json_object_get(vf, "running"))
	           ? "running"
	           : (json_is_true(json_object_get(vf, "interrupted")) ? "interrupted" : "done"),
	       json_string_value(json_object_get(vf, "alg")),
	       json_real_value(json_object_get(vf, "percent")), (long long)geti(vf, "total_bytes"),
	       json_real_value(json_object_get(vf, "rate_mbps")), eta < 0 ? "unknown " : "",
	       eta < 0 ? 0.0 : eta, (long long)geti(vf, "differing_blocks"),
	       (long long)geti(vf, "skipped_blocks"));
	size_t i;
	json_t *rg;
	json_array_foreach(json_object_get(vf, "first_ranges"), i, rg)
	    printf("    differs: offset %lld, %lld bytes\n", (long long)geti(rg, "offset"),
	           (long long)geti(rg, "length"));
}

/* The replication link's transport, when it is not plain TCP: "transport tls: CIPHER, ktls no",
 * or for rdma,tcp "link Connected over tcp (rdma preferred, retrying), 0 in-place moves onto it".
 */
static void print_transport(json_t *r)
{
	const char *tr = json_string_value(json_object_get(r, "transport"));
	const char *conf = json_string_value(json_object_get(r, "transport_configured"));
	json_t *tls = json_object_get(r, "tls");
	if (tr && conf && strchr(conf, ',')) {
		printf("  link %s over %s (%.*s preferred%s), %lld in-place moves onto it\n",
		       json_string_value(json_object_get(r, "link")), tr, (int)strcspn(conf, ","),
		       conf,
		       json_is_true(json_object_get(r, "transport_retrying")) ? ", retrying" : "",
		       (long long)geti(r, "transport_switches"));
		return;
	}
	if (!tr || strcmp(tr, "tcp") == 0)
		return;
	if (!tls) {
		printf("  transport %s (not connected)\n", tr);
		return;
	}
	bool tx = json_is_true(json_object_get(tls, "ktls_tx"));
	bool rx = json_is_true(json_object_get(tls, "ktls_rx"));
	printf("  transport %s: %s, ktls %s\n", tr,
	       json_string_value(json_object_get(tls, "cipher")),
	       tx && rx ? "yes"
	       : tx     ? "sending only (the kernel makes the records it sends)"
	       : rx     ? "receiving only"
	                : "no");
}

static void print_volume(json_t *v)
{
	char sz[32];
	json_t *rq = json_object_get(v, "requests"), *by = json_object_get(v, "bytes");
	ctl_bytes_text((uint64_t)geti(v, "size"), 2, sz, sizeof(sz));
	printf("volume %s: %s, %s (%lld bytes)%s, backing %s\n",
	       json_string_value(json_object_get(v, "name")),
	       json_string_value(json_object_get(v, "role")), sz, (long long)geti(v, "size"),
	       json_is_true(json_object_get(v, "read_only")) ? ", read-only" : "",
	       json_string_value(json_object_get(v, "backing")));
	const char *tcp = json_string_value(json_object_get(v, "tcp"));
	const char *tls = json_string_value(json_object_get(v, "tcp_tls"));
	printf("  nbd: %s%s%s%s%s%s, %lld client(s) connected, %lld since start, %lld over TLS\n",
	       json_string_value(json_object_get(v, "socket")), tcp ? " and tcp " : "",
	       tcp ? tcp : "", tcp ? " (TLS " : "", tcp && tls ? tls : "", tcp ? ")" : "",
	       (long long)geti(v, "clients"), (long long)geti(v, "connections_total"),
	       (long long)geti(v, "tls_sessions"));
	printf("  requests: read %lld, write %lld, flush %lld, trim %lld, zero %lld, cache %lld, "
	       "block-status %lld; in flight %lld\n",
	       (long long)geti(rq, "read"), (long long)geti(rq, "write"),
	       (long long)geti(rq, "flush"), (long long)geti(rq, "trim"),
	       (long long)geti(rq, "zero"), (long long)geti(rq, "cache"),
	       (long long)geti(rq, "block_status"), (long long)geti(v, "in_flight"));
	printf("  bytes: read %lld, written %lld\n", (long long)geti(by, "read"),
	       (long long)geti(by, "write"));
	printf("  errors: %lld (I/O %lld, invalid requests %lld, protocol violations %lld)\n",
	       (long long)geti(v, "errors"), (long long)geti(v, "io_errors"),
	       (long long)geti(v, "invalid_requests"), (long long)geti(v, "protocol_errors"));
	json_t *r = json_object_get(v, "replication");
	if (!r)
		return;
	char oos[32];
	ctl_bytes_text((uint64_t)geti(r, "out_of_sync_bytes"), 2, oos, sizeof(oos));
	const char *pr = json_string_value(json_object_get(r, "peer_role"));
	printf("  replication: %s, disk %s, link %s, mode %s; peer %s %s/%s\n",
	       json_string_value(json_object_get(r, "role")),
	       json_string_value(json_object_get(r, "disk")),
	       json_string_value(json_object_get(r, "link")),
	       json_string_value(json_object_get(r, "mode")),
	       json_string_value(json_object_get(r, "peer")), pr ? pr : "unknown",
	       pr ? json_string_value(json_object_get(r, "peer_disk")) : "unknown");
	print_transport(r);
	printf("  out of sync: %s; in-flight writes %lld; ack latency %.3f ms (max %.3f); ping "
	       "%.2f ms\n",
	       oos, (long long)geti(r, "in_flight_writes"),
	       json_real_value(json_object_get(r, "ack_latency_ms")),
	       json_real_value(json_object_get(r, "ack_latency_max_ms")),
	       json_real_value(json_object_get(r, "ping_rtt_ms")));
	json_t *rs = json_object_get(r, "resync");
	if (rs) {
		double eta = json_real_value(json_object_get(rs, "eta_s"));
		double lim = json_real_value(json_object_get(rs, "rate_limit_mbps"));
		char limit[48] = "no rate limit";
		if (lim > 0)
			snprintf(limit, sizeof(limit), "limit %.1f MiB/s", lim);
		printf("  resync (%s, %s%s): %.1f%% done, %.1f MiB/s, ETA %s%.0f s; %s\n",
		       json_string_value(json_object_get(rs, "direction")),
		       json_is_true(json_object_get(rs, "full")) ? "full" : "bitmap",
		       json_is_true(json_object_get(rs, "paused")) ? ", PAUSED" : "",
		       json_real_value(json_object_get(rs, "percent")),
		       json_real_value(json_object_get(rs, "rate_mbps")), eta < 0 ? "unknown " : "",
		       eta < 0 ? 0.0 : eta, limit);
	}
	print_verify(json_object_get(r, "verify"));
	json_t *al = json_object_get(r, "activity_log");
	if (al)
		printf("  activity log: %lld of %lld extents hot (%lld held until the peer's disk "
		       "has them), %lld updates written\n",
		       (long long)geti(al, "hot"), (long long)geti(al, "extents"),
		       (long long)geti(al, "unstable"), (long long)geti(al, "writes"));
	json_t *fe = json_object_get(r, "fencing");
	if (fe && json_is_true(json_object_get(fe, "frozen")))
		printf("  WRITES FROZEN (fencing %s): for %lld ms, %lld parked, until the peer is "
		       "known Outdated%s\n",
		       json_string_value(json_object_get(fe, "policy")),
		       (long long)geti(fe, "frozen_ms"), (long long)geti(fe, "frozen_writes"),
		       json_is_true(json_object_get(fe, "stuck")) ? " (STUCK past fence-timeout)"
		                                                  : "");
	else if (fe && geti(fe, "fences") > 0)
		printf("  fencing %s: %lld freezes, the last %lld ms (the peer %s)\n",
		       json_string_value(json_object_get(fe, "policy")),
		       (long long)geti(fe, "fences"), (long long)geti(fe, "last_ms"),
		       json_string_value(json_object_get(fe, "last_how")));
	if (json_is_true(json_object_get(r, "split_brain")))
		printf(
		    "  SPLIT BRAIN: resolve with 'hakctl resolve %s --discard-local' on the node "
		    "whose changes are to be dropped\n",
		    json_string_value(json_object_get(v, "name")));
	if (json_is_true(json_object_get(r, "forced")))
		printf("  FORCED: the data comes from a forced promotion; writes %s acknowledged "
		       "before it may be missing\n",
		       json_string_value(json_object_get(r, "peer")));
	const char *auth = json_string_value(json_object_get(r, "auth"));
	if (auth && strcmp(auth, "none") == 0)
		printf(
		    "  NOT AUTHENTICATED (insecure-no-auth): whoever reaches the replication port "
		    "can read and write this volume\n");
	else if (geti(r, "auth_refused") > 0)
		printf("  peer authentication: %lld connections refused (see the log)\n",
		       (long long)geti(r, "auth_refused"));
	const char *lr = json_string_value(json_object_get(r, "last_refusal"));
	if (lr)
		printf("  last refusal: %s\n", lr);
	if (geti(r, "integrity_errors") > 0)
		printf("  integrity errors: %lld payloads failed their checksum (%s)\n",
		       (long long)geti(r, "integrity_errors"),
		       json_string_value(json_object_get(r, "data_integrity")));
}

static void print_group(json_t *g)
{
	json_t *r, *vols = json_object_get(g, "volumes");
	char names[1024] = "";
	size_t i;

	/* a daemon from before groups held several volumes sends "volume" alone */
	json_array_foreach(vols, i, r)
	    snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "",
	             json_string_value(r));
	if (!names[0] && json_is_string(json_object_get(g, "volume")))
		snprintf(names, sizeof(names), "%s",
		         json_string_value(json_object_get(g, "volume")));
	printf("group %s (volume%s %s): %s; %s\n", json_string_value(json_object_get(g, "name")),
	       json_array_size(vols) > 1 ? "s" : "", names,
	       json_string_value(json_object_get(g, "state")),
	       json_string_value(json_object_get(g, "reason")));
	json_array_foreach(json_object_get(g, "resources"), i, r)
	{
		const char *lf = json_string_value(json_object_get(r, "last_failure"));
		const char *vol = json_string_value(json_object_get(r, "volume"));

		printf("  %s (%s%s%s): %s, %lld restart(s)%s%s\n",
		       json_string_value(json_object_get(r, "name")),
		       json_string_value(json_object_get(r, "type")), vol ? " of volume " : "",
		       vol ? vol : "", json_string_value(json_object_get(r, "state")),
		       (long long)geti(r, "restarts"), lf ? "; last failure: " : "", lf ? lf : "");
	}
}

static void print_cluster(json_t *cl)
{
	json_t *p = json_object_get(cl, "peer"), *w = json_object_get(cl, "witness");
	size_t i, alive = 0;
	json_t *v;

	json_array_foreach(json_object_get(cl, "paths"), i, v) alive +=
	    json_is_true(json_object_get(v, "alive"));
	printf("cluster (node %s): peer %s, %s %s, %zu of %zu paths alive; witness %s%s; rule %s: "
	       "%s\n",
	       json_string_value(json_object_get(cl, "node")),
	       json_is_true(json_object_get(p, "alive")) ? "alive" : "dead",
	       json_string_value(json_object_get(p, "role")),
	       json_string_value(json_object_get(p, "disk")), alive,
	       json_array_size(json_object_get(cl, "paths")),
	       !json_is_true(json_object_get(w, "configured")) ? "none"
	       : json_is_true(json_object_get(w, "reachable")) ? "reachable"
	                                                       : "unreachable",
	       json_is_true(json_object_get(w, "vote")) ? " (this node holds the vote)" : "",
	       json_string_value(json_object_get(cl, "rule")),
	       json_string_value(json_object_get(cl, "reason")));
	/* only while a rotation of the cluster key runs: "waiting" is the one to act on */
	json_t *k = json_object_get(cl, "key");
	const char *kp = json_string_value(json_object_get(k, "peer")),
	           *kw = json_string_value(json_object_get(k, "witness"));
	if ((kp && strcmp(kp, "none") != 0) || (kw && strcmp(kw, "none") != 0))
		printf("  cluster key rotation: peer %s, witness %s%s\n", kp ? kp : "-",
		       kw ? kw : "-",
		       (kp && strcmp(kp, "waiting") == 0) || (kw && strcmp(kw, "waiting") == 0)
		           ? " (sending under the old and the new key until the other side has the "
		             "new one)"
		           : "");
}

/* switchover [--to NODE] | standby | unstandby | failover --force */
static int cmd_cluster(const struct cli *c, int argc, char **argv)
{
	int rc;
	json_t *req = json_pack("{s:s}", "cmd", argv[0]);

	if (strcmp(argv[0], "switchover") == 0 && argc == 3 && strcmp(argv[1], "--to") == 0) {
		json_object_set_new(req, "to", json_string(argv[2]));
	} else if (strcmp(argv[0], "failover") == 0 && argc == 2 &&
	           strcmp(argv[1], "--force") == 0) {
		json_object_set_new(req, "force", json_true());
	} else if (argc != 1 || strcmp(argv[0], "failover") == 0) {
		fprintf(stderr,
		        "hakctl %s: use 'hakctl switchover [--to NODE]', 'hakctl standby', "
		        "'hakctl unstandby' or 'hakctl failover --force'.\n",
		        argv[0]);
		json_decref(req);
		return EXIT_USAGE;
	}
	json_t *resp = call(c, req, &rc);
	json_decref(req);
	if (!resp)
		return rc;
	printf("%s requested; the cluster manager carries it out (see hakctl status).\n",
	       json_string_value(json_object_get(resp, "pending")));
	json_decref(resp);
	return 0;
}

static int cmd_status(const struct cli *c, int argc, char **argv)
{
	int json = c->json, rc;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else {
			fprintf(stderr, "hakctl status: unknown argument '%s'.\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	json_t *req = json_pack("{s:s}", "cmd", "status");
	json_t *resp = call(c, req, &rc);
	json_decref(req);
	if (!resp)
		return rc;
	json_object_del(resp, "ok");
	if (json) {
		json_dumpf(resp, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		putchar('\n');
	} else {
		json_t *vols = json_object_get(resp, "volumes");
		size_t i;
		json_t *v;
		printf("hakd %s (pid %lld, I/O engine %s), %zu volume(s)\n",
		       json_string_value(json_object_get(resp, "version")),
		       (long long)geti(resp, "pid"),
		       json_string_value(json_object_get(resp, "io_engine")),
		       json_array_size(vols));
		json_array_foreach(vols, i, v) print_volume(v);
		json_array_foreach(json_object_get(resp, "groups"), i, v) print_group(v);
		if (json_object_get(resp, "cluster"))
			print_cluster(json_object_get(resp, "cluster"));
	}
	json_decref(resp);
	return 0;
}

static int cmd_version(const struct cli *c, int argc, char **argv)
{
	int rc;
	(void)argc;
	(void)argv;
	printf("hakctl %s\n", HAK_VERSION);
	json_t *req = json_pack("{s:s}", "cmd", "version");
	json_t *resp = call(c, req, &rc);
	json_decref(req);
	if (!resp)
		return rc;
	printf("hakd %s\n", json_string_value(json_object_get(resp, "version")));
	json_decref(resp);
	return 0;
}

/* primary / secondary / connect / disconnect / resolve VOL [flags] */
static int cmd_role(const struct cli *c, int argc, char **argv)
{
	int rc, force = 0, discard = 0;
	const char *vol = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--force") == 0 && strcmp(argv[0], "primary") == 0)
			force = 1;
		else if (strcmp(argv[i], "--discard-local") == 0 && strcmp(argv[0], "resolve") == 0)
			discard = 1;
		else if (argv[i][0] != '-' && !vol)
			vol = argv[i];
		else {
			fprintf(stderr, "hakctl %s: unexpected argument '%s'.\n", argv[0], argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!vol) {
		fprintf(stderr, "hakctl %s: name the volume, e.g. 'hakctl %s db'.\n", argv[0],
		        argv[0]);
		return EXIT_USAGE;
	}
	json_t *req = json_pack("{s:s, s:s, s:b, s:b}", "cmd", argv[0], "volume", vol, "force",
	                        force, "discard_local", discard);
	json_t *resp = call(c, req, &rc);
	json_decref(req);
	if (!resp)
		return rc;
	bool started = strcmp(argv[0], "verify") == 0 || strcmp(argv[0], "resync") == 0;
	printf("%s: %s %s; role %s\n", vol, argv[0], started ? "started" : "done",
	       json_string_value(json_object_get(resp, "role")));
	json_decref(resp);
	return 0;
}

/* group start|stop|clear NAME */
static int cmd_group(const struct cli *c, int argc, char **argv)
{
	int rc;

	if (argc != 3 || (strcmp(argv[1], "start") != 0 && strcmp(argv[1], "stop") != 0 &&
	                  strcmp(argv[1], "clear") != 0)) {
		fprintf(stderr, "hakctl group: use 'hakctl group start|stop|clear NAME'.\n");
		return EXIT_USAGE;
	}
	json_t *req =
	    json_pack("{s:s, s:s, s:s}", "cmd", "group", "action", argv[1], "group", argv[2]);
	json_t *resp = call(c, req, &rc);
	json_decref(req);
	if (!resp)
		return rc;
	printf("group %s: %s requested; now %s\n", argv[2], argv[1],
	       json_string_value(json_object_get(resp, "state")));
	json_decref(resp);
	return 0;
}

/* detach VOL / attach VOL: drop the backing store, or take it back and resync it fully. */
static int cmd_disk(const struct cli *c, int argc, char **argv)
{
	int rc;
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr,
		        "hakctl %s: name the volume and nothing else, e.g. 'hakctl %s db'.\n",
		        argv[0], argv[0]);
		return EXIT_USAGE;
	}
	json_t *req = json_pack("{s:s, s:s}", "cmd", argv[0], "volume", argv[1]);
	json_t *resp = call(c, req, &rc);
	json_decref(req);
	if (!resp)
		return rc;
	printf("%s: %s done; %s\n", argv[1], argv[0],
	       json_is_true(json_object_get(resp, "diskless"))
	           ? "the disk is Diskless, I/O goes through the peer"
	           : "the disk is attached and resyncs from the peer");
	json_decref(resp);
	return 0;
}

static int events_connect(const struct cli *c)
{
	static const char req[] = "{\"cmd\":\"events\"}\n";
	int fd = ctl_connect(c->control);

	if (fd < 0)
		return -1;
	/* EPIPE: hakd turned this client away before the request went out; the reason is the
	 * first line to read, as for any answer. */
	if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(req) - 1) &&
	    errno != EPIPE) {
		fprintf(stderr, "hakctl: sending to hakd failed: %s.\n", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* One complete line from buf (the first is hakd's JSON answer); 0 when done, else exit code. */
static int events_line(char *line, bool *first, long *left)
{
	if (*first) {
		json_t *resp = json_loads(line, 0, NULL);
		*first = false;
		if (!json_is_true(json_object_get(resp, "ok"))) {
			const char *e = json_string_value(json_object_get(resp, "error"));
			fprintf(stderr, "hakctl: hakd refused: %s\n", e ? e : line);
			json_decref(resp);
			return EXIT_DAEMON;
		}
		json_decref(resp);
		return -1;
	}
	printf("%s\n", line);
	fflush(stdout);
	if (*left > 0 && --*left == 0)
		return 0;
	return -1;
}

static int cmd_events(const struct cli *c, int argc, char **argv)
{
	long count = 0;
	double timeout = 0;
	char buf[8192];
	size_t len = 0;
	bool first = true;
	int rc = -1;
	for (int i = 1; i < argc; i++) {
		char *end = NULL;
		if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
			count = strtol(argv[++i], &end, 10);
		else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
			timeout = strtod(argv[++i], &end);
		if (!end || *end || count < 0 || timeout < 0) {
			fprintf(stderr,
			        "hakctl events: bad argument '%s'; use --count N, --timeout S.\n",
			        argv[i]);
			return EXIT_USAGE;
		}
	}
	int fd = events_connect(c);
	if (fd < 0)
		return EXIT_UNREACHABLE;
	double t0 = clock_mono();
	while (rc < 0) {
		int wait_ms = -1;
		if (timeout > 0) {
			double el = clock_mono() - t0;
			if (el >= timeout) {
				rc = count > 0 ? EXIT_TIMEOUT : 0;
				break;
			}
			wait_ms = (int)((timeout - el) * 1000) + 1;
		}
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int pr = poll(&pfd, 1, wait_ms);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0)
			continue;
		ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (r <= 0) {
			fprintf(stderr, "hakctl: hakd closed the event stream.\n");
			rc = EXIT_UNREACHABLE;
			break;
		}
		len += (size_t)r;
		char *nl;
		while (rc < 0 && (nl = memchr(buf, '\n', len))) {
			*nl = '\0';
			rc = events_line(buf, &first, &count);
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len);
		}
		if (len == sizeof(buf) - 1) {
			fprintf(stderr, "hakctl: hakd sent an event line over %zu bytes.\n", len);
			rc = EXIT_DAEMON;
		}
	}
	close(fd);
	return rc;
}

/* The volume UUID both nodes derive from the configuration, so metadata created separately on
 * each node matches: SHA-256 over the volume name and the sorted node names. */
static void volume_uuid(const struct hak_config *cfg, const char *vol, uint8_t out[16])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	const char *a = cfg->n_nodes > 0 ? cfg->nodes[0].name : "";
	const char *b = cfg->n_nodes > 1 ? cfg->nodes[1].name : "";
	if (strcmp(a, b) > 0) {
		const char *t = a;
		a = b;
		b = t;
	}
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	EVP_DigestUpdate(ctx, "hak-volume", 11);
	EVP_DigestUpdate(ctx, vol, strlen(vol) + 1);
	EVP_DigestUpdate(ctx, a, strlen(a) + 1);
	EVP_DigestUpdate(ctx, b, strlen(b) + 1);
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	memcpy(out, md, 16);
}

static int load_volume(const struct cli *c, const char *vol, struct hak_config **cfg,
                       const struct hak_volume_cfg **vc, const char **self)
{
	char err[1024];
	const struct hak_node_cfg *me = NULL, *peer = NULL;
	if (config_load(c->config, cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "hakctl: %s\n", err);
		return EXIT_USAGE;
	}
	*vc = config_find_volume(*cfg, vol);
	if (!*vc) {
		fprintf(stderr, "hakctl: %s defines no volume '%s'.\n", c->config, vol);
		return EXIT_USAGE;
	}
	*self = "standalone";
	if ((*cfg)->n_nodes == 2) {
		if (config_find_self(*cfg, c->node, &me, &peer, err, sizeof(err)) < 0) {
			fprintf(stderr, "hakctl: %s\n", err);
			return EXIT_USAGE;
		}
		*self = me->name;
	}
	return 0;
}

static int backing_size(const char *path, uint64_t *out)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -1;
	if (fd < 0)
		return -1;
	if (fstat(fd, &sb) == 0) {
		if (S_ISBLK(sb.st_mode))
			rc = ioctl(fd, BLKGETSIZE64, out) < 0 ? -1 : 0;
		else {
			*out = (uint64_t)sb.st_size;
			rc = 0;
		}
	}
	close(fd);
	return rc;
}

static int cmd_create_md(const struct cli *c, int argc, char **argv)
{
	struct hak_config *cfg = NULL;
	const struct hak_volume_cfg *vc;
	const char *vol = NULL, *self;
	struct meta_create_args a = {0};
	struct meta_sb sb;
	char err[1024];
	uint64_t size;
	int rc;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--blank") == 0)
			a.blank = true;
		else if (strcmp(argv[i], "--force") == 0)
			a.force = true;
		else if (!vol && argv[i][0] != '-')
			vol = argv[i];
		else {
			fprintf(stderr, "hakctl create-md: unexpected argument '%s'.\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!vol) {
		fprintf(stderr, "hakctl create-md: name the volume.\n");
		return EXIT_USAGE;
	}
	rc = load_volume(c, vol, &cfg, &vc, &self);
	if (rc)
		goto out;
	rc = EXIT_DAEMON;
	if (backing_size(vc->backing, &size) < 0) {
		fprintf(stderr, "hakctl: cannot read the size of %s: %s.\n", vc->backing,
		        strerror(errno));
		goto out;
	}
	a.internal = vc->meta_internal;
	a.backing_bytes = size;
	a.bitmap_block_size = vc->bitmap_block_size;
	a.node = self;
	volume_uuid(cfg, vol, a.uuid);
	if (a.blank) {
		/* Both nodes derive the same generation, so two blank disks start in sync. */
		unsigned char md[32];
		EVP_Digest(a.uuid, 16, md, NULL, EVP_sha256(), NULL);
		memcpy(&a.blank_gen, md, 8);
		a.blank_gen |= 1;
	}
	const char *path = vc->meta_internal ? vc->backing : vc->meta_path;
	if (!vc->meta_internal) {
		char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
		if (slash && slash != dir) {
			*slash = '\0';
			mkdir(dir, 0700);
		}
		free(dir);
	}
	if (meta_create_ex(path, &a, &sb, err, sizeof(err)) < 0) {
		fprintf(stderr, "hakctl: %s\n", err);
		goto out;
	}
	printf("%s: metadata written to %s (%s), %llu data bytes, %s.\n", vol, path,
	       a.internal ? "internal" : "external", (unsigned long long)sb.size,
	       a.blank ? "blank: both nodes start in sync"
	               : "a full sync follows on first connect");
	rc = 0;
out:
	config_free(cfg);
	return rc;
}

static int cmd_dump_md(const struct cli *c, int argc, char **argv)
{
	struct hak_config *cfg = NULL;
	const struct hak_volume_cfg *vc;
	const char *self;
	struct meta *m = NULL;
	char err[512] = "";
	int rc;
	if (argc != 2) {
		fprintf(stderr, "hakctl dump-md: name the volume.\n");
		return EXIT_USAGE;
	}
	rc = load_volume(c, argv[1], &cfg, &vc, &self);
	if (rc)
		goto out;
	rc = EXIT_DAEMON;
	const char *path = vc->meta_internal ? vc->backing : vc->meta_path;
	if (meta_open(path, vc->meta_internal, 0, &m, err, sizeof(err)) < 0) {
		fprintf(stderr, "hakctl: %s: %s\n", path, err);
		goto out;
	}
	if (err[0])
		fprintf(stderr, "hakctl: warning: %s\n", err);
	printf("volume %s, metadata %s (%s)\n", argv[1], path,
	       vc->meta_internal ? "internal" : "external");
	meta_dump(meta_sb(m), stdout);
	uint8_t *ring = malloc(META_AL_SIZE);
	if (ring && meta_read_al(m, ring) == 0)
		al_dump(ring, meta_sb(m)->size, stdout);
	else
		printf("activity log       unreadable: %s\n",
		       ring ? strerror(errno) : "out of memory");
	free(ring);
	rc = 0;
out:
	if (m)
		meta_close(m);
	config_free(cfg);
	return rc;
}

static int cmd_resync(const struct cli *c, int argc, char **argv)
{
	int rc;
	/* 'hakctl resync VOL': repair what a verify marked; with pause/resume: hold or release. */
	if (argc == 2 && argv[1][0] != '-')
		return cmd_role(c, argc, argv);
	if (argc != 3 || (strcmp(argv[2], "pause") != 0 && strcmp(argv[2], "resume") != 0)) {
		fprintf(stderr,
		        "hakctl resync: use 'hakctl resync VOL' (repair what a verify "
		        "found), 'hakctl resync VOL pause' or 'hakctl resync VOL resume'.\n");
		return EXIT_USAGE;
	}
	json_t *req =
	    json_pack("{s:s, s:s, s:s}", "cmd", "resync", "volume", argv[1], "action", argv[2]);
	json_t *resp = call(c, req, &rc);
	json_decref(req);
	if (!resp)
		return rc;
	printf("%s: resync %s\n", argv[1],
	       json_is_true(json_object_get(resp, "resync_paused")) ? "paused" : "resumed");
	json_decref(resp);
	return 0;
}

/* hakctl reload: hakd re-reads its file, applies what can change live and names the rest. */
static int cmd_reload(const struct cli *c, int argc, char **argv)
{
	int rc;
	(void)argc;
	(void)argv;
	json_t *req = json_pack("{s:s}", "cmd", "reload");
	json_t *resp = call(c, req, &rc);
	json_decref(req);
	if (!resp)
		return rc;
	json_t *applied = json_object_get(resp, "applied"),
	       *refused = json_object_get(resp, "refused");
	size_t i;
	json_t *v;
	json_array_foreach(applied, i, v) printf("applied: %s\n", json_string_value(v));
	json_array_foreach(refused, i, v) printf("refused: %s\n", json_string_value(v));
	printf("reload of %s: %zu change(s) applied, %zu refused%s\n",
	       json_string_value(json_object_get(resp, "file")), json_array_size(applied),
	       json_array_size(refused),
	       json_array_size(refused) ? " (they need a restart of hakd)" : "");
	rc = json_array_size(refused) ? 3 : 0;
	json_decref(resp);
	return rc;
}

static int cmd_drill(const struct cli *c, int argc, char **argv)
{
	return drill_run(c->control, c->json, argc, argv);
}

static int cmd_wait_sync(const struct cli *c, int argc, char **argv)
{
	return waitsync_run(c->control, argc, argv);
}

static int cmd_check_config(const struct cli *c, int argc, char **argv)
{
	(void)c;
	return checkconf_run(argc, argv);
}

static const struct {
	const char *name;
	int (*fn)(const struct cli *c, int argc, char **argv);
} commands[] = {
    {"status", cmd_status},       {"version", cmd_version},
    {"primary", cmd_role},        {"secondary", cmd_role},
    {"connect", cmd_role},        {"disconnect", cmd_role},
    {"resolve", cmd_role},        {"create-md", cmd_create_md},
    {"dump-md", cmd_dump_md},     {"group", cmd_group},
    {"events", cmd_events},       {"verify", cmd_role},
    {"attach", cmd_disk},         {"detach", cmd_disk},
    {"resync", cmd_resync},       {"switchover", cmd_cluster},
    {"standby", cmd_cluster},     {"unstandby", cmd_cluster},
    {"failover", cmd_cluster},    {"drill", cmd_drill},
    {"wait-sync", cmd_wait_sync}, {"check-config", cmd_check_config},
    {"reload", cmd_reload},
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"control", required_argument, NULL, 'C'}, {"config", required_argument, NULL, 'c'},
	    {"node", required_argument, NULL, 'N'},    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
	};
	struct cli c = {.control = HAK_DEFAULT_CONTROL_SOCKET, .config = "/etc/hak/hak.conf"};
	int o;
	while ((o = getopt_long(argc, argv, "+C:c:N:jh", opts, NULL)) != -1) {
		switch (o) {
		case 'C':
			c.control = optarg;
			break;
		case 'c':
			c.config = optarg;
			break;
		case 'N':
			c.node = optarg;
			break;
		case 'j':
			c.json = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[optind], commands[i].name) == 0)
			return commands[i].fn(&c, argc - optind, argv + optind);
	fprintf(stderr, "hakctl: unknown command '%s'; see hakctl --help.\n", argv[optind]);
	return EXIT_USAGE;
}
