/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for hakctl drill's pure parts (cli/drillrep.c): its arguments, a node's state read
 * from a status reply, the refusal of an unhealthy pair, which steps a sequence of polls
 * completes in each scenario (and which step a timeout names), --rpo-cmd's output, and the
 * report's exact text and JSON. The drill against a running pair is t_drill.sh.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drillrep.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* getopt permutes the pointer array, never the strings: a writable copy of the array will do */
static int parse(const char *const *args, int argc, struct drill_opts *o, char *err)
{
	char *argv[16] = {0};

	for (int i = 0; i < argc && i < 15; i++)
		argv[i] = (char *)args[i];
	return drillrep_parse_args(argc, argv, o, err, 256);
}

START_TEST(args_ok)
{
	static const char *const all[] = {
	    "drill",     "crash-primary",    "--peer-socket", "/tmp/p.ctl", "--check",
	    "psql -c 1", "--rpo-cmd=echo 3", "--timeout",     "2.5",        "--json"};
	static const char *const min[] = {"drill", "switchover", "--peer-socket", "/tmp/q.ctl"};
	struct drill_opts o = {0};
	char err[256];

	ck_assert_int_eq(parse(all, ARGC(all), &o, err), 0);
	ck_assert_int_eq(o.sc, DRILL_CRASH_PRIMARY);
	ck_assert_str_eq(o.peer, "/tmp/p.ctl");
	ck_assert_str_eq(o.check, "psql -c 1");
	ck_assert_str_eq(o.rpo, "echo 3");
	ck_assert(o.timeout == 2.5);
	ck_assert(o.json);
	/* a second parse starts afresh: defaults back, json as the caller set it */
	o.json = false;
	ck_assert_int_eq(parse(min, ARGC(min), &o, err), 0);
	ck_assert_int_eq(o.sc, DRILL_SWITCHOVER);
	ck_assert_str_eq(o.peer, "/tmp/q.ctl");
	ck_assert_ptr_null(o.check);
	ck_assert_ptr_null(o.rpo);
	ck_assert(o.timeout == 60);
	ck_assert(!o.json);
	ck_assert_str_eq(drillrep_scenario_name(DRILL_CRASH_SERVICE), "crash-service");
}
END_TEST

START_TEST(args_refused)
{
	static const struct {
		const char *args[6];
		const char *err;
	} bad[] = {
	    {{"drill"}, "name the scenario first: crash-primary, crash-service or switchover."},
	    {{"drill", "--peer-socket", "x", "crash-primary"},
	     "name the scenario first: crash-primary, crash-service or switchover."},
	    {{"drill", "explode", "--peer-socket", "x"},
	     "unknown scenario 'explode'; use crash-primary, crash-service or switchover."},
	    {{"drill", "crash-primary"},
	     "--peer-socket PATH is required: the drill watches both nodes (on two hosts, "
	     "forward the peer's control socket with ssh -L)."},
	    {{"drill", "crash-primary", "--peer-socket", "x", "--timeout", "0"},
	     "--timeout '0' is not 1 to 3600 seconds."},
	    {{"drill", "crash-primary", "--peer-socket", "x", "--timeout", "3601"},
	     "--timeout '3601' is not 1 to 3600 seconds."},
	    {{"drill", "crash-primary", "--peer-socket", "x", "--timeout", "5s"},
	     "--timeout '5s' is not 1 to 3600 seconds."},
	    {{"drill", "crash-primary", "--peer-socket", "x", "--timeout", ""},
	     "--timeout '' is not 1 to 3600 seconds."},
	    {{"drill", "crash-primary", "--peer-socket", "x", "--check"}, "--check needs a value."},
	    {{"drill", "crash-primary", "--peer-socket", "x", "--force"},
	     "unknown option '--force'; the options are --peer-socket, --check, --rpo-cmd, "
	     "--timeout and --json."},
	    {{"drill", "crash-primary", "--peer-socket", "x", "now"},
	     "unexpected argument 'now' after the scenario."},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct drill_opts o = {0};
		char err[256] = "";
		int argc = 0;

		while (argc < 6 && bad[i].args[argc])
			argc++;
		ck_assert_msg(parse(bad[i].args, argc, &o, err) == -1, "case %zu accepted", i);
		ck_assert_str_eq(err, bad[i].err);
	}
}
END_TEST

