/* SPDX-License-Identifier: MIT */
/*
 * Thread liveness for systemd's watchdog: every thread that must keep going (the heartbeat and
 * witness loops, the I/O workers) owns a slot and stamps it as it makes progress; the main loop
 * feeds the watchdog only while no slot is stale, so a stuck thread gets hakd restarted.
 *
 * A slot is "beating" (stamped with the monotonic time of its last progress) or "parked" (the
 * thread waits for work by design, like an idle I/O worker: nothing to be late for). Stamping is
 * one relaxed atomic store, cheap enough for every I/O request.
 */
#ifndef HAK_ALIVE_H
#define HAK_ALIVE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ALIVE_MAX_SLOTS 256u
#define ALIVE_NAME_MAX  16u /* a thread name, like pthread_setname_np's */

struct alive_slot {
	char name[ALIVE_NAME_MAX];
	_Atomic int64_t stamp_ms; /* monotonic ms of the last progress; 0 = parked */
	_Atomic int used;
};

/* A free slot named name, beating from now; NULL when all ALIVE_MAX_SLOTS are taken (the thread
 * then simply is not watched). Thread-safe. */
struct alive_slot *alive_register(const char *name);
/* Give the slot back (NULL is fine). */
void alive_unregister(struct alive_slot *s);
/* Progress now (NULL is fine). */
void alive_beat(struct alive_slot *s);
/* Waiting for work by design from now on, until the next alive_beat (NULL is fine). */
void alive_park(struct alive_slot *s);

/* Pure: whether a slot stamped stamp_ms (0 parked) is stale at now_ms with limit_ms. */
int alive_is_stale(int64_t stamp_ms, int64_t now_ms, int64_t limit_ms);
/*
 * How many registered slots are stale at now_ms (no progress for more than limit_ms); the first
 * one's name and age go to who/age_ms (when not NULL and some are stale).
 */
unsigned alive_check(int64_t now_ms, int64_t limit_ms, char *who, size_t wholen, int64_t *age_ms);

#endif
