/* SPDX-License-Identifier: MIT */
#include "clock.h"

#include <stdio.h>
#include <time.h>

/* Both clocks exist on every system hak runs on; clock_gettime cannot fail for them. */
static struct timespec clock_read(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ts;
}

double clock_mono(void)
{
	struct timespec ts = clock_read(CLOCK_MONOTONIC);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t clock_mono_ms(void)
{
	struct timespec ts = clock_read(CLOCK_MONOTONIC);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_us(void)
{
	struct timespec ts = clock_read(CLOCK_MONOTONIC);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t clock_mono_ns(void)
{
	struct timespec ts = clock_read(CLOCK_MONOTONIC);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t clock_wall_ms(void)
{
	struct timespec ts = clock_read(CLOCK_REALTIME);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t clock_wall_us(void)
{
	struct timespec ts = clock_read(CLOCK_REALTIME);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

size_t clock_format_time(char *out, size_t len, uint64_t wall_ms)
{
	time_t sec = (time_t)(wall_ms / 1000);
	struct tm tm;
	int n;

	if (len == 0)
		return 0;
	out[0] = '\0';
	if (!localtime_r(&sec, &tm))
		return 0;
	long off = tm.tm_gmtoff / 60; /* minutes east of UTC */
	char sign = off < 0 ? '-' : '+';
	if (off < 0)
		off = -off;
	n = snprintf(out, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03u%c%02ld:%02ld", tm.tm_year + 1900,
	             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	             (unsigned)(wall_ms % 1000), sign, off / 60, off % 60);
	if (n < 0 || (size_t)n >= len) {
		out[0] = '\0';
		return 0;
	}
	return (size_t)n;
}
