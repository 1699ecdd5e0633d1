/* SPDX-License-Identifier: MIT */
/*
 * hakctl drill: inject a fault into a running pair and measure what follows.
 *
 * hakctl talks to both nodes' control sockets: the local one (--control) and the peer's
 * (--peer-socket; on two hosts, forward it: ssh -L /tmp/peer.ctl:/run/hak/hakd.ctl host). It
 * finds which node is primary (the victim of the fault), checks that the pair is healthy, has
 * the victim's hakd inject the fault (only where the configuration says allow-drills yes), then
 * polls every 20 ms and reports, from the moment of the fault:
 *   crash-primary  the victim's services and hakd die by SIGKILL: the survivor declares the peer
 *                  dead, promotes, has its group started, and --check succeeds (the RTO)
 *   crash-service  the victim's services die by SIGKILL: the group restarts them in place
 *                  (no failover), and --check succeeds again
 *   switchover     a planned switchover: the survivor promotes and its group starts
 * --rpo-cmd runs once at the end; the integer it prints is reported as the RPO (lost
 * transactions, as the caller's own ledger counts them).
 */
#ifndef HAK_CLI_DRILL_H
#define HAK_CLI_DRILL_H

#include <stdbool.h>
#include <stddef.h>

/* argv: "drill", SCENARIO, options. Returns hakctl's exit code. */
int drill_run(const char *local_sock, bool json, int argc, char **argv);

#endif
