/* SPDX-License-Identifier: MIT */
#include "tcp.h"

#include <errno.h>
#include <ev.h>
#include <netdb.h>
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

struct tcp_stream {
	struct tstream base; /* first: a struct tstream * is a struct tcp_stream * */
	struct ev_loop *loop;
	int fd;
	ev_io rio, wio;
	ev_prepare prep;
	/* Lazy items (tstream_send_lazy) wait for this timer, lazy_bytes queued, or an eager send.
	 */
	ev_timer lazy_w;
	double lazy_delay;
	size_t lazy_bytes;
	struct outq q;
	uint8_t *in;
	size_t in_len, in_pos;
	/* Frame being received. */
	bool have_hdr;
	struct wire_hdr hdr;
	uint8_t *payload;
	uint32_t got;
	bool bulk_last;  /* the last frame delivered had a bulk payload */
	uint64_t copied; /* payload bytes copied out of the input buffer */
	double last_rx;
	bool dead, paused;
	int in_cb;
	bool close_pending;
	/* A layer between the frames and the socket (tls.c), or NULL for plain syscalls. */
	const struct tcp_io *io;
	void *io_ctx;
	/* The layer's read waits for the socket to be writable, or its write for it to be
	 * readable (a TLS record in the way). */
	bool rd_wants_w, wr_wants_r;
};

struct tcp_listener {
	struct tlistener base;
	struct tlisten_params p; /* addr is not kept: only used to open */
	struct tcp_acceptor a;
};

struct tcp_connect {
	struct tconnect base;
	struct tconnect_params p; /* addr and bind_host are not kept */
	struct tcp_connector k;
	bool in_done; /* done() is running: a cancel from inside it is too late */
};

static struct tcp_stream *tcp_of(struct tstream *s)
{
	return (struct tcp_stream *)s;
}

static const struct tcp_stream *tcp_of_const(const struct tstream *s)
{
	return (const struct tcp_stream *)s;
}

/* ---- stream ------------------------------------------------------------------------------- */

static void stream_stop(struct tcp_stream *s)
{
	ev_io_stop(s->loop, &s->rio);
	ev_io_stop(s->loop, &s->wio);
	ev_prepare_stop(s->loop, &s->prep);
	ev_timer_stop(s->loop, &s->lazy_w);
}

static void stream_free(struct tcp_stream *s)
{
	stream_stop(s);
	outq_drop(&s->q, ECANCELED);
	if (s->io)
		s->io->free(s->io_ctx);
	if (s->fd >= 0)
		close(s->fd);
	if (s->payload)
		buf_put(s->payload, s->hdr.len);
	free(s->in);
	free(s);
}

static void stream_fail(struct tcp_stream *s, const char *why)
{
	if (s->dead)
		return;
	s->dead = true;
	stream_stop(s);
	s->in_cb++;
	s->base.ops->error(s->base.ctx, &s->base, why);
	s->in_cb--;
	/* Callers outside a read callback (the flush path) return right after this. */
	if (s->close_pending && !s->in_cb)
		stream_free(s);
}

/* outq_flush through the layer: 0 empty, 1 blocked until writable, 2 until readable, -1. */
static int stream_write(struct tcp_stream *s, char *why, size_t whylen)
{
	if (s->io && s->io->flush)
		return s->io->flush(s->io_ctx, &s->q, why, whylen);
	return outq_flush(&s->q, s->fd);
}

void tcp_try_flush(struct tstream *ts)
{
	struct tcp_stream *s = tcp_of(ts);
	char why[8];
	if (!s->dead)
		(void)stream_write(s, why, sizeof(why));
}

void tcp_close(struct tstream *ts)
{
	struct tcp_stream *s = tcp_of(ts);
	if (s->in_cb) {
		/* Inside one of our callbacks: free later, but release queued items now, since
		 * their owners free them as soon as this returns. */
		s->close_pending = true;
		s->dead = true;
		stream_stop(s);
		outq_drop(&s->q, ECANCELED);
		return;
	}
	stream_free(s);
}

