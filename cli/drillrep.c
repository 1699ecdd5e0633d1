/* SPDX-License-Identifier: MIT */
#include "drillrep.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char *const sc_names[] = {"crash-primary", "crash-service", "switchover"};
#define N_SCENARIOS (sizeof(sc_names) / sizeof(sc_names[0]))

const char *drillrep_scenario_name(enum drill_scenario sc)
{
	return (size_t)sc < N_SCENARIOS ? sc_names[sc] : "unknown";
}

static int parse_scenario(const char *name, struct drill_opts *o, char *err, size_t errlen)
{
	for (size_t i = 0; i < N_SCENARIOS; i++)
		if (strcmp(name, sc_names[i]) == 0) {
			o->sc = (enum drill_scenario)i;
			return 0;
		}
	snprintf(err, errlen,
	         "unknown scenario '%s'; use crash-primary, crash-service or switchover.", name);
	return -1;
}

int drillrep_parse_args(int argc, char **argv, struct drill_opts *o, char *err, size_t errlen)
{
	static const struct option opts[] = {
	    {"peer-socket", required_argument, NULL, 'p'},
	    {"check", required_argument, NULL, 'c'},
	    {"rpo-cmd", required_argument, NULL, 'r'},
	    {"timeout", required_argument, NULL, 't'},
	    {"json", no_argument, NULL, 'j'},
	    {NULL, 0, NULL, 0},
	};
	char *end, **av;
	int c, ac;

	o->peer = o->check = o->rpo = NULL;
	o->timeout = 60;
	if (argc < 2 || argv[1][0] == '-') {
		snprintf(err, errlen,
		         "name the scenario first: crash-primary, crash-service or switchover.");
		return -1;
	}
	if (parse_scenario(argv[1], o, err, errlen) < 0)
		return -1;
	/* The scenario plays argv[0] for getopt; optind 0 resets getopt's state between calls.
	 * Our own messages instead of getopt's, which name neither the command nor the fix. */
	av = argv + 1;
	ac = argc - 1;
	opterr = 0;
	optind = 0;
	while ((c = getopt_long(ac, av, ":", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->peer = optarg;
			break;
		case 'c':
			o->check = optarg;
			break;
		case 'r':
			o->rpo = optarg;
			break;
		case 't':
			errno = 0;
			o->timeout = strtod(optarg, &end);
			if (errno || end == optarg || *end ||
			    !(o->timeout > 0 && o->timeout <= 3600)) {
				snprintf(err, errlen, "--timeout '%s' is not 1 to 3600 seconds.",
				         optarg);
				return -1;
			}
			break;
		case 'j':
			o->json = true;
			break;
		case ':':
			snprintf(err, errlen, "%s needs a value.", av[optind - 1]);
			return -1;
		default:
			snprintf(err, errlen,
			         "unknown option '%s'; the options are --peer-socket, --check, "
			         "--rpo-cmd, --timeout and --json.",
			         av[optind - 1]);
			return -1;
		}
	}
	if (optind < ac) {
		snprintf(err, errlen, "unexpected argument '%s' after the scenario.", av[optind]);
		return -1;
	}
	if (!o->peer) {
		snprintf(err, errlen,
		         "--peer-socket PATH is required: the drill watches both nodes (on two "
		         "hosts, forward the peer's control socket with ssh -L).");
		return -1;
	}
	return 0;
}

static void copy_str(char *dst, size_t len, json_t *v)
{
	snprintf(dst, len, "%s", json_is_string(v) ? json_string_value(v) : "unknown");
}

void drillrep_node_parse(struct drill_node *n, json_t *status)
{
	json_t *cl = json_object_get(status, "cluster"), *vol, *repl, *g, *res;
	size_t i;

	copy_str(n->name, sizeof(n->name), json_object_get(cl, "node"));
	vol = json_array_get(json_object_get(status, "volumes"), 0);
	copy_str(n->role, sizeof(n->role), json_object_get(vol, "role"));
	repl = json_object_get(vol, "replication");
	copy_str(n->disk, sizeof(n->disk), json_object_get(repl, "disk"));
	copy_str(n->link, sizeof(n->link), json_object_get(repl, "link"));
	g = json_array_get(json_object_get(status, "groups"), 0);
	copy_str(n->group, sizeof(n->group), json_object_get(g, "state"));
	n->peer_alive = json_is_true(json_object_get(json_object_get(cl, "peer"), "alive"));
	n->restarts = 0;
	json_array_foreach(json_object_get(g, "resources"), i, res)
	{
		n->restarts += json_integer_value(json_object_get(res, "restarts"));
	}
}

const char *drillrep_unhealthy(const struct drill_node *p, const struct drill_node *s, char *why,
                               size_t len)
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
		snprintf(
		    why, len,
		    "each node must hear the other's heartbeats (%s hears %s: %s, %s hears %s: %s)",
		    p->name, s->name, p->peer_alive ? "yes" : "no", s->name, p->name,
		    s->peer_alive ? "yes" : "no");
	else if (strcmp(p->group, "started") != 0)
		snprintf(why, len, "the group on the primary %s must be started (it is %s)",
		         p->name, p->group);
	else
		return NULL;
	return why;
}

