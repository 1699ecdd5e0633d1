/* SPDX-License-Identifier: MIT */
/* Checksum-based resync, source side (csum.c): see there. Private to daemon/repl/. */
#ifndef HAK_CSUM_H
#define HAK_CSUM_H

#include <stdbool.h>
#include <stdint.h>

struct repl;
struct wire_hdr;

/* This resync compares hashes before it sends data. */
bool csum_wanted(const struct repl *r);
/* Ask the target for the hashes of a run. 0, or -1 when it must wait (too many asked). */
int csum_start_run(struct repl *r, uint64_t off, uint32_t len);
/* RS_REQUEST: the target's hashes of a run, some differing. */
void csum_frame(struct repl *r, const struct wire_hdr *h, uint8_t *payload);
void csum_stop(struct repl *r);

#endif
