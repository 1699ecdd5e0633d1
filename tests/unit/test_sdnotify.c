/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for ctl/sdnotify: the status text, and the real notification protocol through
 * libsystemd against a datagram socket playing systemd's NOTIFY_SOCKET: READY, STATUS coalescing,
 * and the watchdog fed while threads make progress and no longer once one is stuck.
 */
#include <check.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl/sdnotify.h"
#include "lib/alive.h"

START_TEST(status_text)
{
	char out[256];
	struct sdnotify_vol v[2] = {{"db", "primary", "UpToDate", "Connected"},
	                            {"logs", "secondary", "Outdated", "Connecting"}};
	struct sdnotify_vol solo = {.name = "scratch"};

	sdnotify_status_build(out, sizeof(out), v, 2, "joined, peer alive", "group pg: started",
	                      NULL);
	ck_assert_str_eq(out,
	                 "db: primary UpToDate Connected; logs: secondary Outdated Connecting; "
	                 "cluster: joined, peer alive; group pg: started");
	sdnotify_status_build(out, sizeof(out), &solo, 1, "", NULL, "reload: 1 applied");
	ck_assert_str_eq(out, "scratch: served; reload: 1 applied");
	sdnotify_status_build(out, sizeof(out), NULL, 0, NULL, NULL, NULL);
	ck_assert_str_eq(out, "");
	/* too small: cut, terminated, and the needed length returned like snprintf */
	size_t need = sdnotify_status_build(out, 8, v, 1, NULL, NULL, NULL);
	ck_assert_uint_eq(need, strlen("db: primary UpToDate Connected"));
	ck_assert_str_eq(out, "db: pri");
}
END_TEST

START_TEST(no_socket_no_op)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);

	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	sdnotify_init(loop);
	ck_assert(!sdnotify_enabled());
	ck_assert(sdnotify_watchdog_interval() == 0.0);
	sdnotify_ready();
	sdnotify_status("x");
	sdnotify_stopping();
	ck_assert_int_eq(ev_pending_count(loop), 0);
	sdnotify_shutdown();
	ev_loop_destroy(loop);
}
END_TEST

static int fake_systemd(char *path, size_t len)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(path, len, "/tmp/hak-sdn-%d.sock", (int)getpid());
	unlink(path);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setenv("NOTIFY_SOCKET", path, 1);
	return fd;
}

/* Every datagram waiting, joined with '|'. */
static void drain(int fd, char *out, size_t len)
{
	char buf[1100];
	ssize_t n;
	size_t used = 0;

	out[0] = '\0';
	while ((n = recv(fd, buf, sizeof(buf) - 1, 0)) > 0 && used < len) {
		buf[n] = '\0';
		used += (size_t)snprintf(out + used, len - used, "%s%s", used ? "|" : "", buf);
	}
}

static void break_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

static void run_for(struct ev_loop *loop, double secs)
{
	ev_timer t;
	ev_timer_init(&t, break_cb, secs, 0.0);
	ev_timer_start(loop, &t);
	ev_run(loop, 0);
	ev_timer_stop(loop, &t);
}

START_TEST(ready_and_status)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	char path[108], got[4096];
	int fd = fake_systemd(path, sizeof(path));

	unsetenv("WATCHDOG_USEC");
	sdnotify_init(loop);
	ck_assert(sdnotify_enabled());
	sdnotify_ready();
	sdnotify_status("one");
	drain(fd, got, sizeof(got));
	ck_assert_str_eq(got, "READY=1|STATUS=one");
	/* within the interval: held back, and only the last one goes */
	sdnotify_status("two");
	sdnotify_status("three");
	drain(fd, got, sizeof(got));
	ck_assert_str_eq(got, "");
	run_for(loop, SDNOTIFY_STATUS_INTERVAL + 0.2);
	drain(fd, got, sizeof(got));
	ck_assert_str_eq(got, "STATUS=three");
	/* the same text again: nothing */
	run_for(loop, SDNOTIFY_STATUS_INTERVAL + 0.1);
	sdnotify_status("three");
	run_for(loop, 0.1);
	drain(fd, got, sizeof(got));
	ck_assert_str_eq(got, "");
	sdnotify_reloading();
	sdnotify_stopping();
	drain(fd, got, sizeof(got));
	ck_assert_int_eq(strncmp(got, "RELOADING=1\nMONOTONIC_USEC=", 27), 0);
	ck_assert_ptr_nonnull(strstr(got, "|STOPPING=1"));
	sdnotify_shutdown();
	ev_loop_destroy(loop);
	close(fd);
	unlink(path);
}
END_TEST

START_TEST(watchdog_stops_with_a_stuck_thread)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	char path[108], got[4096], pid[16];
	int fd = fake_systemd(path, sizeof(path));

	setenv("WATCHDOG_USEC", "400000", 1); /* fed every 0.2 s */
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	sdnotify_init(loop);
	ck_assert(sdnotify_watchdog_interval() > 0.39 && sdnotify_watchdog_interval() < 0.41);
	struct alive_slot *s = alive_register("stuck");
	run_for(loop, 0.5);
	drain(fd, got, sizeof(got));
	ck_assert_ptr_nonnull(strstr(got, "WATCHDOG=1"));
	/* the least limit is 1.5 s: past it without a beat, the feeding stops and says why */
	run_for(loop, 1.3);
	drain(fd, got, sizeof(got));
	ck_assert_ptr_nonnull(strstr(got, "STATUS=watchdog: thread stuck made no progress for"));
	run_for(loop, 0.6);
	drain(fd, got, sizeof(got));
	ck_assert_ptr_null(strstr(got, "WATCHDOG=1"));
	/* it beats again: fed again */
	alive_beat(s);
	run_for(loop, 0.5);
	drain(fd, got, sizeof(got));
	ck_assert_ptr_nonnull(strstr(got, "WATCHDOG=1"));
	alive_unregister(s);
	sdnotify_shutdown();
	ev_loop_destroy(loop);
	close(fd);
	unlink(path);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sdnotify");
	TCase *t = tcase_create("core");
	tcase_add_test(t, status_text);
	tcase_add_test(t, no_socket_no_op);
	tcase_add_test(t, ready_and_status);
	tcase_add_test(t, watchdog_stops_with_a_stuck_thread);
	tcase_set_timeout(t, 30);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
