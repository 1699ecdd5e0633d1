/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the replication transport interface. The "stream" cases run on every
 * implementation (TCP over a socketpair, TLS over loopback with a pre-shared key, the in-memory one
 * of tests/unit/support): frames cross
 * with their payload, reading pauses, close is safe inside callbacks, failures reach the owner.
 * Then TCP's lazy (coalesced) sends, its listen/connect over loopback, and the in-memory
 * transport's own controls.
 */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/buf.h"
#include "support/memtransport.h"
#include "support/tlspair.h"
#include "transport/tcp.h"
#include "transport/transport.h"
#include "transport/wire.h"

/* The owner of a stream in these tests. */
struct sink {
	unsigned frames;
	uint16_t last_type;
	uint32_t last_len;
	uint8_t *last_payload; /* a copy */
	bool misaligned;       /* a payload's data was not where wire_payload_align puts it */
	unsigned errors;
	char why[200];
	bool close_on_frame, close_on_error;
	struct tstream **self; /* cleared when the sink closes its stream */
};

static void sink_reset(struct sink *k)
{
	free(k->last_payload);
	memset(k, 0, sizeof(*k));
}

static void on_frame(void *ctx, struct tstream *s, const struct wire_hdr *h, uint8_t *payload)
{
	struct sink *k = ctx;
	k->frames++;
	k->last_type = h->type;
	k->last_len = h->len;
	free(k->last_payload);
	k->last_payload = NULL;
	if (payload) {
		uint32_t at = wire_payload_align(h);
		if (at && ((uintptr_t)(payload + at) & 4095u))
			k->misaligned = true;
		k->last_payload = malloc(h->len);
		memcpy(k->last_payload, payload, h->len);
		buf_put(payload, h->len);
	}
	if (k->close_on_frame) {
		tstream_close(s);
		*k->self = NULL;
	}
}

static void on_error(void *ctx, struct tstream *s, const char *why)
{
	struct sink *k = ctx;
	k->errors++;
	snprintf(k->why, sizeof(k->why), "%s", why);
	if (k->close_on_error) {
		tstream_close(s);
		*k->self = NULL;
	}
}

static const struct tstream_ops ops = {.frame = on_frame, .error = on_error};

/* An item the test owns: its sent() records how it ended. */
struct titem {
	struct outq_item it;
	unsigned sent;
	int err;
};

static void titem_sent(struct outq_item *it, int err)
{
	struct titem *t = (struct titem *)it;
	t->sent++;
	t->err = err;
}

/* A DATA frame: header and the fixed part inline, `len` bytes of data borrowed from `data`. */
static void titem_data(struct titem *t, const uint8_t *data, uint32_t len)
{
	memset(t, 0, sizeof(*t));
	struct wire_io io = {.id = 7, .off = 0, .len = len};
	wire_hdr_encode(t->it.hdr, WIRE_DATA, 0, WIRE_IO_SIZE + len);
	wire_io_encode(t->it.hdr + WIRE_HDR_SIZE, &io);
	t->it.hdr_len = WIRE_HDR_SIZE + WIRE_IO_SIZE;
	t->it.data = data;
	t->it.data_len = len;
	t->it.sent = titem_sent;
}

/* ---- a connected pair on either implementation --------------------------------------------- */

enum impl { IMPL_TCP, IMPL_MEM, IMPL_TLS, IMPL_N };
static const char *const impl_names[] = {"tcp", "mem", "tls"};

struct pair {
	enum impl impl;
	struct ev_loop *loop;
	struct tstream *tx, *rx;
	struct sink tx_sink, rx_sink;
	struct memwire wtx, wrx;
	struct tls_ctx *tls;
};

/* A TLS pair over loopback, both ends with one pre-shared key. */
static void pair_open_tls(struct pair *p)
{
	char psk[] = "/tmp/hak-psk-XXXXXX";
	int fd = mkstemp(psk);
	struct tlspair tp;
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "0123456789abcdef0123456789abcdef\n", 33), 33);
	close(fd);
	struct tls_params tlsp = {.psk_file = psk};
	char err[256];
	ck_assert_int_eq(tls_ctx_create(&tlsp, &p->tls, err, sizeof(err)), 0);
	unlink(psk);
	ck_assert_int_eq(
	    tlspair_connect(p->loop, p->tls, p->tls, &ops, &p->rx_sink, &p->tx_sink, &tp), 0);
	ck_assert_int_eq(tp.client_err, 0);
	ck_assert_ptr_nonnull(tp.client);
	ck_assert_ptr_nonnull(tp.server);
	p->tx = tp.client;
	p->rx = tp.server;
}

