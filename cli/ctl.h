/* SPDX-License-Identifier: MIT */
/*
 * hakctl's side of the control socket: one JSON request line, one JSON reply line.
 */
#ifndef HAK_CLI_CTL_H
#define HAK_CLI_CTL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* hakctl's exit codes. */
enum {
	EXIT_USAGE = 1,
	EXIT_UNREACHABLE = 2,
	EXIT_DAEMON = 3,
	EXIT_TIMEOUT = 4,
	EXIT_NOSYNC = 5, /* wait-sync: a volume cannot get in sync without the operator */
};

/* A socket connected to the hakd listening on sock, or -1 after a sentence on stderr. */
int ctl_connect(const char *sock);
/*
 * Send req to the hakd listening on sock and return its reply when it says ok. NULL otherwise,
 * with a sentence on stderr and *exit_code EXIT_UNREACHABLE (no answer) or EXIT_DAEMON (hakd
 * refused); *exit_code is 0 on success.
 */
json_t *ctl_call(const char *sock, json_t *req, int *exit_code);
/* ctl_call() that gives up (EXIT_UNREACHABLE, a sentence on stderr) when no answer came within
 * timeout_ms; -1 waits as long as it takes. */
json_t *ctl_call_timeout(const char *sock, json_t *req, int timeout_ms, int *exit_code);
/* b bytes for a reader: "512 B", "1.50 GiB" (decimals after the point past bytes). */
void ctl_bytes_text(uint64_t b, int decimals, char *out, size_t len);

#endif
