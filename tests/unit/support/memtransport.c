/* SPDX-License-Identifier: MIT */
#include "memtransport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"

/* An item the owner queued, until the test flushes. */
struct mem_out {
	struct outq_item *it;
	bool lazy;
	struct mem_out *next;
};

/* An injected frame, held while the owner paused reading. */
struct mem_in {
	struct wire_hdr hdr;
	uint8_t *payload;
	struct mem_in *next;
};

struct mem_stream {
	struct tstream base; /* first: a struct tstream * is a struct mem_stream * */
	struct memwire *w;   /* NULL once memwire_free detached it */
	struct mem_out *out_head, *out_tail;
	size_t out_bytes;
	struct mem_in *in_head, *in_tail;
	/* Bytes flushed that do not yet make a whole frame, and whether the item the first of
	 * them came from was lazy. */
	uint8_t *rx;
	size_t rx_len, rx_cap;
	bool rx_lazy;
	bool dead, paused, close_pending;
	int in_cb;
};

struct mem_listener {
	struct tlistener base;
	struct tlisten_params p;
	char *addr;
	struct mem_listener *next;
};

struct mem_connect {
	struct tconnect base;
	struct tconnect_params p;
	char *addr;
	bool in_done; /* done() is running: a cancel from inside it is too late */
	struct mem_connect *next;
};

/* Open listeners and pending connects, for the test to find. */
static struct mem_listener *listeners;
static struct mem_connect *connects;

static struct mem_stream *mem_of(struct tstream *s)
{
	return (struct mem_stream *)s;
}

static struct mem_stream *wire_stream(struct memwire *w)
{
	return w->s ? mem_of(w->s) : NULL;
}

/* ---- what the owner sends ------------------------------------------------------------------ */

static void record_frame(struct mem_stream *s, const struct wire_hdr *h, const uint8_t *payload,
                         bool lazy)
{
	struct memwire *w = s->w;
	if (w->n_frames == w->cap_frames) {
		size_t cap = w->cap_frames ? 2 * w->cap_frames : 16;
		struct mem_frame *f = realloc(w->frames, cap * sizeof(*f));
		if (!f)
			abort(); /* a test helper: running out of memory is the test's failure */
		w->frames = f;
		w->cap_frames = cap;
	}
	struct mem_frame *f = &w->frames[w->n_frames++];
	f->hdr = *h;
	f->lazy = lazy;
	f->payload = NULL;
	if (h->len) {
		f->payload = malloc(h->len);
		if (!f->payload)
			abort();
		memcpy(f->payload, payload, h->len);
	}
}

static void rx_append(struct mem_stream *s, const uint8_t *p, size_t n)
{
	if (s->rx_len + n > s->rx_cap) {
		size_t cap = s->rx_cap ? s->rx_cap : 4096;
		while (cap < s->rx_len + n)
			cap *= 2;
		uint8_t *rx = realloc(s->rx, cap);
		if (!rx)
			abort();
		s->rx = rx;
		s->rx_cap = cap;
	}
	memcpy(s->rx + s->rx_len, p, n);
	s->rx_len += n;
}

/* The bytes of one item join the stream; the frames they complete are recorded, those that start
 * in this item marked with its laziness. */
static void rx_item(struct mem_stream *s, const struct outq_item *it, bool lazy)
{
	size_t item_start = s->rx_len, pos = 0;
	rx_append(s, it->hdr, it->hdr_len);
	if (it->data_len)
		rx_append(s, it->data, it->data_len);
	if (s->w->bad[0])
		return;
	while (s->rx_len - pos >= WIRE_HDR_SIZE) {
		struct wire_hdr h;
		if (wire_hdr_decode(s->rx + pos, &h, s->w->bad, sizeof(s->w->bad)) < 0)
			return;
		if (s->rx_len - pos - WIRE_HDR_SIZE < h.len)
			break;
		record_frame(s, &h, s->rx + pos + WIRE_HDR_SIZE,
		             pos < item_start ? s->rx_lazy : lazy);
		pos += WIRE_HDR_SIZE + h.len;
	}
	if (pos >= item_start)
		s->rx_lazy = lazy;
	memmove(s->rx, s->rx + pos, s->rx_len - pos);
	s->rx_len -= pos;
}

