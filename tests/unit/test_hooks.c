/* SPDX-License-Identifier: MIT */
/* Unit tests for ordered hook lists: order, ties in registration order, the full list. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "lib/hooks.h"

static char trace[64];
static char a[] = "a", b[] = "b", c1[] = "c1", c2[] = "c2", d[] = "d", x[] = "x", y[] = "y";

static void mark(void *ctx)
{
	strncat(trace, ctx, sizeof(trace) - strlen(trace) - 1);
}

START_TEST(runs_in_order)
{
	struct hooks h = {0};
	trace[0] = '\0';
	hooks_run(&h); /* an empty list runs nothing */
	ck_assert_str_eq(trace, "");
	ck_assert_int_eq(hooks_add(&h, 40, mark, d, "d"), 0);
	ck_assert_int_eq(hooks_add(&h, 10, mark, a, "a"), 0);
	ck_assert_int_eq(hooks_add(&h, 30, mark, c1, "c1"), 0);
	ck_assert_int_eq(hooks_add(&h, 20, mark, b, "b"), 0);
	ck_assert_int_eq(hooks_add(&h, 30, mark, c2, "c2"), 0); /* a tie: after c1 */
	hooks_run(&h);
	ck_assert_str_eq(trace, "abc1c2d");
	hooks_run(&h);
	ck_assert_str_eq(trace, "abc1c2dabc1c2d");
}
END_TEST

START_TEST(full_list_refuses)
{
	struct hooks h = {0};
	for (unsigned i = 0; i < HOOKS_MAX; i++)
		ck_assert_int_eq(hooks_add(&h, (int)i, mark, x, "x"), 0);
	errno = 0;
	ck_assert_int_eq(hooks_add(&h, 0, mark, y, "y"), -1);
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_uint_eq(h.n, HOOKS_MAX);
	trace[0] = '\0';
	hooks_run(&h);
	ck_assert_uint_eq(strlen(trace), HOOKS_MAX); /* the refused one never runs */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hooks");
	TCase *t = tcase_create("core");
	tcase_add_test(t, runs_in_order);
	tcase_add_test(t, full_list_refuses);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
