/* SPDX-License-Identifier: MIT */
#include "drill.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"

#define DRILL_POLL_US   20000
#define DRILL_CRASH_US  20000 /* hakd crashes this long after its reply (clusterd.c) */
#define DRILL_CHECK_MAX 4     /* seconds one --check run may take */

enum scenario { SC_CRASH_PRIMARY, SC_CRASH_SERVICE, SC_SWITCHOVER };
static const char *const sc_names[] = {"crash-primary", "crash-service", "switchover"};

/* One node's state as its status shows it. */
struct node {
	const char *sock;
	char name[64];
	char role[16], disk[24], link[24], group[24];
	bool peer_alive;
	long long restarts; /* of the group's resources, summed */
};

/* The measurements, in microseconds after the fault; -1 where the step did not happen. */
struct report {
	enum scenario sc;
	char victim[64], survivor[64];
	int64_t detect, promote, down, service, check;
	long long rpo; /* -1: no --rpo-cmd */
	bool failover; /* the survivor became primary */
};

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void copy_str(char *dst, size_t len, json_t *v)
{
	snprintf(dst, len, "%s", json_is_string(v) ? json_string_value(v) : "unknown");
}

/* Read n's status; 0, or -1 when hakd cannot be reached (a crashed victim). */
static int node_read(struct node *n)
{
	json_t *req = json_pack("{s:s}", "cmd", "status"), *r, *g, *res, *x;
	int code;
	size_t i;

	r = req ? ctl_call(n->sock, req, &code) : NULL;
	json_decref(req);
	if (!r)
		return -1;
	copy_str(n->name, sizeof(n->name), json_object_get(json_object_get(r, "cluster"), "node"));
	x = json_array_get(json_object_get(r, "volumes"), 0);
	copy_str(n->role, sizeof(n->role), json_object_get(x, "role"));
	x = json_object_get(x, "replication");
	copy_str(n->disk, sizeof(n->disk), json_object_get(x, "disk"));
	copy_str(n->link, sizeof(n->link), json_object_get(x, "link"));
	g = json_array_get(json_object_get(r, "groups"), 0);
	copy_str(n->group, sizeof(n->group), json_object_get(g, "state"));
	n->peer_alive = json_is_true(
	    json_object_get(json_object_get(json_object_get(r, "cluster"), "peer"), "alive"));
	n->restarts = 0;
	json_array_foreach(json_object_get(g, "resources"), i, res) n->restarts +=
	    json_integer_value(json_object_get(res, "restarts"));
	json_decref(r);
	return 0;
}

/* Why the pair is not ready for a drill, or NULL. */
static const char *unhealthy(const struct node *p, const struct node *s, char *why, size_t len)
{
	if (strcmp(p->role, "primary") != 0 || strcmp(s->role, "secondary") != 0)
		snprintf(why, len,
		         "one node must be primary and the other secondary (%s is %s, %s is %s)",
		         p->name, p->role, s->name, s->role);
	else if (strcmp(p->disk, "UpToDate") != 0 || strcmp(s->disk, "UpToDate") != 0)
		snprintf(why, len, "both disks must be UpToDate (%s %s, %s %s)", p->name, p->disk,
		         s->name, s->disk);
	else if (strcmp(p->link, "Connected") != 0 || strcmp(s->link, "Connected") != 0)
		snprintf(why, len, "the replication link must be Connected (%s: %s, %s: %s)",
		         p->name, p->link, s->name, s->link);
	else if (!p->peer_alive || !s->peer_alive)
		snprintf(why, len, "each node must hear the other's heartbeats");
	else if (strcmp(p->group, "started") != 0)
		snprintf(why, len, "the group on the primary %s must be started (it is %s)",
		         p->name, p->group);
	else
		return NULL;
	return why;
}

/* Run cmd with /bin/sh, its output discarded (or, with out, its first line kept); its exit
 * status, or -1. Bounded by DRILL_CHECK_MAX seconds through timeout(1). */