static void pair_open(struct pair *p, enum impl impl)
{
	memset(p, 0, sizeof(*p));
	p->impl = impl;
	p->loop = ev_loop_new(EVFLAG_AUTO);
	ck_assert_ptr_nonnull(p->loop);
	p->tx_sink.self = &p->tx;
	p->rx_sink.self = &p->rx;
	if (impl == IMPL_TCP) {
		int sv[2];
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
		ck_assert_int_eq(tcp_stream_create(p->loop, sv[0], &ops, &p->tx_sink, &p->tx), 0);
		ck_assert_int_eq(tcp_stream_create(p->loop, sv[1], &ops, &p->rx_sink, &p->rx), 0);
	} else if (impl == IMPL_TLS) {
		pair_open_tls(p);
	} else {
		ck_assert_int_eq(memstream_create(&p->wtx, &ops, &p->tx_sink, &p->tx), 0);
		ck_assert_int_eq(memstream_create(&p->wrx, &ops, &p->rx_sink, &p->rx), 0);
	}
	ck_assert_str_eq(p->tx->t->name, impl_names[impl]);
}

static void pair_close(struct pair *p)
{
	tstream_close(p->tx);
	tstream_close(p->rx);
	memwire_free(&p->wtx);
	memwire_free(&p->wrx);
	tls_ctx_free(p->tls);
	sink_reset(&p->tx_sink);
	sink_reset(&p->rx_sink);
	ev_loop_destroy(p->loop);
}

/* Runs loop iterations without sleeping for about `seconds`. */
static void spin(struct ev_loop *loop, double seconds)
{
	ev_now_update(loop);
	double end = ev_now(loop) + seconds;
	for (int i = 0; i < 100000; i++) {
		ev_run(loop, EVRUN_NOWAIT);
		usleep(1000);
		ev_now_update(loop);
		if (ev_now(loop) >= end)
			break;
	}
}

/* The in-memory "network": what one side flushed arrives at the other; a closed side is a
 * closed connection. */
static void mem_cross(struct memwire *from, struct memwire *to)
{
	memwire_flush(from);
	for (size_t i = 0; i < from->n_frames; i++) {
		const struct mem_frame *f = &from->frames[i];
		if (to->s)
			memwire_inject(to, f->hdr.type, f->hdr.flags, f->payload, f->hdr.len);
	}
	memwire_clear(from);
	if (from->closed && to->s && !to->failed)
		memwire_inject_error(to, "the peer closed the connection");
}

/* Let what was sent arrive. */
static void pair_pump(struct pair *p)
{
	if (p->impl != IMPL_MEM) {
		spin(p->loop, 0.03);
		return;
	}
	mem_cross(&p->wtx, &p->wrx);
	mem_cross(&p->wrx, &p->wtx);
}

static void send_pings(struct tstream *s, unsigned n, bool lazy)
{
	uint8_t id[WIRE_ID_SIZE] = {0};
	for (unsigned i = 0; i < n; i++) {
		id[7] = (uint8_t)i;
		if (lazy)
			ck_assert_int_eq(tstream_send_small_lazy(s, WIRE_PING, 0, id, sizeof(id)),
			                 0);
		else
			ck_assert_int_eq(tstream_send_small(s, WIRE_PING, 0, id, sizeof(id)), 0);
	}
}

/* ---- every implementation ------------------------------------------------------------------ */