static void stream_free(struct mem_stream *s)
{
	while (s->in_head) {
		struct mem_in *m = s->in_head;
		s->in_head = m->next;
		buf_put(m->payload, m->hdr.len);
		free(m);
	}
	free(s->rx);
	free(s);
}

/* Dropped items hear ECANCELED, as they would from a closing TCP stream. */
static void out_drop(struct mem_stream *s)
{
	while (s->out_head) {
		struct mem_out *o = s->out_head;
		s->out_head = o->next;
		s->out_bytes -= o->it->hdr_len + o->it->data_len;
		if (s->w)
			s->w->cancelled++;
		if (o->it->sent)
			o->it->sent(o->it, ECANCELED);
		free(o);
	}
	s->out_tail = NULL;
}

static void mem_close(struct tstream *ts)
{
	struct mem_stream *s = mem_of(ts);
	s->dead = true;
	out_drop(s);
	if (s->w) {
		s->w->closed = true;
		s->w->s = NULL;
		s->w = NULL;
	}
	if (s->in_cb)
		s->close_pending = true;
	else
		stream_free(s);
}

/* After a callback: a close from inside it frees the stream now. Returns false then. */
static bool cb_done(struct mem_stream *s)
{
	s->in_cb--;
	if (s->close_pending && !s->in_cb) {
		stream_free(s);
		return false;
	}
	return true;
}

static void stream_fail(struct mem_stream *s, const char *why)
{
	if (s->dead)
		return;
	s->dead = true;
	if (s->w)
		s->w->failed = true;
	s->in_cb++;
	s->base.ops->error(s->base.ctx, &s->base, why);
	cb_done(s);
}

static void mem_flush(struct mem_stream *s)
{
	s->in_cb++;
	/* sent() may queue more (it goes too) or close the stream (the rest is dropped). */
	while (!s->dead && s->out_head) {
		struct mem_out *o = s->out_head;
		s->out_head = o->next;
		if (!s->out_head)
			s->out_tail = NULL;
		s->out_bytes -= o->it->hdr_len + o->it->data_len;
		if (s->w)
			rx_item(s, o->it, o->lazy);
		if (o->it->sent)
			o->it->sent(o->it, 0);
		free(o);
	}
	cb_done(s);
}

static void mem_queue(struct tstream *ts, struct outq_item *it, bool lazy)
{
	struct mem_stream *s = mem_of(ts);
	if (s->dead) {
		if (it->sent)
			it->sent(it, ECONNRESET);
		return;
	}
	struct mem_out *o = calloc(1, sizeof(*o));
	if (!o)
		abort();
	o->it = it;
	o->lazy = lazy;
	if (s->out_tail)
		s->out_tail->next = o;
	else
		s->out_head = o;
	s->out_tail = o;
	s->out_bytes += it->hdr_len + it->data_len;
}

static void mem_send(struct tstream *ts, struct outq_item *it)
{
	mem_queue(ts, it, false);
}

static void mem_send_lazy(struct tstream *ts, struct outq_item *it)
{
	mem_queue(ts, it, true);
}

static int mem_send_small(struct tstream *ts, uint16_t type, uint16_t flags, const void *payload,
                          uint32_t len, bool lazy)
{
	struct outq_item *it = tstream_small_item(type, flags, payload, len);
	if (!it)
		return -1;
	mem_queue(ts, it, lazy);
	return 0;
}

static void mem_set_lazy(struct tstream *ts, double delay, size_t bytes)
{
	struct mem_stream *s = mem_of(ts);
	if (s->w) {
		s->w->lazy_delay = delay;
		s->w->lazy_bytes = bytes;
	}
}

