/* SPDX-License-Identifier: MIT */
#include "transport.h"

#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/net.h"

#define IN_SIZE (256u * 1024u)

struct tstream {
	struct ev_loop *loop;
	int fd;
	ev_io rio, wio;
	ev_prepare prep;
	/* Lazy items (tstream_send_lazy) wait for this timer, lazy_bytes queued, or an eager send.
	 */
	ev_timer lazy_w;
	double lazy_delay;
	size_t lazy_bytes;
	const struct tstream_ops *ops;
	void *ctx;
	struct outq q;
	uint8_t *in;
	size_t in_len, in_pos;
	/* Frame being received. */
	bool have_hdr;
	struct wire_hdr hdr;
	uint8_t *payload;
	uint32_t got;
	double last_rx;
	bool dead, paused;
	int in_cb;
	bool close_pending;
};

static void stream_free(struct tstream *s);

static void stream_fail(struct tstream *s, const char *why)
{
	if (s->dead)
		return;
	s->dead = true;
	ev_io_stop(s->loop, &s->rio);
	ev_io_stop(s->loop, &s->wio);
	ev_prepare_stop(s->loop, &s->prep);
	ev_timer_stop(s->loop, &s->lazy_w);
	s->in_cb++;
	s->ops->error(s->ctx, s, why);
	s->in_cb--;
	/* Callers outside a read callback (the flush path) return right after this. */
	if (s->close_pending && !s->in_cb)
		stream_free(s);
}

static void stream_free(struct tstream *s)
{
	ev_io_stop(s->loop, &s->rio);
	ev_io_stop(s->loop, &s->wio);
	ev_prepare_stop(s->loop, &s->prep);
	ev_timer_stop(s->loop, &s->lazy_w);
	outq_drop(&s->q, ECANCELED);
	if (s->fd >= 0)
		close(s->fd);
	if (s->payload)
		buf_put(s->payload, s->hdr.len);
	free(s->in);
	free(s);
}

void tstream_try_flush(struct tstream *s)
{
	if (s && !s->dead)
		(void)outq_flush(&s->q, s->fd);
}

void tstream_close(struct tstream *s)
{
	if (!s)
		return;
	if (s->in_cb) {
		/* Inside one of our callbacks: free later, but release queued items now, since
		 * their owners free them as soon as this returns. */
		s->close_pending = true;
		s->dead = true;
		ev_io_stop(s->loop, &s->rio);
		ev_io_stop(s->loop, &s->wio);
		ev_prepare_stop(s->loop, &s->prep);
		ev_timer_stop(s->loop, &s->lazy_w);
		outq_drop(&s->q, ECANCELED);
		return;
	}
	stream_free(s);
}

static void stream_flush(struct tstream *s)
{
	/* Everything queued goes now, lazy items included. */
	ev_timer_stop(s->loop, &s->lazy_w);
	int rc = outq_flush(&s->q, s->fd);
	if (rc < 0) {
		char why[128];
		snprintf(why, sizeof(why), "sending failed: %s", strerror(errno));
		stream_fail(s, why);
		return;
	}
	if (rc == 1)
		ev_io_start(s->loop, &s->wio);
	else
		ev_io_stop(s->loop, &s->wio);
	ev_prepare_stop(s->loop, &s->prep);
}

static void prep_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)loop;
	(void)revents;
	stream_flush(w->data);
}

static void lazy_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	stream_flush(w->data);
}

static void write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	stream_flush(w->data);
}

/* Deliver complete frames from the input buffer. Returns false once the stream failed. */
static bool stream_parse(struct tstream *s)
{
	char why[200];
	while (!s->dead && !s->paused) {
		size_t avail = s->in_len - s->in_pos;
		if (!s->have_hdr) {
			if (avail < WIRE_HDR_SIZE)
				break;
			if (wire_hdr_decode(s->in + s->in_pos, &s->hdr, why, sizeof(why)) < 0) {
				stream_fail(s, why);
				return false;
			}
			s->in_pos += WIRE_HDR_SIZE;
			s->have_hdr = true;
			s->got = 0;
			s->payload =
			    s->hdr.len ? buf_get_at(s->hdr.len, wire_payload_align(&s->hdr)) : NULL;
			if (s->hdr.len && !s->payload) {
				stream_fail(s, "out of memory for a frame payload");
				return false;
			}
			continue;
		}
		size_t need = s->hdr.len - s->got;
		size_t n = avail < need ? avail : need;
		if (n) {
			memcpy(s->payload + s->got, s->in + s->in_pos, n);
			s->got += (uint32_t)n;
			s->in_pos += n;
		}
		if (s->got < s->hdr.len)
			break;
		struct wire_hdr h = s->hdr;
		uint8_t *p = s->payload;
		s->have_hdr = false;
		s->payload = NULL;
		s->in_cb++;
		s->ops->frame(s->ctx, s, &h, p);
		s->in_cb--;
	}
	if (s->in_pos == s->in_len)
		s->in_pos = s->in_len = 0;
	return !s->dead;
}

