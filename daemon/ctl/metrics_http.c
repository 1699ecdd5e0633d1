/* SPDX-License-Identifier: MIT */
/* The metrics endpoint's HTTP parser and server: see metrics_http.h. */
#include "metrics_http.h"

#include <errno.h>
#include <ev.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/net.h"

/* ---- the parser ---------------------------------------------------------------------------- */

#define MHTTP_MAX_METHOD 16u

/* RFC 9110 token characters: what a method and a header name are made of. */
static bool is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A request target's characters: visible ASCII. */
static bool is_vchar(unsigned char c)
{
	return c > 0x20 && c < 0x7f;
}

/*
 * The request line s[0..n) without its line end; complete false when more of it may follow.
 * Returns 0 (fine so far), 400, or, for a complete line, 200/404/405 with *http11 set.
 */
static int parse_request_line(const char *s, size_t n, bool complete, bool *http11)
{
	size_t i = 0, t0, vlen;

	while (i < n && is_tchar((unsigned char)s[i]))
		i++;
	size_t mlen = i;
	if (mlen > MHTTP_MAX_METHOD || (i < n && (mlen == 0 || s[i] != ' ')))
		return 400;
	if (i == n)
		return complete ? 400 : 0;
	t0 = ++i;
	while (i < n && is_vchar((unsigned char)s[i]))
		i++;
	if (i > t0 && s[t0] != '/')
		return 400; /* only the origin form: no absolute URI, no "*" */
	if (i < n && (i == t0 || s[i] != ' '))
		return 400;
	if (i == n)
		return complete ? 400 : 0;
	size_t tlen = i - t0;
	i++;
	vlen = n - i;
	if (vlen > 8 || memcmp(s + i, "HTTP/1.", vlen < 7 ? vlen : 7) != 0 ||
	    (vlen == 8 && s[i + 7] != '0' && s[i + 7] != '1'))
		return 400;
	if (!complete)
		return 0;
	if (vlen != 8)
		return 400;
	*http11 = s[i + 7] == '1';
	if (mlen != 3 || memcmp(s, "GET", 3) != 0)
		return 405;
	const char *q = memchr(s + t0, '?', tlen);
	size_t plen = q ? (size_t)(q - (s + t0)) : tlen;
	return plen == 8 && memcmp(s + t0, "/metrics", 8) == 0 ? 200 : 404;
}

/* What a header line asks of the parser. */
enum hdr_kind { HDR_OTHER, HDR_HOST, HDR_BODY };

/*
 * One header line s[0..n) (not empty), complete or a prefix. Returns 0 or 400; for a complete
 * line *kind says whether it is the Host or announces a body.
 */
static int parse_header(const char *s, size_t n, bool complete, enum hdr_kind *kind)
{
	size_t i = 0;

	while (i < n && is_tchar((unsigned char)s[i]))
		i++;
	size_t nlen = i;
	if (i < n && (nlen == 0 || s[i] != ':'))
		return 400; /* also a line folded onto the previous one: it starts with a blank */
	if (i == n)
		return complete ? 400 : 0;
	for (size_t k = i + 1; k < n; k++) {
		unsigned char c = (unsigned char)s[k];
		if (c != '\t' && (c < 0x20 || c == 0x7f))
			return 400;
	}
	if (!complete)
		return 0;
	/* the value without the blanks around it */
	const char *v = s + i + 1, *end = s + n;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*kind = HDR_OTHER;
	if (nlen == 4 && strncasecmp(s, "host", 4) == 0)
		*kind = HDR_HOST;
	else if (nlen == 17 && strncasecmp(s, "transfer-encoding", 17) == 0)
		*kind = HDR_BODY;
	else if (nlen == 14 && strncasecmp(s, "content-length", 14) == 0 &&
	         !(end - v == 1 && *v == '0'))
		*kind = HDR_BODY;
	return 0;
}

