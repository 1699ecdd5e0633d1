/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for service groups: real child processes (sh) on the default libev loop, the order
 * of starts and stops read back from a log the commands append to.
 */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf/conf_group.h"
#include "cluster/group.h"
#include "lib/log.h"
#include "cluster/vip.h"

static char dir[64], logpath[128];
static struct hak_resource_cfg rcs[3];
static struct hak_group_cfg gcfg;
static struct ev_loop *loop;

static char *xstrdup(const char *s)
{
	char *d = strdup(s);
	ck_assert_ptr_nonnull(d);
	return d;
}

static char *fmt(const char *f, const char *name)
{
	char buf[512];
	snprintf(buf, sizeof(buf), f, logpath, name);
	return xstrdup(buf);
}

/* Three exec resources a, b, c logging "start-X"/"stop-X"; monitors check a flag file. */
static void setup(void)
{
	static const char *const names[] = {"a", "b", "c"};

	log_set_level(LOG_LVL_ERR);
	snprintf(dir, sizeof(dir), "/tmp/hak-test-group.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	memset(&gcfg, 0, sizeof(gcfg));
	gcfg.name = xstrdup("g");
	gcfg.volumes[0] = xstrdup("db");
	gcfg.n_volumes = 1;
	gcfg.volume = gcfg.volumes[0];
	gcfg.monitor_interval = 0.1;
	gcfg.max_restarts = 1;
	gcfg.restart_window = 60;
	for (int i = 0; i < 3; i++) {
		memset(&rcs[i], 0, sizeof(rcs[i]));
		rcs[i].name = xstrdup(names[i]);
		rcs[i].type = RES_EXEC;
		rcs[i].start = fmt("echo start-%2$s >>%1$s && touch %1$s.%2$s", names[i]);
		rcs[i].stop = fmt("echo stop-%2$s >>%1$s && rm -f %1$s.%2$s", names[i]);
		rcs[i].monitor = fmt("test -f %1$s.%2$s", names[i]);
		rcs[i].timeout = 5;
		gcfg.res[i] = &rcs[i];
	}
	gcfg.n_res = 3;
	loop = ev_default_loop(0);
}

static void teardown(void)
{
	char cmd[128];

	for (int i = 0; i < 3; i++) {
		free(rcs[i].name);
		free(rcs[i].start);
		free(rcs[i].stop);
		free(rcs[i].monitor);
	}
	free(gcfg.name);
	for (unsigned i = 0; i < gcfg.n_volumes; i++)
		free(gcfg.volumes[i]);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Runs the loop until the group is in state st (10 s at most). */
static void wait_state(struct group *g, enum group_state st)
{
	double t0 = ev_time();

	while (group_state(g) != st && ev_time() - t0 < 10)
		ev_run(loop, EVRUN_ONCE);
	ck_assert_str_eq(group_state_name(group_state(g)), group_state_name(st));
}

static void run_for(double s)
{
	double t0 = ev_time();

	while (ev_time() - t0 < s)
		ev_run(loop, EVRUN_ONCE);
}

/* The log's lines joined by spaces. */
static const char *log_text(void)
{
	static char out[1024];
	char line[128];
	FILE *f = fopen(logpath, "r");

	out[0] = '\0';
	if (!f)
		return out;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (out[0])
			strncat(out, " ", sizeof(out) - strlen(out) - 1);
		strncat(out, line, sizeof(out) - strlen(out) - 1);
	}
	fclose(f);
	return out;
}

static void log_clear(void)
{
	unlink(logpath);
}

static struct group *make(void)
{
	struct group *g;
	ck_assert_int_eq(group_create(loop, &gcfg, NULL, NULL, NULL, &g), 0);
	return g;
}

START_TEST(start_in_order_stop_in_reverse)
{
	struct group *g = make();
	char err[256];

	ck_assert_int_eq(group_start(g, err, sizeof(err)), 0);
	wait_state(g, GROUP_STARTED);
	ck_assert_str_eq(log_text(), "start-a start-b start-c");
	/* Healthy monitors change nothing. */
	run_for(0.5);
	ck_assert_str_eq(log_text(), "start-a start-b start-c");
	log_clear();
	ck_assert_int_eq(group_stop(g, err, sizeof(err)), 0);
	wait_state(g, GROUP_STOPPED);
	ck_assert_str_eq(log_text(), "stop-c stop-b stop-a");
	group_destroy(g);
}
END_TEST

START_TEST(failed_start_stops_what_started)
{
	struct group *g = make();
	json_t *st;
	char err[256];

	char buf[256];

	snprintf(buf, sizeof(buf), "echo start-b >>%s; echo no database here; exit 3", logpath);
	free(rcs[1].start);
	rcs[1].start = xstrdup(buf);
	ck_assert_int_eq(group_start(g, err, sizeof(err)), 0);
	wait_state(g, GROUP_FAILED);
	/* b's start may have done half its work: it is stopped too. c never started. */
	ck_assert_str_eq(log_text(), "start-a start-b stop-b stop-a");
	st = group_status_json(g);
	ck_assert_ptr_nonnull(
	    strstr(json_string_value(json_object_get(st, "reason")),
	           "start of resource b failed: exit status 3: no database here"));
	json_decref(st);
	group_destroy(g);
}
END_TEST

START_TEST(start_timeout_kills)
{
	struct group *g = make();
	char err[256];
	double t0 = ev_time();

	free(rcs[2].start);
	rcs[2].start = xstrdup("sleep 30");
	rcs[2].timeout = 1;
	ck_assert_int_eq(group_start(g, err, sizeof(err)), 0);
	wait_state(g, GROUP_FAILED);
	ck_assert_double_lt(ev_time() - t0, 6);
	ck_assert_str_eq(log_text(), "start-a start-b stop-c stop-b stop-a");
	json_t *st = group_status_json(g);
	ck_assert_ptr_nonnull(
	    strstr(json_string_value(json_object_get(st, "reason")), "timed out after 1.0 s"));
	json_decref(st);
	group_destroy(g);
}
END_TEST

START_TEST(monitor_restarts_in_place_then_fails)
{
	struct group *g = make();
	char err[256], flag[160];

	ck_assert_int_eq(group_start(g, err, sizeof(err)), 0);
	wait_state(g, GROUP_STARTED);
	log_clear();
	/* b "crashes": the restart goes from b on, a is left alone. */
	snprintf(flag, sizeof(flag), "%s.b", logpath);
	ck_assert_int_eq(unlink(flag), 0);
	wait_state(g, GROUP_RESTARTING);
	wait_state(g, GROUP_STARTED);
	ck_assert_str_eq(log_text(), "stop-c stop-b start-b start-c");
	json_t *st = group_status_json(g);
	ck_assert_int_eq(json_integer_value(json_object_get(
	                     json_array_get(json_object_get(st, "resources"), 1), "restarts")),
	                 1);
	json_decref(st);
	/* A second failure within the window exceeds max-restarts 1: everything stops. */
	log_clear();
	ck_assert_int_eq(unlink(flag), 0);
	wait_state(g, GROUP_FAILED);
	ck_assert_str_eq(log_text(), "stop-c stop-b stop-a");
	group_destroy(g);
}
END_TEST

START_TEST(failed_stop_blocks)
{
	struct group *g = make();
	char err[256], buf[256];

	snprintf(buf, sizeof(buf), "test -f %s.unblock", logpath);
	free(rcs[1].stop);
	rcs[1].stop = xstrdup(buf);
	ck_assert_int_eq(group_start(g, err, sizeof(err)), 0);
	wait_state(g, GROUP_STARTED);
	ck_assert_int_eq(group_stop(g, err, sizeof(err)), 0);
	wait_state(g, GROUP_BLOCKED);
	/* Nothing below the failed stop is touched, and nothing starts until it is cleared. */
	ck_assert_str_eq(log_text(), "start-a start-b start-c stop-c");
	ck_assert_int_eq(group_start(g, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "blocked"));
	snprintf(buf, sizeof(buf), "%s.unblock", logpath);
	FILE *f = fopen(buf, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(group_clear(g, err, sizeof(err)), 0);
	wait_state(g, GROUP_STOPPED);
	ck_assert_str_eq(log_text(), "start-a start-b start-c stop-c stop-a");
	group_destroy(g);
}
END_TEST

/* A virtual IP in a private network namespace: started after a, stopped before it; a monitor
 * that finds the address gone restarts it in place; a stop leaves no address behind. */
START_TEST(vip_resource)
{
	struct hak_resource_cfg ip = {0};
	struct ipaddr a;
	struct group *g;
	char err[256];

	ck_assert_int_eq(unshare(CLONE_NEWNET), 0);
	ck_assert_int_eq(system("ip link add hakv0 type veth peer name hakv1 && "
	                        "ip link set hakv0 up && ip link set hakv1 up"),
	                 0);
	ip.name = xstrdup("ip");
	ip.type = RES_VIP;
	ip.address = xstrdup("192.0.2.10/24");
	ip.interface = xstrdup("hakv0");
	ip.garp_count = 2;
	ip.garp_delay = 0.2;
	ip.timeout = 5;
	gcfg.res[1] = &ip; /* a, ip, c */
	ck_assert_int_eq(ipaddr_parse(ip.address, &a, err, sizeof(err)), 0);
	g = make();
	ck_assert_int_eq(group_start(g, err, sizeof(err)), 0);
	wait_state(g, GROUP_STARTED);
	ck_assert_int_eq(vip_present("hakv0", &a, err, sizeof(err)), 1);
	ck_assert_str_eq(log_text(), "start-a start-c");
	ck_assert_int_eq(group_announce(g), 1);
	/* someone removes it: the monitor puts it back, c is restarted, a is not */
	log_clear();
	ck_assert_int_eq(system("ip addr del 192.0.2.10/24 dev hakv0"), 0);
	run_for(1.0);
	ck_assert_str_eq(group_state_name(group_state(g)), "started");
	ck_assert_int_eq(vip_present("hakv0", &a, err, sizeof(err)), 1);
	ck_assert_str_eq(log_text(), "stop-c start-c");
	ck_assert_int_eq(group_stop(g, err, sizeof(err)), 0);
	wait_state(g, GROUP_STOPPED);
	ck_assert_int_eq(vip_present("hakv0", &a, err, sizeof(err)), 0);
	ck_assert_int_eq(group_announce(g), 0);
	group_destroy(g);
	free(ip.name);
	free(ip.address);
	free(ip.interface);
}
END_TEST

/* group_pids: the live pids of started exec resources with a pid file, nothing once stopped. */
START_TEST(pids_from_pidfiles)
{
	char buf[512], pidfile[128];
	pid_t pids[4];
	struct group *g;
	FILE *f;
	int pid = 0;

	snprintf(pidfile, sizeof(pidfile), "%s/svc.pid", dir);
	snprintf(buf, sizeof(buf), "setsid sleep 30 </dev/null >/dev/null 2>&1 & echo $! >%s",
	         pidfile);
	free(rcs[1].start);
	rcs[1].start = xstrdup(buf);
	rcs[1].pidfile = pidfile;
	g = make();
	ck_assert_int_eq(group_pids(g, pids, 4), 0); /* not started: nothing */
	ck_assert_int_eq(group_start(g, buf, sizeof(buf)), 0);
	wait_state(g, GROUP_STARTED);
	f = fopen(pidfile, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &pid), 1);
	fclose(f);
	ck_assert_int_eq(group_pids(g, pids, 4), 1);
	ck_assert_int_eq(pids[0], pid);
	ck_assert_int_eq(group_pids(g, pids, 0), 0);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	for (int i = 0; i < 100 && group_pids(g, pids, 4) != 0; i++)
		usleep(10000);
	ck_assert_int_eq(group_pids(g, pids, 4), 0); /* dead (a zombie at most): not listed */
	/* garbage in the pid file is no pid */
	f = fopen(pidfile, "w");
	ck_assert_ptr_nonnull(f);
	fputs("12abc\n", f);
	fclose(f);
	ck_assert_int_eq(group_pids(g, pids, 4), 0);
	rcs[1].pidfile = NULL;
	group_destroy(g);
}
END_TEST

/* Writes an executable shell script named name in bin with body after its #! line. */
static void fake_tool(const char *bin, const char *name, const char *body)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", bin, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "#!/bin/sh\n%s\n", body);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(path, 0755), 0);
}

