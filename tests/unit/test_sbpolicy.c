/* SPDX-License-Identifier: MIT */
/* Table tests of the after-split-brain decision: every policy's rules and ties, and over the whole
 * input space that both nodes reach mirrored verdicts (never both discard, never one discards
 * while the other disconnects). */
#include <check.h>
#include <stddef.h>
#include <string.h>

#include "conf/sbpolicy.h"

enum { D = SB_VERDICT_DISCONNECT, L = SB_VERDICT_DISCARD_LOCAL, P = SB_VERDICT_DISCARD_PEER };

static const struct row {
	enum sb_policy pol;
	const char *victim;
	const char *ln;
	uint64_t lc, lt;
	const char *pn;
	uint64_t pc, pt;
	int want;
} rows[] = {
    /* disconnect: always */
    {SB_POLICY_DISCONNECT, NULL, "alpha", 0, 0, "beta", 5, 0, D},
    {SB_POLICY_DISCONNECT, "alpha", "alpha", 3, 100, "beta", 0, 200, D},
    /* discard-zero-changes */
    {SB_POLICY_DISCARD_ZERO, NULL, "alpha", 0, 100, "beta", 7, 200, L},
    {SB_POLICY_DISCARD_ZERO, NULL, "alpha", 7, 100, "beta", 0, 200, P},
    {SB_POLICY_DISCARD_ZERO, NULL, "alpha", 1, 100, "beta", 1, 200, D},
    {SB_POLICY_DISCARD_ZERO, NULL, "alpha", 9, 0, "beta", 2, 0, D},
    {SB_POLICY_DISCARD_ZERO, NULL, "alpha", 0, 0, "beta", 0, 0, P}, /* beta sorts last */
    {SB_POLICY_DISCARD_ZERO, NULL, "beta", 0, 0, "alpha", 0, 0, L},
    /* discard-least-changes */
    {SB_POLICY_DISCARD_LEAST, NULL, "alpha", 2, 0, "beta", 3, 0, L},
    {SB_POLICY_DISCARD_LEAST, NULL, "alpha", 3, 0, "beta", 2, 0, P},
    {SB_POLICY_DISCARD_LEAST, NULL, "alpha", 0, 0, "beta", 1, 0, L},
    {SB_POLICY_DISCARD_LEAST, NULL, "alpha", 4, 100, "beta", 4, 200, P}, /* tie: younger */
    {SB_POLICY_DISCARD_LEAST, NULL, "alpha", 4, 300, "beta", 4, 200, L},
    {SB_POLICY_DISCARD_LEAST, NULL, "alpha", 4, 200, "beta", 4, 200, D},
    {SB_POLICY_DISCARD_LEAST, NULL, "alpha", 4, 0, "beta", 4, 200, D},
    /* discard-younger-primary */
    {SB_POLICY_DISCARD_YOUNGER, NULL, "alpha", 9, 100, "beta", 1, 200, P},
    {SB_POLICY_DISCARD_YOUNGER, NULL, "alpha", 1, 201, "beta", 9, 200, L},
    {SB_POLICY_DISCARD_YOUNGER, NULL, "alpha", 1, 200, "beta", 9, 200, D},
    {SB_POLICY_DISCARD_YOUNGER, NULL, "alpha", 1, 0, "beta", 9, 200, D},
    {SB_POLICY_DISCARD_YOUNGER, NULL, "alpha", 1, 200, "beta", 9, 0, D},
    /* discard-node */
    {SB_POLICY_DISCARD_NODE, "alpha", "alpha", 9, 100, "beta", 0, 200, L},
    {SB_POLICY_DISCARD_NODE, "beta", "alpha", 0, 300, "beta", 9, 200, P},
    {SB_POLICY_DISCARD_NODE, "gamma", "alpha", 0, 300, "beta", 9, 200, D},
    {SB_POLICY_DISCARD_NODE, NULL, "alpha", 0, 300, "beta", 9, 200, D},
    {SB_POLICY_DISCARD_NODE, "alph", "alpha", 0, 300, "beta", 9, 200, D},
};

