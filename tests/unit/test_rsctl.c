/* SPDX-License-Identifier: MIT */
/* Unit tests for the resync rate controller. */
#include <check.h>
#include <stdint.h>

#include "repl/rsctl.h"

#define MiB (1024.0 * 1024.0)

/* Idle volume: the window is the fill target, whatever the time; no rate limit by default. */
START_TEST(idle_unlimited)
{
	struct rsctl c;
	double retry;

	rsctl_init(&c, 0, 10 * MiB, 8 * MiB);
	rsctl_start(&c, 100.0);
	ck_assert_uint_eq(rsctl_allow(&c, 100.0, 0, &retry), 8 * MiB);
	ck_assert_uint_eq(rsctl_allow(&c, 100.0, 3 * MiB, &retry), 5 * MiB);
	ck_assert_uint_eq(rsctl_allow(&c, 100.0, 8 * MiB, &retry), 0);
	ck_assert(retry == 0); /* acks will come */
	ck_assert(!rsctl_busy(&c, 100.0));
	ck_assert(rsctl_rate(&c, 100.0) == 0);
}
END_TEST

/* Table: what the controller allows at time t after an application write at 10.0. */
START_TEST(busy_table)
{
	static const struct {
		double now;
		uint64_t inflight;
		bool busy;
		uint64_t max_allow; /* upper bound on the answer */
		uint64_t min_allow; /* lower bound */
	} t[] = {
	    {10.05, 0, true, RSCTL_BUSY_WINDOW, 1},                  /* busy: small window */
	    {10.10, RSCTL_BUSY_WINDOW, true, 0, 0},                  /* window full */
	    {10.30, 0, false, 8 * (uint64_t)MiB, 8 * (uint64_t)MiB}, /* busy hold over: idle */
	};
	for (unsigned i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct rsctl c;
		double retry;

		rsctl_init(&c, 0, 10 * MiB, 8 * MiB);
		rsctl_start(&c, 10.0);
		rsctl_app_write(&c, 10.0);
		ck_assert_msg(rsctl_busy(&c, t[i].now) == t[i].busy, "row %u busy", i);
		uint64_t a = rsctl_allow(&c, t[i].now, t[i].inflight, &retry);
		ck_assert_msg(a <= t[i].max_allow && a >= t[i].min_allow, "row %u: allowed %llu", i,
		              (unsigned long long)a);
	}
}
END_TEST

/* While applications write, the bucket holds the resync to about rate_min. */
START_TEST(busy_rate_min)
{
	struct rsctl c;
	double retry, now = 0.0;
	uint64_t sent = 0;

	rsctl_init(&c, 0, 10 * MiB, 8 * MiB);
	rsctl_start(&c, now);
	for (int step = 0; step < 1000; step++) { /* one second in 1 ms steps */
		now = step * 0.001;
		rsctl_app_write(&c, now);
		uint64_t a = rsctl_allow(&c, now, 0, &retry);
		if (a) {
			uint64_t run = a < 256 * 1024 ? a : 256 * 1024;
			rsctl_consume(&c, run);
			sent += run;
		} else {
			ck_assert(retry > 0);
		}
	}
	ck_assert_msg(sent >= 9 * MiB && sent <= 11 * MiB, "sent %llu in 1 s",
	              (unsigned long long)sent);
}
END_TEST

/* Latency feedback: high latency cuts the rate to the floor, low latency lets it grow. */
START_TEST(latency_adapts)
{
	struct rsctl c;
	double now = 0;

	rsctl_init(&c, 100 * MiB, 10 * MiB, 8 * MiB);
	rsctl_app_latency(&c, now, 0.0002, false); /* 200 us without a resync */
	rsctl_start(&c, now);
	rsctl_app_write(&c, now);
	ck_assert(rsctl_rate(&c, now) == 10 * MiB);
	for (int i = 1; i <= 40; i++) { /* good latency: grows */
		now = i * 0.06;
		rsctl_app_write(&c, now);
		rsctl_app_latency(&c, now, 0.00025, true);
	}
	double grown = rsctl_rate(&c, now);
	ck_assert_msg(grown > 50 * MiB && grown <= 100 * MiB, "grown to %f", grown);
	for (int i = 41; i <= 80; i++) { /* 5x latency: shrinks to the floor */
		now = i * 0.06;
		rsctl_app_write(&c, now);
		rsctl_app_latency(&c, now, 0.001, true);
	}
	ck_assert(rsctl_rate(&c, now) == 10 * MiB);
}
END_TEST

START_TEST(rate_max_and_pause)
{
	struct rsctl c;
	double retry;

	rsctl_init(&c, 20 * MiB, 50 * MiB, 8 * MiB);
	ck_assert_uint_eq(c.rate_min, 20 * MiB); /* the floor never exceeds the maximum */
	rsctl_start(&c, 0);
	/* Idle with a maximum: token bucket at 20 MiB/s, 0.5 s gives at most the bucket depth. */
	uint64_t a = rsctl_allow(&c, 0.5, 0, &retry);
	ck_assert_uint_le(a, (uint64_t)(20 * MiB * RSCTL_BURST_S) + 1 > 256 * 1024
	                         ? (uint64_t)(20 * MiB * RSCTL_BURST_S) + 1
	                         : 256 * 1024 + 1);
	ck_assert_uint_gt(a, 0);
	rsctl_consume(&c, 4 * (uint64_t)MiB);
	ck_assert_uint_eq(rsctl_allow(&c, 0.5, 0, &retry), 0);
	ck_assert(retry > 0.15 && retry < 0.25); /* ~4 MiB of debt at 20 MiB/s */
	c.paused_local = true;
	ck_assert_uint_eq(rsctl_allow(&c, 10.0, 0, &retry), 0);
	ck_assert(retry < 0);
	c.paused_local = false;
	c.paused_peer = true;
	ck_assert(rsctl_paused(&c));
	c.paused_peer = false;
	ck_assert_uint_gt(rsctl_allow(&c, 10.0, 0, &retry), 0);
}
END_TEST

START_TEST(min_zero_waits_for_lull)
{
	struct rsctl c;
	double retry;

	rsctl_init(&c, 0, 0, 8 * MiB);
	rsctl_start(&c, 0);
	rsctl_app_write(&c, 1.0);
	ck_assert_uint_eq(rsctl_allow(&c, 1.01, 0, &retry), 0);
	ck_assert(retry > 0);
	ck_assert_uint_eq(rsctl_allow(&c, 1.5, 0, &retry), 8 * MiB);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rsctl");
	TCase *t = tcase_create("core");
	tcase_add_test(t, idle_unlimited);
	tcase_add_test(t, busy_table);
	tcase_add_test(t, busy_rate_min);
	tcase_add_test(t, latency_adapts);
	tcase_add_test(t, rate_max_and_pause);
	tcase_add_test(t, min_zero_waits_for_lull);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
