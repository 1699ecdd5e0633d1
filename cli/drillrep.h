/* SPDX-License-Identifier: MIT */
/*
 * The pure half of hakctl drill (drill.c does the sockets, the commands and the clock): its
 * arguments, a node's state as its status JSON shows it, whether the pair is ready for a
 * drill, which steps of the scenario an observation of both nodes completes, which step is
 * still missing, and the report as text or JSON. Times are microseconds after the fault.
 */
#ifndef HAK_CLI_DRILLREP_H
#define HAK_CLI_DRILLREP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum drill_scenario { DRILL_CRASH_PRIMARY, DRILL_CRASH_SERVICE, DRILL_SWITCHOVER };

/* hakctl drill SCENARIO --peer-socket SOCK [--check CMD] [--rpo-cmd CMD] [--timeout S] */
struct drill_opts {
	enum drill_scenario sc;
	const char *peer, *check, *rpo; /* point into argv; check and rpo may be NULL */
	double timeout;                 /* seconds, default 60 */
	bool json;
};

/* One node's state as its status shows it ("unknown" where the status lacks a field). */
struct drill_node {
	const char *sock;
	char name[64];
	char role[16], disk[24], link[24], group[24];
	bool peer_alive;
	long long restarts; /* of the first group's resources, summed */
};

/* The measurements, in microseconds after the fault; -1 where the step did not happen. */
struct drill_report {
	enum drill_scenario sc;
	char victim[64], survivor[64];
	int64_t detect, promote, down, service, check;
	long long restarts0; /* the victim's restart count before the fault */
	long long rpo;       /* -1: no --rpo-cmd, or it printed no number */
	bool failover;       /* the survivor became primary */
};

const char *drillrep_scenario_name(enum drill_scenario sc);

/*
 * Parse argv ("drill", SCENARIO, options) into o (json is left as the caller set it unless
 * --json is given). 0, or -1 with a sentence in err.
 */
int drillrep_parse_args(int argc, char **argv, struct drill_opts *o, char *err, size_t errlen);

/* Fill n (all but sock) from a reply to the status command. */
void drillrep_node_parse(struct drill_node *n, json_t *status);

/* Why primary p and secondary s are not ready for a drill (a clause in why), or NULL. */
const char *drillrep_unhealthy(const struct drill_node *p, const struct drill_node *s, char *why,
                               size_t len);

/* A report with no step done yet, victim v (the primary) and survivor s as they were before. */
void drillrep_init(struct drill_report *rp, enum drill_scenario sc, const struct drill_node *v,
                   const struct drill_node *s);

/*
 * Record what one poll at time t saw: v (the victim; v_ok false when its hakd did not answer)
 * and s (the survivor, likewise). Each step is recorded once, the first time it is seen.
 * Returns true when the service is up where the scenario expects it, so --check may run.
 */
bool drillrep_observe(struct drill_report *rp, const struct drill_node *v, bool v_ok,
                      const struct drill_node *s, bool s_ok, int64_t t);

/* --check exited 0 at time t (or there is no --check and the service is up). */
void drillrep_check_passed(struct drill_report *rp, int64_t t);

/* true when every step of the scenario happened. */
bool drillrep_done(const struct drill_report *rp);

/* The first step of the scenario that did not happen, as a sentence, or NULL. */
const char *drillrep_missing(const struct drill_report *rp, char *buf, size_t len);

/* --rpo-cmd's output: one integer >= 0 (spaces and a newline around it allowed). 0 or -1. */
int drillrep_parse_rpo(const char *out, long long *rpo);

/* The report as aligned text. */
void drillrep_print(const struct drill_report *rp, FILE *f);

/* The report as one JSON object (times in ms, -1 for steps that did not happen), or NULL. */
json_t *drillrep_json(const struct drill_report *rp);

#endif