START_TEST(table)
{
	const struct row *t = &rows[_i];
	struct sb_side l = {t->ln, t->lc, t->lt}, p = {t->pn, t->pc, t->pt};
	const char *why = NULL;
	enum sb_verdict v = sbpolicy_decide(t->pol, t->victim, &l, &p, &why);
	ck_assert_msg((int)v == t->want, "row %d (%s): got %s, want %s", _i, sbpolicy_name(t->pol),
	              sbpolicy_verdict_name(v), sbpolicy_verdict_name((enum sb_verdict)t->want));
	ck_assert_ptr_nonnull(why);
	ck_assert_uint_gt(strlen(why), 5);
}
END_TEST

static enum sb_verdict mirror(enum sb_verdict v)
{
	return v == SB_VERDICT_DISCARD_LOCAL  ? SB_VERDICT_DISCARD_PEER
	       : v == SB_VERDICT_DISCARD_PEER ? SB_VERDICT_DISCARD_LOCAL
	                                      : SB_VERDICT_DISCONNECT;
}

START_TEST(both_sides_agree)
{
	static const uint64_t changes[] = {0, 1, 2, 1000, UINT64_MAX};
	static const uint64_t times[] = {0, 1, 1700000000000u, 1700000000001u};
	static const char *const victims[] = {NULL, "alpha", "beta", "gamma", ""};
	static const char *const names[][2] = {{"alpha", "beta"}, {"beta", "alpha"}, {"a", "b.2"}};
	unsigned n = 0, decided = 0;
	for (unsigned pol = 0; pol < SB_POLICY_COUNT + 1; pol++)
		for (size_t vi = 0; vi < 5; vi++)
			for (size_t ni = 0; ni < 3; ni++)
				for (size_t a = 0; a < 5; a++)
					for (size_t b = 0; b < 5; b++)
						for (size_t x = 0; x < 4; x++)
							for (size_t y = 0; y < 4; y++) {
								struct sb_side l = {names[ni][0],
								                    changes[a],
								                    times[x]};
								struct sb_side p = {names[ni][1],
								                    changes[b],
								                    times[y]};
								enum sb_verdict v1 =
								    sbpolicy_decide(
								        (enum sb_policy)pol,
								        victims[vi], &l, &p, NULL);
								enum sb_verdict v2 =
								    sbpolicy_decide(
								        (enum sb_policy)pol,
								        victims[vi], &p, &l, NULL);
								ck_assert_int_eq(v2, mirror(v1));
								/* The side with changes is never
								 * dropped for one without. */
								if (pol == SB_POLICY_DISCARD_ZERO ||
								    pol ==
								        SB_POLICY_DISCARD_LEAST) {
									if (v1 ==
									    SB_VERDICT_DISCARD_LOCAL)
										ck_assert_uint_le(
										    l.changes,
										    p.changes);
								}
								if (pol == SB_POLICY_DISCONNECT ||
								    pol == SB_POLICY_COUNT)
									ck_assert_int_eq(
									    v1,
									    SB_VERDICT_DISCONNECT);
								decided +=
								    v1 != SB_VERDICT_DISCONNECT;
								n++;
							}
	ck_assert_uint_eq(n, 6u * 5 * 3 * 5 * 5 * 4 * 4);
	ck_assert_uint_gt(decided, n / 4);
}
END_TEST

START_TEST(names)
{
	enum sb_policy p;
	for (unsigned i = 0; i < SB_POLICY_COUNT; i++) {
		ck_assert_int_eq(sbpolicy_parse(sbpolicy_name((enum sb_policy)i), &p), 0);
		ck_assert_int_eq(p, i);
	}
	ck_assert_int_eq(sbpolicy_parse("discard-node beta", &p), -1);
	ck_assert_int_eq(sbpolicy_parse("Disconnect", &p), -1);
	ck_assert_int_eq(sbpolicy_parse("", &p), -1);
	ck_assert_str_eq(sbpolicy_name(SB_POLICY_COUNT), "unknown");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sbpolicy");
	TCase *t = tcase_create("core");
	tcase_add_loop_test(t, table, 0, (int)(sizeof(rows) / sizeof(rows[0])));
	tcase_add_test(t, both_sides_agree);
	tcase_add_test(t, names);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
