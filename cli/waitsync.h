/* SPDX-License-Identifier: MIT */
/*
 * hakctl wait-sync [VOLUME] [--timeout S]: wait until the volumes are connected and UpToDate on
 * both nodes with nothing out of sync, showing the resync's progress meanwhile.
 */
#ifndef HAK_CLI_WAITSYNC_H
#define HAK_CLI_WAITSYNC_H

/*
 * argv[0] is "wait-sync"; control is hakd's control socket. Returns 0 once in sync,
 * EXIT_TIMEOUT when --timeout came first, EXIT_NOSYNC when a volume cannot get in sync without
 * the operator (StandAlone, split brain, Diskless, no UpToDate copy, no peer), EXIT_USAGE,
 * EXIT_UNREACHABLE or EXIT_DAEMON as every command.
 */
int waitsync_run(const char *control, int argc, char **argv);

#endif