START_TEST(frames_cross_with_their_payload)
{
	struct pair p;
	pair_open(&p, (enum impl)_i);
	/* Bigger than TCP's bulk threshold, so its direct read into the payload runs too. */
	uint32_t len = 256 * 1024;
	uint8_t *data = malloc(len);
	for (uint32_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 7 + 3);
	struct titem t;
	titem_data(&t, data, len);
	send_pings(p.tx, 1, false);
	tstream_send(p.tx, &t.it);
	ck_assert_uint_eq(t.sent, 0); /* never inside tstream_send */
	ck_assert_uint_eq(tstream_queued(p.tx),
	                  2 * WIRE_HDR_SIZE + WIRE_ID_SIZE + WIRE_IO_SIZE + len);
	for (int i = 0; i < 20 && p.rx_sink.frames < 2; i++)
		pair_pump(&p);
	ck_assert_uint_eq(p.rx_sink.frames, 2);
	ck_assert_uint_eq(p.rx_sink.last_type, WIRE_DATA);
	ck_assert_uint_eq(p.rx_sink.last_len, WIRE_IO_SIZE + len);
	ck_assert(memcmp(p.rx_sink.last_payload + WIRE_IO_SIZE, data, len) == 0);
	ck_assert(!p.rx_sink.misaligned);
	ck_assert_uint_eq(t.sent, 1);
	ck_assert_int_eq(t.err, 0);
	ck_assert_uint_eq(tstream_queued(p.tx), 0);
	ck_assert_uint_eq(p.rx_sink.errors + p.tx_sink.errors, 0);
	pair_close(&p);
	free(data);
}
END_TEST

/* A run of bulk frames (a resync's) goes straight into their buffers: after the first, only a
 * small peek of each payload passes through the input buffer and is copied. */
START_TEST(bulk_frames_skip_the_input_buffer)
{
	enum impl impl = _i == 0 ? IMPL_TCP : IMPL_TLS;
	struct pair p;
	pair_open(&p, impl);
	enum { N = 16 };
	uint32_t len = 256 * 1024;
	uint8_t *data = malloc(len);
	for (uint32_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 13 + 5);
	struct titem t[N];
	for (int i = 0; i < N; i++) {
		titem_data(&t[i], data, len);
		tstream_send(p.tx, &t[i].it);
	}
	for (int i = 0; i < 200 && p.rx_sink.frames < N; i++)
		pair_pump(&p);
	ck_assert_uint_eq(p.rx_sink.frames, N);
	ck_assert_uint_eq(p.rx_sink.last_len, WIRE_IO_SIZE + len);
	ck_assert(memcmp(p.rx_sink.last_payload + WIRE_IO_SIZE, data, len) == 0);
	ck_assert(!p.rx_sink.misaligned);
	ck_assert_uint_eq(p.rx_sink.errors + p.tx_sink.errors, 0);
	/* The first frame may come whole through the buffer; each later one at most a peek. */
	uint64_t copied = tcp_stream_copied(p.rx);
	ck_assert_msg(copied <= (uint64_t)len + WIRE_IO_SIZE + (N - 1) * 4096u,
	              "%llu payload bytes of %u went through the input buffer",
	              (unsigned long long)copied, N * (WIRE_IO_SIZE + len));
	pair_close(&p);
	free(data);
}
END_TEST

START_TEST(paused_reading_holds_frames)
{
	struct pair p;
	pair_open(&p, (enum impl)_i);
	tstream_pause(p.rx, true);
	send_pings(p.tx, 3, false);
	pair_pump(&p);
	ck_assert_uint_eq(p.rx_sink.frames, 0);
	tstream_pause(p.rx, false);
	pair_pump(&p);
	ck_assert_uint_eq(p.rx_sink.frames, 3);
	pair_close(&p);
}
END_TEST

START_TEST(close_inside_the_frame_callback)
{
	struct pair p;
	pair_open(&p, (enum impl)_i);
	p.rx_sink.close_on_frame = true;
	send_pings(p.tx, 3, false);
	pair_pump(&p);
	/* The first frame closed the stream: no more callbacks, nothing touched after (ASan). */
	ck_assert_uint_eq(p.rx_sink.frames, 1);
	ck_assert_ptr_null(p.rx);
	pair_close(&p);
}
END_TEST

START_TEST(peer_close_reaches_the_owner)
{
	struct pair p;
	pair_open(&p, (enum impl)_i);
	tstream_close(p.tx);
	p.tx = NULL;
	pair_pump(&p);
	ck_assert_uint_eq(p.rx_sink.errors, 1);
	ck_assert_str_eq(p.rx_sink.why, "the peer closed the connection");
	/* A failed stream answers a send at once. */
	struct titem t;
	titem_data(&t, (const uint8_t *)"x", 1);
	tstream_send(p.rx, &t.it);
	ck_assert_uint_eq(t.sent, 1);
	ck_assert_int_eq(t.err, ECONNRESET);
	pair_close(&p);
}
END_TEST