void drillrep_init(struct drill_report *rp, enum drill_scenario sc, const struct drill_node *v,
                   const struct drill_node *s)
{
	memset(rp, 0, sizeof(*rp));
	rp->sc = sc;
	snprintf(rp->victim, sizeof(rp->victim), "%s", v->name);
	snprintf(rp->survivor, sizeof(rp->survivor), "%s", s->name);
	rp->detect = rp->promote = rp->down = rp->service = rp->check = -1;
	rp->restarts0 = v->restarts;
	rp->rpo = -1;
}

static void set_once(int64_t *field, int64_t t)
{
	if (*field < 0)
		*field = t;
}

bool drillrep_observe(struct drill_report *rp, const struct drill_node *v, bool v_ok,
                      const struct drill_node *s, bool s_ok, int64_t t)
{
	bool in_place = rp->sc == DRILL_CRASH_SERVICE;
	const struct drill_node *srv = in_place ? v : s;
	bool srv_ok = in_place ? v_ok : s_ok;

	if (s_ok && !s->peer_alive)
		set_once(&rp->detect, t);
	if (s_ok && strcmp(s->role, "primary") == 0) {
		set_once(&rp->promote, t);
		rp->failover = true;
	}
	/* a restart quicker than one poll shows only in the restart count */
	if (in_place && v_ok && (strcmp(v->group, "started") != 0 || v->restarts > rp->restarts0))
		set_once(&rp->down, t);
	if (rp->sc == DRILL_SWITCHOVER && v_ok && strcmp(v->group, "stopped") == 0)
		set_once(&rp->down, t);
	if (srv_ok && strcmp(srv->group, "started") == 0 &&
	    (in_place ? rp->down >= 0 : rp->promote >= 0))
		set_once(&rp->service, t);
	return rp->service >= 0 && rp->check < 0;
}

void drillrep_check_passed(struct drill_report *rp, int64_t t)
{
	if (rp->service >= 0)
		set_once(&rp->check, t);
}

bool drillrep_done(const struct drill_report *rp)
{
	return rp->check >= 0 && (rp->sc != DRILL_CRASH_PRIMARY || rp->detect >= 0);
}

const char *drillrep_missing(const struct drill_report *rp, char *buf, size_t len)
{
	if (rp->sc == DRILL_CRASH_PRIMARY && rp->detect < 0)
		snprintf(buf, len, "the survivor %s did not declare %s dead", rp->survivor,
		         rp->victim);
	else if (rp->sc == DRILL_CRASH_SERVICE && rp->down < 0)
		snprintf(buf, len,
		         "the service failure on %s did not show (its group stayed started with "
		         "no restart)",
		         rp->victim);
	else if (rp->sc != DRILL_CRASH_SERVICE && rp->promote < 0)
		snprintf(buf, len, "%s did not become primary", rp->survivor);
	else if (rp->service < 0)
		snprintf(buf, len, "the group did not %s on %s",
		         rp->sc == DRILL_CRASH_SERVICE ? "start again" : "start",
		         rp->sc == DRILL_CRASH_SERVICE ? rp->victim : rp->survivor);
	else if (rp->check < 0)
		snprintf(buf, len, "the check command did not succeed");
	else
		return NULL;
	return buf;
}

int drillrep_parse_rpo(const char *out, long long *rpo)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(out, &end, 10);
	if (errno || end == out || v < 0)
		return -1;
	while (isspace((unsigned char)*end))
		end++;
	if (*end)
		return -1;
	*rpo = v;
	return 0;
}

static void print_time(FILE *f, const char *what, int64_t us)
{
	if (us < 0)
		fprintf(f, "  %-36s did not happen\n", what);
	else
		fprintf(f, "  %-36s %8.3f s\n", what, (double)us / 1e6);
}

void drillrep_print(const struct drill_report *rp, FILE *f)
{
	fprintf(f, "drill %s: fault on %s (primary), %s was secondary\n",
	        drillrep_scenario_name(rp->sc), rp->victim, rp->survivor);
	if (rp->sc == DRILL_CRASH_PRIMARY)
		print_time(f, "peer declared dead (detection)", rp->detect);
	if (rp->sc != DRILL_CRASH_PRIMARY)
		print_time(f,
		           rp->sc == DRILL_SWITCHOVER ? "services stopped on the old primary"
		                                      : "service failure noticed",
		           rp->down);
	if (rp->sc != DRILL_CRASH_SERVICE)
		print_time(f, "survivor primary (promotion)", rp->promote);
	print_time(f, "group started (service ready)", rp->service);
	print_time(f, "check command succeeded", rp->check);
	print_time(f, "RTO", rp->check);
	if (rp->rpo >= 0)
		fprintf(f, "  %-36s %8lld\n", "RPO (lost, by --rpo-cmd)", rp->rpo);
	fprintf(f, "  %-36s %8s\n", "failover", rp->failover ? "yes" : "no");
}

static json_int_t ms(int64_t us)
{
	return us < 0 ? -1 : (json_int_t)(us / 1000);
}

json_t *drillrep_json(const struct drill_report *rp)
{
	return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I}", "scenario",
	                 drillrep_scenario_name(rp->sc), "victim", rp->victim, "survivor",
	                 rp->survivor, "detect_ms", ms(rp->detect), "promote_ms", ms(rp->promote),
	                 "down_ms", ms(rp->down), "service_ms", ms(rp->service), "check_ms",
	                 ms(rp->check), "rto_ms", ms(rp->check), "failover", rp->failover, "rpo",
	                 (json_int_t)rp->rpo);
}
