/* SPDX-License-Identifier: MIT */
/*
 * systemd's service protocol (sd_notify(3), libsystemd): READY, RELOADING, STOPPING, STATUS= and
 * the watchdog. Without NOTIFY_SOCKET (hakd not started by systemd, or not as Type=notify) every
 * call does nothing, so hakd behaves as before.
 *
 * The watchdog (WatchdogSec= in the unit, WATCHDOG_USEC for hakd) is fed from the main loop at
 * half the interval, but only while every thread registered in lib/alive.h has made progress
 * within that half: a stuck heartbeat thread or I/O worker stops the feeding, and systemd kills
 * and restarts hakd (Restart=on-failure).
 */
#ifndef HAK_SDNOTIFY_H
#define HAK_SDNOTIFY_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>

/* Status lines are sent at most this often; changes in between are coalesced. */
#define SDNOTIFY_STATUS_INTERVAL 1.0

/* Reads the watchdog settings and starts feeding it from loop. Safe to call without systemd. */
void sdnotify_init(struct ev_loop *loop);
/* Stops the timers (before the loop is destroyed). */
void sdnotify_shutdown(void);
/* Whether systemd listens (NOTIFY_SOCKET is set). */
bool sdnotify_enabled(void);
/* The watchdog interval systemd asked for, in seconds; 0 without one. */
double sdnotify_watchdog_interval(void);

void sdnotify_ready(void);
void sdnotify_reloading(void);
void sdnotify_stopping(void);
/* STATUS=text, when it differs from the last one, at most once per SDNOTIFY_STATUS_INTERVAL. */
void sdnotify_status(const char *text);

/* One volume's line for the status. */
struct sdnotify_vol {
	const char *name;
	const char *role; /* NULL: a standalone volume, just served */
	const char *disk, *link;
};

/*
 * Pure: the status text, like "db: Primary UpToDate Connected; cluster: joined, peer alive;
 * group pg: started". cluster, groups and note may be NULL or empty (left out). Returns the
 * length it needed (like snprintf); out is always terminated.
 */
size_t sdnotify_status_build(char *out, size_t len, const struct sdnotify_vol *vols, size_t n,
                             const char *cluster, const char *groups, const char *note);

/*
 * Pure: whether the watchdog may be fed, given the number of threads the liveness check found
 * stale. Kept as a function so the decision and its message live in one place.
 */
bool sdnotify_may_feed(unsigned stale);

#endif
