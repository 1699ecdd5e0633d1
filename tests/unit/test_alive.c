/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the thread liveness the watchdog feeding checks (lib/alive): the staleness rule,
 * a slot's life, and the real threads that stamp it: an idle I/O worker is parked (no stall), a
 * worker stuck in a request and a hung loop thread are stale (HAK_TEST_STALL_THREAD, which the
 * ASan build compiles in).
 */
#include <check.h>
#include <ev.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/loopthread.h"
#include "ctl/sdnotify.h"
#include "io/io.h"
#include "lib/alive.h"
#include "lib/clock.h"
#include "lib/testhook.h"

START_TEST(stale_rule)
{
	/* parked: never stale, however old */
	ck_assert_int_eq(alive_is_stale(0, 1000000, 10), 0);
	/* within the limit, at it, beyond it */
	ck_assert_int_eq(alive_is_stale(1000, 1500, 1000), 0);
	ck_assert_int_eq(alive_is_stale(1000, 2000, 1000), 0);
	ck_assert_int_eq(alive_is_stale(1000, 2001, 1000), 1);
	/* the feeding decision */
	ck_assert(sdnotify_may_feed(0));
	ck_assert(!sdnotify_may_feed(1));
}
END_TEST

START_TEST(slot_life)
{
	char who[ALIVE_NAME_MAX];
	int64_t age = -1, now = clock_mono_ms();
	struct alive_slot *s = alive_register("worker-a-long-name");

	ck_assert_ptr_nonnull(s);
	/* names are cut like thread names */
	ck_assert_str_eq(s->name, "worker-a-long-n");
	ck_assert_uint_eq(alive_check(now, 1000, who, sizeof(who), &age), 0);
	/* two seconds later without a beat: stale, named, aged */
	ck_assert_uint_eq(alive_check(now + 2000, 1000, who, sizeof(who), &age), 1);
	ck_assert_str_eq(who, "worker-a-long-n");
	ck_assert_int_ge(age, 2000);
	ck_assert_int_lt(age, 3000);
	/* parked: no longer counted */
	alive_park(s);
	ck_assert_uint_eq(alive_check(now + 2000, 1000, who, sizeof(who), &age), 0);
	/* a beat counts from its own time */
	alive_beat(s);
	ck_assert_uint_eq(alive_check(clock_mono_ms() + 500, 1000, NULL, 0, NULL), 0);
	ck_assert_uint_eq(alive_check(clock_mono_ms() + 1500, 1000, NULL, 0, NULL), 1);
	/* given back: gone, and the slot is reused */
	alive_unregister(s);
	ck_assert_uint_eq(alive_check(clock_mono_ms() + 5000, 1000, NULL, 0, NULL), 0);
	ck_assert_ptr_eq(alive_register("b"), s);
	alive_unregister(s);
	/* NULL (all slots taken) is harmless everywhere */
	alive_beat(NULL);
	alive_park(NULL);
	alive_unregister(NULL);
}
END_TEST

START_TEST(slots_run_out)
{
	static struct alive_slot *s[ALIVE_MAX_SLOTS];

	for (unsigned i = 0; i < ALIVE_MAX_SLOTS; i++)
		ck_assert_ptr_nonnull(s[i] = alive_register("x"));
	ck_assert_ptr_null(alive_register("one-too-many"));
	for (unsigned i = 0; i < ALIVE_MAX_SLOTS; i++)
		alive_unregister(s[i]);
}
END_TEST

static void done_cb(struct io_req *req)
{
	(*(int *)req->data)++;
}

static void break_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

/* Runs loop for secs. */
static void run_for(struct ev_loop *loop, double secs)
{
	ev_timer t;
	ev_timer_init(&t, break_cb, secs, 0.0);
	ev_timer_start(loop, &t);
	ev_run(loop, 0);
	ev_timer_stop(loop, &t);
}

static int temp_file(void)
{
	char path[] = "/tmp/hak-alive-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
	return fd;
}

