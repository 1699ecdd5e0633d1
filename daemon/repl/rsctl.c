/* SPDX-License-Identifier: MIT */
/* Resync rate controller (see rsctl.h). */
#include "rsctl.h"

#include <string.h>

void rsctl_init(struct rsctl *c, uint64_t rate_max, uint64_t rate_min, uint64_t fill_target)
{
	memset(c, 0, sizeof(*c));
	c->rate_max = rate_max;
	c->rate_min = rate_max && rate_min > rate_max ? rate_max : rate_min;
	c->fill_target = fill_target ? fill_target : RSCTL_BUSY_WINDOW;
	c->last_app = -1;
	c->busy_rate = (double)c->rate_min;
}

void rsctl_start(struct rsctl *c, double now)
{
	c->busy_rate = (double)c->rate_min;
	c->tokens = 0;
	c->tokens_t = now;
	c->lat_min = 0;
	c->lat_busy = 0;
	c->adapt_t = now;
}

void rsctl_app_write(struct rsctl *c, double now)
{
	c->last_app = now;
}

bool rsctl_busy(const struct rsctl *c, double now)
{
	return c->last_app >= 0 && now - c->last_app < RSCTL_BUSY_HOLD;
}

bool rsctl_paused(const struct rsctl *c)
{
	return c->paused_local || c->paused_peer;
}

static double rate_cap(const struct rsctl *c)
{
	return c->rate_max ? (double)c->rate_max : 1e15;
}

void rsctl_app_latency(struct rsctl *c, double now, double lat, bool resyncing)
{
	if (lat <= 0)
		return;
	if (!resyncing) {
		c->lat_idle = c->lat_idle ? c->lat_idle * 0.9 + lat * 0.1 : lat;
		return;
	}
	if (!c->lat_min || lat < c->lat_min)
		c->lat_min = lat;
	c->lat_busy = c->lat_busy ? c->lat_busy * 0.7 + lat * 0.3 : lat;
	if (now - c->adapt_t < RSCTL_ADAPT_S)
		return;
	c->adapt_t = now;
	double base = c->lat_idle ? c->lat_idle : c->lat_min;
	if (c->lat_busy > RSCTL_LAT_FACTOR * base)
		c->busy_rate *= 2.0 / 3.0;
	else
		c->busy_rate = c->busy_rate * 1.125 +
		               (c->rate_min ? (double)c->rate_min : RSCTL_BURST_MIN) * 0.125;
	if (c->busy_rate < (double)c->rate_min)
		c->busy_rate = (double)c->rate_min;
	if (c->busy_rate > rate_cap(c))
		c->busy_rate = rate_cap(c);
}

double rsctl_rate(const struct rsctl *c, double now)
{
	if (rsctl_busy(c, now))
		return c->busy_rate;
	return (double)c->rate_max;
}

uint64_t rsctl_allow(struct rsctl *c, double now, uint64_t inflight, double *retry_s)
{
	bool busy = rsctl_busy(c, now);
	uint64_t window =
	    busy && c->fill_target > RSCTL_BUSY_WINDOW ? RSCTL_BUSY_WINDOW : c->fill_target;
	double rate = rsctl_rate(c, now);

	*retry_s = 0;
	if (rsctl_paused(c)) {
		*retry_s = -1;
		return 0;
	}
	if (inflight >= window)
		return 0;
	if (!busy && rate <= 0) { /* unlimited */
		c->tokens = 0;
		c->tokens_t = now;
		return window - inflight;
	}
	if (rate <= 0) { /* applications write and resync-rate-min is 0: wait for a lull */
		*retry_s = RSCTL_BUSY_HOLD / 4;
		return 0;
	}
	double depth =
	    rate * RSCTL_BURST_S < RSCTL_BURST_MIN ? RSCTL_BURST_MIN : rate * RSCTL_BURST_S;
	if (now > c->tokens_t)
		c->tokens += rate * (now - c->tokens_t);
	c->tokens_t = now;
	if (c->tokens > depth)
		c->tokens = depth;
	if (c->tokens <= 0) {
		*retry_s = -c->tokens / rate + 0.001;
		return 0;
	}
	uint64_t allow = window - inflight;
	return (double)allow > c->tokens ? (uint64_t)c->tokens + 1 : allow;
}

void rsctl_consume(struct rsctl *c, uint64_t bytes)
{
	c->tokens -= (double)bytes;
}