static size_t mem_queued(const struct tstream *ts)
{
	return ((const struct mem_stream *)ts)->out_bytes;
}

/* Hand one frame to the owner. Returns false when the owner closed the stream in it. */
static bool deliver(struct mem_stream *s, const struct wire_hdr *h, uint8_t *payload)
{
	s->in_cb++;
	s->base.ops->frame(s->base.ctx, &s->base, h, payload);
	return cb_done(s);
}

static void mem_pause(struct tstream *ts, bool paused)
{
	struct mem_stream *s = mem_of(ts);
	if (s->dead || s->paused == paused)
		return;
	s->paused = paused;
	if (s->w)
		s->w->paused = paused;
	s->in_cb++; /* the stream outlives the frames it delivers here */
	while (!s->dead && !s->paused && s->in_head) {
		struct mem_in *m = s->in_head;
		s->in_head = m->next;
		if (!s->in_head)
			s->in_tail = NULL;
		if (s->w)
			s->w->held--;
		struct wire_hdr h = m->hdr;
		uint8_t *p = m->payload;
		free(m);
		deliver(s, &h, p);
	}
	cb_done(s);
}

static double mem_idle(const struct tstream *ts)
{
	const struct mem_stream *s = (const struct mem_stream *)ts;
	return s->w ? s->w->idle : 0.0;
}

static void mem_try_flush(struct tstream *ts)
{
	mem_flush(mem_of(ts));
}

/* ---- the test's side ----------------------------------------------------------------------- */

int memstream_create(struct memwire *w, const struct tstream_ops *ops, void *ctx,
                     struct tstream **out)
{
	struct mem_stream *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return -1;
	}
	s->base.t = &memtransport;
	s->w = w;
	s->base.ops = ops;
	s->base.ctx = ctx;
	w->s = &s->base;
	w->closed = w->failed = w->paused = false;
	*out = &s->base;
	return 0;
}

void memwire_flush(struct memwire *w)
{
	struct mem_stream *s = wire_stream(w);
	if (s)
		mem_flush(s);
}

int memwire_inject(struct memwire *w, uint16_t type, uint16_t flags, const void *payload,
                   uint32_t len)
{
	struct mem_stream *s = wire_stream(w);
	if (!s || s->dead) {
		errno = EPIPE;
		return -1;
	}
	uint8_t raw[WIRE_HDR_SIZE];
	struct wire_hdr h;
	char why[200];
	wire_hdr_encode(raw, type, flags, len);
	if (wire_hdr_decode(raw, &h, why, sizeof(why)) < 0) {
		stream_fail(s, why);
		return 0;
	}
	if (s->base.max_payload && len > s->base.max_payload) { /* as tcp.c */
		snprintf(why, sizeof(why), "a %u-byte frame exceeds the stream's limit of %u", len,
		         s->base.max_payload);
		stream_fail(s, why);
		return 0;
	}
	uint8_t *p = len ? buf_get_at(len, wire_payload_align(&h)) : NULL;
	if (len && !p) {
		stream_fail(s, "out of memory for a frame payload");
		return 0;
	}
	if (len)
		memcpy(p, payload, len);
	if (!s->paused) {
		deliver(s, &h, p);
		return 0;
	}
	struct mem_in *m = calloc(1, sizeof(*m));
	if (!m)
		abort();
	m->hdr = h;
	m->payload = p;
	if (s->in_tail)
		s->in_tail->next = m;
	else
		s->in_head = m;
	s->in_tail = m;
	w->held++;
	return 0;
}

void memwire_inject_error(struct memwire *w, const char *why)
{
	struct mem_stream *s = wire_stream(w);
	if (s)
		stream_fail(s, why);
}

void memwire_clear(struct memwire *w)
{
	for (size_t i = 0; i < w->n_frames; i++)
		free(w->frames[i].payload);
	w->n_frames = 0;
}

