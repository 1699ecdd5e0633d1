/* SPDX-License-Identifier: MIT */
/* Unit tests for the control socket: dispatch of JSON lines, privilege levels and a real socket
 * round trip. */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl/control.h"
#include "lib/usock.h"

static int calls;
static const struct control_caller root = {.level = CONTROL_ADMIN, .uid = 0};

static json_t *h_status(void *ctx, json_t *req, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	calls++;
	return json_pack("{s:s, s:O?}", "who", (const char *)ctx, "echo",
	                 json_object_get(req, "arg"));
}

static json_t *h_fail(void *ctx, json_t *req, char *err, size_t errlen)
{
	(void)ctx;
	(void)req;
	snprintf(err, errlen, "Volume 'x' does not exist.");
	return NULL;
}

static json_t *parse(char *line)
{
	ck_assert_ptr_nonnull(line);
	size_t n = strlen(line);
	ck_assert_uint_gt(n, 0);
	ck_assert_int_eq(line[n - 1], '\n');
	json_t *j = json_loads(line, 0, NULL);
	ck_assert_ptr_nonnull(j);
	free(line);
	return j;
}

START_TEST(dispatch)
{
	struct control *ctl;
	ck_assert_int_eq(control_create(NULL, NULL, &ctl), 0);
	ck_assert_int_eq(
	    control_register(ctl, "status", CONTROL_READ, h_status, (void *)(uintptr_t) "me"), 0);
	ck_assert_int_eq(control_register(ctl, "fail", CONTROL_ADMIN, h_fail, NULL), 0);
	const char *ok = "{\"cmd\":\"status\",\"arg\":[1,2]}";
	json_t *j = parse(control_handle_line(ctl, &root, ok, strlen(ok)));
	ck_assert(json_is_true(json_object_get(j, "ok")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "who")), "me");
	ck_assert_int_eq(json_array_size(json_object_get(j, "echo")), 2);
	json_decref(j);

	const char *bad[] = {"{\"cmd\":",          "[1]",
	                     "{\"cmd\":5}",        "{\"cmd\":\"nope\"}",
	                     "{\"cmd\":\"fail\"}", "{\"cmd\":\"status\",\"cmd\":\"x\"}"};
	const char *want[] = {"not valid UTF-8 JSON",  "must be a JSON object",
	                      "must be a JSON object", "Unknown command 'nope'",
	                      "does not exist",        "not valid UTF-8 JSON"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		j = parse(control_handle_line(ctl, &root, bad[i], strlen(bad[i])));
		ck_assert(json_is_false(json_object_get(j, "ok")));
		const char *e = json_string_value(json_object_get(j, "error"));
		ck_assert_msg(e && strstr(e, want[i]), "case %zu: error '%s' lacks '%s'", i, e,
		              want[i]);
		json_decref(j);
	}
	control_destroy(ctl);
}
END_TEST

/* Lines that are not UTF-8 (or hold a NUL) get an error reply like any bad request; before #26
 * some got none and the daemon dropped the client. */
