/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the metrics exposition: a status object (the shape `hakctl status --json`
 * prints, here built by the same statjson_lathist the daemon uses) rendered to exact lines, the
 * histograms cumulative and consistent, the state sets complete, and the names the replication
 * module gives its states all known to the state sets.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl/metrics.h"
#include "ctl/statjson.h"
#include "lib/lathist.h"
#include "repl/repl.h"

static json_t *volume(const char *name, const char *role, bool replicated)
{
	struct lathist w, f, rt;
	memset(&w, 0, sizeof(w));
	memset(&f, 0, sizeof(f));
	memset(&rt, 0, sizeof(rt));
	lathist_add(&w, 3000);       /* 3 us: le 4e-06 */
	lathist_add(&w, 100000);     /* 100 us: le 0.000128 */
	lathist_add(&w, 100000);     /* again */
	lathist_add(&w, 9000000000); /* 9 s: the open bucket */
	lathist_add(&rt, 60000);     /* 60 us */
	json_t *v = json_pack("{s:s, s:s, s:I, s:i, s:I, s:{s:I, s:I}, s:{s:I, s:I, s:I}, s:I}",
	                      "name", name, "role", role, "size", (json_int_t)1048576, "clients", 2,
	                      "in_flight", (json_int_t)0, "bytes", "read", (json_int_t)512, "write",
	                      (json_int_t)4096, "requests", "read", (json_int_t)1, "write",
	                      (json_int_t)4, "flush", (json_int_t)0, "io_errors", (json_int_t)0);
	json_object_set_new(v, "latency",
	                    json_pack("{s:{s:o, s:o, s:o}, s:{s:o, s:o, s:o}}", "write", "total",
	                              statjson_lathist(&w), "local", statjson_lathist(&w), "peer",
	                              statjson_lathist(&w), "flush", "total", statjson_lathist(&f),
	                              "local", statjson_lathist(&f), "peer", statjson_lathist(&f)));
	if (replicated)
		json_object_set_new(
		    v, "replication",
		    json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:f, s:I, s:i, s:b, s:I, s:I, "
		              "s:{s:b, s:i, s:I, s:I, s:I}, s:{s:o, s:o}}",
		              "role", role, "disk", "UpToDate", "link", "SyncSource", "peer",
		              "be\"ta", "out_of_sync_bytes", (json_int_t)65536, "shipped_bytes",
		              (json_int_t)8192, "ping_rtt_ms", 0.25, "bytes_resynced",
		              (json_int_t)1000, "in_flight_writes", 1, "split_brain", 0,
		              "resyncs_completed", (json_int_t)2, "integrity_errors", (json_int_t)0,
		              "fencing", "frozen", 1, "frozen_writes", 3, "frozen_ms",
		              (json_int_t)1500, "total_ms", (json_int_t)2000, "fences",
		              (json_int_t)2, "round_trip", "write", statjson_lathist(&rt), "flush",
		              statjson_lathist(&f)));
	ck_assert_ptr_nonnull(v);
	return v;
}

static char *render(json_t *st)
{
	size_t len;
	char *txt = metrics_render(st, 1700000000.5, &len);
	ck_assert_ptr_nonnull(txt);
	ck_assert_uint_eq(strlen(txt), len);
	json_decref(st);
	return txt;
}

#define HAS(txt, line)                                                                             \
	ck_assert_msg(strstr((txt), line "\n") != NULL, "missing line: %s\n--- in ---\n%s",        \
	              (line), (txt))