static void node_set(struct drill_node *n, const char *name, const char *role, const char *group,
                     bool alive)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", name);
	snprintf(n->role, sizeof(n->role), "%s", role);
	snprintf(n->disk, sizeof(n->disk), "UpToDate");
	snprintf(n->link, sizeof(n->link), "Connected");
	snprintf(n->group, sizeof(n->group), "%s", group);
	n->peer_alive = alive;
}

START_TEST(status_parse)
{
	static const char *const status =
	    "{\"cluster\": {\"node\": \"alpha\", \"rule\": \"serve\", \"peer\": {\"alive\": true}},"
	    " \"volumes\": [{\"name\": \"db\", \"role\": \"primary\","
	    "   \"replication\": {\"disk\": \"UpToDate\", \"link\": \"Connected\"}}],"
	    " \"groups\": [{\"name\": \"svc\", \"state\": \"started\", \"resources\": ["
	    "   {\"name\": \"marker\", \"restarts\": 2}, {\"name\": \"svc\", \"restarts\": 3}]}]}";
	json_t *j = json_loads(status, 0, NULL), *empty = json_object();
	struct drill_node n;

	ck_assert_ptr_nonnull(j);
	drillrep_node_parse(&n, j);
	ck_assert_str_eq(n.name, "alpha");
	ck_assert_str_eq(n.role, "primary");
	ck_assert_str_eq(n.disk, "UpToDate");
	ck_assert_str_eq(n.link, "Connected");
	ck_assert_str_eq(n.group, "started");
	ck_assert(n.peer_alive);
	ck_assert_int_eq(n.restarts, 5);
	/* a standalone hakd: no cluster, no group */
	drillrep_node_parse(&n, empty);
	ck_assert_str_eq(n.name, "unknown");
	ck_assert_str_eq(n.role, "unknown");
	ck_assert_str_eq(n.group, "unknown");
	ck_assert(!n.peer_alive);
	ck_assert_int_eq(n.restarts, 0);
	json_decref(j);
	json_decref(empty);
}
END_TEST

START_TEST(health)
{
	struct drill_node p, s;
	char why[256];

	node_set(&p, "alpha", "primary", "started", true);
	node_set(&s, "beta", "secondary", "stopped", true);
	ck_assert_ptr_null(drillrep_unhealthy(&p, &s, why, sizeof(why)));

	snprintf(s.role, sizeof(s.role), "primary");
	ck_assert_str_eq(drillrep_unhealthy(&p, &s, why, sizeof(why)),
	                 "one node must be primary and the other secondary (alpha is primary, "
	                 "beta is primary)");
	snprintf(s.role, sizeof(s.role), "secondary");
	snprintf(s.disk, sizeof(s.disk), "Inconsistent");
	ck_assert_str_eq(drillrep_unhealthy(&p, &s, why, sizeof(why)),
	                 "both disks must be UpToDate (alpha UpToDate, beta Inconsistent)");
	snprintf(s.disk, sizeof(s.disk), "UpToDate");
	snprintf(p.link, sizeof(p.link), "StandAlone");
	ck_assert_str_eq(drillrep_unhealthy(&p, &s, why, sizeof(why)),
	                 "the replication link must be Connected (alpha: StandAlone, beta: "
	                 "Connected)");
	snprintf(p.link, sizeof(p.link), "Connected");
	s.peer_alive = false;
	ck_assert_str_eq(drillrep_unhealthy(&p, &s, why, sizeof(why)),
	                 "each node must hear the other's heartbeats (alpha hears beta: yes, beta "
	                 "hears alpha: no)");
	s.peer_alive = true;
	snprintf(p.group, sizeof(p.group), "restarting");
	ck_assert_str_eq(drillrep_unhealthy(&p, &s, why, sizeof(why)),
	                 "the group on the primary alpha must be started (it is restarting)");
}
END_TEST

