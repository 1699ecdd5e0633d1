/* SPDX-License-Identifier: MIT */
/* The status object in Prometheus's text format, and the endpoint serving it: see metrics.h. */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/lathist.h"
#include "lib/log.h"
#include "metrics_http.h"

/* The member at a dotted path ("replication.fencing.frozen") of o, or NULL. */
static json_t *jpath(const json_t *o, const char *path)
{
	char key[64];
	json_t *v = (json_t *)o;

	while (v && *path) {
		size_t n = strcspn(path, ".");
		if (n >= sizeof(key))
			return NULL;
		memcpy(key, path, n);
		key[n] = '\0';
		v = json_object_get(v, key);
		path += n + (path[n] == '.');
	}
	return v;
}

/* A number or a boolean as a double; false when v is neither. */
static bool jnum(const json_t *v, double *out)
{
	if (json_is_number(v))
		*out = json_number_value(v);
	else if (json_is_boolean(v))
		*out = json_is_true(v) ? 1.0 : 0.0;
	else
		return false;
	return isfinite(*out);
}

/* A label value, escaped as the format wants (backslash, quote, newline). */
static void put_label(FILE *f, const char *name, const char *value)
{
	fprintf(f, "%s=\"", name);
	for (const char *p = value ? value : ""; *p; p++) {
		if (*p == '\\' || *p == '"')
			fputc('\\', f);
		if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* The labels every per-volume sample carries: the volume, and the peer where it replicates. */
static void put_volume_labels(FILE *f, const json_t *vol, bool with_peer)
{
	put_label(f, "volume", json_string_value(json_object_get(vol, "name")));
	const char *peer = json_string_value(jpath(vol, "replication.peer"));
	if (with_peer && peer) {
		fputc(',', f);
		put_label(f, "peer", peer);
	}
}

/* The shortest decimal that reads back as v: 0.15 rather than 0.14999999999999999. */
static void put_value(FILE *f, double v)
{
	char num[40];
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(num, sizeof(num), "%.*g", prec, v);
		if (strtod(num, NULL) == v)
			break;
	}
	fprintf(f, " %s\n", num);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One number per volume, at a path of its status object, divided by div (1000: ms to s; a
 * division keeps 86 ms 0.086 s where a product by 1e-3 makes it 0.08600000000000001). */
struct vol_scalar {
	const char *name, *type, *help, *path;
	double div;
	bool peer;         /* a replication metric: labelled with the peer too */
	bool zero_if_none; /* absent from the status means 0 (the resync rate between resyncs) */
	const char *path2; /* added to path's value, if set */
};

static const struct vol_scalar vol_scalars[] = {
    {"hak_volume_size_bytes", "gauge", "Size of the volume as its NBD clients see it.", "size", 1,
     false, false, NULL},
    {"hak_volume_nbd_clients", "gauge", "NBD clients connected to the volume.", "clients", 1, false,
     false, NULL},
    {"hak_volume_in_flight_requests", "gauge", "NBD requests received and not yet answered.",
     "in_flight", 1, false, false, NULL},
    {"hak_volume_read_bytes_total", "counter", "Bytes read by NBD clients.", "bytes.read", 1, false,
     false, NULL},
    {"hak_volume_written_bytes_total", "counter", "Bytes written by NBD clients.", "bytes.write", 1,
     false, false, NULL},
    {"hak_volume_io_errors_total", "counter", "NBD requests answered with an I/O error.",
     "io_errors", 1, false, false, NULL},
    {"hak_volume_out_of_sync_bytes", "gauge",
     "Bytes marked out of sync with the peer in the bitmap.", "replication.out_of_sync_bytes", 1,
     true, false, NULL},
    {"hak_replication_sent_bytes_total", "counter",
     "Bytes of client writes shipped to the peer (resync traffic not included).",
     "replication.shipped_bytes", 1, true, false, NULL},
    {"hak_replication_in_flight_writes", "gauge",
     "Writes and barriers sent to the peer and not yet acknowledged.",
     "replication.in_flight_writes", 1, true, false, NULL},
    {"hak_replication_ping_rtt_seconds", "gauge",
     "Round trip of the last ping on the replication link.", "replication.ping_rtt_ms", 1e3, true,
     false, NULL},
    {"hak_replication_resync_rate_bytes_per_second", "gauge",
     "Rate of the running resync (0 when none runs).", "replication.resync.rate_mbps", 1048576.0,
     true, true, NULL},
    {"hak_replication_resync_remaining_bytes", "gauge",
     "Bytes the running resync still has to bring over (0 when none runs).",
     "replication.resync.left_bytes", 1, true, true, NULL},
    {"hak_replication_resynced_bytes_total", "counter",
     "Bytes brought in sync by resyncs since hakd started.", "replication.bytes_resynced", 1, true,
     false, NULL},
    {"hak_replication_resyncs_completed_total", "counter", "Resyncs completed since hakd started.",
     "replication.resyncs_completed", 1, true, false, NULL},
    {"hak_replication_split_brain", "gauge", "1 while the volume is in a split brain.",
     "replication.split_brain", 1, true, false, NULL},
    {"hak_replication_integrity_errors_total", "counter",
     "Payloads from the peer whose checksum did not match.", "replication.integrity_errors", 1,
     true, false, NULL},
    {"hak_replication_connections_total", "counter",
     "Connections to the peer that completed their handshake since hakd started.",
     "replication.connections", 1, true, false, NULL},
    {"hak_replication_transport_switches_total", "counter",
     "Connections moved onto the preferred transport in place (transport rdma,tcp: TCP to RDMA).",
     "replication.transport_switches", 1, true, false, NULL},
    {"hak_fence_frozen", "gauge",
     "1 while the fence suspends writes (the peer lost and not known Outdated).",
     "replication.fencing.frozen", 1, true, false, NULL},
    {"hak_fence_frozen_writes", "gauge", "Writes suspended by the fence now.",
     "replication.fencing.frozen_writes", 1, true, false, NULL},
    {"hak_fence_frozen_seconds_total", "counter",
     "Time writes spent suspended by the fence, the current freeze included.",
     "replication.fencing.total_ms", 1e3, true, false, "replication.fencing.frozen_ms"},
    {"hak_fences_total", "counter", "Times the fence suspended writes.",
     "replication.fencing.fences", 1, true, false, NULL},
};

static void render_vol_scalar(FILE *f, const json_t *vols, const struct vol_scalar *s)
{
	size_t i;
	json_t *vol;
	bool header = false;

	json_array_foreach(vols, i, vol)
	{
		double v = 0, v2 = 0;
		if (!jnum(jpath(vol, s->path), &v) &&
		    !(s->zero_if_none && jpath(vol, "replication")))
			continue;
		if (s->path2 && jnum(jpath(vol, s->path2), &v2))
			v += v2;
		if (!header)
			family(f, s->name, s->type, s->help);
		header = true;
		fprintf(f, "%s{", s->name);
		put_volume_labels(f, vol, s->peer);
		fputc('}', f);
		put_value(f, v / s->div);
	}
}

/*
 * A state set: one sample per state, 1 for the current one, so a query can compare or alert on
 * a state without knowing the others. A state the list does not know (a newer hakd's) is still
 * shown, as 1.
 */
struct state_set {
	const char *name, *help, *path, *label;
	bool peer;
	const char *const *states;
};

static const char *const role_states[] = {"primary", "secondary", "standalone", NULL};
static const char *const disk_states[] = {"UpToDate", "Outdated", "Inconsistent",
                                          "Diskless", "Failed",   NULL};
static const char *const link_states[] = {"StandAlone", "Connecting", "Connected",
                                          "SyncSource", "SyncTarget", NULL};

static const struct state_set state_sets[] = {
    {"hak_volume_role", "The volume's role: 1 for the current one.", "role", "role", false,
     role_states},
    {"hak_volume_disk_state", "The local disk's state: 1 for the current one.", "replication.disk",
     "state", true, disk_states},
    {"hak_replication_connection_state",
     "The replication connection's state: 1 for the current one.", "replication.link", "state",
     true, link_states},
};

static void render_state_set(FILE *f, const json_t *vols, const struct state_set *s)
{
	size_t i;
	json_t *vol;
	bool header = false;

	json_array_foreach(vols, i, vol)
	{
		const char *cur = json_string_value(jpath(vol, s->path));
		bool known = false;
		if (!cur)
			continue;
		if (!header)
			family(f, s->name, "gauge", s->help);
		header = true;
		for (const char *const *st = s->states;; st++) {
			const char *name = *st ? *st : cur;
			if (!*st && known)
				break;
			bool on = strcmp(name, cur) == 0;
			known |= on;
			fprintf(f, "%s{", s->name);
			put_volume_labels(f, vol, s->peer);
			fputc(',', f);
			put_label(f, s->label, name);
			fprintf(f, "} %d\n", on ? 1 : 0);
			if (!*st)
				break;
		}
	}
}

/* One latency histogram (statjson_lathist's shape) as _bucket, _sum and _count lines. */
static void render_hist(FILE *f, const char *name, const json_t *vol, bool peer, const char *op,
                        const json_t *h)
{
	json_t *buckets = json_object_get(h, "buckets");
	double count = 0, sum_us = 0, cum = 0;
	size_t k;
	json_t *b;

	jnum(json_object_get(h, "count"), &count);
	jnum(json_object_get(h, "sum_us"), &sum_us);
	for (unsigned i = 0; i + 1 < LATHIST_BUCKETS; i++) {
		double bound = (double)lathist_bound_us(i);
		json_array_foreach(buckets, k, b)
		{
			double bb, n;
			if (jnum(json_array_get(b, 0), &bb) && bb == bound &&
			    jnum(json_array_get(b, 1), &n))
				cum += n;
		}
		fprintf(f, "%s_bucket{", name);
		put_volume_labels(f, vol, peer);
		fprintf(f, ",op=\"%s\",le=\"%.9g\"}", op, bound / 1e6);
		put_value(f, cum);
	}
	fprintf(f, "%s_bucket{", name);
	put_volume_labels(f, vol, peer);
	fprintf(f, ",op=\"%s\",le=\"+Inf\"}", op);
	put_value(f, count);
	fprintf(f, "%s_sum{", name);
	put_volume_labels(f, vol, peer);
	fprintf(f, ",op=\"%s\"}", op);
	put_value(f, sum_us / 1e6);
	fprintf(f, "%s_count{", name);
	put_volume_labels(f, vol, peer);
	fprintf(f, ",op=\"%s\"}", op);
	put_value(f, count);
}

struct hist_family {
	const char *name, *help, *path; /* path: "%s" stands for the op */
	bool peer;
};

static const struct hist_family hist_families[] = {
    {"hak_volume_request_duration_seconds",
     "Writes and flushes from arrival to the answer to the NBD client.", "latency.%s.total", false},
    {"hak_volume_local_duration_seconds",
     "Writes and flushes from arrival until the local disk finished them.", "latency.%s.local",
     false},
    {"hak_volume_peer_duration_seconds",
     "Writes and flushes from arrival until the peer acknowledged them (or was lost).",
     "latency.%s.peer", false},
    {"hak_replication_round_trip_seconds",
     "Replication round trip: a write sent until the peer's write ack, a flush's barrier "
     "sent until the peer's barrier ack.",
     "replication.round_trip.%s", true},
};

static void render_hist_family(FILE *f, const json_t *vols, const struct hist_family *hf)
{
	static const char *const ops[] = {"write", "flush"};
	size_t i;
	json_t *vol;
	bool header = false;
	char path[64];

	json_array_foreach(vols, i, vol)
	{
		for (size_t k = 0; k < 2; k++) {
			snprintf(path, sizeof(path), hf->path, ops[k]);
			json_t *h = jpath(vol, path);
			if (!json_is_object(h))
				continue;
			if (!header)
				family(f, hf->name, "histogram", hf->help);
			header = true;
			render_hist(f, hf->name, vol, hf->peer, ops[k], h);
		}
	}
}

static void render_requests(FILE *f, const json_t *vols)
{
	size_t i;
	json_t *vol;
	bool header = false;

	json_array_foreach(vols, i, vol)
	{
		const char *op;
		json_t *n;
		json_object_foreach(json_object_get(vol, "requests"), op, n)
		{
			double v;
			if (!jnum(n, &v))
				continue;
			if (!header)
				family(f, "hak_volume_requests_total", "counter",
				       "NBD requests received, by operation.");
			header = true;
			fputs("hak_volume_requests_total{", f);
			put_volume_labels(f, vol, false);
			fputc(',', f);
			put_label(f, "op", op);
			fputc('}', f);
			put_value(f, v);
		}
	}
}

/* The cluster manager and its heartbeat paths (status "cluster", when configured). */
static void render_cluster(FILE *f, const json_t *cl)
{
	static const struct {
		const char *name, *type, *help, *key;
	} paths[] = {
	    {"hak_heartbeat_path_up", "gauge", "1 while the peer is heard on the heartbeat path.",
	     "alive"},
	    {"hak_heartbeat_path_last_heard_seconds", "gauge",
	     "Time since the last valid heartbeat from the peer on the path.", "last_heard_ms"},
	    {"hak_heartbeat_path_rtt_seconds", "gauge",
	     "The path's last measured round trip (a heartbeat and the peer's echo of it).",
	     "rtt_us"},
	    {"hak_heartbeat_received_total", "counter", "Valid heartbeats received on the path.",
	     "rx_ok"},
	    {"hak_heartbeat_rejected_total", "counter",
	     "Heartbeat datagrams refused on the path (bad MAC or format, replay, stranger).",
	     "rx_rejected"},
	    {"hak_heartbeat_sent_total", "counter", "Heartbeats sent on the path.", "tx_ok"},
	    {"hak_heartbeat_send_errors_total", "counter", "Heartbeats the path failed to send.",
	     "tx_err"},
	};
	double v;
	size_t i;
	json_t *p;

	for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++) {
		bool header = false;
		json_array_foreach(json_object_get(cl, "paths"), i, p)
		{
			if (!jnum(json_object_get(p, paths[k].key), &v) || v < 0)
				continue; /* never heard: no age to tell */
			if (!header)
				family(f, paths[k].name, paths[k].type, paths[k].help);
			header = true;
			fprintf(f, "%s{path=\"%zu\"}", paths[k].name, i);
			put_value(f, strcmp(paths[k].key, "last_heard_ms") == 0 ? v / 1e3
			             : strcmp(paths[k].key, "rtt_us") == 0      ? v / 1e6
			                                                        : v);
		}
	}
	if (jnum(jpath(cl, "peer.alive"), &v)) {
		family(f, "hak_cluster_peer_up", "gauge",
		       "1 while the peer is heard on at least one heartbeat path.");
		fputs("hak_cluster_peer_up", f);
		put_value(f, v);
	}
	if (jnum(json_object_get(cl, "frozen"), &v)) {
		family(f, "hak_cluster_frozen", "gauge",
		       "1 while the cluster manager holds this node's writes.");
		fputs("hak_cluster_frozen", f);
		put_value(f, v);
	}
	if (jnum(json_object_get(cl, "promotions"), &v)) {
		family(f, "hak_cluster_promotions_total", "counter",
		       "Times the cluster manager made this node primary: failovers, switchovers, "
		       "its first promotion.");
		fputs("hak_cluster_promotions_total", f);
		put_value(f, v);
	}
	if (jnum(json_object_get(cl, "decisions"), &v)) {
		family(f, "hak_cluster_decisions_total", "counter",
		       "Decisions the cluster manager evaluated.");
		fputs("hak_cluster_decisions_total", f);
		put_value(f, v);
	}
}

char *metrics_render(const json_t *status, double start_time, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	json_t *vols = json_object_get(status, "volumes");

	if (!f)
		return NULL;
	family(f, "hak_build_info", "gauge", "The running hakd's version, as a label.");
	fputs("hak_build_info{", f);
	put_label(f, "version", json_string_value(json_object_get(status, "version")));
	fputs("} 1\n", f);
	family(f, "hak_process_start_time_seconds", "gauge",
	       "When hakd started, in seconds since the epoch.");
	fputs("hak_process_start_time_seconds", f);
	put_value(f, start_time);
	for (size_t k = 0; k < sizeof(state_sets) / sizeof(state_sets[0]); k++)
		render_state_set(f, vols, &state_sets[k]);
	render_requests(f, vols);
	for (size_t k = 0; k < sizeof(vol_scalars) / sizeof(vol_scalars[0]); k++)
		render_vol_scalar(f, vols, &vol_scalars[k]);
	for (size_t k = 0; k < sizeof(hist_families) / sizeof(hist_families[0]); k++)
		render_hist_family(f, vols, &hist_families[k]);
	if (json_is_object(json_object_get(status, "cluster")))
		render_cluster(f, json_object_get(status, "cluster"));
	if (fclose(f) != 0) {
		free(buf);
		errno = ENOMEM;
		return NULL;
	}
	return buf;
}

double metrics_process_start_time(void)
{
	char stat[1024], line[256];
	unsigned long long start_ticks = 0, btime = 0;
	double t = 0;
	FILE *f = fopen("/proc/self/stat", "re");

	if (!f)
		return 0;
	size_t n = fread(stat, 1, sizeof(stat) - 1, f);
	fclose(f);
	stat[n] = '\0';
	/* the fields after the command name, which may hold anything up to its last ')' */
	const char *p = strrchr(stat, ')');
	/* starttime is field 22; the first after ')' is field 3 */
	for (int field = 3; p && field <= 22; field++) {
		p = strchr(p + 1, ' ');
		if (p && field == 22)
			start_ticks = strtoull(p + 1, NULL, 10);
	}
	f = fopen("/proc/stat", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %llu", &btime) == 1)
			break;
	if (f)
		fclose(f);
	long hz = sysconf(_SC_CLK_TCK);
	if (btime && start_ticks && hz > 0)
		t = (double)btime + (double)start_ticks / (double)hz;
	return t;
}

struct metrics {
	struct mhttp_server *http;
	metrics_status_fn status;
	void *ctx;
	double start_time;
};

static char *metrics_body(void *ctx, size_t *len)
{
	struct metrics *m = ctx;
	json_t *st = m->status(m->ctx);
	char *body = NULL;

	if (st)
		body = metrics_render(st, m->start_time, len);
	if (!body)
		log_warn("A metrics scrape failed: the status could not be built or rendered (%s).",
		         strerror(errno ? errno : ENOMEM));
	json_decref(st);
	return body;
}

int metrics_start(struct ev_loop *loop, const char *addr, metrics_status_fn status, void *ctx,
                  struct metrics **out, char *err, size_t errlen)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (!m) {
		snprintf(err, errlen, "Out of memory starting the metrics endpoint on %s.", addr);
		return -1;
	}
	m->status = status;
	m->ctx = ctx;
	m->start_time = metrics_process_start_time();
	if (mhttp_server_start(loop, addr, metrics_body, m, &m->http, err, errlen) < 0) {
		int e = errno;
		free(m);
		errno = e;
		return -1;
	}
	log_info("Serving Prometheus metrics on http://%s/metrics.", addr);
	*out = m;
	return 0;
}

void metrics_stop(struct metrics *m)
{
	if (!m)
		return;
	mhttp_server_stop(m->http);
	free(m);
}
