/* SPDX-License-Identifier: MIT */
#include "waitsync.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "lib/clock.h"

#define WS_POLL_S     0.25 /* between two status requests */
#define WS_CALL_MS    5000 /* the longest one status request may take */
#define WS_LINE_S     5.0  /* between two plain progress lines (not a terminal) */
#define WS_STUCK_S    2.0  /* a no-chance state must last this long: connecting passes through */
#define WS_BAR_WIDTH  24
#define WS_REASON_MAX 320

/* What one status poll says about the volumes waited for. */
struct ws_sum {
	size_t n_vols, n_synced;
	uint64_t oos;               /* out-of-sync bytes, every volume */
	uint64_t rs_total, rs_left; /* of the resyncs running */
	double rate_mbps, eta_s;    /* eta_s < 0: unknown */
	bool resync;                /* a resync runs on one of them */
	bool paused;                /* one of those is paused */
	char first[128];            /* "db: SyncSource, peer UpToDate": the first one not in sync */
	char names[256];            /* "db, wal": the volumes */
	char nochance[WS_REASON_MAX]; /* why one cannot get in sync without the operator */
	bool static_nochance;         /* ...and that will not change by waiting (no peer) */
};

static const char *jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "unknown";
}

/* Why a volume cannot get in sync by waiting, into why; false when it can. */
static bool ws_nochance(const char *name, json_t *r, char *why, size_t len)
{
	const char *link = jstr(r, "link"), *disk = jstr(r, "disk");
	const char *pdisk = json_string_value(json_object_get(r, "peer_disk"));

	if (json_is_true(json_object_get(r, "split_brain")))
		snprintf(why, len,
		         "volume %s is in split brain; resolve it with 'hakctl resolve %s "
		         "--discard-local' on the node whose changes are dropped",
		         name, name);
	else if (strcmp(link, "StandAlone") == 0)
		snprintf(why, len,
		         "volume %s is StandAlone (disconnected); it connects again after "
		         "'hakctl connect %s'",
		         name, name);
	else if (strcmp(disk, "Diskless") == 0 || strcmp(disk, "Failed") == 0)
		snprintf(why, len,
		         "the local disk of volume %s is %s; 'hakctl attach %s' takes it back",
		         name, disk, name);
	else if (strcmp(link, "Connected") == 0 && strcmp(disk, "UpToDate") != 0 && pdisk &&
	         strcmp(pdisk, "UpToDate") != 0)
		snprintf(why, len,
		         "neither copy of volume %s is UpToDate (%s here, %s on the peer); promote "
		         "the reference copy with 'hakctl primary %s --force'",
		         name, disk, pdisk, name);
	else
		return false;
	return true;
}

/* Adds volume v to the sum. */
static void ws_add(struct ws_sum *s, json_t *v)
{
	const char *name = jstr(v, "name");
	json_t *r = json_object_get(v, "replication"), *rs;
	size_t used = strlen(s->names);

	snprintf(s->names + used, sizeof(s->names) - used, "%s%s", used ? ", " : "", name);
	s->n_vols++;
	if (!r) {
		snprintf(s->nochance, sizeof(s->nochance),
		         "volume %s has no peer (the configuration has no node sections): there is "
		         "nothing to sync",
		         name);
		s->static_nochance = true;
		return;
	}
	uint64_t oos = (uint64_t)json_integer_value(json_object_get(r, "out_of_sync_bytes"));
	const char *pdisk = json_string_value(json_object_get(r, "peer_disk"));
	s->oos += oos;
	if (strcmp(jstr(r, "link"), "Connected") == 0 && strcmp(jstr(r, "disk"), "UpToDate") == 0 &&
	    pdisk && strcmp(pdisk, "UpToDate") == 0 && oos == 0) {
		s->n_synced++;
		return;
	}
	if (!s->first[0])
		snprintf(s->first, sizeof(s->first), "%s: %s, disk %s, peer %s", name,
		         jstr(r, "link"), jstr(r, "disk"), pdisk ? pdisk : "unknown");
	if (!s->nochance[0])
		ws_nochance(name, r, s->nochance, sizeof(s->nochance));
	if ((rs = json_object_get(r, "resync")) != NULL) {
		double eta = json_real_value(json_object_get(rs, "eta_s"));
		s->resync = true;
		s->paused |= json_is_true(json_object_get(rs, "paused"));
		s->rs_total += (uint64_t)json_integer_value(json_object_get(rs, "total_bytes"));
		s->rs_left += (uint64_t)json_integer_value(json_object_get(rs, "left_bytes"));
		s->rate_mbps += json_real_value(json_object_get(rs, "rate_mbps"));
		if (eta < 0 || s->eta_s < 0)
			s->eta_s = -1;
		else if (eta > s->eta_s)
			s->eta_s = eta;
	}
}