START_TEST(bad_bytes)
{
	static const struct {
		const char *line;
		size_t len;
		const char *want;
	} cases[] = {
#define C(lit, want) {lit, sizeof(lit) - 1, want}
	    C("{\"cmd\":\"sta\xfftus\"}", "not valid UTF-8 JSON"),
	    C("\xff", "not valid UTF-8 JSON"),
	    C("{\"cmd\":\"\xc0\xaf\"}", "not valid UTF-8 JSON"), /* overlong '/' */
	    C("{\"cmd\":\"\xe0\x80\xaf\"}", "not valid UTF-8 JSON"),
	    C("{\"cmd\":\"\xed\xa0\x80\"}", "not valid UTF-8 JSON"), /* a surrogate */
	    C("{\"cmd\":\"sta\0tus\"}", "not valid UTF-8 JSON"),
	    C("{\"cmd\":\"status\"}\0", "not valid UTF-8 JSON"),
	    C("\0", "not valid UTF-8 JSON"),
	    C("{\"cmd\":\"\\u0000\"}", "not valid UTF-8 JSON"),
	    /* Found by fuzz_control: jansson quotes the half character after the bad escape. */
	    C("{\"cm\\\xde\x9c\":tatus\"}", "not valid UTF-8 JSON"),
	    /* Valid, but the name cut at 64 bytes ends inside a two-byte character. */
	    C("{\"cmd\":\"x\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	      "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	      "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	      "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}",
	      "Unknown command 'x"),
#undef C
	};
	struct control *ctl;
	ck_assert_int_eq(control_create(NULL, NULL, &ctl), 0);
	ck_assert_int_eq(
	    control_register(ctl, "status", CONTROL_READ, h_status, (void *)(uintptr_t) "me"), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *line = control_handle_line(ctl, &root, cases[i].line, cases[i].len);
		ck_assert_msg(line, "case %zu: no reply", i);
		/* parse() uses json_loads, which itself rejects a reply that is not UTF-8. */
		json_t *j = parse(line);
		ck_assert(json_is_false(json_object_get(j, "ok")));
		const char *e = json_string_value(json_object_get(j, "error"));
		ck_assert_msg(e && strstr(e, cases[i].want), "case %zu: error '%s' lacks '%s'", i,
		              e, cases[i].want);
		json_decref(j);
	}
	control_destroy(ctl);
}
END_TEST

struct client_arg {
	char path[108];
	char reply[4096];
};

static void *client_thread(void *p)
{
	struct client_arg *a = p;
	int fd = usock_connect(a->path);
	if (fd >= 0) {
		/* Three requests in one write, the first not UTF-8: all must be answered, in order,
		 * without the bad one costing the client its connection. */
		const char *req = "{\"cmd\":\"\xff\"}\n{\"cmd\":\"status\",\"arg\":1}\n{\"cmd\":"
		                  "\"status\",\"arg\":2}\n";
		(void)!write(fd, req, strlen(req));
		size_t len = 0;
		while (len < sizeof(a->reply) - 1) {
			ssize_t r = read(fd, a->reply + len, sizeof(a->reply) - 1 - len);
			if (r <= 0)
				break;
			len += (size_t)r;
			a->reply[len] = '\0';
			int lines = 0;
			for (const char *q = a->reply; (q = strchr(q, '\n')); q++)
				lines++;
			if (lines == 3)
				break;
		}
		close(fd);
	}
	return NULL;
}

static void stop_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

START_TEST(socket_round_trip)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct control *ctl;
	struct client_arg a = {0};
	pthread_t th;
	ev_timer stop;
	snprintf(a.path, sizeof(a.path), "/tmp/hak-test-ctl.%d", (int)getpid());
	ck_assert_int_eq(control_create(loop, a.path, &ctl), 0);
	ck_assert_int_eq(
	    control_register(ctl, "status", CONTROL_READ, h_status, (void *)(uintptr_t) "sock"), 0);
	calls = 0;
	pthread_create(&th, NULL, client_thread, &a);
	ev_timer_init(&stop, stop_cb, 0.05, 0.05);
	for (int i = 0; i < 100 && calls < 2; i++) {
		ev_timer_start(loop, &stop);
		ev_run(loop, 0);
		ev_timer_stop(loop, &stop);
	}
	pthread_join(th, NULL);
	ck_assert_int_eq(calls, 2);
	ck_assert_msg(
	    strncmp(a.reply, "{\"ok\":false,\"error\":\"The request is not valid UTF-8", 51) == 0,
	    "the first reply is '%.80s'", a.reply);
	ck_assert_ptr_nonnull(strstr(a.reply, "\"echo\":1"));
	ck_assert_ptr_nonnull(strstr(a.reply, "\"echo\":2"));
	ck_assert(strstr(a.reply, "\"echo\":1") < strstr(a.reply, "\"echo\":2"));
	control_destroy(ctl);
	ck_assert_int_ne(access(a.path, F_OK), 0); /* the socket file is removed */
	ev_loop_destroy(loop);
}
END_TEST