START_TEST(render_volume)
{
	json_t *vols = json_pack("[o, o]", volume("db", "primary", true),
	                         volume("scratch", "standalone", false));
	char *t = render(json_pack("{s:s, s:o}", "version", "0.9.1", "volumes", vols));
	HAS(t, "hak_build_info{version=\"0.9.1\"} 1");
	HAS(t, "hak_process_start_time_seconds 1700000000.5");
	HAS(t, "# TYPE hak_volume_role gauge");
	HAS(t, "hak_volume_role{volume=\"db\",role=\"primary\"} 1");
	HAS(t, "hak_volume_role{volume=\"db\",role=\"secondary\"} 0");
	HAS(t, "hak_volume_role{volume=\"scratch\",role=\"standalone\"} 1");
	HAS(t, "hak_volume_disk_state{volume=\"db\",peer=\"be\\\"ta\",state=\"UpToDate\"} 1");
	HAS(t, "hak_volume_disk_state{volume=\"db\",peer=\"be\\\"ta\",state=\"Failed\"} 0");
	HAS(t, "hak_replication_connection_state{volume=\"db\",peer=\"be\\\"ta\",state="
	       "\"SyncSource\"} 1");
	ck_assert_ptr_null(strstr(t, "hak_volume_disk_state{volume=\"scratch\""));
	HAS(t, "hak_volume_requests_total{volume=\"db\",op=\"write\"} 4");
	HAS(t, "hak_volume_written_bytes_total{volume=\"scratch\"} 4096");
	HAS(t, "hak_volume_out_of_sync_bytes{volume=\"db\",peer=\"be\\\"ta\"} 65536");
	HAS(t, "hak_replication_sent_bytes_total{volume=\"db\",peer=\"be\\\"ta\"} 8192");
	HAS(t, "hak_replication_ping_rtt_seconds{volume=\"db\",peer=\"be\\\"ta\"} 0.00025");
	/* no resync object: a replicated volume's rate is 0, an unreplicated one has none */
	HAS(t, "hak_replication_resync_rate_bytes_per_second{volume=\"db\",peer=\"be\\\"ta\"} 0");
	ck_assert_ptr_null(strstr(t, "hak_replication_resync_rate_bytes_per_second{volume=\"scr"));
	HAS(t, "hak_fence_frozen{volume=\"db\",peer=\"be\\\"ta\"} 1");
	HAS(t, "hak_fence_frozen_writes{volume=\"db\",peer=\"be\\\"ta\"} 3");
	HAS(t, "hak_fence_frozen_seconds_total{volume=\"db\",peer=\"be\\\"ta\"} 3.5");
	/* the histogram: cumulative, +Inf and _count the total, _sum in seconds */
	HAS(t, "# TYPE hak_volume_request_duration_seconds histogram");
	HAS(t, "hak_volume_request_duration_seconds_bucket{volume=\"db\",op=\"write\",le=\"2e-06\"}"
	       " 0");
	HAS(t, "hak_volume_request_duration_seconds_bucket{volume=\"db\",op=\"write\",le=\"4e-06\"}"
	       " 1");
	HAS(t, "hak_volume_request_duration_seconds_bucket{volume=\"db\",op=\"write\",le=\"6.4e-"
	       "05\"} 1");
	HAS(t, "hak_volume_request_duration_seconds_bucket{volume=\"db\",op=\"write\",le=\"0."
	       "000128\"} 3");
	HAS(t, "hak_volume_request_duration_seconds_bucket{volume=\"db\",op=\"write\",le=\"4."
	       "194304\"} 3");
	HAS(t,
	    "hak_volume_request_duration_seconds_bucket{volume=\"db\",op=\"write\",le=\"+Inf\"} 4");
	HAS(t, "hak_volume_request_duration_seconds_count{volume=\"db\",op=\"write\"} 4");
	HAS(t, "hak_volume_request_duration_seconds_sum{volume=\"db\",op=\"write\"} 9.000203");
	HAS(t, "hak_volume_request_duration_seconds_count{volume=\"scratch\",op=\"flush\"} 0");
	HAS(t, "hak_replication_round_trip_seconds_bucket{volume=\"db\",peer=\"be\\\"ta\",op="
	       "\"write\",le=\"6.4e-05\"} 1");
	HAS(t, "hak_replication_round_trip_seconds_bucket{volume=\"db\",peer=\"be\\\"ta\",op="
	       "\"write\",le=\"3.2e-05\"} 0");
	/* one HELP and TYPE per family, before all its samples */
	char *first = strstr(t, "# TYPE hak_volume_role gauge");
	ck_assert_ptr_null(strstr(first + 1, "# TYPE hak_volume_role gauge"));
	ck_assert_ptr_null(strstr(t, "hak_heartbeat"));
	free(t);
}
END_TEST