static void stream_flush(struct tcp_stream *s)
{
	/* Everything queued goes now, lazy items included. */
	ev_timer_stop(s->loop, &s->lazy_w);
	char why[200] = "";
	int rc = stream_write(s, why, sizeof(why));
	if (rc < 0) {
		if (!why[0])
			snprintf(why, sizeof(why), "sending failed: %s", strerror(errno));
		stream_fail(s, why);
		return;
	}
	s->wr_wants_r = rc == 2;
	if (rc == 1 || s->rd_wants_w)
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

/* Deliver complete frames from the input buffer. Returns false once the stream failed. */
static bool stream_parse(struct tcp_stream *s)
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
			if (s->base.max_payload && s->hdr.len > s->base.max_payload) {
				snprintf(
				    why, sizeof(why),
				    "a %s frame of %u bytes exceeds the %u bytes this connection "
				    "may send yet",
				    wire_type_name(s->hdr.type), s->hdr.len, s->base.max_payload);
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
			s->copied += n;
		}
		if (s->got < s->hdr.len)
			break;
		struct wire_hdr h = s->hdr;
		uint8_t *p = s->payload;
		s->have_hdr = false;
		s->bulk_last = h.len >= NET_BULK_MIN;
		s->payload = NULL;
		s->in_cb++;
		s->base.ops->frame(s->base.ctx, &s->base, &h, p);
		s->in_cb--;
	}
	if (s->in_pos == s->in_len)
		s->in_pos = s->in_len = 0;
	return !s->dead;
}

static ssize_t stream_read_into(struct tcp_stream *s, void *buf, size_t len, char *why,
                                size_t whylen)
{
	if (s->io && s->io->read)
		return s->io->read(s->io_ctx, buf, len, why, whylen);
	return read(s->fd, buf, len);
}

/* One read into the input buffer, or straight into a bulk payload: the read's result. */
static ssize_t stream_read(struct tcp_stream *s, char *why, size_t whylen)
{
	ssize_t r;
	if (s->have_hdr && s->in_pos == s->in_len && s->hdr.len >= NET_BULK_MIN) {
		/* Bulk payloads go straight into their buffer, to their last byte: a read of the
		 * tail into the input buffer would take the next payload along. */
		r = stream_read_into(s, s->payload + s->got, s->hdr.len - s->got, why, whylen);
		if (r > 0)
			s->got += (uint32_t)r;
		return r;
	}
	if (s->in_pos && s->in_len == IN_SIZE) {
		memmove(s->in, s->in + s->in_pos, s->in_len - s->in_pos);
		s->in_len -= s->in_pos;
		s->in_pos = 0;
	}
	size_t room = IN_SIZE - s->in_len;
	if (s->bulk_last && s->in_len == 0 && room > NET_BULK_PEEK)
		room = NET_BULK_PEEK;
	r = stream_read_into(s, s->in + s->in_len, room, why, whylen);
	if (r > 0)
		s->in_len += (size_t)r;
	return r;
}

/* A layer may hold bytes the socket no longer signals (a decrypted record): read again soon. */
static void stream_rearm(struct tcp_stream *s)
{
	if (s->io && s->io->pending && !s->dead && !s->paused && s->io->pending(s->io_ctx))
		ev_feed_event(s->loop, &s->rio, EV_READ);
}

/* Up to 16 reads, each parsed. The caller holds in_cb. */
static void stream_read_some(struct tcp_stream *s)
{
	char why[200] = "";
	for (int i = 0; i < 16 && !s->dead && !s->paused; i++) {
		ssize_t r = stream_read(s, why, sizeof(why));
		if (r > 0) {
			s->last_rx = ev_now(s->loop);
			stream_parse(s);
			continue;
		}
		if (r == 0) {
			stream_fail(s, "the peer closed the connection");
			return;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EINPROGRESS) {
			s->rd_wants_w = true;
			ev_io_start(s->loop, &s->wio);
			return;
		}
		if (!why[0])
			snprintf(why, sizeof(why), "receiving failed: %s", strerror(errno));
		stream_fail(s, why);
		return;
	}
	stream_rearm(s);
}

static void read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_stream *s = w->data;
	(void)loop;
	(void)revents;
	s->in_cb++;
	if (s->wr_wants_r)
		stream_flush(s);
	if (!s->dead)
		stream_read_some(s);
	s->in_cb--;
	if (s->close_pending && !s->in_cb)
		stream_free(s);
}

