/* SPDX-License-Identifier: MIT */
#include "sdnotify.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "lib/alive.h"
#include "lib/clock.h"
#include "lib/log.h"

#define STATUS_MAX 1024

/* One per process: systemd watches one main process. Main loop only. */
static struct {
	struct ev_loop *loop;
	bool enabled;
	uint64_t wd_usec; /* 0: no watchdog */
	ev_timer wd_timer, status_timer;
	bool starving; /* the last check found a stuck thread (logged once per episode) */
	char sent[STATUS_MAX], pending[STATUS_MAX];
	double sent_at;
} sn;

/* The least stall a thread may show before it counts as stuck: a loop thread beats every
 * 0.5 s, so anything shorter than three beats would trip on scheduling noise. */
#define ALIVE_LIMIT_MIN_MS 1500

bool sdnotify_may_feed(unsigned stale)
{
	return stale == 0;
}

static void wd_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	char who[ALIVE_NAME_MAX] = "";
	int64_t age = 0, limit = (int64_t)(sn.wd_usec / 2000);
	unsigned stale;

	(void)loop;
	(void)w;
	(void)revents;
	if (limit < ALIVE_LIMIT_MIN_MS)
		limit = ALIVE_LIMIT_MIN_MS;
	stale = alive_check(clock_mono_ms(), limit, who, sizeof(who), &age);
	if (sdnotify_may_feed(stale)) {
		if (sn.starving)
			log_notice("Every watched thread makes progress again; feeding systemd's "
			           "watchdog again.");
		sn.starving = false;
		sd_notify(0, "WATCHDOG=1");
		return;
	}
	if (!sn.starving)
		log_err("Thread %s (and %u more) made no progress for %.1f s (limit %.1f s); no "
		        "longer feeding systemd's watchdog, which restarts hakd when it expires.",
		        who, stale - 1, (double)age / 1000.0, (double)limit / 1000.0);
	sn.starving = true;
	sd_notifyf(0, "STATUS=watchdog: thread %s made no progress for %.1f s", who,
	           (double)age / 1000.0);
}

static void status_send(void)
{
	if (strcmp(sn.pending, sn.sent) == 0)
		return;
	snprintf(sn.sent, sizeof(sn.sent), "%s", sn.pending);
	sn.sent_at = ev_now(sn.loop);
	sd_notifyf(0, "STATUS=%s", sn.sent);
}

static void status_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	status_send();
}

void sdnotify_init(struct ev_loop *loop)
{
	const char *sock = getenv("NOTIFY_SOCKET");
	uint64_t usec = 0;

	sn.loop = loop;
	sn.enabled = sock && *sock;
	ev_timer_init(&sn.status_timer, status_cb, 0.0, 0.0);
	if (!sn.enabled)
		return;
	/* unset_environment 0: the service-group children are no notify clients, but a variable
	 * they see changes nothing; hakd's own re-reads (reload) need it. */
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
		sn.wd_usec = usec;
		ev_timer_init(&sn.wd_timer, wd_cb, 0.0, (double)usec / 2e6);
		ev_timer_again(loop, &sn.wd_timer);
		log_info(
		    "systemd's watchdog expects a sign of life every %.1f s; hakd sends one every "
		    "%.1f s while its threads make progress.",
		    (double)usec / 1e6, (double)usec / 2e6);
	}
}

void sdnotify_shutdown(void)
{
	if (!sn.loop)
		return;
	ev_timer_stop(sn.loop, &sn.wd_timer);
	ev_timer_stop(sn.loop, &sn.status_timer);
}

bool sdnotify_enabled(void)
{
	return sn.enabled;
}

double sdnotify_watchdog_interval(void)
{
	return (double)sn.wd_usec / 1e6;
}

void sdnotify_ready(void)
{
	if (sn.enabled)
		sd_notify(0, "READY=1");
}

void sdnotify_reloading(void)
{
	/* MONOTONIC_USEC: systemd 253 and later match the reload to its own request by it. */
	if (sn.enabled)
		sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%" PRId64, clock_mono_us());
}

void sdnotify_stopping(void)
{
	if (sn.enabled)
		sd_notify(0, "STOPPING=1");
}

void sdnotify_status(const char *text)
{
	double wait;

	if (!sn.enabled)
		return;
	snprintf(sn.pending, sizeof(sn.pending), "%s", text);
	if (strcmp(sn.pending, sn.sent) == 0 || ev_is_active(&sn.status_timer))
		return;
	wait = sn.sent_at + SDNOTIFY_STATUS_INTERVAL - ev_now(sn.loop);
	if (sn.sent_at == 0 || wait <= 0) {
		status_send();
		return;
	}
	ev_timer_set(&sn.status_timer, wait, 0.0);
	ev_timer_start(sn.loop, &sn.status_timer);
}

static size_t append(char *out, size_t len, size_t used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t append(char *out, size_t len, size_t used, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(used < len ? out + used : NULL, used < len ? len - used : 0, fmt, ap);
	va_end(ap);
	return used + (n > 0 ? (size_t)n : 0);
}

size_t sdnotify_status_build(char *out, size_t len, const struct sdnotify_vol *vols, size_t n,
                             const char *cluster, const char *groups, const char *note)
{
	size_t used = 0;

	if (len)
		out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		const char *sep = i ? "; " : "";
		if (vols[i].role)
			used = append(out, len, used, "%s%s: %s %s %s", sep, vols[i].name,
			              vols[i].role, vols[i].disk, vols[i].link);
		else
			used = append(out, len, used, "%s%s: served", sep, vols[i].name);
	}
	if (cluster && *cluster)
		used = append(out, len, used, "%scluster: %s", used ? "; " : "", cluster);
	if (groups && *groups)
		used = append(out, len, used, "%s%s", used ? "; " : "", groups);
	if (note && *note)
		used = append(out, len, used, "%s%s", used ? "; " : "", note);
	return used;
}
