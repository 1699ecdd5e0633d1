/* SPDX-License-Identifier: MIT */
/*
 * Resync rate control: how much resync data the source may put in flight, as a pure function of
 * time, application activity and configuration (no I/O, no clock of its own).
 *
 * Idle volume (no application write for RSCTL_BUSY_HOLD seconds): the resync keeps fill_target
 * bytes in flight, limited only by rate_max (0: unlimited). Application writes compete for the
 * same link and the same send queue, so while they come: at most RSCTL_BUSY_WINDOW bytes in
 * flight (an application write waits behind little resync data), and a token bucket whose rate
 * starts at rate_min and adapts to the application's write latency (ack latency): above
 * RSCTL_LAT_FACTOR x its latency without a resync, the rate is cut by a third (at most once per
 * RSCTL_ADAPT_S); below it, the rate grows by an eighth, up to rate_max (or unlimited). It never
 * goes below rate_min. Pause (local or the peer's) stops new resync I/O altogether.
 */
#ifndef HAK_RSCTL_H
#define HAK_RSCTL_H

#include <stdbool.h>
#include <stdint.h>

#define RSCTL_BUSY_HOLD   0.2            /* seconds after the last application write */
#define RSCTL_BUSY_WINDOW (512u * 1024u) /* bytes in flight while applications write */
#define RSCTL_LAT_FACTOR  1.5
#define RSCTL_ADAPT_S     0.05
#define RSCTL_BURST_S     0.02             /* token bucket depth, in seconds of rate */
#define RSCTL_BURST_MIN   (256.0 * 1024.0) /* ... but at least one resync run */

struct rsctl {
	uint64_t rate_max; /* bytes/s, 0 = unlimited */
	uint64_t rate_min; /* bytes/s kept while applications write */
	uint64_t fill_target;
	bool paused_local, paused_peer;
	double last_app;  /* time of the last application write (-1: none) */
	double busy_rate; /* the adaptive rate while applications write */
	double tokens, tokens_t;
	double lat_idle; /* application latency without a resync (EWMA; 0 unknown) */
	double lat_min;  /* smallest latency seen during resyncs (fallback baseline) */
	double lat_busy; /* application latency during the resync (EWMA) */
	double adapt_t;
};

void rsctl_init(struct rsctl *c, uint64_t rate_max, uint64_t rate_min, uint64_t fill_target);
/* A resync starts: a fresh bucket and a fresh adaptive rate. */
void rsctl_start(struct rsctl *c, double now);
/* An application write was submitted at now. */
void rsctl_app_write(struct rsctl *c, double now);
/* An application write was acknowledged after lat seconds; resyncing: a resync runs. */
void rsctl_app_latency(struct rsctl *c, double now, double lat, bool resyncing);
bool rsctl_busy(const struct rsctl *c, double now);
bool rsctl_paused(const struct rsctl *c);

/*
 * Bytes of resync the source may start now with inflight bytes already in flight (it may start
 * one run more than that, the bucket goes into debt). 0: nothing now; then *retry_s is when to
 * ask again (0: when resync acks arrive, -1: only after a resume).
 */
uint64_t rsctl_allow(struct rsctl *c, double now, uint64_t inflight, double *retry_s);
/* bytes of resync were started. */
void rsctl_consume(struct rsctl *c, uint64_t bytes);
/* The rate in force now (bytes/s; 0: unlimited). */
double rsctl_rate(const struct rsctl *c, double now);

#endif