START_TEST(close_inside_the_error_callback)
{
	struct pair p;
	pair_open(&p, (enum impl)_i);
	p.rx_sink.close_on_error = true;
	tstream_close(p.tx);
	p.tx = NULL;
	pair_pump(&p);
	ck_assert_uint_eq(p.rx_sink.errors, 1);
	ck_assert_ptr_null(p.rx);
	pair_close(&p);
}
END_TEST

START_TEST(close_drops_queued_items)
{
	struct pair p;
	pair_open(&p, (enum impl)_i);
	struct titem t;
	titem_data(&t, (const uint8_t *)"abcd", 4);
	tstream_set_lazy(p.tx, 10.0, 1u << 20);
	tstream_send_lazy(p.tx, &t.it);
	ck_assert_uint_eq(tstream_queued(p.tx), WIRE_HDR_SIZE + WIRE_IO_SIZE + 4);
	tstream_close(p.tx);
	p.tx = NULL;
	ck_assert_uint_eq(t.sent, 1);
	ck_assert_int_eq(t.err, ECANCELED);
	pair_close(&p);
}
END_TEST

/* ---- TCP: lazy sends ----------------------------------------------------------------------- */

START_TEST(eager_sends_go_at_once)
{
	struct pair p;
	pair_open(&p, IMPL_TCP);
	send_pings(p.tx, 3, false);
	spin(p.loop, 0.02);
	ck_assert_uint_eq(p.rx_sink.frames, 3);
	ck_assert_uint_eq(p.rx_sink.last_type, WIRE_PING);
	ck_assert_uint_eq(p.rx_sink.errors + p.tx_sink.errors, 0);
	pair_close(&p);
}
END_TEST

START_TEST(lazy_without_setting_is_eager)
{
	struct pair p;
	pair_open(&p, IMPL_TCP);
	send_pings(p.tx, 2, true);
	spin(p.loop, 0.02);
	ck_assert_uint_eq(p.rx_sink.frames, 2);
	pair_close(&p);
}
END_TEST

START_TEST(lazy_waits_for_the_delay)
{
	struct pair p;
	pair_open(&p, IMPL_TCP);
	tstream_set_lazy(p.tx, 0.3, 1u << 20);
	send_pings(p.tx, 5, true);
	spin(p.loop, 0.1);
	/* Held: neither the delay nor the byte limit is reached. */
	ck_assert_uint_eq(p.rx_sink.frames, 0);
	ck_assert_uint_gt(tstream_queued(p.tx), 0);
	spin(p.loop, 0.4);
	ck_assert_uint_eq(p.rx_sink.frames, 5);
	ck_assert_uint_eq(tstream_queued(p.tx), 0);
	pair_close(&p);
}
END_TEST

START_TEST(lazy_goes_at_the_byte_limit)
{
	struct pair p;
	pair_open(&p, IMPL_TCP);
	/* Each PING frame is WIRE_HDR_SIZE + 8 bytes: four of them reach the limit. */
	tstream_set_lazy(p.tx, 10.0, 4 * (WIRE_HDR_SIZE + WIRE_ID_SIZE));
	send_pings(p.tx, 3, true);
	spin(p.loop, 0.05);
	ck_assert_uint_eq(p.rx_sink.frames, 0);
	send_pings(p.tx, 1, true);
	spin(p.loop, 0.05);
	ck_assert_uint_eq(p.rx_sink.frames, 4);
	pair_close(&p);
}
END_TEST

START_TEST(eager_send_takes_lazy_ones_along)
{
	struct pair p;
	pair_open(&p, IMPL_TCP);
	tstream_set_lazy(p.tx, 10.0, 1u << 20);
	send_pings(p.tx, 3, true);
	spin(p.loop, 0.05);
	ck_assert_uint_eq(p.rx_sink.frames, 0);
	send_pings(p.tx, 1, false);
	spin(p.loop, 0.05);
	/* In order, all four. */
	ck_assert_uint_eq(p.rx_sink.frames, 4);
	pair_close(&p);
}
END_TEST

START_TEST(close_with_lazy_items_queued)
{
	/* The timer must not fire on a freed stream (ASan would see it). */
	struct pair p;
	pair_open(&p, IMPL_TCP);
	tstream_set_lazy(p.tx, 0.05, 1u << 20);
	send_pings(p.tx, 2, true);
	tstream_close(p.tx);
	p.tx = NULL;
	spin(p.loop, 0.1);
	ck_assert_uint_eq(p.rx_sink.frames, 0);
	pair_close(&p);
}
END_TEST