START_TEST(idle_io_workers_are_parked)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct io_engine *eng = NULL;
	static char buf[4096];
	struct io_req req;
	int fd = temp_file(), calls = 0;

	ck_assert_int_eq(io_engine_create(loop, IO_KIND_POOL, 16, &eng), 0);
	io_req_prep(&req, IO_OP_READ, fd, 0, sizeof(buf), buf, done_cb, &calls);
	ck_assert_int_eq(io_submit(eng, &req), 0);
	ck_assert_int_eq(io_drain(eng, 10.0), 0);
	ck_assert_int_eq(calls, 1);
	run_for(loop, 0.1); /* the worker goes back to waiting */
	/* a minute of idleness is no stall */
	ck_assert_uint_eq(alive_check(clock_mono_ms() + 60000, 1000, NULL, 0, NULL), 0);
	io_engine_destroy(eng);
	ev_loop_destroy(loop);
	close(fd);
}
END_TEST

#ifdef HAK_TESTHOOKS_BUILT
START_TEST(stuck_io_worker_is_stale)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct io_engine *eng = NULL;
	static char buf[4096];
	static struct io_req req;
	char who[ALIVE_NAME_MAX] = "";
	int fd = temp_file(), calls = 0;

	setenv("HAK_TEST_STALL_THREAD", "io", 1);
	testhook_init();
	ck_assert_int_eq(io_engine_create(loop, IO_KIND_POOL, 16, &eng), 0);
	io_req_prep(&req, IO_OP_READ, fd, 0, sizeof(buf), buf, done_cb, &calls);
	ck_assert_int_eq(io_submit(eng, &req), 0);
	run_for(loop, 1.5);
	ck_assert_int_eq(calls, 0); /* it hangs */
	ck_assert_uint_eq(alive_check(clock_mono_ms(), 1000, who, sizeof(who), NULL), 1);
	ck_assert_str_eq(who, "io");
	/* The request never completes, so the engine cannot be destroyed: this test runs in its
	 * own forked process (Check's default), which ends here with the worker still hung. */
	close(fd);
}
END_TEST

START_TEST(hung_loop_thread_is_stale)
{
	struct ev_loop *main_loop = ev_loop_new(EVFLAG_AUTO);
	struct loopthread lt = {.name = "heartbeat"};
	char who[ALIVE_NAME_MAX] = "";

	setenv("HAK_TEST_STALL_THREAD", "heartbeat:1", 1);
	testhook_init();
	ck_assert_int_eq(loopthread_init(&lt, main_loop, NULL, NULL), 0);
	ck_assert_int_eq(loopthread_start(&lt, NULL), 0);
	/* beating before the stall begins */
	run_for(main_loop, 0.8);
	ck_assert_uint_eq(alive_check(clock_mono_ms(), 400 + 600, NULL, 0, NULL), 0);
	/* from 1 s on it hangs: after 1 s more it is stale */
	run_for(main_loop, 2.5);
	ck_assert_uint_eq(alive_check(clock_mono_ms(), 1000, who, sizeof(who), NULL), 1);
	ck_assert_str_eq(who, "heartbeat");
	/* a hung thread still stops when asked (so hakd can exit) */
	loopthread_stop(&lt);
	ck_assert_uint_eq(alive_check(clock_mono_ms() + 10000, 1000, NULL, 0, NULL), 0);
	ev_loop_destroy(main_loop);
}
END_TEST
#endif

int main(void)
{
	Suite *s = suite_create("alive");
	TCase *t = tcase_create("core");
	tcase_add_test(t, stale_rule);
	tcase_add_test(t, slot_life);
	tcase_add_test(t, slots_run_out);
	tcase_add_test(t, idle_io_workers_are_parked);
#ifdef HAK_TESTHOOKS_BUILT
	tcase_add_test(t, stuck_io_worker_is_stale);
	tcase_add_test(t, hung_loop_thread_is_stale);
#endif
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