/*
 * Two attach resources of a group of two volumes each open their own volume on its own socket.
 * nbdfuse, losetup, mountpoint and fusermount3 are stand-ins early in PATH (the test process is
 * forked, so the PATH change stays here): nbdfuse logs the URI it was given.
 */
START_TEST(attach_uri_per_volume)
{
	static const char *const socks[] = {"/run/db.sock", "/run/wal.sock"};
	struct hak_resource_cfg at[2] = {{0}};
	char bin[128], body[256], path[4096], err[256];
	struct group *g;
	json_t *st;

	snprintf(bin, sizeof(bin), "%s/bin", dir);
	ck_assert_int_eq(mkdir(bin, 0755), 0);
	/* nbdfuse -P PIDFILE FILE URI: the script waits for the pid file */
	snprintf(body, sizeof(body), "echo \"nbdfuse $4\" >>%s; echo $$ >\"$2\"", logpath);
	fake_tool(bin, "nbdfuse", body);
	fake_tool(bin, "losetup", "echo /dev/null");
	fake_tool(bin, "mountpoint", "exit 1");
	fake_tool(bin, "fusermount3", "exit 0");
	snprintf(path, sizeof(path), "%s:%s", bin,
	         getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	ck_assert_int_eq(setenv("PATH", path, 1), 0);
	gcfg.volumes[1] = xstrdup("wal");
	gcfg.n_volumes = 2;
	for (int i = 0; i < 2; i++) {
		snprintf(body, sizeof(body), "a%d", i);
		at[i].name = xstrdup(body);
		at[i].type = RES_ATTACH;
		snprintf(body, sizeof(body), "%s/m%d", dir, i);
		at[i].directory = xstrdup(body);
		snprintf(body, sizeof(body), "%s/l%d", dir, i);
		at[i].link = xstrdup(body);
		at[i].timeout = 5;
		gcfg.res[i] = &at[i];
	}
	at[1].volume = xstrdup("wal"); /* a0 has none: the group's first */
	gcfg.n_res = 2;
	gcfg.monitor_interval = 3600; /* the stand-ins make no block device for a monitor */
	ck_assert_int_eq(group_create(loop, &gcfg, socks, NULL, NULL, &g), 0);
	ck_assert_int_eq(group_start(g, err, sizeof(err)), 0);
	wait_state(g, GROUP_STARTED);
	ck_assert_str_eq(log_text(), "nbdfuse nbd+unix:///db?socket=/run/db.sock "
	                             "nbdfuse nbd+unix:///wal?socket=/run/wal.sock");
	st = group_status_json(g);
	ck_assert_str_eq(json_string_value(json_object_get(st, "volume")), "db");
	ck_assert_int_eq(json_array_size(json_object_get(st, "volumes")), 2);
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(st, "volumes"), 1)),
	                 "wal");
	ck_assert_str_eq(json_string_value(json_object_get(
	                     json_array_get(json_object_get(st, "resources"), 1), "volume")),
	                 "wal");
	json_decref(st);
	ck_assert_int_eq(group_stop(g, err, sizeof(err)), 0);
	wait_state(g, GROUP_STOPPED);
	group_destroy(g);
	for (int i = 0; i < 2; i++) {
		free(at[i].name);
		free(at[i].directory);
		free(at[i].link);
		free(at[i].volume);
	}
}
END_TEST

START_TEST(mountinfo)
{
	ck_assert_int_eq(group_is_mounted("/proc"), 1);
	ck_assert_int_eq(group_is_mounted("/proc/"), 1);
	ck_assert_int_eq(group_is_mounted(dir), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("group");
	TCase *t = tcase_create("core");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, start_in_order_stop_in_reverse);
	tcase_add_test(t, failed_start_stops_what_started);
	tcase_add_test(t, start_timeout_kills);
	tcase_add_test(t, monitor_restarts_in_place_then_fails);
	tcase_add_test(t, failed_stop_blocks);
	tcase_add_test(t, vip_resource);
	tcase_add_test(t, pids_from_pidfiles);
	tcase_add_test(t, attach_uri_per_volume);
	tcase_add_test(t, mountinfo);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
