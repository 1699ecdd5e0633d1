/* SPDX-License-Identifier: MIT */
/* Unit tests for the payload buffer pool. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"

START_TEST(buffers)
{
	void *a = buf_get(4096), *b = buf_get(5000);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq((uintptr_t)a % 4096, 0);
	memset(b, 0xab, 5000);
	buf_put(a, 4096);
	ck_assert_uint_eq(buf_cached(), 4096);
	ck_assert_ptr_eq(buf_get(100), a); /* recycled from the 4 KiB class */
	buf_put(b, 5000);
	ck_assert_uint_eq(buf_cached(), 8192);
	buf_put(a, 4096);
	buf_trim();
	ck_assert_uint_eq(buf_cached(), 0);
}
END_TEST

START_TEST(large_and_limits)
{
	/* Beyond the largest class: plain allocation, never cached. */
	void *p = buf_get((size_t)128 << 20);
	ck_assert_ptr_nonnull(p);
	buf_put(p, (size_t)128 << 20);
	ck_assert_uint_eq(buf_cached(), 0);
	/* The cache stops growing at its limit (128 MiB). */
	void *v[40];
	for (int i = 0; i < 40; i++)
		v[i] = buf_get(8u << 20);
	for (int i = 0; i < 40; i++)
		buf_put(v[i], 8u << 20);
	ck_assert_uint_le(buf_cached(), (size_t)128 << 20);
	buf_trim();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("buf");
	TCase *t = tcase_create("core");
	tcase_add_test(t, buffers);
	tcase_add_test(t, large_and_limits);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
