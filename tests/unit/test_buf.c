/* SPDX-License-Identifier: MIT */
/* Unit tests for the payload buffer pool. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "lib/buf.h"

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

/* A frame payload whose data, after a 20-byte header, must be page-aligned for O_DIRECT. */
/* Aging frees what sat unused for a whole interval, and keeps what was taken in it. */
START_TEST(aging)
{
	void *v[3];
	buf_trim();
	for (int i = 0; i < 3; i++)
		v[i] = buf_get(65536);
	for (int i = 0; i < 3; i++)
		buf_put(v[i], 65536);
	ck_assert_uint_eq(buf_cached(), 3 * 65536);
	/* They were put in during this interval: none has been idle a whole one yet. */
	ck_assert_uint_eq(buf_age(), 0);
	ck_assert_uint_eq(buf_cached(), 3 * 65536);
	/* One is used in the next interval (twice: still one), the other two sit. */
	for (int i = 0; i < 2; i++) {
		void *p = buf_get(65536);
		ck_assert_ptr_nonnull(p);
		buf_put(p, 65536);
	}
	ck_assert_uint_eq(buf_age(), 2 * 65536);
	ck_assert_uint_eq(buf_cached(), 65536);
	/* A quiet interval: the last one goes too, and nothing is left to free after that. */
	ck_assert_uint_eq(buf_age(), 65536);
	ck_assert_uint_eq(buf_cached(), 0);
	ck_assert_uint_eq(buf_age(), 0);
	/* buf_get_at buffers are aged in the class they came from. */
	void *a = buf_get_at(4096, 100);
	buf_put(a, 4096);
	ck_assert_uint_eq(buf_cached(), 8192);
	buf_age();
	ck_assert_uint_eq(buf_age(), 8192);
	ck_assert_uint_eq(buf_cached(), 0);
}
END_TEST

START_TEST(aligned_at)
{
	uint8_t *p = buf_get_at(4096 + 20, 20);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq((uintptr_t)(p + 20) % 4096, 0);
	memset(p, 0x5a, 4096 + 20); /* all of it is ours (ASan would say otherwise) */
	buf_put(p, 4096 + 20);
	/* Back, whole, into the class it came from (8 KiB: 4096 + 20 and a 4076-byte head). */
	ck_assert_uint_eq(buf_cached(), 8192);
	ck_assert_ptr_eq(buf_get(8192), p - 4076);
	ck_assert_uint_eq(buf_cached(), 0);
	buf_put(p - 4076, 8192);
	/* A length whose head crosses into the next class goes back into that class. */
	uint8_t *q = buf_get_at(8192 - 512 + 24, 24);
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq((uintptr_t)(q + 24) % 4096, 0);
	memset(q, 0xa5, 8192 - 512 + 24);
	buf_put(q, 8192 - 512 + 24);
	ck_assert_uint_eq(buf_cached(), 8192 + 16384);
	/* At 0 it is a plain buffer, from the class of len; an offset whose head cannot hold the
	 * size is refused. */
	uint8_t *z = buf_get_at(4096, 0);
	ck_assert_ptr_nonnull(z);
	ck_assert_uint_eq((uintptr_t)z % 4096, 0);
	buf_put(z, 4096);
	ck_assert_uint_eq(buf_cached(), 4096 + 8192 + 16384);
	ck_assert_ptr_null(buf_get_at(100, 4090));
	ck_assert_int_eq(errno, EINVAL);
	buf_trim();
	ck_assert_uint_eq(buf_cached(), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("buf");
	TCase *t = tcase_create("core");
	tcase_add_test(t, buffers);
	tcase_add_test(t, large_and_limits);
	tcase_add_test(t, aligned_at);
	tcase_add_test(t, aging);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
