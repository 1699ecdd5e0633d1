/* SPDX-License-Identifier: MIT */
/* Unit tests for the event stream: line format, value tokens, the bounded subscriber queue, and a
 * real subscription over the control socket (including a subscriber that never reads). */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl/control.h"
#include "ctl/events.h"
#include "lib/log.h"
#include "lib/usock.h"

START_TEST(format_table)
{
	static const struct {
		const char *type;
		uint64_t ms;
		const char *kv;
		const char *want;
	} cases[] = {
	    {"role", 1700000000123u, "volume:db role:primary",
	     "role time:1700000000.123 volume:db role:primary\n"},
	    {"resync-end", 5, "bytes:0", "resync-end time:0.005 bytes:0\n"},
	    {"detach", 1000, "", "detach time:1.000\n"},
	    {"detach", 1999, NULL, "detach time:1.999\n"},
	};
	char out[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = events_format(out, sizeof(out), cases[i].type, cases[i].ms, cases[i].kv);
		ck_assert_str_eq(out, cases[i].want);
		ck_assert_uint_eq(n, strlen(cases[i].want));
	}
	/* Too long: cut, still one line. */
	char small[16];
	size_t n = events_format(small, sizeof(small), "role", 1000, "volume:abcdefghijkl");
	ck_assert_uint_eq(n, sizeof(small) - 1);
	ck_assert_int_eq(small[n - 1], '\n');
	ck_assert_ptr_eq(strchr(small, '\n'), small + n - 1);
	ck_assert_str_eq(small, "role time:1.00\n");
}
END_TEST

START_TEST(token_table)
{
	static const struct {
		const char *in;
		size_t len;
		const char *want;
	} cases[] = {
	    {"the operator disconnected", 64, "the-operator-disconnected"},
	    {"no answer from the peer for 5.0 s.", 64, "no-answer-from-the-peer-for-5.0-s"},
	    {"bad\tfield: x\n", 64, "bad-field=-x"},
	    {"abcdef", 4, "abc"},
	    {"", 8, ""},
	};
	char out[64];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		events_token(out, cases[i].len, cases[i].in);
		ck_assert_str_eq(out, cases[i].want);
		ck_assert_ptr_null(strchr(out, ' '));
	}
}
END_TEST

START_TEST(queue_wraps_and_bounds)
{
	struct events_queue *q = calloc(1, sizeof(*q));
	char line[1000], got[1000];
	size_t n, total = 0, consumed = 0;
	ck_assert_ptr_nonnull(q);
	/* Fill to the brim with numbered lines, read half, refill: bytes come back in order across
	 * the wrap, and a line that does not fit is refused whole. */
	unsigned next_in = 0, next_out = 0;
	const size_t L = (size_t)snprintf(line, sizeof(line), "line %08u %0900d\n", 0u, 0);
	for (int round = 0; round < 3; round++) {
		for (;;) {
			int k = snprintf(line, sizeof(line), "line %08u %0900d\n", next_in, 0);
			if (events_queue_push(q, line, (size_t)k) < 0)
				break;
			next_in++;
			total += (size_t)k;
		}
		ck_assert_uint_le(q->len, EVENTS_SUB_BUF);
		ck_assert_uint_gt(q->len, EVENTS_SUB_BUF - 1000);
		size_t want = q->len / 2, k = 0;
		while (k < want) {
			const char *p = events_queue_peek(q, &n);
			ck_assert_uint_gt(n, 0);
			size_t take = n < L ? n : L; /* one line's length */
			if (take > L - consumed % L)
				take = L - consumed % L;
			memcpy(got + consumed % L, p, take);
			events_queue_consume(q, take);
			consumed += take;
			k += take;
			if (consumed % L == 0) {
				unsigned num;
				ck_assert_int_eq(sscanf(got, "line %08u", &num), 1);
				ck_assert_uint_eq(num, next_out);
				ck_assert_int_eq(got[L - 1], '\n');
				next_out++;
			}
		}
	}
	ck_assert_uint_eq(total - consumed, q->len);
	events_queue_consume(q, q->len);
	events_queue_peek(q, &n);
	ck_assert_uint_eq(n, 0);
	free(q);
}
END_TEST

