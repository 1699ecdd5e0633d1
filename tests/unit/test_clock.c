/* SPDX-License-Identifier: MIT */
/* Unit tests for the clock helpers: the units agree with each other and the stamp is well formed.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"

START_TEST(mono_units_agree)
{
	/* Read in order s, ms, us, ns: each later reading is at least the earlier one, in its unit,
	 * and all of them lie within a second (the test does nothing in between). */
	double s = clock_mono();
	int64_t ms = clock_mono_ms(), us = clock_mono_us(), ns = clock_mono_ns();
	ck_assert_int_ge(ms, (int64_t)(s * 1e3) - 1);
	ck_assert_int_ge(us / 1000, ms);
	ck_assert_int_ge(ns / 1000, us);
	ck_assert_int_lt(ns - (int64_t)(s * 1e9), 1000000000);
	/* Monotonic: never goes back. */
	int64_t prev = clock_mono_ns();
	for (int i = 0; i < 1000; i++) {
		int64_t now = clock_mono_ns();
		ck_assert_int_ge(now, prev);
		prev = now;
	}
}
END_TEST

START_TEST(wall_is_the_epoch)
{
	uint64_t ms = clock_wall_ms(), us = clock_wall_us();
	time_t t = time(NULL);
	/* ms before us: us/1000 is not smaller, and both are within a second of time(). */
	ck_assert_uint_ge(us / 1000, ms);
	ck_assert_uint_le(us / 1000 - ms, 1000);
	ck_assert_int_le(llabs((long long)(ms / 1000) - (long long)t), 1);
}
END_TEST

START_TEST(format_time)
{
	char out[16];

	setenv("TZ", "UTC", 1);
	tzset();
	/* 2021-01-02 03:04:05.067 UTC */
	uint64_t ms = 1609556645067ull;
	ck_assert_uint_eq(clock_format_time(out, sizeof(out), ms), 12);
	ck_assert_str_eq(out, "03:04:05.067");
	ck_assert_uint_eq(clock_format_time(out, sizeof(out), 0), 12);
	ck_assert_str_eq(out, "00:00:00.000");
	ck_assert_uint_eq(clock_format_time(out, sizeof(out), 86399999), 12);
	ck_assert_str_eq(out, "23:59:59.999");
	/* Too small a buffer: nothing, and an empty string rather than half a stamp. */
	ck_assert_uint_eq(clock_format_time(out, 12, ms), 0);
	ck_assert_str_eq(out, "");
	ck_assert_uint_eq(clock_format_time(out, 0, ms), 0);
	/* Another zone moves the hours only. */
	setenv("TZ", "UTC-2", 1);
	tzset();
	ck_assert_uint_eq(clock_format_time(out, sizeof(out), ms), 12);
	ck_assert_str_eq(out, "05:04:05.067");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("clock");
	TCase *t = tcase_create("core");
	tcase_add_test(t, mono_units_agree);
	tcase_add_test(t, wall_is_the_epoch);
	tcase_add_test(t, format_time);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
