/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the metrics endpoint's HTTP side: the request parser's verdict on good, bad,
 * partial and oversized requests, the exact responses, and the server on a real loopback socket
 * (a scrape, a 404, a slow client dropped at the timeout while another is served, the client
 * limit).
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl/metrics_http.h"

static int parse(const char *s)
{
	return mhttp_parse(s, strlen(s));
}

START_TEST(parse_good)
{
	ck_assert_int_eq(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 200);
	ck_assert_int_eq(parse("GET /metrics HTTP/1.0\r\n\r\n"), 200);
	ck_assert_int_eq(parse("GET /metrics?name[]=hak_volume_role HTTP/1.1\r\nHost: x\r\n"
	                       "Accept: text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
	                       "User-Agent: Prometheus/2.42.0\r\nContent-Length: 0\r\n\r\n"),
	                 200);
	/* a bare LF ends a line too; blanks around a value are not part of it */
	ck_assert_int_eq(parse("GET /metrics HTTP/1.1\nHost:   x \t\n\n"), 200);
	ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 404);
	ck_assert_int_eq(parse("GET /metricsx HTTP/1.1\r\nHost: x\r\n\r\n"), 404);
	ck_assert_int_eq(parse("GET /metrics/ HTTP/1.1\r\nHost: x\r\n\r\n"), 404);
	ck_assert_int_eq(parse("POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 405);
	ck_assert_int_eq(parse("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 405);
	ck_assert_int_eq(parse("get /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 405);
}
END_TEST

START_TEST(parse_partial)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: localhost:9810\r\n\r\n";
	/* every proper prefix waits for more; the whole is answered */
	for (size_t n = 0; n < sizeof(req) - 1; n++)
		ck_assert_msg(mhttp_parse(req, n) == 0, "prefix of %zu bytes judged %d", n,
		              mhttp_parse(req, n));
	ck_assert_int_eq(mhttp_parse(req, sizeof(req) - 1), 200);
}
END_TEST

START_TEST(parse_bad)
{
	static const char *const bad[] = {
	    "\r\n",                                      /* an empty request line */
	    "GET\r\n\r\n",                               /* no target */
	    "GET /metrics\r\n\r\n",                      /* HTTP/0.9 */
	    "GET  /metrics HTTP/1.1\r\nHost: x\r\n\r\n", /* two blanks */
	    "GET metrics HTTP/1.1\r\nHost: x\r\n\r\n",   /* not origin form */
	    "GET http://x/metrics HTTP/1.1\r\nHost: x\r\n\r\n",
	    "GET * HTTP/1.1\r\nHost: x\r\n\r\n",
	    "GET /metrics HTTP/2.0\r\n\r\n",
	    "GET /metrics HTTP/1.2\r\n\r\n",
	    "GET /metrics HTTP/1.1 \r\nHost: x\r\n\r\n",
	    "GET /metrics http/1.1\r\nHost: x\r\n\r\n",
	    "GET /metrics HTTP/1.1\r\n\r\n", /* 1.1 without Host */
	    "GET /metrics HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
	    "GET /metrics HTTP/1.1\r\nHost x\r\n\r\n", /* no colon */
	    "GET /metrics HTTP/1.1\r\n: x\r\nHost: x\r\n\r\n",
	    "GET /metrics HTTP/1.1\r\nHo st: x\r\n\r\n",
	    "GET /metrics HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
	    "GET /metrics HTTP/1.1\r\nHost: x\rA: b\r\n\r\n", /* a CR inside a line */
	    "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde",
	    "GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
	    "GET /metr\x01ics HTTP/1.1\r\nHost: x\r\n\r\n",
	    "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", /* a TLS ClientHello */
	    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	    "VERYLONGMETHODNAMEXYZ /metrics HTTP/1.1\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(parse(bad[i]) == 400, "request %zu judged %d, not 400", i,
		              parse(bad[i]));
	/* a NUL is garbage too, even though strlen would stop at it */
	ck_assert_int_eq(mhttp_parse("GET /\0 HTTP/1.1\r\n\r\n", 19), 400);
	/* garbage is refused as soon as it shows, without waiting for a line end */
	ck_assert_int_eq(parse("GE\x7f"), 400);
	ck_assert_int_eq(parse("GET /metrics HTTP/3"), 400);
}
END_TEST

START_TEST(parse_too_large)
{
	char *big = malloc(MHTTP_MAX_REQUEST + 100);
	/* one long header that never ends */
	int n = snprintf(big, MHTTP_MAX_REQUEST + 100, "GET /metrics HTTP/1.1\r\nX-Pad: ");
	memset(big + n, 'a', MHTTP_MAX_REQUEST + 50 - (size_t)n);
	n = MHTTP_MAX_REQUEST + 50;
	ck_assert_int_eq(mhttp_parse(big, MHTTP_MAX_REQUEST - 1), 0);
	ck_assert_int_eq(mhttp_parse(big, MHTTP_MAX_REQUEST), 431);
	ck_assert_int_eq(mhttp_parse(big, (size_t)n), 431);
	/* too many headers, though short */
	n = snprintf(big, MHTTP_MAX_REQUEST, "GET /metrics HTTP/1.1\r\nHost: x\r\n");
	for (unsigned i = 0; i < MHTTP_MAX_HEADERS + 1; i++)
		n += snprintf(big + n, MHTTP_MAX_REQUEST - (size_t)n, "A: b\r\n");
	n += snprintf(big + n, MHTTP_MAX_REQUEST - (size_t)n, "\r\n");
	ck_assert_int_eq(mhttp_parse(big, (size_t)n), 431);
	free(big);
}
END_TEST

START_TEST(responses)
{
	size_t len;
	char *r = mhttp_response(200, "a 1\n", 4, &len);
	static const char ok[] = "HTTP/1.1 200 OK\r\n"
	                         "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
	                         "Content-Length: 4\r\nConnection: close\r\n\r\na 1\n";
	ck_assert_uint_eq(len, sizeof(ok) - 1);
	ck_assert_mem_eq(r, ok, len);
	free(r);
	r = mhttp_response(405, NULL, 0, &len);
	static const char nope[] =
	    "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain; charset=utf-8\r\n"
	    "Content-Length: 62\r\nAllow: GET\r\nConnection: close\r\n\r\n"
	    "Method not allowed: hakd's metrics endpoint answers GET only.\n";
	ck_assert_uint_eq(len, sizeof(nope) - 1);
	ck_assert_mem_eq(r, nope, len);
	free(r);
	r = mhttp_response(404, "ignored", 7, &len);
	static const char nf[] =
	    "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n"
	    "Content-Length: 57\r\nConnection: close\r\n\r\n"
	    "Not found: hakd's metrics endpoint serves /metrics only.\n";
	ck_assert_uint_eq(len, sizeof(nf) - 1);
	ck_assert_mem_eq(r, nf, len);
	free(r);
	r = mhttp_response(400, NULL, 0, &len);
	ck_assert_ptr_nonnull(strstr(r, "HTTP/1.1 400 Bad Request\r\n"));
	free(r);
}
END_TEST

/* ---- the server on a real socket ---- */

static unsigned scrapes;

static char *test_body(void *ctx, size_t *len)
{
	(void)ctx;
	scrapes++;
	*len = 6;
	return strdup("up 1\n\n");
}

static struct ev_loop *loop;
static struct mhttp_server *srv;
static char addr[64];

static void server_up(void)
{
	char err[256];
	int port = 0;
	loop = ev_loop_new(EVFLAG_AUTO);
	scrapes = 0;
	/* a free port: bind to 0, read it back, close, use it (the test runs alone on it) */
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
	port = ntohs(sa.sin_port);
	close(s);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	ck_assert_msg(mhttp_server_start(loop, addr, test_body, NULL, &srv, err, sizeof(err)) == 0,
	              "%s", err);
}

static void server_down(void)
{
	mhttp_server_stop(srv);
	ev_loop_destroy(loop);
}

static int client(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	                         .sin_port = htons((uint16_t)atoi(strchr(addr, ':') + 1))};
	int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	ck_assert(rc == 0 || errno == EINPROGRESS);
	return fd;
}

/* Run the loop until fd has the whole response (EOF) or seconds pass; what it got. */
static size_t collect(int fd, char *buf, size_t cap, double seconds)
{
	size_t len = 0;
	for (int i = 0; i < (int)(seconds * 100); i++) {
		ev_run(loop, EVRUN_NOWAIT);
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n == 0)
			break;
		if (n > 0)
			len += (size_t)n;
		else
			usleep(10000);
	}
	buf[len] = '\0';
	return len;
}

START_TEST(server_scrape)
{
	char buf[1024];
	server_up();
	int fd = client();
	ev_run(loop, EVRUN_NOWAIT);
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n";
	ck_assert_int_eq(write(fd, req, sizeof(req) - 1), sizeof(req) - 1);
	collect(fd, buf, sizeof(buf), 3);
	ck_assert_str_eq(buf, "HTTP/1.1 200 OK\r\n"
	                      "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
	                      "Content-Length: 6\r\nConnection: close\r\n\r\nup 1\n\n");
	ck_assert_uint_eq(scrapes, 1);
	close(fd);
	/* a request in pieces, then a 404 */
	fd = client();
	ev_run(loop, EVRUN_NOWAIT);
	ck_assert_int_eq(write(fd, "GET /x HT", 9), 9);
	ck_assert_uint_eq(collect(fd, buf, sizeof(buf), 0.2), 0);
	ck_assert_int_eq(write(fd, "TP/1.0\r\n\r\n", 10), 10);
	collect(fd, buf, sizeof(buf), 3);
	ck_assert_ptr_nonnull(strstr(buf, "HTTP/1.1 404 Not Found\r\n"));
	ck_assert_uint_eq(scrapes, 1);
	close(fd);
	server_down();
}
END_TEST

START_TEST(server_slow_and_full)
{
	char buf[1024];
	int slow[MHTTP_MAX_CLIENTS];
	server_up();
	/* every slot taken by a client that never finishes its request */
	for (unsigned i = 0; i < MHTTP_MAX_CLIENTS; i++) {
		slow[i] = client();
		ev_run(loop, EVRUN_NOWAIT);
		ck_assert_int_eq(write(slow[i], "GET /met", 8), 8);
	}
	for (int i = 0; i < 20; i++)
		ev_run(loop, EVRUN_NOWAIT);
	/* one more is told to come back */
	int fd = client();
	collect(fd, buf, sizeof(buf), 2);
	ck_assert_ptr_nonnull(strstr(buf, "HTTP/1.1 503 Service Unavailable\r\n"));
	close(fd);
	/* after the timeout the slow ones are gone (EOF, no response) and a scrape works */
	collect(slow[0], buf, sizeof(buf), MHTTP_TIMEOUT + 2);
	ck_assert_str_eq(buf, "");
	for (unsigned i = 0; i < MHTTP_MAX_CLIENTS; i++)
		close(slow[i]);
	fd = client();
	ev_run(loop, EVRUN_NOWAIT);
	ck_assert_int_eq(write(fd, "GET /metrics HTTP/1.0\r\n\r\n", 25), 25);
	collect(fd, buf, sizeof(buf), 3);
	ck_assert_ptr_nonnull(strstr(buf, "\r\n\r\nup 1\n\n"));
	close(fd);
	server_down();
}
END_TEST

/* Out of descriptors, the listener rests a second instead of spinning, then serves again. */
START_TEST(server_out_of_fds)
{
	char buf[1024];
	struct rlimit old, low;
	server_up();
	int fd = client();
	int probe = open("/dev/null", O_RDONLY);
	ck_assert_int_ge(probe, 0);
	close(probe);
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)probe; /* the lowest free descriptor is no longer allowed */
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	ck_assert_uint_eq(collect(fd, buf, sizeof(buf), 0.3), 0);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	ck_assert_int_eq(write(fd, "GET /metrics HTTP/1.0\r\n\r\n", 25), 25);
	collect(fd, buf, sizeof(buf), 3);
	ck_assert_ptr_nonnull(strstr(buf, "HTTP/1.1 200 OK\r\n"));
	close(fd);
	server_down();
}
END_TEST

START_TEST(server_bad_address)
{
	char err[256];
	struct mhttp_server *s = NULL;
	struct ev_loop *l = ev_loop_new(EVFLAG_AUTO);
	ck_assert_int_eq(mhttp_server_start(l, "127.0.0.1", test_body, NULL, &s, err, sizeof(err)),
	                 -1);
	ck_assert_ptr_nonnull(strstr(err, "Cannot listen for metrics scrapes on 127.0.0.1"));
	ev_loop_destroy(l);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics_http");
	TCase *t = tcase_create("core");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, parse_good);
	tcase_add_test(t, parse_partial);
	tcase_add_test(t, parse_bad);
	tcase_add_test(t, parse_too_large);
	tcase_add_test(t, responses);
	tcase_add_test(t, server_scrape);
	tcase_add_test(t, server_slow_and_full);
	tcase_add_test(t, server_out_of_fds);
	tcase_add_test(t, server_bad_address);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