/* ---- TCP: listen and connect --------------------------------------------------------------- */

/* A loopback address with a port nobody listens on (the kernel's pick, released again). */
static void free_port(char *addr, size_t len)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(addr, len, "127.0.0.1:%u", ntohs(sa.sin_port));
	close(fd);
}

/* What the listener and the connect hand over. */
struct ends {
	struct tstream *accepted, *connected;
	unsigned n_accepted, n_done;
	int err;
};

/* The owner of a listener or a connect, and of the streams they hand over. */
struct side {
	struct sink k; /* first: the stream callbacks take the ctx for a sink */
	struct ends *e;
};

static void ends_accepted(void *ctx, struct tlistener *l, struct tstream *s)
{
	struct side *d = ctx;
	(void)l;
	d->e->accepted = s;
	d->e->n_accepted++;
}

static void ends_done(void *ctx, struct tconnect *c, struct tstream *s, int err)
{
	struct side *d = ctx;
	(void)c;
	d->e->connected = s;
	d->e->err = err;
	d->e->n_done++;
}

START_TEST(transport_find_by_name)
{
	ck_assert_ptr_eq(transport_find("tcp"), &transport_tcp);
	errno = 0;
	ck_assert_ptr_null(transport_find("carrier-pigeon"));
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(tcp_listen_and_connect)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	const struct transport_ops *t = transport_find("tcp");
	struct ends e = {0};
	struct side ls = {.e = &e}, cs = {.e = &e};
	char addr[64];
	free_port(addr, sizeof(addr));
	struct tlisten_params lp = {
	    .loop = loop, .addr = addr, .ops = &ops, .ctx = &ls, .accepted = ends_accepted};
	struct tconnect_params cp = {.loop = loop,
	                             .addr = addr,
	                             .bind_host = "127.0.0.1",
	                             .ops = &ops,
	                             .ctx = &cs,
	                             .done = ends_done};
	struct tlistener *l;
	struct tconnect *c;
	ck_assert_int_eq(tlistener_open(t, &lp, &l), 0);
	ck_assert_int_eq(tconnect_start(t, &cp, &c), 0);
	for (int i = 0; i < 100 && (!e.n_accepted || !e.n_done); i++)
		spin(loop, 0.01);
	ck_assert_uint_eq(e.n_accepted, 1);
	ck_assert_uint_eq(e.n_done, 1);
	ck_assert_int_eq(e.err, 0);
	ck_assert_ptr_nonnull(e.connected);
	/* Both ways, to the owners the listener and the connect were given. */
	send_pings(e.connected, 2, false);
	send_pings(e.accepted, 1, false);
	spin(loop, 0.05);
	ck_assert_uint_eq(ls.k.frames, 2);
	ck_assert_uint_eq(cs.k.frames, 1);
	tstream_close(e.connected);
	tstream_close(e.accepted);
	tlistener_close(l);
	sink_reset(&ls.k);
	sink_reset(&cs.k);
	ev_loop_destroy(loop);
}
END_TEST

START_TEST(tcp_connect_refused)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct ends e = {0};
	struct side cs = {.e = &e};
	char addr[64];
	free_port(addr, sizeof(addr));
	struct tconnect_params cp = {
	    .loop = loop, .addr = addr, .ops = &ops, .ctx = &cs, .done = ends_done};
	struct tconnect *c;
	ck_assert_int_eq(tconnect_start(&transport_tcp, &cp, &c), 0);
	for (int i = 0; i < 100 && !e.n_done; i++)
		spin(loop, 0.01);
	ck_assert_uint_eq(e.n_done, 1);
	ck_assert_ptr_null(e.connected);
	ck_assert_int_eq(e.err, ECONNREFUSED);
	ev_loop_destroy(loop);
}
END_TEST

START_TEST(tcp_bad_addresses_fail_at_once)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct ends e = {0};
	struct side k = {.e = &e};
	struct tlisten_params lp = {
	    .loop = loop, .addr = "no-port", .ops = &ops, .ctx = &k, .accepted = ends_accepted};
	struct tconnect_params cp = {
	    .loop = loop, .addr = "127.0.0.1:0", .ops = &ops, .ctx = &k, .done = ends_done};
	struct tlistener *l;
	struct tconnect *c;
	ck_assert_int_eq(tlistener_open(&transport_tcp, &lp, &l), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(tconnect_start(&transport_tcp, &cp, &c), -1);
	ck_assert_int_eq(errno, EINVAL);
	ev_loop_destroy(loop);
}
END_TEST