static int run_cmd(const char *cmd, char *out, size_t outlen)
{
	char *full = NULL;
	FILE *f;
	int st;

	/* the command goes through the environment: no quoting of it into this line */
	if (asprintf(&full, "timeout %d sh -c 'eval \"$HAK_CMD\"' 2>/dev/null%s", DRILL_CHECK_MAX,
	             out ? "" : " >/dev/null") < 0)
		return -1;
	if (setenv("HAK_CMD", cmd, 1) < 0 || !(f = popen(full, "r"))) {
		free(full);
		return -1;
	}
	if (out && !fgets(out, (int)outlen, f))
		out[0] = 0;
	while (fgetc(f) != EOF)
		;
	st = pclose(f);
	free(full);
	return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void set_once(int64_t *field, int64_t t0)
{
	if (*field < 0)
		*field = now_us() - t0;
}

/* Poll until every step of the scenario happened or the timeout; 0, or -1 (step missing). */
static int drill_watch(struct report *rp, struct node *v, struct node *s, int64_t t0,
                       const char *check, double timeout)
{
	long long restarts0 = v->restarts;
	bool done = false;

	while (!done && now_us() - t0 < (int64_t)(timeout * 1e6)) {
		int sv = node_read(s), vv = rp->sc == SC_CRASH_PRIMARY ? -1 : node_read(v);
		if (sv == 0 && !s->peer_alive)
			set_once(&rp->detect, t0);
		if (sv == 0 && strcmp(s->role, "primary") == 0) {
			set_once(&rp->promote, t0);
			rp->failover = true;
		}
		if (rp->sc == SC_CRASH_SERVICE && vv == 0 &&
		    (strcmp(v->group, "started") != 0 || v->restarts > restarts0))
			set_once(&rp->down, t0);
		if (rp->sc == SC_SWITCHOVER && vv == 0 && strcmp(v->group, "stopped") == 0)
			set_once(&rp->down, t0);
		const struct node *srv = rp->sc == SC_CRASH_SERVICE ? v : s;
		bool up = (rp->sc == SC_CRASH_SERVICE ? vv : sv) == 0 &&
		          strcmp(srv->group, "started") == 0 &&
		          (rp->sc != SC_CRASH_SERVICE || rp->down >= 0) &&
		          (rp->sc == SC_CRASH_SERVICE || rp->promote >= 0);
		if (up)
			set_once(&rp->service, t0);
		if (rp->service >= 0 && (!check || run_cmd(check, NULL, 0) == 0))
			set_once(&rp->check, t0);
		done = rp->check >= 0 && (rp->sc != SC_CRASH_PRIMARY || rp->detect >= 0);
		if (!done)
			usleep(DRILL_POLL_US);
	}
	return done ? 0 : -1;
}

static void print_ms(const char *what, int64_t us)
{
	if (us < 0)
		printf("  %-36s did not happen\n", what);
	else
		printf("  %-36s %8.3f s\n", what, (double)us / 1e6);
}

static void report_print(const struct report *rp, bool json)
{
	if (json) {
		json_t *o =
		    json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I}", "scenario",
		              sc_names[rp->sc], "victim", rp->victim, "survivor", rp->survivor,
		              "detect_ms", (json_int_t)(rp->detect < 0 ? -1 : rp->detect / 1000),
		              "promote_ms", (json_int_t)(rp->promote < 0 ? -1 : rp->promote / 1000),
		              "down_ms", (json_int_t)(rp->down < 0 ? -1 : rp->down / 1000),
		              "service_ms", (json_int_t)(rp->service < 0 ? -1 : rp->service / 1000),
		              "check_ms", (json_int_t)(rp->check < 0 ? -1 : rp->check / 1000),
		              "rto_ms", (json_int_t)(rp->check < 0 ? -1 : rp->check / 1000),
		              "failover", rp->failover, "rpo", (json_int_t)rp->rpo);
		char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
		printf("%s\n", t ? t : "{}");
		free(t);
		json_decref(o);
		return;
	}
	printf("drill %s: fault on %s (primary), %s was secondary\n", sc_names[rp->sc], rp->victim,
	       rp->survivor);
	if (rp->sc == SC_CRASH_PRIMARY)
		print_ms("peer declared dead (detection)", rp->detect);
	if (rp->sc != SC_CRASH_PRIMARY)
		print_ms(rp->sc == SC_SWITCHOVER ? "services stopped on the old primary"
		                                 : "service failure noticed",
		         rp->down);
	if (rp->sc != SC_CRASH_SERVICE)
		print_ms("survivor primary (promotion)", rp->promote);
	print_ms("group started (service ready)", rp->service);
	print_ms("check command succeeded", rp->check);
	print_ms("RTO", rp->check);
	if (rp->rpo >= 0)
		printf("  %-36s %8lld\n", "RPO (lost, by --rpo-cmd)", rp->rpo);
	printf("  %-36s %8s\n", "failover", rp->failover ? "yes" : "no");
}