void memwire_free(struct memwire *w)
{
	struct mem_stream *s = wire_stream(w);
	if (s)
		s->w = NULL;
	w->s = NULL;
	memwire_clear(w);
	free(w->frames);
	w->frames = NULL;
	w->cap_frames = 0;
}

/* ---- listen and connect -------------------------------------------------------------------- */

static int mem_listen(const struct tlisten_params *p, struct tlistener **out)
{
	struct mem_listener *l = calloc(1, sizeof(*l));
	if (!l || !(l->addr = strdup(p->addr))) {
		free(l);
		errno = ENOMEM;
		return -1;
	}
	l->base.t = &memtransport;
	l->p = *p;
	l->p.addr = l->addr;
	l->next = listeners;
	listeners = l;
	*out = &l->base;
	return 0;
}

static void mem_listener_close(struct tlistener *tl)
{
	struct mem_listener *l = (struct mem_listener *)tl;
	for (struct mem_listener **pp = &listeners; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	free(l->addr);
	free(l);
}

struct tlistener *memtransport_listener(const char *addr)
{
	for (struct mem_listener *l = listeners; l; l = l->next)
		if (strcmp(l->addr, addr) == 0)
			return &l->base;
	return NULL;
}

int memlistener_accept(struct tlistener *tl, struct memwire *w)
{
	struct mem_listener *l = (struct mem_listener *)tl;
	struct tstream *s;
	if (memstream_create(w, l->p.ops, l->p.ctx, &s) < 0)
		return -1;
	l->p.accepted(l->p.ctx, &l->base, s);
	return 0;
}

static int mem_connect(const struct tconnect_params *p, struct tconnect **out)
{
	struct mem_connect *c = calloc(1, sizeof(*c));
	if (!c || !(c->addr = strdup(p->addr))) {
		free(c);
		errno = ENOMEM;
		return -1;
	}
	c->base.t = &memtransport;
	c->p = *p;
	c->p.addr = c->addr;
	c->p.bind_host = NULL;
	/* Appended: memtransport_connecting() gives the oldest. */
	struct mem_connect **pp = &connects;
	while (*pp)
		pp = &(*pp)->next;
	*pp = c;
	*out = &c->base;
	return 0;
}

static void connect_unlink(struct mem_connect *c)
{
	for (struct mem_connect **pp = &connects; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			return;
		}
}

static void mem_connect_cancel(struct tconnect *tc)
{
	struct mem_connect *c = (struct mem_connect *)tc;
	if (c->in_done)
		return;
	connect_unlink(c);
	free(c->addr);
	free(c);
}

struct tconnect *memtransport_connecting(void)
{
	return connects ? &connects->base : NULL;
}

const char *memconnect_addr(const struct tconnect *tc, unsigned *port_offset)
{
	const struct mem_connect *c = (const struct mem_connect *)tc;
	if (port_offset)
		*port_offset = c->p.port_offset;
	return c->addr;
}

int memconnect_finish(struct tconnect *tc, struct memwire *w, int err)
{
	struct mem_connect *c = (struct mem_connect *)tc;
	struct tstream *s = NULL;
	if (!err && memstream_create(w, c->p.ops, c->p.ctx, &s) < 0)
		return -1;
	/* Off the list before done() runs, which may start the next connect. */
	connect_unlink(c);
	c->in_done = true;
	c->p.done(c->p.ctx, &c->base, s, err);
	free(c->addr);
	free(c);
	return 0;
}

const struct transport_ops memtransport = {
    .name = "mem",
    .listen = mem_listen,
    .listener_close = mem_listener_close,
    .connect = mem_connect,
    .connect_cancel = mem_connect_cancel,
    .send = mem_send,
    .send_lazy = mem_send_lazy,
    .send_small = mem_send_small,
    .set_lazy = mem_set_lazy,
    .queued = mem_queued,
    .pause = mem_pause,
    .idle = mem_idle,
    .try_flush = mem_try_flush,
    .close = mem_close,
};
