/* SPDX-License-Identifier: MIT */
/* Unit tests for the range lock: the overlap predicate at its edges, arrival order, removal from
 * any position, and a reference model driven by random adds and deletes. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "lib/rangelock.h"

START_TEST(overlap_edges)
{
	ck_assert(range_overlaps(0, 10, 5, 10));
	ck_assert(range_overlaps(5, 10, 0, 10));
	ck_assert(range_overlaps(0, 10, 9, 1));   /* the last byte */
	ck_assert(!range_overlaps(0, 10, 10, 5)); /* touching is not overlapping */
	ck_assert(!range_overlaps(10, 5, 0, 10));
	ck_assert(range_overlaps(0, 100, 40, 2)); /* inside */
	ck_assert(range_overlaps(40, 2, 0, 100)); /* around */
	ck_assert(!range_overlaps(0, 0, 0, 10));  /* empty ranges hold nothing */
	ck_assert(!range_overlaps(5, 10, 5, 0));
	ck_assert(range_overlaps(UINT64_MAX - 8, 4, UINT64_MAX - 6, 1));
}
END_TEST

START_TEST(order_and_before)
{
	struct rangelock rl;
	struct range a, b, c, d;
	rangelock_init(&rl);
	ck_assert(rangelock_empty(&rl));
	rangelock_add(&rl, &a, 0, 4096);
	rangelock_add(&rl, &b, 8192, 4096);
	rangelock_add(&rl, &c, 2048, 8192); /* overlaps a and b */
	rangelock_add(&rl, &d, 100000, 10);
	ck_assert_uint_eq(rl.count, 4);
	ck_assert_ptr_eq(rangelock_find(&rl, 3000, 1, NULL), &a); /* the oldest first */
	ck_assert_ptr_eq(rangelock_find(&rl, 9000, 1, NULL), &b);
	/* c waits behind a and b only, d behind nothing added before it */
	ck_assert_ptr_eq(rangelock_find(&rl, c.off, c.len, &c), &a);
	ck_assert_ptr_null(rangelock_find(&rl, d.off, d.len, &d));
	ck_assert_ptr_null(rangelock_find(&rl, c.off, c.len, &a));
	ck_assert(!rangelock_overlaps(&rl, 12288, 100000 - 12288));
	ck_assert(rangelock_overlaps(&rl, 12287, 1));
	rangelock_del(&a);
	ck_assert(!range_held(&a));
	ck_assert_ptr_eq(rangelock_find(&rl, c.off, c.len, &c), &b);
	rangelock_del(&b);
	ck_assert_ptr_null(rangelock_find(&rl, c.off, c.len, &c));
	ck_assert_ptr_eq(rl.head, &c);
	rangelock_del(&a); /* not held any more: nothing happens */
	ck_assert_uint_eq(rl.count, 2);
	rangelock_del(&d);
	ck_assert_ptr_eq(rl.tail, &c);
	rangelock_del(&c);
	ck_assert(rangelock_empty(&rl));
	ck_assert_ptr_null(rl.tail);
	ck_assert_uint_eq(rl.count, 0);
}
END_TEST

struct owner {
	int tag;
	struct range r;
};

START_TEST(entry_of)
{
	struct owner o = {.tag = 7};
	struct rangelock rl;
	rangelock_init(&rl);
	rangelock_add(&rl, &o.r, 1, 1);
	struct range *e = rangelock_find(&rl, 0, 2, NULL);
	ck_assert_int_eq(range_entry(e, struct owner, r)->tag, 7);
}
END_TEST

/* A model: an array of held ranges in arrival order, compared after every random step. */
#define N 48
START_TEST(reference_model)
{
	struct range e[N];
	int order[N], n = 0; /* indices of held entries, oldest first */
	struct rangelock rl;
	unsigned seed = 12345;
	rangelock_init(&rl);
	for (int i = 0; i < N; i++)
		e[i].owner = NULL;
	for (int step = 0; step < 20000; step++) {
		int i = (int)(rand_r(&seed) % N);
		if (!range_held(&e[i])) {
			uint64_t off = rand_r(&seed) % 1000, len = rand_r(&seed) % 64;
			rangelock_add(&rl, &e[i], off, len);
			order[n++] = i;
		} else {
			rangelock_del(&e[i]);
			int k = 0;
			while (order[k] != i)
				k++;
			for (; k < n - 1; k++)
				order[k] = order[k + 1];
			n--;
		}
		ck_assert_uint_eq(rl.count, (unsigned)n);
		uint64_t qoff = rand_r(&seed) % 1000, qlen = rand_r(&seed) % 64;
		/* the query, also as a waiter added at position p */
		int p = n ? (int)(rand_r(&seed) % (unsigned)n) : 0;
		const struct range *before = n ? &e[order[p]] : NULL;
		const struct range *want_any = NULL, *want_before = NULL;
		for (int k = 0; k < n; k++) {
			const struct range *x = &e[order[k]];
			if (!range_overlaps(x->off, x->len, qoff, qlen))
				continue;
			if (!want_any)
				want_any = x;
			if (k < p && !want_before)
				want_before = x;
		}
		ck_assert_ptr_eq(rangelock_find(&rl, qoff, qlen, NULL), want_any);
		if (n)
			ck_assert_ptr_eq(rangelock_find(&rl, qoff, qlen, before), want_before);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rangelock");
	TCase *t = tcase_create("core");
	tcase_add_test(t, overlap_edges);
	tcase_add_test(t, order_and_before);
	tcase_add_test(t, entry_of);
	tcase_add_test(t, reference_model);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
