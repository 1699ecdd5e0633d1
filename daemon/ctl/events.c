/* SPDX-License-Identifier: MIT */
#include "events.h"

#include <ctype.h>
#include <errno.h>
#include <ev.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control.h"
#include "lib/clock.h"
#include "lib/log.h"

struct events_sub {
	struct events_sub *next;
	int fd;
	unsigned id;
	ev_io rio, wio;
	struct events_queue q;
};

static struct ev_loop *events_loop;
static struct events_sub *events_subs;
static unsigned events_nsubs, events_next_id;

size_t events_format(char *out, size_t outlen, const char *type, uint64_t unix_ms, const char *kv)
{
	if (outlen < 2)
		return 0;
	int n = snprintf(out, outlen, "%s time:%llu.%03u%s%s\n", type,
	                 (unsigned long long)(unix_ms / 1000), (unsigned)(unix_ms % 1000),
	                 kv && kv[0] ? " " : "", kv ? kv : "");
	if (n < 0)
		n = 0;
	if ((size_t)n >= outlen) {
		/* Cut: keep the newline so the stream stays one event per line. */
		n = (int)outlen - 1;
		out[n - 1] = '\n';
		out[n] = '\0';
	}
	return (size_t)n;
}

void events_token(char *out, size_t len, const char *text)
{
	size_t i = 0;
	if (len == 0)
		return;
	for (; text && *text && i + 1 < len; text++) {
		unsigned char c = (unsigned char)*text;
		out[i++] = isspace(c) ? '-' : c == ':' ? '=' : (char)c;
	}
	/* A sentence's full stop is no part of the value. */
	while (i > 0 && (out[i - 1] == '.' || out[i - 1] == '-'))
		i--;
	out[i] = '\0';
}

int events_queue_push(struct events_queue *q, const char *line, size_t n)
{
	if (n > sizeof(q->buf) - q->len)
		return -1;
	size_t tail = (q->head + q->len) % sizeof(q->buf);
	size_t first = sizeof(q->buf) - tail < n ? sizeof(q->buf) - tail : n;
	memcpy(q->buf + tail, line, first);
	memcpy(q->buf, line + first, n - first);
	q->len += n;
	return 0;
}

const char *events_queue_peek(const struct events_queue *q, size_t *n)
{
	size_t run = sizeof(q->buf) - q->head;
	*n = q->len < run ? q->len : run;
	return q->buf + q->head;
}

void events_queue_consume(struct events_queue *q, size_t n)
{
	if (n > q->len)
		n = q->len;
	q->head = (q->head + n) % sizeof(q->buf);
	q->len -= n;
	if (q->len == 0)
		q->head = 0;
}

static void sub_free(struct events_sub *s)
{
	for (struct events_sub **pp = &events_subs; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	ev_io_stop(events_loop, &s->rio);
	ev_io_stop(events_loop, &s->wio);
	close(s->fd);
	free(s);
	events_nsubs--;
}

/* Write what the socket takes; -1 when the subscriber is gone. */
static int sub_flush(struct events_sub *s)
{
	for (;;) {
		size_t n;
		const char *p = events_queue_peek(&s->q, &n);
		if (n == 0)
			break;
		ssize_t w = send(s->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			ev_io_start(events_loop, &s->wio);
			return 0;
		}
		if (w <= 0)
			return -1;
		events_queue_consume(&s->q, (size_t)w);
	}
	ev_io_stop(events_loop, &s->wio);
	return 0;
}

static void sub_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct events_sub *s = w->data;
	(void)loop;
	(void)revents;
	if (sub_flush(s) < 0)
		sub_free(s);
}

/* A subscriber only listens: anything it sends is discarded; EOF ends the subscription. */
static void sub_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct events_sub *s = w->data;
	char junk[256];
	(void)loop;
	(void)revents;
	ssize_t r = recv(s->fd, junk, sizeof(junk), MSG_DONTWAIT);
	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK))
		sub_free(s);
}

static int events_subscribe(void *ctx, int fd, char *err, size_t errlen)
{
	static const char ack[] = "{\"ok\":true,\"subscribed\":true}\n";
	struct events_sub *s;
	(void)ctx;
	if (events_nsubs >= EVENTS_MAX_SUBS) {
		snprintf(err, errlen, "There are already %u event subscribers (the limit).",
		         EVENTS_MAX_SUBS);
		return -1;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "Out of memory for an event subscriber.");
		return -1;
	}
	s->fd = fd;
	s->id = ++events_next_id;
	ev_io_init(&s->rio, sub_read_cb, fd, EV_READ);
	ev_io_init(&s->wio, sub_write_cb, fd, EV_WRITE);
	s->rio.data = s->wio.data = s;
	events_queue_push(&s->q, ack, sizeof(ack) - 1);
	s->next = events_subs;
	events_subs = s;
	events_nsubs++;
	ev_io_start(events_loop, &s->rio);
	log_info("Event subscriber %u connected (%u in all).", s->id, events_nsubs);
	if (sub_flush(s) < 0)
		sub_free(s);
	return 0;
}

void events_init(struct control *ctl)
{
	if (!ctl || !control_loop(ctl))
		return;
	events_loop = control_loop(ctl);
	if (control_register_stream(ctl, "events", CONTROL_READ, events_subscribe, NULL) < 0)
		log_err("Cannot register the events command: %s.", strerror(errno));
}

void events_shutdown(void)
{
	while (events_subs)
		sub_free(events_subs);
}

void events_emit(const char *type, const char *fmt, ...)
{
	char kv[768], line[EVENTS_LINE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(kv, sizeof(kv), fmt, ap);
	va_end(ap);
	log_info("Event %s %s.", type, kv);
	size_t n = events_format(line, sizeof(line), type, clock_wall_ms(), kv);
	struct events_sub *s = events_subs, *next;
	for (; s; s = next) {
		next = s->next;
		if (events_queue_push(&s->q, line, n) < 0) {
			log_warn(
			    "Dropping event subscriber %u: it has not read %zu bytes of events "
			    "(the limit is %u).",
			    s->id, s->q.len, EVENTS_SUB_BUF);
			sub_free(s);
			continue;
		}
		if (sub_flush(s) < 0)
			sub_free(s);
	}
}