/* One status request, summed over the volume asked for (or every volume). 0 or an exit code. */
static int ws_poll(const char *control, const char *volume, struct ws_sum *s)
{
	json_t *req = json_pack("{s:s}", "cmd", "status"), *resp, *v;
	char served[256] = "";
	int rc;
	size_t i;

	memset(s, 0, sizeof(*s));
	resp = ctl_call_timeout(control, req, WS_CALL_MS, &rc);
	json_decref(req);
	if (!resp)
		return rc;
	json_array_foreach(json_object_get(resp, "volumes"), i, v)
	{
		const char *name = jstr(v, "name");
		size_t used = strlen(served);
		snprintf(served + used, sizeof(served) - used, "%s%s", used ? ", " : "", name);
		if (!volume || strcmp(volume, name) == 0)
			ws_add(s, v);
	}
	json_decref(resp);
	if (s->n_vols == 0) {
		fprintf(stderr, "hakctl wait-sync: hakd serves no volume%s%s; it serves: %s.\n",
		        volume ? " named " : "s", volume ? volume : "",
		        served[0] ? served : "none");
		return EXIT_USAGE;
	}
	return 0;
}

static double ws_percent(const struct ws_sum *s)
{
	if (!s->rs_total)
		return 0.0;
	uint64_t left = s->rs_left < s->rs_total ? s->rs_left : s->rs_total;
	return 100.0 * (double)(s->rs_total - left) / (double)s->rs_total;
}

/* "41.2 MiB/s, ETA 3 s" or "paused" */
static void ws_rate(const struct ws_sum *s, char *out, size_t len)
{
	if (s->paused)
		snprintf(out, len, "paused");
	else if (s->eta_s < 0)
		snprintf(out, len, "%.1f MiB/s, ETA unknown", s->rate_mbps);
	else
		snprintf(out, len, "%.1f MiB/s, ETA %.0f s", s->rate_mbps, s->eta_s);
}

/* The progress bar, redrawn in place on a terminal. */
static void ws_draw_tty(const struct ws_sum *s)
{
	char bar[WS_BAR_WIDTH + 1], rate[64], oos[32];
	double pct = ws_percent(s);
	int fill = s->resync ? (int)(pct * WS_BAR_WIDTH / 100.0) : 0;

	for (int i = 0; i < WS_BAR_WIDTH; i++)
		bar[i] = i < fill ? '#' : '-';
	bar[WS_BAR_WIDTH] = '\0';
	ctl_bytes_text(s->oos, 1, oos, sizeof(oos));
	ws_rate(s, rate, sizeof(rate));
	if (s->resync)
		printf("\r[%s] %5.1f%%  %s  %s out of sync  (%s)\033[K", bar, pct, rate, oos,
		       s->first);
	else
		printf("\r[%s]  waiting: %s, %s out of sync\033[K", bar, s->first, oos);
	fflush(stdout);
}

