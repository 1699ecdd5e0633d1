/* SPDX-License-Identifier: MIT */
#include "drill.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl.h"
#include "drillrep.h"
#include "lib/clock.h"

#define DRILL_POLL_US   20000
#define DRILL_CRASH_US  20000 /* hakd crashes this long after its reply (clusterd.c) */
#define DRILL_CHECK_MAX 4     /* seconds one --check run may take */

/* Read n's status; 0, or -1 when hakd cannot be reached (a crashed victim). */
static int node_read(struct drill_node *n)
{
	json_t *req = json_pack("{s:s}", "cmd", "status"), *r;
	int code;

	r = req ? ctl_call(n->sock, req, &code) : NULL;
	json_decref(req);
	if (!r)
		return -1;
	drillrep_node_parse(n, r);
	json_decref(r);
	return 0;
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

/* Poll both nodes until every step of the scenario happened or the timeout; 0, or -1. */
static int drill_watch(struct drill_report *rp, struct drill_node *v, struct drill_node *s,
                       int64_t t0, const struct drill_opts *o)
{
	while (!drillrep_done(rp) && clock_mono_us() - t0 < (int64_t)(o->timeout * 1e6)) {
		/* a crashed victim's socket is gone: asking it would only print errors */
		bool v_ok = rp->sc != DRILL_CRASH_PRIMARY && node_read(v) == 0;
		bool s_ok = node_read(s) == 0;

		if (drillrep_observe(rp, v, v_ok, s, s_ok, clock_mono_us() - t0) &&
		    (!o->check || run_cmd(o->check, NULL, 0) == 0))
			drillrep_check_passed(rp, clock_mono_us() - t0);
		if (!drillrep_done(rp))
			usleep(DRILL_POLL_US);
	}
	return drillrep_done(rp) ? 0 : -1;
}

/* Send the fault; t0 is when it happens (monotonic, this host's clock). 0 or exit code. */
static int inject(enum drill_scenario sc, const struct drill_node *v, int64_t *t0)
{
	json_t *req, *r;
	int code;

	if (sc == DRILL_SWITCHOVER)
		req = json_pack("{s:s}", "cmd", "switchover");
	else
		req = json_pack("{s:s, s:s}", "cmd", "drill", "fault",
		                sc == DRILL_CRASH_PRIMARY ? "crash" : "service");
	*t0 = clock_mono_us();
	r = req ? ctl_call(v->sock, req, &code) : NULL;
	json_decref(req);
	if (!r)
		return code ? code : EXIT_DAEMON;
	if (sc == DRILL_CRASH_PRIMARY)
		*t0 = clock_mono_us() + DRILL_CRASH_US;
	json_decref(r);
	return 0;
}

static void report_print(const struct drill_report *rp, bool json)
{
	json_t *o;
	char *t;

	if (!json) {
		drillrep_print(rp, stdout);
		return;
	}
	o = drillrep_json(rp);
	t = o ? json_dumps(o, JSON_COMPACT) : NULL;
	printf("%s\n", t ? t : "{}");
	free(t);
	json_decref(o);
}

/* --rpo-cmd, once the drill is over: the number it prints into rp, or a sentence in why. */
static void rpo_run(struct drill_report *rp, const char *cmd, char *why, size_t len)
{
	char line[64];
	int st = run_cmd(cmd, line, sizeof(line));

	why[0] = 0;
	if (st != 0)
		snprintf(why, len, "--rpo-cmd '%s' exited with status %d; no RPO reported.", cmd,
		         st);
	else if (drillrep_parse_rpo(line, &rp->rpo) < 0)
		snprintf(why, len,
		         "--rpo-cmd '%s' printed '%.*s', not a count of lost transactions; no RPO "
		         "reported.",
		         cmd, (int)strcspn(line, "\n"), line);
}

int drill_run(const char *local_sock, bool json, int argc, char **argv)
{
	struct drill_opts o = {.json = json};
	struct drill_node a = {.sock = local_sock}, b = {0}, *v, *s;
	struct drill_report rp;
	char why[256], err[256], rpo_why[512] = "";
	int64_t t0;
	int rc;

	if (drillrep_parse_args(argc, argv, &o, err, sizeof(err)) < 0) {
		fprintf(stderr, "hakctl drill: %s\n", err);
		return EXIT_USAGE;
	}
	b.sock = o.peer;
	if (node_read(&a) < 0 || node_read(&b) < 0)
		return EXIT_UNREACHABLE;
	v = strcmp(a.role, "primary") == 0 ? &a : &b;
	s = v == &a ? &b : &a;
	if (drillrep_unhealthy(v, s, why, sizeof(why))) {
		fprintf(
		    stderr,
		    "hakctl drill: the pair is not ready for a drill: %s.\n"
		    "A drill needs one node primary and the other secondary, both disks UpToDate, "
		    "the replication link Connected, each node hearing the other's heartbeats, and "
		    "the group started on the primary.\n",
		    why);
		return EXIT_DAEMON;
	}
	drillrep_init(&rp, o.sc, v, s);
	if ((rc = inject(o.sc, v, &t0)) != 0)
		return rc;
	rc = drill_watch(&rp, v, s, t0, &o);
	if (o.rpo)
		rpo_run(&rp, o.rpo, rpo_why, sizeof(rpo_why));
	report_print(&rp, o.json);
	/* the sentences below come after the report, also when both go to one pipe */
	fflush(stdout);
	if (rpo_why[0])
		fprintf(stderr, "hakctl drill: %s\n", rpo_why);
	if (rc < 0) {
		fprintf(stderr,
		        "hakctl drill: within %g s, %s (the report above shows what did happen).\n",
		        o.timeout, drillrep_missing(&rp, why, sizeof(why)));
		return EXIT_TIMEOUT;
	}
	return 0;
}