int mhttp_parse(const char *buf, size_t len)
{
	bool full = len >= MHTTP_MAX_REQUEST, http11 = false, host = false;
	size_t pos = 0, lines = 0;
	int verdict = 0;

	if (full)
		len = MHTTP_MAX_REQUEST;
	while (pos < len) {
		const char *s = buf + pos, *nl = memchr(s, '\n', len - pos);
		bool complete = nl != NULL;
		size_t n = complete ? (size_t)(nl - s) : len - pos;
		/* a CR is part of the line end only right before the LF (or, so far, at the end) */
		if (n > 0 && s[n - 1] == '\r')
			n--;
		int rc;
		enum hdr_kind kind = HDR_OTHER;
		if (lines == 0) {
			rc = parse_request_line(s, n, complete, &http11);
			if (rc == 400 || rc == 0)
				return rc ? rc : (full ? 431 : 0);
			verdict = rc;
		} else if (complete && n == 0) {
			return http11 && !host ? 400 : verdict;
		} else {
			if (lines > MHTTP_MAX_HEADERS)
				return 431;
			if (parse_header(s, n, complete, &kind) != 0)
				return 400;
			if (!complete)
				break;
			if (kind == HDR_BODY || (kind == HDR_HOST && host))
				return 400; /* no body to read; two Hosts are ambiguous */
			host |= kind == HDR_HOST;
		}
		lines++;
		pos += (size_t)(nl - s) + 1;
	}
	return full ? 431 : 0;
}

static const char *reason_of(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 431:
		return "Request Header Fields Too Large";
	case 503:
		return "Service Unavailable";
	default:
		return "Internal Server Error";
	}
}

static const char *text_of(int status)
{
	switch (status) {
	case 400:
		return "Malformed request: hakd's metrics endpoint serves GET /metrics.\n";
	case 404:
		return "Not found: hakd's metrics endpoint serves /metrics only.\n";
	case 405:
		return "Method not allowed: hakd's metrics endpoint answers GET only.\n";
	case 431:
		return "Request too large: the request line and headers exceed 4096 bytes.\n";
	case 503:
		return "Too many clients: hakd's metrics endpoint serves 16 at a time.\n";
	default:
		return "hakd could not produce its metrics.\n";
	}
}

char *mhttp_response(int status, const char *body, size_t body_len, size_t *out_len)
{
	const char *type = "text/plain; charset=utf-8";
	char head[256];

	if (status == 200) {
		type = "text/plain; version=0.0.4; charset=utf-8";
	} else {
		body = text_of(status);
		body_len = strlen(body);
	}
	int hlen = snprintf(head, sizeof(head),
	                    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
	                    "Connection: close\r\n\r\n",
	                    status, reason_of(status), type, body_len,
	                    status == 405 ? "Allow: GET\r\n" : "");
	char *out = malloc((size_t)hlen + body_len);
	if (!out)
		return NULL;
	memcpy(out, head, (size_t)hlen);
	if (body_len)
		memcpy(out + hlen, body, body_len);
	*out_len = (size_t)hlen + body_len;
	return out;
}

/* ---- the server ---------------------------------------------------------------------------- */

struct mhttp_client {
	struct mhttp_server *ms;
	int fd; /* -1: the slot is free */
	ev_io io;
	ev_timer timer;
	char *out;
	size_t out_len, out_off, in_len;
	char in[MHTTP_MAX_REQUEST];
};

struct mhttp_server {
	struct ev_loop *loop;
	int lfd;
	ev_io lio;
	ev_timer accept_pause; /* the listener rests while the process is out of descriptors */
	mhttp_body_fn body;
	void *ctx;
	struct mhttp_client cl[MHTTP_MAX_CLIENTS];
};

static void client_close(struct mhttp_client *c)
{
	char sink[512];

	ev_io_stop(c->ms->loop, &c->io);
	ev_timer_stop(c->ms->loop, &c->timer);
	/* What the client sent past its request would make close() reset the connection, and a
	 * reset can destroy the response before the client read it: take a little of it. */
	for (int i = 0; i < 8 && read(c->fd, sink, sizeof(sink)) > 0; i++)
		;
	close(c->fd);
	c->fd = -1;
	free(c->out);
	c->out = NULL;
}

/* Send what is left of the response; close once all of it is out or the client is gone. */
static void client_flush(struct mhttp_client *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			log_debug("A metrics client went away before its response was sent: %s.",
			          strerror(errno));
			break;
		}
		c->out_off += (size_t)n;
	}
	shutdown(c->fd, SHUT_WR);
	client_close(c);
}

static void client_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	client_flush(w->data);
}

static void client_respond(struct mhttp_client *c, int status)
{
	struct mhttp_server *ms = c->ms;
	char *body = NULL;
	size_t blen = 0;

	if (status == 200 && !(body = ms->body(ms->ctx, &blen)))
		status = 500;
	c->out = mhttp_response(status, body, blen, &c->out_len);
	free(body);
	if (!c->out) {
		log_warn("Out of memory answering a metrics client (status %d); closing it.",
		         status);
		client_close(c);
		return;
	}
	if (status != 200)
		log_debug("A metrics client gets %d %s.", status, reason_of(status));
	ev_io_stop(ms->loop, &c->io);
	ev_io_init(&c->io, client_write_cb, c->fd, EV_WRITE);
	c->io.data = c;
	ev_io_start(ms->loop, &c->io);
	client_flush(c);
}