static void write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_stream *s = w->data;
	(void)loop;
	(void)revents;
	s->in_cb++;
	if (s->rd_wants_w) {
		s->rd_wants_w = false;
		stream_read_some(s);
	}
	if (!s->dead)
		stream_flush(s);
	s->in_cb--;
	if (s->close_pending && !s->in_cb)
		stream_free(s);
}

int tcp_stream_create(struct ev_loop *loop, int fd, const struct tstream_ops *ops, void *ctx,
                      struct tstream **out)
{
	return tcp_stream_create_io(loop, fd, NULL, NULL, ops, ctx, out);
}

int tcp_stream_create_io(struct ev_loop *loop, int fd, const struct tcp_io *io, void *io_ctx,
                         const struct tstream_ops *ops, void *ctx, struct tstream **out)
{
	struct tcp_stream *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return -1;
	}
	s->in = malloc(IN_SIZE);
	if (!s->in) {
		free(s);
		errno = ENOMEM;
		return -1;
	}
	s->base.t = io && io->transport ? io->transport : &transport_tcp;
	s->loop = loop;
	s->fd = fd;
	s->io = io;
	s->io_ctx = io_ctx;
	s->base.ops = ops;
	s->base.ctx = ctx;
	s->last_rx = ev_now(loop);
	ev_io_init(&s->rio, read_cb, fd, EV_READ);
	ev_io_init(&s->wio, write_cb, fd, EV_WRITE);
	ev_prepare_init(&s->prep, prep_cb);
	ev_timer_init(&s->lazy_w, lazy_cb, 0., 0.);
	s->rio.data = s->wio.data = s->prep.data = s->lazy_w.data = s;
	ev_io_start(loop, &s->rio);
	stream_rearm(s);
	*out = &s->base;
	return 0;
}

void *tcp_stream_io(const struct tstream *ts, const struct tcp_io *io)
{
	const struct tcp_stream *s = tcp_of_const(ts);
	return ts->t->send == tcp_send && s->io == io ? s->io_ctx : NULL;
}

void tcp_send(struct tstream *ts, struct outq_item *it)
{
	struct tcp_stream *s = tcp_of(ts);
	if (s->dead) {
		if (it->sent)
			it->sent(it, ECONNRESET);
		return;
	}
	outq_push(&s->q, it);
	if (!ev_is_active(&s->wio))
		ev_prepare_start(s->loop, &s->prep);
}

void tcp_set_lazy(struct tstream *ts, double delay, size_t bytes)
{
	struct tcp_stream *s = tcp_of(ts);
	s->lazy_delay = delay;
	s->lazy_bytes = bytes;
}

void tcp_send_lazy(struct tstream *ts, struct outq_item *it)
{
	struct tcp_stream *s = tcp_of(ts);
	if (s->dead || s->lazy_delay <= 0) {
		tcp_send(ts, it);
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

int tcp_send_small(struct tstream *ts, uint16_t type, uint16_t flags, const void *payload,
                   uint32_t len, bool lazy)
{
	struct outq_item *it = tstream_small_item(type, flags, payload, len);
	if (!it)
		return -1;
	if (lazy)
		tcp_send_lazy(ts, it);
	else
		tcp_send(ts, it);
	return 0;
}

size_t tcp_queued(const struct tstream *ts)
{
	return tcp_of_const(ts)->q.bytes;
}

void tcp_pause(struct tstream *ts, bool paused)
{
	struct tcp_stream *s = tcp_of(ts);
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
	stream_rearm(s);
	s->in_cb--;
	if (s->close_pending && !s->in_cb)
		stream_free(s);
}

double tcp_idle(const struct tstream *ts)
{
	const struct tcp_stream *s = tcp_of_const(ts);
	return ev_now(s->loop) - s->last_rx;
}

uint64_t tcp_stream_copied(const struct tstream *ts)
{
	return tcp_of_const(ts)->copied;
}

int tcp_peer_name(const struct tstream *ts, char *buf, size_t len)
{
	return net_peer_name(tcp_of_const(ts)->fd, buf, len);
}

/* ---- listen and connect ------------------------------------------------------------------ */

/* Socket options for a replication stream: no Nagle, keepalive, short user timeout. */
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

static void acceptor_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_acceptor *a = w->data;
	(void)loop;
	(void)revents;
	int fd = accept4(a->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	tcp_tune(fd);
	a->take(a, fd);
}

int tcp_acceptor_open(struct tcp_acceptor *a, struct ev_loop *loop, const char *addr,
                      unsigned port_offset, void (*take)(struct tcp_acceptor *a, int fd),
                      void *owner)
{
	a->fd = net_listen(addr, port_offset);
	if (a->fd < 0)
		return -1;
	a->loop = loop;
	a->take = take;
	a->owner = owner;
	ev_io_init(&a->io, acceptor_cb, a->fd, EV_READ);
	a->io.data = a;
	ev_io_start(loop, &a->io);
	return 0;
}

void tcp_acceptor_close(struct tcp_acceptor *a)
{
	ev_io_stop(a->loop, &a->io);
	close(a->fd);
}

static void connector_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_connector *k = w->data;
	int err = 0, fd = k->fd;
	socklen_t len = sizeof(err);
	(void)revents;
	ev_io_stop(loop, w);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		close(fd);
		fd = -1;
	}
	k->fd = -1; /* the hook's now */
	k->done(k, fd, err);
}