static void spin(struct ev_loop *loop, int n)
{
	for (int i = 0; i < n; i++)
		ev_run(loop, EVRUN_NOWAIT);
}

/* Read whatever is there within ~0.5 s of loop spinning. */
static size_t drain(struct ev_loop *loop, int fd, char *buf, size_t cap)
{
	size_t len = 0;
	for (int i = 0; i < 500 && len < cap - 1; i++) {
		spin(loop, 2);
		ssize_t r = recv(fd, buf + len, cap - 1 - len, MSG_DONTWAIT);
		if (r > 0)
			len += (size_t)r;
		else if (r == 0)
			break;
		else
			usleep(1000);
	}
	buf[len] = '\0';
	return len;
}

static int sub_connect(const char *path)
{
	int fd = usock_connect(path);
	ck_assert_int_ge(fd, 0);
	const char *req = "{\"cmd\":\"events\"}\n";
	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	return fd;
}

START_TEST(subscription)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct control *ctl;
	char path[108], buf[8192];
	log_set_level(LOG_LVL_NOTICE); /* 4000 storm events need not reach stderr */
	snprintf(path, sizeof(path), "/tmp/hak-test-ev.%d", (int)getpid());
	ck_assert_int_eq(control_create(loop, path, &ctl), 0);
	events_init(ctl);
	int fd = sub_connect(path);
	drain(loop, fd, buf, sizeof(buf));
	ck_assert_str_eq(buf, "{\"ok\":true,\"subscribed\":true}\n");
	events_emit("role", "volume:%s role:%s", "db", "primary");
	events_emit("disconnect", "volume:db reason:x");
	drain(loop, fd, buf, sizeof(buf));
	char *second = strchr(buf, '\n');
	ck_assert_ptr_nonnull(second);
	ck_assert_int_eq(strncmp(buf, "role time:", 10), 0);
	ck_assert_ptr_nonnull(strstr(buf, " volume:db role:primary\n"));
	ck_assert_int_eq(strncmp(second + 1, "disconnect time:", 16), 0);
	ck_assert_ptr_nonnull(strstr(second + 1, " volume:db reason:x\n"));

	/* Without a socket, the command is refused (it cannot stream). */
	const char *req = "{\"cmd\":\"events\"}";
	const struct control_caller who = {.level = CONTROL_READ, .uid = 1000};
	char *ans = control_handle_line(ctl, &who, req, strlen(req));
	ck_assert_ptr_nonnull(strstr(ans, "needs the control socket"));
	free(ans);

	/* A subscriber that never reads is dropped; emitting never blocks; the reader above
	 * survives as long as it reads. */
	int lazy = sub_connect(path);
	spin(loop, 20);
	int one = 4096;
	setsockopt(lazy, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
	size_t got = 0;
	for (int i = 0; i < 4000; i++) {
		events_emit("storm", "volume:db n:%d pad:%0600d", i, 0);
		if (i % 50 == 0) {
			ssize_t r;
			while ((r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
				got += (size_t)r;
		}
	}
	ssize_t r;
	spin(loop, 20);
	while ((r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		got += (size_t)r;
	ck_assert_uint_gt(got, 4000u * 600u);
	/* The lazy one got EOF after what was in its socket. */
	size_t lazy_bytes = 0;
	for (int i = 0; i < 1000; i++) {
		r = recv(lazy, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == 0)
			break;
		if (r > 0)
			lazy_bytes += (size_t)r;
		else
			usleep(1000);
	}
	ck_assert_int_eq(r, 0);
	ck_assert_uint_lt(lazy_bytes, 4000u * 600u);
	close(lazy);
	close(fd);
	events_shutdown();
	control_destroy(ctl);
	ev_loop_destroy(loop);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("events");
	TCase *t = tcase_create("core");
	tcase_add_test(t, format_table);
	tcase_add_test(t, token_table);
	tcase_add_test(t, queue_wraps_and_bounds);
	tcase_add_test(t, subscription);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