static void client_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct mhttp_client *c = w->data;
	(void)loop;
	(void)revents;
	ssize_t n = read(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		client_close(c); /* gone before its request was complete: nobody to answer */
		return;
	}
	c->in_len += (size_t)n;
	int status = mhttp_parse(c->in, c->in_len);
	if (status)
		client_respond(c, status);
}

static void client_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct mhttp_client *c = w->data;
	(void)loop;
	(void)revents;
	log_debug("A metrics client was dropped: no complete exchange within %.0f s (%zu bytes "
	          "received).",
	          MHTTP_TIMEOUT, c->in_len);
	client_close(c);
}

static void accept_resume_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct mhttp_server *ms = w->data;
	(void)revents;
	ev_io_start(loop, &ms->lio);
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct mhttp_server *ms = w->data;
	(void)revents;
	/* bounded: a flood of connections cannot keep the loop here */
	for (unsigned k = 0; k < MHTTP_MAX_CLIENTS; k++) {
		int fd = accept4(ms->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 &&
		    (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
			/* the pending connection stays readable: without a pause the loop would
			 * spin */
			log_warn("The metrics endpoint stops accepting for a second: %s.",
			         strerror(errno));
			ev_io_stop(loop, &ms->lio);
			ev_timer_start(loop, &ms->accept_pause);
		}
		if (fd < 0)
			return;
		struct mhttp_client *c = NULL;
		for (unsigned i = 0; i < MHTTP_MAX_CLIENTS && !c; i++)
			if (ms->cl[i].fd < 0)
				c = &ms->cl[i];
		if (!c) {
			size_t len;
			char *busy = mhttp_response(503, NULL, 0, &len);
			/* best effort: a small answer fits a fresh socket's buffer */
			if (busy && send(fd, busy, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
				log_debug("A refused metrics client did not take its 503: %s.",
				          strerror(errno));
			free(busy);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->in_len = c->out_len = c->out_off = 0;
		ev_io_init(&c->io, client_read_cb, fd, EV_READ);
		c->io.data = c;
		ev_timer_init(&c->timer, client_timeout_cb, MHTTP_TIMEOUT, 0.0);
		c->timer.data = c;
		ev_io_start(loop, &c->io);
		ev_timer_start(loop, &c->timer);
	}
}

int mhttp_server_start(struct ev_loop *loop, const char *addr, mhttp_body_fn body, void *ctx,
                       struct mhttp_server **out, char *err, size_t errlen)
{
	struct mhttp_server *ms = calloc(1, sizeof(*ms));
	int rc = -1;

	if (!ms) {
		snprintf(err, errlen, "Out of memory starting the metrics endpoint on %s.", addr);
		goto out;
	}
	ms->lfd = net_listen(addr, 0);
	if (ms->lfd < 0) {
		snprintf(err, errlen, "Cannot listen for metrics scrapes on %s: %s.", addr,
		         strerror(errno));
		goto out;
	}
	ms->loop = loop;
	ms->body = body;
	ms->ctx = ctx;
	for (unsigned i = 0; i < MHTTP_MAX_CLIENTS; i++) {
		ms->cl[i].fd = -1;
		ms->cl[i].ms = ms;
	}
	ev_io_init(&ms->lio, accept_cb, ms->lfd, EV_READ);
	ms->lio.data = ms;
	ev_timer_init(&ms->accept_pause, accept_resume_cb, 1.0, 0.0);
	ms->accept_pause.data = ms;
	ev_io_start(loop, &ms->lio);
	*out = ms;
	ms = NULL;
	rc = 0;
out:
	if (ms) {
		int e = errno;
		free(ms);
		errno = e;
	}
	return rc;
}

void mhttp_server_stop(struct mhttp_server *ms)
{
	if (!ms)
		return;
	for (unsigned i = 0; i < MHTTP_MAX_CLIENTS; i++)
		if (ms->cl[i].fd >= 0)
			client_close(&ms->cl[i]);
	ev_io_stop(ms->loop, &ms->lio);
	ev_timer_stop(ms->loop, &ms->accept_pause);
	close(ms->lfd);
	free(ms);
}