START_TEST(tcp_cancel_connect)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct ends e = {0};
	struct side cs = {.e = &e};
	char addr[64];
	free_port(addr, sizeof(addr));
	struct tconnect_params cp = {
	    .loop = loop, .addr = addr, .ops = &ops, .ctx = &cs, .done = ends_done};
	struct tconnect *c;
	ck_assert_int_eq(tconnect_start(&transport_tcp, &cp, &c), 0);
	tconnect_cancel(c);
	spin(loop, 0.05);
	ck_assert_uint_eq(e.n_done, 0); /* and ASan saw no use of the freed connect */
	tconnect_cancel(NULL);
	tlistener_close(NULL);
	ev_loop_destroy(loop);
}
END_TEST

/* ---- the in-memory transport's controls ----------------------------------------------------- */

START_TEST(mem_records_frames_at_flush)
{
	struct memwire w = {0};
	struct sink k = {0};
	struct tstream *s;
	ck_assert_int_eq(memstream_create(&w, &ops, &k, &s), 0);
	struct titem t;
	titem_data(&t, (const uint8_t *)"0123456789", 10);
	uint8_t id[WIRE_ID_SIZE] = {1, 2, 3, 4, 5, 6, 7, 8};
	tstream_set_lazy(s, 0.5, 4096);
	ck_assert(w.lazy_delay == 0.5);
	ck_assert_uint_eq(w.lazy_bytes, 4096);
	ck_assert_int_eq(tstream_send_small(s, WIRE_PING, 0, id, sizeof(id)), 0);
	tstream_send_lazy(s, &t.it);
	ck_assert_int_eq(tstream_send_small_lazy(s, WIRE_BARRIER, 0, id, sizeof(id)), 0);
	/* Nothing leaves before the flush. */
	ck_assert_uint_eq(w.n_frames, 0);
	ck_assert_uint_eq(t.sent, 0);
	ck_assert_uint_gt(tstream_queued(s), 0);
	memwire_flush(&w);
	ck_assert_uint_eq(tstream_queued(s), 0);
	ck_assert_uint_eq(t.sent, 1);
	ck_assert_int_eq(t.err, 0);
	ck_assert_str_eq(w.bad, "");
	ck_assert_uint_eq(w.n_frames, 3);
	ck_assert_uint_eq(w.frames[0].hdr.type, WIRE_PING);
	ck_assert(!w.frames[0].lazy);
	ck_assert(memcmp(w.frames[0].payload, id, sizeof(id)) == 0);
	ck_assert_uint_eq(w.frames[1].hdr.type, WIRE_DATA);
	ck_assert_uint_eq(w.frames[1].hdr.len, WIRE_IO_SIZE + 10);
	ck_assert(w.frames[1].lazy);
	struct wire_io io;
	char why[200];
	ck_assert_int_eq(wire_io_decode(&w.frames[1].hdr, w.frames[1].payload, 1u << 20, 1, &io,
	                                why, sizeof(why)),
	                 0);
	ck_assert_uint_eq(io.id, 7);
	ck_assert(memcmp(w.frames[1].payload + WIRE_IO_SIZE, "0123456789", 10) == 0);
	ck_assert_uint_eq(w.frames[2].hdr.type, WIRE_BARRIER);
	ck_assert(w.frames[2].lazy);
	memwire_clear(&w);
	ck_assert_uint_eq(w.n_frames, 0);
	tstream_close(s);
	ck_assert(w.closed);
	ck_assert_ptr_null(w.s);
	memwire_free(&w);
}
END_TEST