static json_t *h_promote(void *ctx, json_t *req, char *err, size_t errlen)
{
	(void)ctx;
	(void)req;
	(void)err;
	(void)errlen;
	calls++;
	return json_pack("{s:s}", "role", "primary");
}

/* The reply to line from caller who, parsed. */
static json_t *ask(struct control *ctl, const struct control_caller *who, const char *line)
{
	return parse(control_handle_line(ctl, who, line, strlen(line)));
}

/* A read-only caller runs the read commands and is refused the admin ones with a sentence that
 * names the command and its uid; an admin runs both; unknown commands keep their error. */
START_TEST(levels)
{
	static const struct control_caller reader = {.level = CONTROL_READ, .uid = 1001};
	const char *status = "{\"cmd\":\"status\"}", *promote = "{\"cmd\":\"primary\"}";
	struct control *ctl;
	json_t *j;

	ck_assert_int_eq(control_create(NULL, NULL, &ctl), 0);
	ck_assert_int_eq(
	    control_register(ctl, "status", CONTROL_READ, h_status, (void *)(uintptr_t) "me"), 0);
	ck_assert_int_eq(control_register(ctl, "primary", CONTROL_ADMIN, h_promote, NULL), 0);
	ck_assert_int_eq(
	    control_register(ctl, "version", CONTROL_READ, h_status, (void *)(uintptr_t) "v"), 0);
	ck_assert_int_eq(control_register(ctl, "bad", (enum control_level)0, h_status, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	calls = 0;

	j = ask(ctl, &reader, status);
	ck_assert(json_is_true(json_object_get(j, "ok")));
	json_decref(j);
	ck_assert_int_eq(calls, 1);

	j = ask(ctl, &reader, promote);
	ck_assert(json_is_false(json_object_get(j, "ok")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "error")),
	                 "Command 'primary' changes hakd's state and needs root; uid 1001 may run "
	                 "only the read-only commands (status, version).");
	json_decref(j);
	ck_assert_int_eq(calls, 1); /* the handler never ran */

	j = ask(ctl, &reader, "{\"cmd\":\"nope\"}");
	ck_assert_str_eq(json_string_value(json_object_get(j, "error")),
	                 "Unknown command 'nope'; try 'hakctl --help'.");
	json_decref(j);

	j = ask(ctl, &root, status);
	ck_assert(json_is_true(json_object_get(j, "ok")));
	json_decref(j);
	j = ask(ctl, &root, promote);
	ck_assert(json_is_true(json_object_get(j, "ok")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "role")), "primary");
	json_decref(j);
	ck_assert_int_eq(calls, 3);
	control_destroy(ctl);
}
END_TEST

/* In a child running as uid:gid with no supplementary groups: connect to path, send req (may be
 * NULL: only read what hakd says first) and write the first reply line to out. */
static void run_as(uid_t uid, gid_t gid, const char *path, const char *req, int out)
{
	char buf[1024];
	size_t len = 0;
	int fd;

	if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
		_exit(2);
	fd = usock_connect(path);
	if (fd < 0) {
		dprintf(out, "connect: %s\n", strerror(errno));
		_exit(0);
	}
	/* A client hakd turns away may be closed before it writes: what it was told is still
	 * there to read. */
	if (req)
		(void)!send(fd, req, strlen(req), MSG_NOSIGNAL);
	while (len < sizeof(buf) - 1 && !memchr(buf, '\n', len)) {
		ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	(void)!write(out, buf, len);
	_exit(0);
}

/* What a child running as uid:gid got back for req from the control socket at path. */
static void client_as(struct ev_loop *loop, uid_t uid, gid_t gid, const char *path, const char *req,
                      char *reply, size_t len)
{
	int p[2], status = 0;
	pid_t pid;
	ssize_t n;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* Only the pipe: the loop's epoll and the server's sockets stay the parent's. */
		for (int fd = 3; fd < 1024; fd++)
			if (fd != p[1])
				close(fd);
		run_as(uid, gid, path, req, p[1]);
	}
	close(p[1]);
	/* Serve without blocking until the child is done: 5000 rounds of 2 ms at least. */
	for (int i = 0; waitpid(pid, &status, WNOHANG) == 0; i++) {
		ck_assert_msg(i < 5000, "the client running as uid %u did not finish",
		              (unsigned)uid);
		ev_run(loop, EVRUN_NOWAIT);
		usleep(2000);
	}
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	              "the client running as uid %u ended with status %d", (unsigned)uid, status);
	n = read(p[0], reply, len - 1);
	reply[n > 0 ? n : 0] = '\0';
	close(p[0]);
}