/* Send the fault; t0 is when it happens (monotonic, this host's clock). 0 or exit code. */
static int inject(const struct report *rp, const struct node *v, int64_t *t0)
{
	json_t *req, *r;
	int code;

	if (rp->sc == SC_SWITCHOVER)
		req = json_pack("{s:s}", "cmd", "switchover");
	else
		req = json_pack("{s:s, s:s}", "cmd", "drill", "fault",
		                rp->sc == SC_CRASH_PRIMARY ? "crash" : "service");
	*t0 = now_us();
	r = req ? ctl_call(v->sock, req, &code) : NULL;
	json_decref(req);
	if (!r)
		return code ? code : EXIT_DAEMON;
	if (rp->sc == SC_CRASH_PRIMARY)
		*t0 = now_us() + DRILL_CRASH_US;
	json_decref(r);
	return 0;
}

static int parse_args(int argc, char **argv, enum scenario *sc, const char **peer,
                      const char **check, const char **rpo, double *timeout, bool *json)
{
	static const struct option opts[] = {
	    {"peer-socket", required_argument, NULL, 'p'},
	    {"check", required_argument, NULL, 'c'},
	    {"rpo-cmd", required_argument, NULL, 'r'},
	    {"timeout", required_argument, NULL, 't'},
	    {"json", no_argument, NULL, 'j'},
	    {NULL, 0, NULL, 0},
	};
	int o;
	size_t i;

	if (argc < 2) {
		fprintf(stderr, "hakctl drill: name a scenario: crash-primary, crash-service or "
		                "switchover.\n");
		return -1;
	}
	for (i = 0; i < sizeof(sc_names) / sizeof(sc_names[0]); i++)
		if (strcmp(argv[1], sc_names[i]) == 0)
			break;
	if (i == sizeof(sc_names) / sizeof(sc_names[0])) {
		fprintf(stderr,
		        "hakctl drill: unknown scenario '%s'; use crash-primary, "
		        "crash-service or switchover.\n",
		        argv[1]);
		return -1;
	}
	*sc = (enum scenario)i;
	optind = 2;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end;
		switch (o) {
		case 'p':
			*peer = optarg;
			break;
		case 'c':
			*check = optarg;
			break;
		case 'r':
			*rpo = optarg;
			break;
		case 't':
			*timeout = strtod(optarg, &end);
			if (*end || !(*timeout > 0 && *timeout <= 3600)) {
				fprintf(stderr,
				        "hakctl drill: --timeout '%s' is not 1 to 3600 "
				        "seconds.\n",
				        optarg);
				return -1;
			}
			break;
		case 'j':
			*json = true;
			break;
		default:
			return -1;
		}
	}
	if (!*peer) {
		fprintf(stderr, "hakctl drill: --peer-socket PATH is required: the drill watches "
		                "both nodes (on two hosts, forward the peer's control socket with "
		                "ssh -L).\n");
		return -1;
	}
	return 0;
}

int drill_run(const char *local_sock, bool json, int argc, char **argv)
{
	struct node a = {.sock = local_sock}, b = {0}, *v, *s;
	struct report rp = {
	    .detect = -1, .promote = -1, .down = -1, .service = -1, .check = -1, .rpo = -1};
	const char *peer = NULL, *check = NULL, *rpo = NULL, *why;
	double timeout = 60;
	char whybuf[256], line[64];
	int64_t t0;
	int rc;

	if (parse_args(argc, argv, &rp.sc, &peer, &check, &rpo, &timeout, &json) < 0)
		return EXIT_USAGE;
	b.sock = peer;
	if (node_read(&a) < 0 || node_read(&b) < 0)
		return EXIT_UNREACHABLE;
	v = strcmp(a.role, "primary") == 0 ? &a : &b;
	s = v == &a ? &b : &a;
	if ((why = unhealthy(v, s, whybuf, sizeof(whybuf)))) {
		fprintf(stderr, "hakctl drill: the pair is not ready for a drill: %s.\n", why);
		return EXIT_DAEMON;
	}
	snprintf(rp.victim, sizeof(rp.victim), "%s", v->name);
	snprintf(rp.survivor, sizeof(rp.survivor), "%s", s->name);
	if ((rc = inject(&rp, v, &t0)) != 0)
		return rc;
	rc = drill_watch(&rp, v, s, t0, check, timeout);
	if (rpo && run_cmd(rpo, line, sizeof(line)) == 0)
		rp.rpo = strtoll(line, NULL, 10);
	report_print(&rp, json);
	if (rc < 0) {
		fprintf(stderr,
		        "hakctl drill: not every step happened within %.0f s (see the "
		        "report above).\n",
		        timeout);
		return EXIT_TIMEOUT;
	}
	return 0;
}