START_TEST(render_cluster)
{
	json_t *st = json_pack(
	    "{s:s, s:[], s:{s:[{s:i, s:b, s:I, s:I, s:I, s:I, s:I}, {s:i, s:b, s:I, s:I, s:I, s:I, "
	    "s:I}], s:{s:b}, s:b, s:I, s:I}}",
	    "version", "1", "volumes", "cluster", "paths", "path", 0, "alive", 1, "last_heard_ms",
	    (json_int_t)150, "rx_ok", (json_int_t)40, "rx_rejected", (json_int_t)1, "tx_ok",
	    (json_int_t)41, "tx_err", (json_int_t)0, "path", 1, "alive", 0, "last_heard_ms",
	    (json_int_t)-1, "rx_ok", (json_int_t)0, "rx_rejected", (json_int_t)0, "tx_ok",
	    (json_int_t)41, "tx_err", (json_int_t)2, "peer", "alive", 1, "frozen", 0, "promotions",
	    (json_int_t)1, "decisions", (json_int_t)12);
	char *t = render(st);
	HAS(t, "hak_heartbeat_path_up{path=\"0\"} 1");
	HAS(t, "hak_heartbeat_path_up{path=\"1\"} 0");
	HAS(t, "hak_heartbeat_path_last_heard_seconds{path=\"0\"} 0.15");
	ck_assert_ptr_null(strstr(t, "hak_heartbeat_path_last_heard_seconds{path=\"1\"}"));
	HAS(t, "hak_heartbeat_received_total{path=\"0\"} 40");
	HAS(t, "hak_heartbeat_rejected_total{path=\"0\"} 1");
	HAS(t, "hak_heartbeat_send_errors_total{path=\"1\"} 2");
	HAS(t, "hak_cluster_peer_up 1");
	HAS(t, "hak_cluster_frozen 0");
	HAS(t, "hak_cluster_promotions_total 1");
	HAS(t, "hak_cluster_decisions_total 12");
	ck_assert_ptr_null(strstr(t, "hak_volume_role"));
	free(t);
}
END_TEST

/* Every state the replication module can report is one the state sets list, so a dashboard
 * sees a 0 for each state the volume is not in. */
START_TEST(states_known)
{
	json_t *vols = json_pack("[o]", volume("db", "primary", true));
	char *t = render(json_pack("{s:s, s:o}", "version", "1", "volumes", vols));
	char want[160];
	for (int i = 0; i <= ROLE_PRIMARY; i++) {
		snprintf(want, sizeof(want), "hak_volume_role{volume=\"db\",role=\"%s\"}",
		         repl_role_name((enum repl_role)i));
		ck_assert_msg(strstr(t, want), "%s missing", want);
	}
	for (int i = 0; i <= DISK_FAILED; i++) {
		snprintf(want, sizeof(want), ",state=\"%s\"} 0", repl_disk_name((enum repl_disk)i));
		if (i != DISK_UPTODATE)
			ck_assert_msg(strstr(t, want), "disk state %s missing", want);
	}
	for (int i = 0; i <= LINK_SYNC_TARGET; i++) {
		snprintf(want, sizeof(want), "state=\"%s\"}", repl_link_name((enum repl_link)i));
		ck_assert_msg(strstr(t, want), "link state %s missing", want);
	}
	free(t);
	/* a state no list knows is still shown */
	json_t *v = volume("db", "primary", true);
	json_object_set_new(json_object_get(v, "replication"), "link", json_string("Teleporting"));
	t = render(json_pack("{s:s, s:[o]}", "version", "1", "volumes", v));
	HAS(t, "hak_replication_connection_state{volume=\"db\",peer=\"be\\\"ta\",state="
	       "\"Teleporting\"} 1");
	HAS(t, "hak_replication_connection_state{volume=\"db\",peer=\"be\\\"ta\",state="
	       "\"Connected\"} 0");
	free(t);
}
END_TEST

START_TEST(start_time)
{
	double t = metrics_process_start_time();
	/* this test started within the last hour, and not in the future */
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	ck_assert_msg(t > (double)now.tv_sec - 3600 && t <= (double)now.tv_sec + 1,
	              "start time %f, now %ld", t, (long)now.tv_sec);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *t = tcase_create("core");
	tcase_add_test(t, render_volume);
	tcase_add_test(t, render_cluster);
	tcase_add_test(t, states_known);
	tcase_add_test(t, start_time);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