/* A crash of the primary, polled step by step; the victim never answers. */
START_TEST(crash_primary_steps)
{
	struct drill_node v, s;
	struct drill_report rp;
	char buf[256];

	node_set(&v, "alpha", "primary", "started", true);
	node_set(&s, "beta", "secondary", "stopped", true);
	drillrep_init(&rp, DRILL_CRASH_PRIMARY, &v, &s);
	ck_assert_str_eq(rp.victim, "alpha");
	ck_assert_str_eq(rp.survivor, "beta");

	ck_assert(!drillrep_observe(&rp, &v, false, &s, true, 100000));
	ck_assert_str_eq(drillrep_missing(&rp, buf, sizeof(buf)),
	                 "the survivor beta did not declare alpha dead");
	ck_assert(!drillrep_observe(&rp, &v, false, &s, false, 200000)); /* beta busy */
	s.peer_alive = false;
	ck_assert(!drillrep_observe(&rp, &v, false, &s, true, 900000));
	ck_assert_int_eq(rp.detect, 900000);
	ck_assert_str_eq(drillrep_missing(&rp, buf, sizeof(buf)), "beta did not become primary");
	/* the secondary's group state before the promotion does not count */
	snprintf(s.group, sizeof(s.group), "started");
	ck_assert(!drillrep_observe(&rp, &v, false, &s, true, 950000));
	ck_assert_int_eq(rp.service, -1);
	snprintf(s.group, sizeof(s.group), "starting");
	snprintf(s.role, sizeof(s.role), "primary");
	ck_assert(!drillrep_observe(&rp, &v, false, &s, true, 1000000));
	ck_assert_int_eq(rp.promote, 1000000);
	ck_assert(rp.failover);
	ck_assert_str_eq(drillrep_missing(&rp, buf, sizeof(buf)),
	                 "the group did not start on beta");
	/* a check passing before the service is up is not the RTO */
	drillrep_check_passed(&rp, 1000001);
	ck_assert_int_eq(rp.check, -1);
	snprintf(s.group, sizeof(s.group), "started");
	ck_assert(drillrep_observe(&rp, &v, false, &s, true, 1500000));
	ck_assert_int_eq(rp.service, 1500000);
	ck_assert_str_eq(drillrep_missing(&rp, buf, sizeof(buf)),
	                 "the check command did not succeed");
	ck_assert(!drillrep_done(&rp));
	ck_assert(drillrep_observe(&rp, &v, false, &s, true, 1600000)); /* check failed once */
	drillrep_check_passed(&rp, 1700000);
	ck_assert(drillrep_done(&rp));
	ck_assert_ptr_null(drillrep_missing(&rp, buf, sizeof(buf)));
	/* later polls change nothing */
	ck_assert(!drillrep_observe(&rp, &v, false, &s, true, 2000000));
	drillrep_check_passed(&rp, 2000000);
	ck_assert_int_eq(rp.detect, 900000);
	ck_assert_int_eq(rp.check, 1700000);
}
END_TEST

START_TEST(crash_service_steps)
{
	struct drill_node v, s;
	struct drill_report rp;
	char buf[256];

	node_set(&v, "alpha", "primary", "started", true);
	node_set(&s, "beta", "secondary", "stopped", true);
	v.restarts = 1;
	drillrep_init(&rp, DRILL_CRASH_SERVICE, &v, &s);
	/* nothing seen yet: still started, same restart count */
	ck_assert(!drillrep_observe(&rp, &v, true, &s, true, 20000));
	ck_assert_str_eq(drillrep_missing(&rp, buf, sizeof(buf)),
	                 "the service failure on alpha did not show (its group stayed started "
	                 "with no restart)");
	snprintf(v.group, sizeof(v.group), "restarting");
	ck_assert(!drillrep_observe(&rp, &v, true, &s, true, 60000));
	ck_assert_int_eq(rp.down, 60000);
	ck_assert_str_eq(drillrep_missing(&rp, buf, sizeof(buf)),
	                 "the group did not start again on alpha");
	snprintf(v.group, sizeof(v.group), "started");
	v.restarts = 2;
	ck_assert(drillrep_observe(&rp, &v, true, &s, true, 300000));
	ck_assert_int_eq(rp.service, 300000);
	drillrep_check_passed(&rp, 320000);
	ck_assert(drillrep_done(&rp));
	ck_assert(!rp.failover);
	ck_assert_int_eq(rp.detect, -1);

	/* a restart quicker than one poll: seen only in the restart count */
	v.restarts = 1;
	drillrep_init(&rp, DRILL_CRASH_SERVICE, &v, &s);
	v.restarts = 2;
	ck_assert(drillrep_observe(&rp, &v, true, &s, true, 150000));
	ck_assert_int_eq(rp.down, 150000);
	ck_assert_int_eq(rp.service, 150000);
}
END_TEST

