/* SPDX-License-Identifier: MIT */
/* Unit tests for child processes and the CPU policy helpers (proc.c). */
#include <check.h>
#include <ev.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "lib/proc.h"

struct outcome {
	bool done;
	struct proc_result res;
};

static void on_done(void *ctx, const struct proc_result *res)
{
	struct outcome *o = ctx;
	o->done = true;
	o->res = *res;
}

/* Runs CMD under /bin/sh from the default loop; returns its result. */
static struct proc_result run(const char *cmd)
{
	struct ev_loop *loop = ev_default_loop(0);
	struct outcome o = {0};
	struct proc *p = NULL;
	ck_assert_int_eq(proc_run_shell(loop, cmd, NULL, 10.0, on_done, &o, &p), 0);
	for (int i = 0; i < 2000 && !o.done; i++)
		ev_run(loop, EVRUN_ONCE);
	ck_assert(o.done);
	return o.res;
}

START_TEST(exit_status_and_output)
{
	struct proc_result r = run("echo hello; exit 3");
	ck_assert(r.exited);
	ck_assert_int_eq(r.code, 3);
	ck_assert_ptr_nonnull(strstr(r.output, "hello"));
}
END_TEST

START_TEST(batch_policy_is_per_thread_and_not_inherited_by_children)
{
	ck_assert_int_eq(proc_sched_batch(true), 0);
	ck_assert_int_eq(sched_getscheduler(0), SCHED_BATCH);
	/* A child started from a SCHED_BATCH thread gets the normal policy (0 = SCHED_OTHER). */
	struct proc_result r = run("sed -n 's/^policy *: *//p' /proc/self/sched");
	ck_assert(r.exited);
	ck_assert_int_eq(r.code, 0);
	int policy = -1;
	ck_assert_int_eq(sscanf(r.output, "%d", &policy), 1);
	ck_assert_int_eq(policy, SCHED_OTHER);
	ck_assert_int_eq(proc_sched_batch(false), 0);
	ck_assert_int_eq(sched_getscheduler(0), SCHED_OTHER);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("proc");
	TCase *t = tcase_create("core");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, exit_status_and_output);
	tcase_add_test(t, batch_policy_is_per_thread_and_not_inherited_by_children);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
