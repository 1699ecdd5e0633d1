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
	char out[CLOCK_STAMP_LEN];

	setenv("TZ", "UTC", 1);
	tzset();
	/* 2021-01-02 03:04:05.067 UTC */
	uint64_t ms = 1609556645067ull;
	ck_assert_uint_eq(clock_format_time(out, sizeof(out), ms), 29);
	ck_assert_str_eq(out, "2021-01-02T03:04:05.067+00:00");
	ck_assert_uint_eq(clock_format_time(out, sizeof(out), 0), 29);
	ck_assert_str_eq(out, "1970-01-01T00:00:00.000+00:00");
	ck_assert_uint_eq(clock_format_time(out, sizeof(out), 86399999), 29);
	ck_assert_str_eq(out, "1970-01-01T23:59:59.999+00:00");
	/* Too small a buffer: nothing, and an empty string rather than half a stamp. */
	ck_assert_uint_eq(clock_format_time(out, 29, ms), 0);
	ck_assert_str_eq(out, "");
	ck_assert_uint_eq(clock_format_time(out, 0, ms), 0);
	/* Another zone moves the hours, and the day, and says so in the offset (POSIX TZ signs
	 * are inverted: UTC-2 is two hours east). */
	setenv("TZ", "UTC-2", 1);
	tzset();
	ck_assert_uint_eq(clock_format_time(out, sizeof(out), 86399999), 29);
	ck_assert_str_eq(out, "1970-01-02T01:59:59.999+02:00");
	setenv("TZ", "XYZ+5:30", 1);
	tzset();
	ck_assert_uint_eq(clock_format_time(out, sizeof(out), ms), 29);
	ck_assert_str_eq(out, "2021-01-01T21:34:05.067-05:30");
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