START_TEST(switchover_steps)
{
	struct drill_node v, s;
	struct drill_report rp;
	char buf[256];

	node_set(&v, "beta", "primary", "started", true);
	node_set(&s, "alpha", "secondary", "stopped", true);
	drillrep_init(&rp, DRILL_SWITCHOVER, &v, &s);
	snprintf(v.group, sizeof(v.group), "stopping");
	ck_assert(!drillrep_observe(&rp, &v, true, &s, true, 10000));
	ck_assert_int_eq(rp.down, -1);
	ck_assert_str_eq(drillrep_missing(&rp, buf, sizeof(buf)), "alpha did not become primary");
	snprintf(v.group, sizeof(v.group), "stopped");
	snprintf(v.role, sizeof(v.role), "secondary");
	ck_assert(!drillrep_observe(&rp, &v, true, &s, true, 30000));
	ck_assert_int_eq(rp.down, 30000);
	snprintf(s.role, sizeof(s.role), "primary");
	snprintf(s.group, sizeof(s.group), "started");
	ck_assert(drillrep_observe(&rp, &v, true, &s, true, 50000));
	ck_assert_int_eq(rp.promote, 50000);
	ck_assert_int_eq(rp.service, 50000);
	drillrep_check_passed(&rp, 55000);
	ck_assert(drillrep_done(&rp));
	ck_assert_int_eq(rp.detect, -1);
}
END_TEST

START_TEST(rpo_output)
{
	static const char *const bad[] = {"",   "\n",     "lost",
	                                  "-1", "3 lost", "9999999999999999999999"};
	long long rpo = -7;

	ck_assert_int_eq(drillrep_parse_rpo("0\n", &rpo), 0);
	ck_assert_int_eq(rpo, 0);
	ck_assert_int_eq(drillrep_parse_rpo("  12 \n", &rpo), 0);
	ck_assert_int_eq(rpo, 12);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(drillrep_parse_rpo(bad[i], &rpo) == -1, "'%s' accepted", bad[i]);
		ck_assert_int_eq(rpo, 12);
	}
}
END_TEST

static struct drill_report sample_report(void)
{
	struct drill_node v, s;
	struct drill_report rp;

	node_set(&v, "alpha", "primary", "started", true);
	node_set(&s, "beta", "secondary", "stopped", true);
	drillrep_init(&rp, DRILL_CRASH_PRIMARY, &v, &s);
	rp.detect = 912345;
	rp.promote = 1002000;
	rp.service = 1500999;
	rp.rpo = 0;
	rp.failover = true;
	return rp;
}

START_TEST(report_text)
{
	struct drill_report rp = sample_report();
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(f);
	drillrep_print(&rp, f);
	fclose(f);
	ck_assert_str_eq(text, "drill crash-primary: fault on alpha (primary), beta was secondary\n"
	                       "  peer declared dead (detection)          0.912 s\n"
	                       "  survivor primary (promotion)            1.002 s\n"
	                       "  group started (service ready)           1.501 s\n"
	                       "  check command succeeded              did not happen\n"
	                       "  RTO                                  did not happen\n"
	                       "  RPO (lost, by --rpo-cmd)                    0\n"
	                       "  failover                                  yes\n");
	free(text);
}
END_TEST

START_TEST(report_json)
{
	struct drill_report rp = sample_report();
	json_t *j;
	char *t;

	rp.check = 2040500;
	j = drillrep_json(&rp);
	ck_assert_ptr_nonnull(j);
	t = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	ck_assert_str_eq(
	    t, "{\"check_ms\":2040,\"detect_ms\":912,\"down_ms\":-1,\"failover\":true,"
	       "\"promote_ms\":1002,\"rpo\":0,\"rto_ms\":2040,\"scenario\":\"crash-"
	       "primary\",\"service_ms\":1500,\"survivor\":\"beta\",\"victim\":\"alpha\"}");
	free(t);
	json_decref(j);
}
END_TEST

static Suite *drill_suite(void)
{
	Suite *s = suite_create("drill");
	TCase *tc = tcase_create("pure");

	tcase_add_test(tc, args_ok);
	tcase_add_test(tc, args_refused);
	tcase_add_test(tc, status_parse);
	tcase_add_test(tc, health);
	tcase_add_test(tc, crash_primary_steps);
	tcase_add_test(tc, crash_service_steps);
	tcase_add_test(tc, switchover_steps);
	tcase_add_test(tc, rpo_output);
	tcase_add_test(tc, report_text);
	tcase_add_test(tc, report_json);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(drill_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