/* Over the socket, by SO_PEERCRED: nobody in nogroup reads, a stranger is told off and closed,
 * root does everything. Needs root to change uid. */
START_TEST(socket_levels)
{
	struct ev_loop *loop;
	struct control *ctl;
	struct group *gr = getgrgid(65534);
	char path[108], reply[1024];
	struct stat st;

	if (geteuid() != 0 || !gr) {
		printf("socket_levels: skipped (needs root and a group with gid 65534).\n");
		return;
	}
	loop = ev_loop_new(EVFLAG_AUTO);
	snprintf(path, sizeof(path), "/tmp/hak-test-ctlpriv.%d", (int)getpid());
	ck_assert_int_eq(control_create(loop, path, &ctl), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(control_set_group(ctl, gr->gr_name, true), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0660);
	ck_assert_uint_eq(st.st_gid, 65534);
	ck_assert_int_eq(
	    control_register(ctl, "status", CONTROL_READ, h_status, (void *)(uintptr_t) "s"), 0);
	ck_assert_int_eq(control_register(ctl, "primary", CONTROL_ADMIN, h_promote, NULL), 0);
	calls = 0;

	client_as(loop, 65534, 65534, path, "{\"cmd\":\"status\"}\n", reply, sizeof(reply));
	ck_assert_msg(strncmp(reply, "{\"who\":\"s\"", 10) == 0 && strstr(reply, "\"ok\":true"),
	              "status as nobody: '%s'", reply);
	client_as(loop, 65534, 65534, path, "{\"cmd\":\"primary\"}\n", reply, sizeof(reply));
	ck_assert_str_eq(reply, "{\"ok\":false,\"error\":\"Command 'primary' changes hakd's state "
	                        "and needs root; uid 65534 may run only the read-only commands "
	                        "(status).\"}\n");
	ck_assert_int_eq(calls, 1);

	/* The mode keeps a stranger out; with it opened up, hakd still does. */
	client_as(loop, 4242, 4242, path, NULL, reply, sizeof(reply));
	ck_assert_str_eq(reply, "connect: Permission denied\n");
	ck_assert_int_eq(chmod(path, 0666), 0);
	client_as(loop, 4242, 4242, path, "{\"cmd\":\"status\"}\n", reply, sizeof(reply));
	char want[256];
	snprintf(want, sizeof(want),
	         "{\"ok\":false,\"error\":\"uid 4242 may not use hakd's control socket: only root "
	         "may, and the members of group '%s' for the read-only commands.\"}\n",
	         gr->gr_name);
	ck_assert_str_eq(reply, want);
	ck_assert_int_eq(calls, 1);

	client_as(loop, 0, 0, path, "{\"cmd\":\"primary\"}\n", reply, sizeof(reply));
	ck_assert_str_eq(reply, "{\"role\":\"primary\",\"ok\":true}\n");
	ck_assert_int_eq(calls, 2);
	control_destroy(ctl);
	ev_loop_destroy(loop);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("control");
	TCase *t = tcase_create("core");
	tcase_add_test(t, dispatch);
	tcase_add_test(t, bad_bytes);
	tcase_add_test(t, socket_round_trip);
	tcase_add_test(t, levels);
	tcase_add_test(t, socket_levels);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