START_TEST(mem_decodes_across_items)
{
	/* A frame's header in one item and its payload in the next still makes one frame. */
	struct memwire w = {0};
	struct sink k = {0};
	struct tstream *s;
	ck_assert_int_eq(memstream_create(&w, &ops, &k, &s), 0);
	struct titem a = {0}, b = {0};
	wire_hdr_encode(a.it.hdr, WIRE_PONG, 0, WIRE_ID_SIZE);
	a.it.hdr_len = WIRE_HDR_SIZE;
	a.it.sent = titem_sent;
	b.it.data = (const uint8_t *)"pongpong";
	b.it.data_len = WIRE_ID_SIZE;
	b.it.sent = titem_sent;
	tstream_send(s, &a.it);
	tstream_send_lazy(s, &b.it);
	memwire_flush(&w);
	ck_assert_uint_eq(w.n_frames, 1);
	ck_assert_uint_eq(w.frames[0].hdr.type, WIRE_PONG);
	ck_assert(!w.frames[0].lazy); /* its header went eagerly */
	ck_assert(memcmp(w.frames[0].payload, "pongpong", WIRE_ID_SIZE) == 0);
	/* Bytes no receiver would take are reported. */
	struct titem bad = {0};
	memset(bad.it.hdr, 0xee, WIRE_HDR_SIZE);
	bad.it.hdr_len = WIRE_HDR_SIZE;
	tstream_send(s, &bad.it);
	memwire_flush(&w);
	ck_assert_ptr_nonnull(strstr(w.bad, "bad frame magic"));
	tstream_close(s);
	memwire_free(&w);
}
END_TEST

START_TEST(mem_injects_frames_and_errors)
{
	struct memwire w = {0};
	struct sink k = {0};
	struct tstream *s;
	ck_assert_int_eq(memstream_create(&w, &ops, &k, &s), 0);
	k.self = &s;
	uint8_t id[WIRE_ID_SIZE] = {9};
	ck_assert_int_eq(memwire_inject(&w, WIRE_PING, 0, id, sizeof(id)), 0);
	ck_assert_uint_eq(k.frames, 1);
	ck_assert_uint_eq(k.last_payload[0], 9);
	tstream_pause(s, true);
	ck_assert(w.paused);
	ck_assert_int_eq(memwire_inject(&w, WIRE_PONG, 0, id, sizeof(id)), 0);
	ck_assert_uint_eq(k.frames, 1);
	ck_assert_uint_eq(w.held, 1);
	tstream_pause(s, false);
	ck_assert_uint_eq(k.frames, 2);
	ck_assert_uint_eq(k.last_type, WIRE_PONG);
	ck_assert_uint_eq(w.held, 0);
	/* The header checks of wire.c apply to injected frames too. */
	ck_assert_int_eq(memwire_inject(&w, WIRE_PING, 0, id, 3), 0);
	ck_assert_uint_eq(k.errors, 1);
	ck_assert_ptr_nonnull(strstr(k.why, "PING frame payload of 3 bytes"));
	ck_assert(w.failed);
	ck_assert_int_eq(memwire_inject(&w, WIRE_PING, 0, id, sizeof(id)), -1);
	ck_assert_int_eq(errno, EPIPE);
	tstream_close(s);
	memwire_free(&w);
	sink_reset(&k);

	/* An injected error; the owner closes inside its callback. */
	ck_assert_int_eq(memstream_create(&w, &ops, &k, &s), 0);
	k.self = &s;
	k.close_on_error = true;
	memwire_inject_error(&w, "receiving failed: Connection reset by peer");
	ck_assert_uint_eq(k.errors, 1);
	ck_assert_str_eq(k.why, "receiving failed: Connection reset by peer");
	ck_assert(w.closed);
	ck_assert_ptr_null(s);
	memwire_free(&w);
	sink_reset(&k);
}
END_TEST