static void read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tstream *s = w->data;
	(void)revents;
	s->in_cb++;
	for (int i = 0; i < 16 && !s->dead && !s->paused; i++) {
		ssize_t r;
		if (s->have_hdr && s->in_pos == s->in_len && s->hdr.len - s->got > 65536) {
			/* Bulk payloads go straight into their buffer. */
			r = read(s->fd, s->payload + s->got, s->hdr.len - s->got);
			if (r > 0) {
				s->got += (uint32_t)r;
				s->last_rx = ev_now(loop);
				stream_parse(s);
				continue;
			}
		} else {
			if (s->in_pos && s->in_len == IN_SIZE) {
				memmove(s->in, s->in + s->in_pos, s->in_len - s->in_pos);
				s->in_len -= s->in_pos;
				s->in_pos = 0;
			}
			r = read(s->fd, s->in + s->in_len, IN_SIZE - s->in_len);
			if (r > 0) {
				s->in_len += (size_t)r;
				s->last_rx = ev_now(loop);
				stream_parse(s);
				continue;
			}
		}
		if (r == 0) {
			stream_fail(s, "the peer closed the connection");
			break;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		if (errno == EINTR)
			continue;
		char why[128];
		snprintf(why, sizeof(why), "receiving failed: %s", strerror(errno));
		stream_fail(s, why);
		break;
	}
	s->in_cb--;
	if (s->close_pending && !s->in_cb)
		stream_free(s);
}

int tstream_create(struct ev_loop *loop, int fd, const struct tstream_ops *ops, void *ctx,
                   struct tstream **out)
{
	struct tstream *s = calloc(1, sizeof(*s));
	if (!s)
		return -1;
	s->in = malloc(IN_SIZE);
	if (!s->in) {
		free(s);
		errno = ENOMEM;
		return -1;
	}
	s->loop = loop;
	s->fd = fd;
	s->ops = ops;
	s->ctx = ctx;
	s->last_rx = ev_now(loop);
	ev_io_init(&s->rio, read_cb, fd, EV_READ);
	ev_io_init(&s->wio, write_cb, fd, EV_WRITE);
	ev_prepare_init(&s->prep, prep_cb);
	ev_timer_init(&s->lazy_w, lazy_cb, 0., 0.);
	s->rio.data = s->wio.data = s->prep.data = s->lazy_w.data = s;
	ev_io_start(loop, &s->rio);
	*out = s;
	return 0;
}

void tstream_send(struct tstream *s, struct outq_item *it)
{
	if (s->dead) {
		if (it->sent)
			it->sent(it, ECONNRESET);
		return;
	}
	outq_push(&s->q, it);
	if (!ev_is_active(&s->wio))
		ev_prepare_start(s->loop, &s->prep);
}

void tstream_set_lazy(struct tstream *s, double delay, size_t bytes)
{
	s->lazy_delay = delay;
	s->lazy_bytes = bytes;
}

void tstream_send_lazy(struct tstream *s, struct outq_item *it)
{
	if (s->dead || s->lazy_delay <= 0) {
		tstream_send(s, it);
		return;
	}
	outq_push(&s->q, it);
	/* Already due to go: with the next flush, or when the socket takes more. */
	if (ev_is_active(&s->wio) || ev_is_active(&s->prep))
		return;
	if (s->q.bytes >= s->lazy_bytes) {
		ev_prepare_start(s->loop, &s->prep);
		return;
	}
	if (!ev_is_active(&s->lazy_w)) {
		ev_timer_set(&s->lazy_w, s->lazy_delay, 0.);
		ev_timer_start(s->loop, &s->lazy_w);
	}
}

static struct outq_item *small_item(uint16_t type, uint16_t flags, const void *payload,
                                    uint32_t len)
{
	struct outq_item *it = calloc(1, sizeof(*it));
	if (!it || len > sizeof(it->hdr) - WIRE_HDR_SIZE) {
		free(it);
		errno = ENOMEM;
		return NULL;
	}
	wire_hdr_encode(it->hdr, type, flags, len);
	if (len)
		memcpy(it->hdr + WIRE_HDR_SIZE, payload, len);
	it->hdr_len = WIRE_HDR_SIZE + len;
	it->sent = outq_free_item;
	return it;
}

int tstream_send_small_lazy(struct tstream *s, uint16_t type, uint16_t flags, const void *payload,
                            uint32_t len)
{
	struct outq_item *it = small_item(type, flags, payload, len);
	if (!it)
		return -1;
	tstream_send_lazy(s, it);
	return 0;
}

int tstream_send_small(struct tstream *s, uint16_t type, uint16_t flags, const void *payload,
                       uint32_t len)
{
	struct outq_item *it = small_item(type, flags, payload, len);
	if (!it)
		return -1;
	tstream_send(s, it);
	return 0;
}

size_t tstream_queued(const struct tstream *s)
{
	return s->q.bytes;
}

void tstream_pause(struct tstream *s, bool paused)
{
	if (s->dead || s->paused == paused)
		return;
	s->paused = paused;
	if (paused) {
		ev_io_stop(s->loop, &s->rio);
		return;
	}
	ev_io_start(s->loop, &s->rio);
	s->in_cb++;
	stream_parse(s); /* frames already buffered */
	s->in_cb--;
	if (s->close_pending && !s->in_cb)
		stream_free(s);
}

double tstream_idle(const struct tstream *s)
{
	return ev_now(s->loop) - s->last_rx;
}

/* ---- TCP --------------------------------------------------------------------------------- */

void tcp_tune(int fd)
{
	int one = 1, idle = 5, intvl = 1, cnt = 3;
	unsigned int user_timeout = 5000;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	/* Unacknowledged data older than this fails the socket: a dead peer must not hold writes
	 * for minutes of TCP retransmission. The ping timeout usually fires first. */
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

int tcp_listen_addr(const char *addr, unsigned port_offset)
{
	return net_listen(addr, port_offset);
}

int tcp_connect_addr(const char *addr, unsigned port_offset, const char *bind_host)
{
	return net_connect(addr, port_offset, bind_host, tcp_tune);
}
