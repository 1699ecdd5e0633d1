/* SPDX-License-Identifier: MIT */
/* Unit tests for the latency histogram: bucket edges, mean, quantiles and merging. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/lathist.h"

START_TEST(bucket_edges)
{
	struct lathist h;
	memset(&h, 0, sizeof(h));
	/* up to 1 us -> bucket 0, (1,2] -> 1, (2,4] -> 2, (512,1024] -> 10 */
	lathist_add(&h, 0);
	lathist_add(&h, 1000);
	lathist_add(&h, 1001); /* 1.001 us rounds up to 2 us */
	lathist_add(&h, 2000);
	lathist_add(&h, 3000);
	lathist_add(&h, 4000);
	lathist_add(&h, 1024000);
	lathist_add(&h, 1025000);
	lathist_add(&h, -5); /* a clock read out of order counts as 0 */
	ck_assert_uint_eq(h.count, 9);
	ck_assert_uint_eq(h.bucket[0], 3);
	ck_assert_uint_eq(h.bucket[1], 2);
	ck_assert_uint_eq(h.bucket[2], 2);
	ck_assert_uint_eq(h.bucket[10], 1);
	ck_assert_uint_eq(h.bucket[11], 1);
	ck_assert_uint_eq(h.sum_ns, 1000 + 1001 + 2000 + 3000 + 4000 + 1024000 + 1025000);
	/* an hour lands in the open bucket */
	lathist_add(&h, 3600LL * 1000000000LL);
	ck_assert_uint_eq(h.bucket[LATHIST_BUCKETS - 1], 1);
	ck_assert_uint_eq(lathist_bound_us(0), 1);
	ck_assert_uint_eq(lathist_bound_us(10), 1024);
	ck_assert_uint_eq(lathist_bound_us(LATHIST_BUCKETS - 1), UINT64_MAX);
}
END_TEST

START_TEST(mean_and_quantiles)
{
	struct lathist h;
	memset(&h, 0, sizeof(h));
	ck_assert_uint_eq(lathist_quantile_us(&h, 0.5), 0);
	ck_assert(lathist_mean_us(&h) == 0.0);
	/* 90 requests of 50 us and 10 of 3 ms */
	for (int i = 0; i < 90; i++)
		lathist_add(&h, 50000);
	for (int i = 0; i < 10; i++)
		lathist_add(&h, 3000000);
	ck_assert_int_eq((int)(lathist_mean_us(&h) + 0.5), (90 * 50 + 10 * 3000) / 100);
	ck_assert_uint_eq(lathist_quantile_us(&h, 0.5), 64);
	ck_assert_uint_eq(lathist_quantile_us(&h, 0.9), 64);
	ck_assert_uint_eq(lathist_quantile_us(&h, 0.91), 4096);
	ck_assert_uint_eq(lathist_quantile_us(&h, 0.99), 4096);
	ck_assert_uint_eq(lathist_quantile_us(&h, 1.0), 4096);
	/* a tiny q still names the first non-empty bucket */
	ck_assert_uint_eq(lathist_quantile_us(&h, 0.0001), 64);
	/* beyond the last bound: twice the bound below it, not a made-up value */
	struct lathist big;
	memset(&big, 0, sizeof(big));
	lathist_add(&big, 3600LL * 1000000000LL);
	ck_assert_uint_eq(lathist_quantile_us(&big, 0.5),
	                  lathist_bound_us(LATHIST_BUCKETS - 2) * 2);
}
END_TEST

START_TEST(merge)
{
	struct lathist a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	lathist_add(&a, 10000);
	lathist_add(&b, 10000);
	lathist_add(&b, 700000);
	lathist_merge(&a, &b);
	ck_assert_uint_eq(a.count, 3);
	ck_assert_uint_eq(a.sum_ns, 720000);
	ck_assert_uint_eq(a.bucket[4], 2);  /* 10 us: (8,16] */
	ck_assert_uint_eq(a.bucket[10], 1); /* 700 us: (512,1024] */
	ck_assert_uint_eq(b.count, 2);      /* the source is untouched */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lathist");
	TCase *t = tcase_create("core");
	tcase_add_test(t, bucket_edges);
	tcase_add_test(t, mean_and_quantiles);
	tcase_add_test(t, merge);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
