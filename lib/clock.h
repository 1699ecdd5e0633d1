/* SPDX-License-Identifier: MIT */
/*
 * The two clocks hak reads. CLOCK_MONOTONIC measures timeouts, leases and elapsed times: it never
 * jumps when an operator or NTP sets the time. CLOCK_REALTIME stamps what a person or another
 * node reads (log lines, events, incarnations, promotion times). Thread-safe.
 */
#ifndef HAK_CLOCK_H
#define HAK_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Monotonic time in seconds, with nanosecond resolution (timers of libev take doubles). */
double clock_mono(void);
int64_t clock_mono_ms(void);
int64_t clock_mono_us(void);
int64_t clock_mono_ns(void);

/* Wall-clock time since the Unix epoch. */
uint64_t clock_wall_ms(void);
uint64_t clock_wall_us(void);

/*
 * wall_ms as local time in ISO 8601 with milliseconds and the zone's offset,
 * "2026-12-06T19:13:10.123+01:00" (29 characters): the stamp of a log line, readable across
 * midnight and across machines in other zones. Returns the length written, or 0 when len is too
 * small (then out is "").
 */
#define CLOCK_STAMP_LEN 30
size_t clock_format_time(char *out, size_t len, uint64_t wall_ms);

#endif