int tcp_connector_start(struct tcp_connector *k, const struct tconnect_params *p,
                        void (*done)(struct tcp_connector *k, int fd, int err), void *owner)
{
	k->fd = net_connect(p->addr, p->port_offset, p->bind_host, tcp_tune);
	if (k->fd < 0)
		return -1;
	k->loop = p->loop;
	k->done = done;
	k->owner = owner;
	ev_io_init(&k->io, connector_cb, k->fd, EV_WRITE);
	k->io.data = k;
	ev_io_start(p->loop, &k->io);
	return 0;
}

void tcp_connector_cancel(struct tcp_connector *k)
{
	ev_io_stop(k->loop, &k->io);
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
}

static void listener_take(struct tcp_acceptor *a, int fd)
{
	struct tcp_listener *l = a->owner;
	struct tstream *s;
	if (tcp_stream_create(a->loop, fd, l->p.ops, l->p.ctx, &s) < 0) {
		close(fd);
		return;
	}
	/* Last: accepted() may close the listener. */
	l->p.accepted(l->p.ctx, &l->base, s);
}

static int tcp_listen(const struct tlisten_params *p, struct tlistener **out)
{
	struct tcp_listener *l = calloc(1, sizeof(*l));
	if (!l) {
		errno = ENOMEM;
		return -1;
	}
	if (tcp_acceptor_open(&l->a, p->loop, p->addr, p->port_offset, listener_take, l) < 0) {
		int saved = errno;
		free(l);
		errno = saved;
		return -1;
	}
	l->base.t = &transport_tcp;
	l->p = *p;
	l->p.addr = NULL;
	*out = &l->base;
	return 0;
}

static void tcp_listener_close(struct tlistener *tl)
{
	struct tcp_listener *l = (struct tcp_listener *)tl;
	tcp_acceptor_close(&l->a);
	free(l);
}

static void connect_done(struct tcp_connector *k, int fd, int err)
{
	struct tcp_connect *c = k->owner;
	struct tstream *s = NULL;
	if (!err && tcp_stream_create(k->loop, fd, c->p.ops, c->p.ctx, &s) < 0) {
		err = errno;
		close(fd);
	}
	c->in_done = true;
	c->p.done(c->p.ctx, &c->base, s, err);
	free(c);
}

static int tcp_connect(const struct tconnect_params *p, struct tconnect **out)
{
	struct tcp_connect *c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return -1;
	}
	if (tcp_connector_start(&c->k, p, connect_done, c) < 0) {
		int saved = errno;
		free(c);
		errno = saved;
		return -1;
	}
	c->base.t = &transport_tcp;
	c->p = *p;
	c->p.addr = c->p.bind_host = NULL;
	*out = &c->base;
	return 0;
}

static void tcp_connect_cancel(struct tconnect *tc)
{
	struct tcp_connect *c = (struct tcp_connect *)tc;
	if (c->in_done)
		return; /* the fd went to the stream or was closed; freed after done() */
	tcp_connector_cancel(&c->k);
	free(c);
}

const struct transport_ops transport_tcp = {
    .name = "tcp",
    .listen = tcp_listen,
    .listener_close = tcp_listener_close,
    .connect = tcp_connect,
    .connect_cancel = tcp_connect_cancel,
    TCP_STREAM_OPS,
};