/* A plain progress line, for a pipe or a file. */
static void ws_print_line(const struct ws_sum *s)
{
	char rate[64], oos[32];

	ctl_bytes_text(s->oos, 1, oos, sizeof(oos));
	ws_rate(s, rate, sizeof(rate));
	if (s->resync)
		printf("wait-sync: %.1f%% resynced, %s, %s out of sync (%s)\n", ws_percent(s), rate,
		       oos, s->first);
	else
		printf("wait-sync: waiting, %s out of sync (%s)\n", oos, s->first);
	fflush(stdout);
}

static int ws_parse(int argc, char **argv, const char **volume, double *timeout)
{
	for (int i = 1; i < argc; i++) {
		char *end = NULL;
		if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
			*timeout = strtod(argv[++i], &end);
			if (!end || *end || end == argv[i] || !(*timeout > 0) || *timeout > 1e7) {
				fprintf(
				    stderr,
				    "hakctl wait-sync: bad timeout '%s'; give seconds, like 600.\n",
				    argv[i]);
				return EXIT_USAGE;
			}
		} else if (argv[i][0] != '-' && !*volume) {
			*volume = argv[i];
		} else {
			fprintf(stderr,
			        "hakctl wait-sync: unexpected argument '%s'; use 'hakctl wait-sync "
			        "[VOLUME] [--timeout S]'.\n",
			        argv[i]);
			return EXIT_USAGE;
		}
	}
	return 0;
}

/* Ends the wait: the bar's line is finished first so the message starts on its own. */
static int ws_end(bool tty, bool drawn, int rc, const char *fmt, const char *a, double t)
{
	if (tty && drawn)
		printf("\n");
	fflush(stdout);
	if (fmt) /* NULL: the reason is printed already */
		fprintf(rc ? stderr : stdout, fmt, a, t);
	return rc;
}

int waitsync_run(const char *control, int argc, char **argv)
{
	const char *volume = NULL;
	double timeout = 0, t0 = clock_mono(), stuck_since = -1, last_line = -1e9;
	bool tty = isatty(STDOUT_FILENO), drawn = false;
	struct ws_sum s;
	int rc = ws_parse(argc, argv, &volume, &timeout);

	if (rc)
		return rc;
	for (;;) {
		double now;
		if ((rc = ws_poll(control, volume, &s)) == EXIT_USAGE)
			return ws_end(tty, drawn, rc, NULL, NULL, 0);
		if (rc)
			return ws_end(tty, drawn, rc,
			              "hakctl wait-sync: gave up on %s after %.1f s.\n",
			              volume ? volume : "the volumes", clock_mono() - t0);
		now = clock_mono();
		if (s.n_synced == s.n_vols)
			return ws_end(tty, drawn, 0, "in sync: %s (after %.1f s)\n", s.names,
			              now - t0);
		if (s.nochance[0] && stuck_since < 0)
			stuck_since = now;
		else if (!s.nochance[0])
			stuck_since = -1;
		if (s.nochance[0] && (s.static_nochance || now - stuck_since >= WS_STUCK_S))
			return ws_end(tty, drawn, EXIT_NOSYNC,
			              "hakctl wait-sync: %s (after %.1f s).\n", s.nochance,
			              now - t0);
		if (timeout > 0 && now - t0 >= timeout) {
			char why[WS_REASON_MAX + 64];
			snprintf(why, sizeof(why), "not in sync after %.0f s: %s", timeout,
			         s.first);
			return ws_end(tty, drawn, EXIT_TIMEOUT, "hakctl wait-sync: %s (%.1f s).\n",
			              why, now - t0);
		}
		if (tty) {
			ws_draw_tty(&s);
			drawn = true;
		} else if (now - last_line >= WS_LINE_S) {
			ws_print_line(&s);
			last_line = now;
		}
		double left = timeout > 0 ? timeout - (clock_mono() - t0) : WS_POLL_S;
		double nap = left < WS_POLL_S ? (left > 0 ? left : 0) : WS_POLL_S;
		struct timespec ts = {(time_t)nap, (long)((nap - (double)(time_t)nap) * 1e9)};
		nanosleep(&ts, NULL);
	}
}