START_TEST(mem_listen_and_connect)
{
	struct ends e = {0};
	struct side ls = {.e = &e}, cs = {.e = &e};
	struct memwire wa = {0}, wc = {0};
	struct tlisten_params lp = {
	    .addr = "10.0.0.1:7788", .ops = &ops, .ctx = &ls, .accepted = ends_accepted};
	struct tconnect_params cp = {
	    .addr = "10.0.0.2:7788", .port_offset = 3, .ops = &ops, .ctx = &cs, .done = ends_done};
	struct tlistener *l;
	struct tconnect *c1, *c2;
	ck_assert_int_eq(tlistener_open(&memtransport, &lp, &l), 0);
	ck_assert_ptr_eq(memtransport_listener("10.0.0.1:7788"), l);
	ck_assert_ptr_null(memtransport_listener("10.0.0.9:7788"));
	ck_assert_int_eq(memlistener_accept(l, &wa), 0);
	ck_assert_uint_eq(e.n_accepted, 1);
	ck_assert_ptr_eq(e.accepted, wa.s);

	ck_assert_int_eq(tconnect_start(&memtransport, &cp, &c1), 0);
	ck_assert_int_eq(tconnect_start(&memtransport, &cp, &c2), 0);
	ck_assert_ptr_eq(memtransport_connecting(), c1);
	unsigned off = 0;
	ck_assert_str_eq(memconnect_addr(c1, &off), "10.0.0.2:7788");
	ck_assert_uint_eq(off, 3);
	ck_assert_int_eq(memconnect_finish(c1, NULL, ECONNREFUSED), 0);
	ck_assert_uint_eq(e.n_done, 1);
	ck_assert_int_eq(e.err, ECONNREFUSED);
	ck_assert_ptr_null(e.connected);
	ck_assert_ptr_eq(memtransport_connecting(), c2);
	ck_assert_int_eq(memconnect_finish(c2, &wc, 0), 0);
	ck_assert_uint_eq(e.n_done, 2);
	ck_assert_int_eq(e.err, 0);
	ck_assert_ptr_eq(e.connected, wc.s);
	ck_assert_ptr_null(memtransport_connecting());
	ck_assert_int_eq(tconnect_start(&memtransport, &cp, &c1), 0);
	tconnect_cancel(c1);
	ck_assert_ptr_null(memtransport_connecting());

	/* The streams belong to the owners the listener and the connect were given. */
	uint8_t id[WIRE_ID_SIZE] = {0};
	ck_assert_int_eq(memwire_inject(&wa, WIRE_PING, 0, id, sizeof(id)), 0);
	ck_assert_int_eq(memwire_inject(&wc, WIRE_PONG, 0, id, sizeof(id)), 0);
	ck_assert_uint_eq(ls.k.frames, 1);
	ck_assert_uint_eq(cs.k.frames, 1);
	tstream_close(e.accepted);
	tstream_close(e.connected);
	tlistener_close(l);
	ck_assert_ptr_null(memtransport_listener("10.0.0.1:7788"));
	memwire_free(&wa);
	memwire_free(&wc);
	sink_reset(&ls.k);
	sink_reset(&cs.k);
}
END_TEST

int main(void)
{
	/* A TLS stream's socket BIO writes with write(): a closed peer would kill the test. */
	signal(SIGPIPE, SIG_IGN);
	Suite *s = suite_create("transport");
	TCase *t = tcase_create("stream");
	tcase_add_loop_test(t, frames_cross_with_their_payload, 0, IMPL_N);
	tcase_add_loop_test(t, paused_reading_holds_frames, 0, IMPL_N);
	tcase_add_loop_test(t, bulk_frames_skip_the_input_buffer, 0, 2);
	tcase_add_loop_test(t, close_inside_the_frame_callback, 0, IMPL_N);
	tcase_add_loop_test(t, peer_close_reaches_the_owner, 0, IMPL_N);
	tcase_add_loop_test(t, close_inside_the_error_callback, 0, IMPL_N);
	tcase_add_loop_test(t, close_drops_queued_items, 0, IMPL_N);
	suite_add_tcase(s, t);
	t = tcase_create("lazy");
	tcase_add_test(t, eager_sends_go_at_once);
	tcase_add_test(t, lazy_without_setting_is_eager);
	tcase_add_test(t, lazy_waits_for_the_delay);
	tcase_add_test(t, lazy_goes_at_the_byte_limit);
	tcase_add_test(t, eager_send_takes_lazy_ones_along);
	tcase_add_test(t, close_with_lazy_items_queued);
	suite_add_tcase(s, t);
	t = tcase_create("tcp");
	tcase_add_test(t, transport_find_by_name);
	tcase_add_test(t, tcp_listen_and_connect);
	tcase_add_test(t, tcp_connect_refused);
	tcase_add_test(t, tcp_bad_addresses_fail_at_once);
	tcase_add_test(t, tcp_cancel_connect);
	suite_add_tcase(s, t);
	t = tcase_create("mem");
	tcase_add_test(t, mem_records_frames_at_flush);
	tcase_add_test(t, mem_decodes_across_items);
	tcase_add_test(t, mem_injects_frames_and_errors);
	tcase_add_test(t, mem_listen_and_connect);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
