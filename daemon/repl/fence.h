/* SPDX-License-Identifier: MIT */
/*
 * Fencing on the primary's side, and the Outdated mark on the secondary's (private to repl/):
 * see fence.c. The cluster manager drives it through repl.h (repl_fencing, repl_fence_confirm,
 * repl_outdate).
 */
#ifndef HAK_REPL_FENCE_H
#define HAK_REPL_FENCE_H

#include <jansson.h>
#include <stdbool.h>

struct repl;

/* Register the connection-loss hook and the timer. */
void fence_init(struct repl *r);
/* Stop the timer; a fence still on fails its parked writes (the daemon stops, or the node is
 * demoting: then its unacknowledged changes make its disk Outdated, see fence.c). */
void fence_shutdown(struct repl *r, bool demoting);
/* Every ping interval: without a cluster section, a peer connected and in sync again ends a
 * freeze, and what fence-peer did is lifted by unfence-peer. */
void fence_tick(struct repl *r);
/* The "fencing" object of the volume's status. */
json_t *fence_status_json(const struct repl *r);

#endif
