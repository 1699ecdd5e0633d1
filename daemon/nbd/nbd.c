/* SPDX-License-Identifier: MIT */
#include "nbd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/buf.h"
#include "conf/config.h"
#include "lib/log.h"
#include "lib/net.h"
#include "lib/usock.h"
#include "nbd_proto.h"
#include "nbd_tls.h"
#include "lib/outq.h"
#include "volume/volume.h"

#define IN_BUF_SIZE      (64u * 1024u)
#define MAX_INFLIGHT     256u          /* requests per connection before reading pauses */
#define MAX_INFLIGHT_MEM (64u << 20)   /* payload bytes per connection before reading pauses */
#define MAP_MAX          64u           /* extents per BLOCK_STATUS / structured READ */
#define HOLE_SCAN_MIN    (64u * 1024u) /* structured reads this big look for holes first */
#define READS_PER_WAKEUP 8

_Static_assert((int)HAK_NBD_TLS_OFF == (int)NBD_TLS_OFF && (int)HAK_NBD_TLS_ON == (int)NBD_TLS_ON &&
                   (int)HAK_NBD_TLS_REQUIRE == (int)NBD_TLS_REQUIRE,
               "config.h's nbd-tls modes are nbd_proto.h's");

struct nbd_conn;
struct nbd_creq;

struct nbd_creq {
	struct nbd_conn *conn;
	struct nbd_request r;
	void *buf;
	size_t buf_len;
	struct vol_io vio;
	int phase; /* structured READ: 0 = hole scan, 1 = data read */
	bool all_hole;
	unsigned scan_count; /* extents found by the hole scan */
	struct io_extent map[MAP_MAX];
	uint8_t *bs_payload;
	struct outq_item *items;
	unsigned n_items;
	unsigned unsent;
	struct outq_item inline_items[1];
};

enum conn_state {
	C_HS_FLAGS = 0,
	C_HS_OPT_HDR,
	C_HS_OPT_DATA,
	C_HS_OPT_DISCARD,
	C_TLS_ACK, /* the STARTTLS ACK is being written; nothing is read meanwhile */
	C_TLS_HS,  /* the TLS handshake runs */
	C_TX_HDR,
	C_TX_PAYLOAD,
	C_TX_DISCARD,
	C_CLOSED,
};

struct nbd_conn {
	struct nbd_server *srv;
	uint64_t id;
	int fd;
	ev_io rio, wio;
	ev_io tio; /* TLS only: a read waiting for writability, or a write for readability */
	ev_timer hs_timer;
	struct nbd_tls *tls;             /* set once STARTTLS was acknowledged */
	bool tls_read_wants_write;       /* SSL_read asked to wait for a writable socket */
	bool tls_write_wants_read;       /* SSL_write asked to wait for a readable socket */
	char peer[INET6_ADDRSTRLEN + 8]; /* "ADDR:PORT", or "UNIX socket" */
	enum conn_state state;
	struct nbd_neg neg;
	uint8_t *in;
	size_t in_len, in_pos;
	uint32_t opt, opt_len, opt_got;
	uint8_t *opt_data;
	uint64_t discard_left;
	uint32_t discard_err;
	struct nbd_request discard_req;
	struct nbd_creq *cur;
	uint32_t payload_got;
	bool bulk_last; /* the last write's payload was at least NET_BULK_MIN */
	struct outq out;
	unsigned in_flight;
	size_t inflight_mem;
	bool read_paused, stop_reading, want_close, in_dirty;
	struct nbd_conn *prev, *next, *dirty_next;
};

struct nbd_server {
	struct ev_loop *loop;
	struct volume *vol;
	struct nbd_server_opts opts;
	char *unix_path;
	int lfd[2];
	ev_io lio[2];
	enum nbd_tls_mode tls_mode[2]; /* per listener: UNIX, TCP */
	struct nbd_tls_ctx *tls_ctx;   /* NULL when TLS is off */
	ev_prepare prep;
	struct nbd_export exp;
	char desc[256];
	const struct nbd_export *exp_list[1];
	struct nbd_conn *conns;
	struct nbd_conn *dirty;
	uint64_t next_id;
	bool shutting_down;
	struct nbd_server_stats st;
};

static void conn_close(struct nbd_conn *c, const char *why);
static void conn_process(struct nbd_conn *c);
static void conn_mark_dirty(struct nbd_conn *c);
static void conn_tls_begin(struct nbd_conn *c);
static void conn_tls_kick(struct nbd_conn *c);
static void conn_read_cb(struct ev_loop *loop, ev_io *w, int revents);

/* ---- output ----------------------------------------------------------------------------- */

static void out_push(struct nbd_conn *c, struct outq_item *it)
{
	outq_push(&c->out, it);
	conn_mark_dirty(c);
}

static int out_push_heap(struct nbd_conn *c, struct nbd_buf *b)
{
	if (b->len == 0) {
		nbd_buf_free(b);
		return 0;
	}
	struct outq_item *it = calloc(1, sizeof(*it));
	if (!it)
		return -1;
	it->data = b->data;
	it->data_len = b->len;
	it->sent = outq_free_item_and_data;
	b->data = NULL;
	b->len = b->cap = 0;
	out_push(c, it);
	return 0;
}

static void creq_free(struct nbd_creq *q)
{
	struct nbd_conn *c = q->conn;
	c->in_flight--;
	c->inflight_mem -= q->buf_len;
	c->srv->st.in_flight--;
	buf_put(q->buf, q->buf_len);
	free(q->bs_payload);
	if (q->items != q->inline_items)
		free(q->items);
	free(q);
	/* Resume a connection that paused because too much was in flight. */
	if (c->read_paused && !c->stop_reading && c->state != C_CLOSED &&
	    c->in_flight < MAX_INFLIGHT / 2 && c->inflight_mem < MAX_INFLIGHT_MEM / 2) {
		c->read_paused = false;
		ev_io_start(c->srv->loop, &c->rio);
		conn_process(c);
		conn_tls_kick(c);
	}
	if (c->want_close || c->stop_reading)
		conn_mark_dirty(c);
}

/* A reply item of a request: the request goes once all its items are written. */
static void creq_item_sent(struct outq_item *it, int err)
{
	struct nbd_creq *q = it->ctx;
	(void)err;
	if (--q->unsent == 0)
		creq_free(q);
}

/* Output queued or, with TLS, taken from the queue and not yet written. */
static bool conn_out_pending(const struct nbd_conn *c)
{
	return c->out.head || (c->tls && nbd_tls_unsent(c->tls));
}

/* TLS may turn a read into a wait for writability and a write into one for readability. */
static void conn_tls_watch(struct nbd_conn *c)
{
	int ev = (c->tls_read_wants_write ? EV_WRITE : 0) | (c->tls_write_wants_read ? EV_READ : 0);
	if (ev == (ev_is_active(&c->tio) ? c->tio.events & (EV_READ | EV_WRITE) : 0))
		return;
	ev_io_stop(c->srv->loop, &c->tio);
	if (!ev)
		return;
	ev_io_set(&c->tio, c->fd, ev);
	ev_io_start(c->srv->loop, &c->tio);
}

static void conn_tls_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct nbd_conn *c = w->data;
	if ((revents & EV_READ) && c->tls_write_wants_read) {
		c->tls_write_wants_read = false;
		conn_mark_dirty(c);
	}
	if ((revents & EV_WRITE) && c->tls_read_wants_write) {
		c->tls_read_wants_write = false;
		conn_read_cb(loop, &c->rio, EV_READ);
	}
	if (c->state != C_CLOSED)
		conn_tls_watch(c);
}

/* Write as much queued output as the socket takes. 0, or -1 when the connection is dead. */
static int conn_flush_out(struct nbd_conn *c)
{
	enum nbd_tls_want want = NBD_TLS_WANT_NONE;
	int rc = c->tls ? nbd_tls_flush(c->tls, &c->out, &want) : outq_flush(&c->out, c->fd);
	if (rc < 0)
		return -1;
	if (rc == 1 && want != NBD_TLS_WANT_READ)
		ev_io_start(c->srv->loop, &c->wio);
	else
		ev_io_stop(c->srv->loop, &c->wio);
	if (c->tls) {
		c->tls_write_wants_read = want == NBD_TLS_WANT_READ;
		conn_tls_watch(c);
	}
	if (rc == 0 && c->state == C_TLS_ACK)
		conn_tls_begin(c);
	return 0;
}

static void conn_mark_dirty(struct nbd_conn *c)
{
	if (c->in_dirty)
		return;
	c->in_dirty = true;
	c->dirty_next = c->srv->dirty;
	c->srv->dirty = c;
}

static void conn_free(struct nbd_conn *c)
{
	struct nbd_server *s = c->srv;
	outq_drop(&c->out, ECANCELED);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->in_dirty) {
		struct nbd_conn **pp = &s->dirty;
		while (*pp && *pp != c)
			pp = &(*pp)->dirty_next;
		if (*pp)
			*pp = c->dirty_next;
	}
	s->st.clients--;
	nbd_tls_free(c->tls);
	free(c->in);
	free(c->opt_data);
	free(c);
}

/* Runs once per loop iteration after I/O completions: write replies, retire dead connections. */
static void server_prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct nbd_server *s = w->data;
	(void)loop;
	(void)revents;
	while (s->dirty) {
		struct nbd_conn *c = s->dirty;
		s->dirty = c->dirty_next;
		c->in_dirty = false;
		if (c->state != C_CLOSED && conn_flush_out(c) < 0)
			conn_close(c, strerror(errno));
		bool drained = c->in_flight == 0 && !conn_out_pending(c);
		if (c->state != C_CLOSED && c->stop_reading && drained)
			conn_close(c, NULL);
		if (c->state == C_CLOSED && c->in_flight == 0)
			conn_free(c);
	}
}

static void conn_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct nbd_conn *c = w->data;
	(void)loop;
	(void)revents;
	conn_mark_dirty(c);
}

/*
 * Close the socket at once; the structure lives until the requests still in flight come back
 * from the volume (their buffers belong to it).
 */
static void conn_close(struct nbd_conn *c, const char *why)
{
	struct ev_loop *loop = c->srv->loop;
	if (c->state == C_CLOSED)
		return;
	if (why)
		log_vol(LOG_LVL_INFO, c->srv->exp.name, NULL, "Closing client %llu (%s): %s%s",
		        (unsigned long long)c->id, c->peer, why,
		        why[0] && why[strlen(why) - 1] == '.' ? "" : ".");
	else
		log_vol(LOG_LVL_DEBUG, c->srv->exp.name, NULL, "Client %llu (%s) disconnected.",
		        (unsigned long long)c->id, c->peer);
	c->state = C_CLOSED;
	ev_io_stop(loop, &c->rio);
	ev_io_stop(loop, &c->wio);
	ev_io_stop(loop, &c->tio);
	ev_timer_stop(loop, &c->hs_timer);
	nbd_tls_close(c->tls); /* a flush up the stack may still hold it: freed in conn_free */
	close(c->fd);
	c->fd = -1;
	outq_drop(&c->out, ECANCELED);
	if (c->cur) {
		struct nbd_creq *q = c->cur;
		c->cur = NULL;
		q->unsent = 0;
		creq_free(q);
	}
	conn_mark_dirty(c);
}

static void conn_protocol_error(struct nbd_conn *c, const char *why)
{
	c->srv->st.protocol_errors++;
	log_vol(LOG_LVL_WARN, c->srv->exp.name, NULL, "Client %llu (%s) violated the protocol: %s.",
	        (unsigned long long)c->id, c->peer, why);
	conn_close(c, NULL);
}

/* ---- transmission ------------------------------------------------------------------------ */

static struct nbd_creq *creq_new(struct nbd_conn *c, const struct nbd_request *r, size_t buf_len)
{
	struct nbd_creq *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	if (buf_len) {
		q->buf = buf_get(buf_len);
		if (!q->buf) {
			free(q);
			return NULL;
		}
		q->buf_len = buf_len;
	}
	q->conn = c;
	q->r = *r;
	q->items = q->inline_items;
	c->in_flight++;
	c->inflight_mem += buf_len;
	c->srv->st.in_flight++;
	return q;
}

static void creq_send_items(struct nbd_creq *q, unsigned n)
{
	q->n_items = n;
	q->unsent = n;
	for (unsigned i = 0; i < n; i++) {
		q->items[i].ctx = q;
		q->items[i].sent = creq_item_sent;
		out_push(q->conn, &q->items[i]);
	}
}

/* Reply with only an error (or success without data). */
static void creq_reply_status(struct nbd_creq *q, uint32_t err)
{
	struct outq_item *it = &q->items[0];
	memset(it, 0, sizeof(*it));
	if (err && q->conn->neg.structured) {
		static const char msg[] = "request failed";
		nbd_chunk_header(it->hdr, q->r.cookie, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR,
		                 4 + 2 + sizeof(msg) - 1);
		be_put32(it->hdr + 20, err);
		be_put16(it->hdr + 24, sizeof(msg) - 1);
		it->hdr_len = 26;
		it->data = (const uint8_t *)msg;
		it->data_len = sizeof(msg) - 1;
	} else {
		nbd_simple_reply(it->hdr, q->r.cookie, err);
		it->hdr_len = NBD_SIMPLE_REPLY_SIZE;
	}
	creq_send_items(q, 1);
}

static void item_data(struct outq_item *it, struct nbd_creq *q, uint64_t off, uint64_t len)
{
	memset(it, 0, sizeof(*it));
	nbd_chunk_header(it->hdr, q->r.cookie, 0, NBD_REPLY_TYPE_OFFSET_DATA, (uint32_t)(8 + len));
	be_put64(it->hdr + 20, off);
	it->hdr_len = 28;
	it->data = (const uint8_t *)q->buf + (off - q->r.offset);
	it->data_len = len;
}

static void item_hole(struct outq_item *it, struct nbd_creq *q, uint64_t off, uint64_t len)
{
	memset(it, 0, sizeof(*it));
	nbd_chunk_header(it->hdr, q->r.cookie, 0, NBD_REPLY_TYPE_OFFSET_HOLE, 12);
	be_put64(it->hdr + 20, off);
	be_put32(it->hdr + 28, (uint32_t)len);
	it->hdr_len = 32;
}

static void creq_reply_read(struct nbd_creq *q)
{
	struct outq_item *it = &q->items[0];
	uint64_t off = q->r.offset, end = q->r.offset + q->r.length;
	unsigned n = q->scan_count, k = 0;

	if (!q->conn->neg.structured) {
		memset(it, 0, sizeof(*it));
		nbd_simple_reply(it->hdr, q->r.cookie, 0);
		it->hdr_len = NBD_SIMPLE_REPLY_SIZE;
		it->data = q->buf;
		it->data_len = q->r.length;
		creq_send_items(q, 1);
		return;
	}
	if (q->all_hole) {
		item_hole(it, q, off, q->r.length);
		k = 1;
	} else if (n <= 1 || (q->r.flags & NBD_CMD_FLAG_DF)) {
		item_data(it, q, off, q->r.length);
		k = 1;
	} else {
		/* One chunk per extent of the hole scan; whatever the scan did not cover is data.
		 */
		struct outq_item *items = calloc(n + 1, sizeof(*items));
		if (!items) {
			item_data(it, q, off, q->r.length);
			k = 1;
		} else {
			q->items = items;
			for (unsigned i = 0; i < n && off < end; i++) {
				uint64_t len =
				    q->map[i].len < end - off ? q->map[i].len : end - off;
				if (q->map[i].hole)
					item_hole(&items[k++], q, off, len);
				else
					item_data(&items[k++], q, off, len);
				off += len;
			}
			if (off < end)
				item_data(&items[k++], q, off, end - off);
		}
	}
	if (k ==
	    0) { /* cannot happen for a validated (non-empty) read; keeps the reply well-formed */
		item_data(&q->items[0], q, q->r.offset, q->r.length);
		k = 1;
	}
	be_put16(q->items[k - 1].hdr + 4, NBD_REPLY_FLAG_DONE);
	creq_send_items(q, k);
}

static void creq_reply_block_status(struct nbd_creq *q)
{
	unsigned n = q->vio.map_count;
	if (n == 0 || (q->r.flags & NBD_CMD_FLAG_REQ_ONE))
		n = n ? 1 : 0;
	if (n == 0) {
		creq_reply_status(q, NBD_EIO);
		return;
	}
	q->bs_payload = malloc(4 + 8 * (size_t)n);
	if (!q->bs_payload) {
		creq_reply_status(q, NBD_ENOMEM);
		return;
	}
	be_put32(q->bs_payload, NBD_META_ALLOC_ID);
	for (unsigned i = 0; i < n; i++) {
		be_put32(q->bs_payload + 4 + 8 * i, (uint32_t)q->map[i].len);
		be_put32(q->bs_payload + 8 + 8 * i,
		         q->map[i].hole ? (NBD_STATE_HOLE | NBD_STATE_ZERO) : 0);
	}
	struct outq_item *it = &q->items[0];
	memset(it, 0, sizeof(*it));
	nbd_chunk_header(it->hdr, q->r.cookie, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_BLOCK_STATUS,
	                 (uint32_t)(4 + 8 * n));
	it->hdr_len = NBD_STRUCT_REPLY_SIZE;
	it->data = q->bs_payload;
	it->data_len = 4 + 8 * (size_t)n;
	creq_send_items(q, 1);
}

static void creq_submit(struct nbd_creq *q, enum vol_op op);

static void creq_done(struct vol_io *vio)
{
	struct nbd_creq *q = vio->data;
	if (q->conn->state == C_CLOSED) {
		/* Nobody to answer: just release. */
		q->unsent = 0;
		creq_free(q);
		return;
	}
	if (vio->err) {
		if (q->phase == 0 && q->r.type == NBD_CMD_READ && vio->op == VOL_BLOCK_STATUS) {
			vio->map_count = 0; /* the hole scan is an optimisation only */
		} else {
			log_vol(LOG_LVL_WARN, q->conn->srv->exp.name, NULL,
			        "%s of %u bytes at offset %llu failed: %s.",
			        nbd_cmd_name(q->r.type), q->r.length,
			        (unsigned long long)q->r.offset, strerror(vio->err));
			creq_reply_status(q, nbd_errno_to_nbd(vio->err));
			return;
		}
	}
	switch (q->r.type) {
	case NBD_CMD_READ:
		if (vio->op == VOL_BLOCK_STATUS) {
			q->phase = 1;
			q->scan_count = vio->map_count;
			if (vio->map_count == 1 && q->map[0].hole && q->map[0].len >= q->r.length) {
				q->all_hole = true; /* nothing to read */
				creq_reply_read(q);
				return;
			}
			creq_submit(q, VOL_READ);
			return;
		}
		creq_reply_read(q);
		return;
	case NBD_CMD_BLOCK_STATUS:
		creq_reply_block_status(q);
		return;
	default:
		creq_reply_status(q, 0);
		return;
	}
}

static void creq_submit(struct nbd_creq *q, enum vol_op op)
{
	struct vol_io *v = &q->vio;
	memset(v, 0, sizeof(*v));
	v->op = op;
	v->off = q->r.offset;
	v->len = q->r.length;
	v->buf = q->buf;
	v->map = q->map;
	v->map_max = MAP_MAX;
	v->done = creq_done;
	v->data = q;
	if (q->r.flags & NBD_CMD_FLAG_FUA)
		v->flags |= VOL_F_FUA;
	if (q->r.flags & NBD_CMD_FLAG_NO_HOLE)
		v->flags |= VOL_F_NO_HOLE;
	if (q->r.flags & NBD_CMD_FLAG_FAST_ZERO)
		v->flags |= VOL_F_FAST_ZERO;
	volume_submit(q->conn->srv->vol, v);
}

static void conn_start_request(struct nbd_conn *c, struct nbd_creq *q)
{
	static const enum vol_op ops[] = {
	    [NBD_CMD_READ] = VOL_READ,
	    [NBD_CMD_WRITE] = VOL_WRITE,
	    [NBD_CMD_FLUSH] = VOL_FLUSH,
	    [NBD_CMD_TRIM] = VOL_TRIM,
	    [NBD_CMD_CACHE] = VOL_CACHE,
	    [NBD_CMD_WRITE_ZEROES] = VOL_ZERO,
	    [NBD_CMD_BLOCK_STATUS] = VOL_BLOCK_STATUS,
	};
	(void)c;
	if (q->r.type == NBD_CMD_READ && c->neg.structured && !(q->r.flags & NBD_CMD_FLAG_DF) &&
	    q->r.length >= HOLE_SCAN_MIN) {
		q->phase = 0;
		creq_submit(q, VOL_BLOCK_STATUS);
		return;
	}
	q->phase = 1;
	creq_submit(q, ops[q->r.type]);
}

static bool conn_over_limit(const struct nbd_conn *c)
{
	return c->in_flight >= MAX_INFLIGHT || c->inflight_mem >= MAX_INFLIGHT_MEM;
}

/* Reply to a request refused before any I/O. */
static void conn_reply_error(struct nbd_conn *c, const struct nbd_request *r, uint32_t err)
{
	struct nbd_creq *q = creq_new(c, r, 0);
	c->srv->st.invalid_requests++;
	log_vol(LOG_LVL_DEBUG, c->srv->exp.name, NULL,
	        "Client %llu: %s offset=%llu length=%u flags=0x%x refused with NBD error %u.",
	        (unsigned long long)c->id, nbd_cmd_name(r->type), (unsigned long long)r->offset,
	        r->length, r->flags, err);
	if (!q) {
		conn_close(c, "out of memory while refusing a request");
		return;
	}
	creq_reply_status(q, err);
}

/* Parse one request header from the input. Returns false when more input is needed. */
static bool conn_tx_header(struct nbd_conn *c)
{
	struct nbd_request r;
	if (c->in_len - c->in_pos < NBD_REQUEST_SIZE)
		return false;
	if (nbd_request_decode(c->in + c->in_pos, &r) < 0) {
		char why[96];
		snprintf(why, sizeof(why), "bad request magic 0x%08x", be_get32(c->in + c->in_pos));
		conn_protocol_error(c, why);
		return false;
	}
	c->in_pos += NBD_REQUEST_SIZE;
	c->bulk_last = false;
	if (r.type == NBD_CMD_DISC) {
		c->stop_reading = true;
		ev_io_stop(c->srv->loop, &c->rio);
		conn_mark_dirty(c);
		return false;
	}
	uint32_t err = nbd_request_validate(&c->neg, &c->srv->exp, &r);
	if (r.type == NBD_CMD_WRITE && err) {
		/* The payload follows regardless: skip it without buffering, then answer. */
		c->discard_left = r.length;
		c->discard_err = err;
		c->discard_req = r;
		c->state = C_TX_DISCARD;
		return true;
	}
	if (err) {
		conn_reply_error(c, &r, err);
		return true;
	}
	size_t blen = (r.type == NBD_CMD_READ || r.type == NBD_CMD_WRITE) ? r.length : 0;
	struct nbd_creq *q = creq_new(c, &r, blen);
	if (!q && r.type == NBD_CMD_WRITE) {
		c->discard_left = r.length;
		c->discard_err = NBD_ENOMEM;
		c->discard_req = r;
		c->state = C_TX_DISCARD;
		return true;
	}
	if (!q) {
		conn_reply_error(c, &r, NBD_ENOMEM);
		return true;
	}
	if (r.type == NBD_CMD_WRITE) {
		c->cur = q;
		c->payload_got = 0;
		c->state = C_TX_PAYLOAD;
		return true;
	}
	conn_start_request(c, q);
	return true;
}

/* Consume buffered input according to the state. */
static bool conn_tx_step(struct nbd_conn *c)
{
	size_t avail = c->in_len - c->in_pos;
	switch (c->state) {
	case C_TX_HDR:
		if (c->srv->shutting_down) {
			c->stop_reading = true;
			ev_io_stop(c->srv->loop, &c->rio);
			conn_mark_dirty(c);
			return false;
		}
		if (conn_over_limit(c)) {
			c->read_paused = true;
			ev_io_stop(c->srv->loop, &c->rio);
			return false;
		}
		return conn_tx_header(c);
	case C_TX_PAYLOAD: {
		struct nbd_creq *q = c->cur;
		size_t need = q->r.length - c->payload_got;
		size_t n = avail < need ? avail : need;
		if (n == 0)
			return false;
		memcpy((uint8_t *)q->buf + c->payload_got, c->in + c->in_pos, n);
		c->in_pos += n;
		c->payload_got += (uint32_t)n;
		c->srv->st.write_bytes_copied += n;
		if (c->payload_got == q->r.length) {
			c->bulk_last = q->r.length >= NET_BULK_MIN;
			c->cur = NULL;
			c->state = C_TX_HDR;
			conn_start_request(c, q);
		}
		return true;
	}
	case C_TX_DISCARD: {
		size_t n = avail < c->discard_left ? avail : (size_t)c->discard_left;
		c->in_pos += n;
		c->discard_left -= n;
		if (c->discard_left == 0) {
			c->state = C_TX_HDR;
			conn_reply_error(c, &c->discard_req, c->discard_err);
			return true;
		}
		return false;
	}
	default:
		return false;
	}
}

/* ---- handshake --------------------------------------------------------------------------- */

static void conn_enter_transmission(struct nbd_conn *c)
{
	ev_timer_stop(c->srv->loop, &c->hs_timer);
	c->state = C_TX_HDR;
	log_vol(LOG_LVL_DEBUG, c->srv->exp.name, NULL,
	        "Client %llu entered transmission (structured replies %s, base:allocation %s).",
	        (unsigned long long)c->id, c->neg.structured ? "on" : "off",
	        c->neg.meta_alloc ? "on" : "off");
}

/* Advance the TLS handshake; once it is done the option haggling starts again, encrypted. */
static void conn_tls_handshake(struct nbd_conn *c)
{
	enum nbd_tls_want want;
	char err[512], desc[256];
	int rc = nbd_tls_handshake(c->tls, &want, err, sizeof(err));

	if (rc < 0) {
		c->srv->st.protocol_errors++;
		c->srv->st.tls_failures++;
		conn_close(c, err);
		return;
	}
	c->tls_read_wants_write = rc == 1 && want == NBD_TLS_WANT_WRITE;
	conn_tls_watch(c);
	if (rc == 1)
		return;
	nbd_neg_tls_started(&c->neg);
	c->srv->st.tls_sessions++;
	c->state = C_HS_OPT_HDR;
	nbd_tls_describe(c->tls, desc, sizeof(desc));
	log_vol(LOG_LVL_INFO, c->srv->exp.name, NULL, "Client %llu (%s) switched to TLS: %s.",
	        (unsigned long long)c->id, c->peer, desc);
}

/* The STARTTLS ACK is out in the clear: from here on the socket belongs to the TLS session. */
static void conn_tls_begin(struct nbd_conn *c)
{
	c->tls = nbd_tls_new(c->srv->tls_ctx, c->fd, c->peer);
	if (!c->tls) {
		conn_close(c, "out of memory while starting TLS");
		return;
	}
	c->state = C_TLS_HS;
	ev_io_start(c->srv->loop, &c->rio);
	conn_tls_handshake(c);
}

/* STARTTLS was acknowledged: nothing may follow it in the clear (it would be injected). */
static void conn_starttls(struct nbd_conn *c)
{
	if (c->in_pos != c->in_len) {
		conn_protocol_error(c, "it sent data after NBD_OPT_STARTTLS before the server's "
		                       "reply, which would be accepted as if it came over TLS");
		return;
	}
	c->state = C_TLS_ACK;
	ev_io_stop(c->srv->loop, &c->rio);
}

static void conn_option_done(struct nbd_conn *c, int rc, struct nbd_buf *out)
{
	if (rc < 0 || out_push_heap(c, out) < 0) {
		nbd_buf_free(out);
		conn_close(c, "out of memory during negotiation");
		return;
	}
	switch (rc) {
	case NBD_OPT_DONE_GO:
	case NBD_OPT_DONE_EXPORT:
		conn_enter_transmission(c);
		break;
	case NBD_OPT_STARTTLS_ACK:
		conn_starttls(c);
		break;
	case NBD_OPT_CLOSE:
		/* Send what is queued (the ACK of ABORT), then close. */
		c->stop_reading = true;
		ev_io_stop(c->srv->loop, &c->rio);
		if (c->opt == NBD_OPT_EXPORT_NAME && c->neg.tls_mode == NBD_TLS_REQUIRE &&
		    !c->neg.tls_active)
			log_vol(LOG_LVL_INFO, c->srv->exp.name, NULL,
			        "Client %llu (%s) sent NBD_OPT_EXPORT_NAME without TLS, which this "
			        "listener requires; closing, as that option allows no error reply.",
			        (unsigned long long)c->id, c->peer);
		else if (c->opt == NBD_OPT_EXPORT_NAME)
			log_vol(
			    LOG_LVL_INFO, c->srv->exp.name, NULL,
			    "Client %llu asked for an export that is not available here with "
			    "NBD_OPT_EXPORT_NAME; closing, as that option allows no error reply.",
			    (unsigned long long)c->id);
		break;
	default:
		c->state = C_HS_OPT_HDR;
		break;
	}
}

static bool conn_hs_step(struct nbd_conn *c)
{
	size_t avail = c->in_len - c->in_pos;
	const uint8_t *p = c->in + c->in_pos;
	struct nbd_buf out = {0};
	char why[128];

	switch (c->state) {
	case C_HS_FLAGS:
		if (avail < 4)
			return false;
		if (nbd_client_flags(&c->neg, be_get32(p)) < 0) {
			snprintf(why, sizeof(why), "unknown client flags 0x%08x", be_get32(p));
			conn_protocol_error(c, why);
			return false;
		}
		c->in_pos += 4;
		c->state = C_HS_OPT_HDR;
		return true;
	case C_HS_OPT_HDR:
		if (avail < NBD_OPT_HEADER_SIZE)
			return false;
		if (be_get64(p) != NBD_MAGIC_OPTS) {
			conn_protocol_error(c, "bad option magic");
			return false;
		}
		c->opt = be_get32(p + 8);
		c->opt_len = be_get32(p + 12);
		c->opt_got = 0;
		c->in_pos += NBD_OPT_HEADER_SIZE;
		if (c->opt_len > NBD_OPT_MAX_LEN) {
			c->discard_left = c->opt_len;
			c->state = C_HS_OPT_DISCARD;
			return true;
		}
		free(c->opt_data);
		c->opt_data = malloc(c->opt_len ? c->opt_len : 1);
		if (!c->opt_data) {
			conn_close(c, "out of memory during negotiation");
			return false;
		}
		c->state = C_HS_OPT_DATA;
		return true;
	case C_HS_OPT_DATA: {
		size_t n = avail < c->opt_len - c->opt_got ? avail : c->opt_len - c->opt_got;
		memcpy(c->opt_data + c->opt_got, p, n);
		c->opt_got += (uint32_t)n;
		c->in_pos += n;
		if (c->opt_got < c->opt_len)
			return false;
		conn_option_done(c, nbd_neg_option(&c->neg, c->opt, c->opt_data, c->opt_len, &out),
		                 &out);
		return c->state != C_CLOSED && c->state != C_TLS_ACK && !c->stop_reading;
	}
	case C_HS_OPT_DISCARD: {
		size_t n = avail < c->discard_left ? avail : (size_t)c->discard_left;
		c->in_pos += n;
		c->discard_left -= n;
		if (c->discard_left)
			return false;
		conn_option_done(c, nbd_neg_too_big(&c->neg, c->opt, &out), &out);
		return c->state != C_CLOSED && !c->stop_reading;
	}
	default:
		return false;
	}
}

static void conn_process(struct nbd_conn *c)
{
	for (unsigned guard = 0; guard < 100000; guard++) {
		if (c->state == C_CLOSED || c->stop_reading || c->read_paused)
			break;
		bool progressed = c->state < C_TX_HDR ? conn_hs_step(c) : conn_tx_step(c);
		if (!progressed)
			break;
	}
	if (c->in_pos == c->in_len)
		c->in_pos = c->in_len = 0;
}

/* read() for the connection: through the TLS session once there is one. */
static ssize_t conn_recv(struct nbd_conn *c, void *buf, size_t len)
{
	enum nbd_tls_want want;
	char err[512];
	ssize_t r;

	if (!c->tls)
		return read(c->fd, buf, len);
	r = nbd_tls_read(c->tls, buf, len, &want, err, sizeof(err));
	if (r < 0 && errno == EAGAIN) {
		c->tls_read_wants_write = want == NBD_TLS_WANT_WRITE;
		conn_tls_watch(c);
	} else if (r < 0 && errno == EPROTO) {
		c->srv->st.protocol_errors++;
		conn_close(c, err);
		errno = ECONNABORTED;
	}
	return r;
}

/* Decrypted bytes inside the TLS session do not wake the socket watcher: wake it by hand. */
static void conn_tls_kick(struct nbd_conn *c)
{
	if (c->tls && c->state != C_CLOSED && !c->stop_reading && !c->read_paused &&
	    nbd_tls_pending(c->tls))
		ev_feed_event(c->srv->loop, &c->rio, EV_READ);
}

static void conn_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct nbd_conn *c = w->data;
	(void)loop;
	(void)revents;
	for (int i = 0; i < READS_PER_WAKEUP && c->state != C_CLOSED; i++) {
		if (c->stop_reading || c->read_paused)
			break;
		if (c->state == C_TLS_ACK) {
			ev_io_stop(c->srv->loop, &c->rio);
			return;
		}
		if (c->state == C_TLS_HS) {
			conn_tls_handshake(c);
			if (c->state != C_HS_OPT_HDR)
				return;
			continue;
		}
		ssize_t r;
		if (c->state == C_TX_PAYLOAD && c->in_pos == c->in_len) {
			/* Large payloads go straight into the request buffer. */
			struct nbd_creq *q = c->cur;
			r = conn_recv(c, (uint8_t *)q->buf + c->payload_got,
			              q->r.length - c->payload_got);
			if (r > 0) {
				c->payload_got += (uint32_t)r;
				if (c->payload_got == q->r.length) {
					c->bulk_last = q->r.length >= NET_BULK_MIN;
					c->cur = NULL;
					c->state = C_TX_HDR;
					conn_start_request(c, q);
				}
				continue;
			}
		} else {
			if (c->in_pos > 0 && c->in_pos == c->in_len)
				c->in_pos = c->in_len = 0;
			if (c->in_pos > 0 && c->in_len == IN_BUF_SIZE) {
				memmove(c->in, c->in + c->in_pos, c->in_len - c->in_pos);
				c->in_len -= c->in_pos;
				c->in_pos = 0;
			}
			size_t room = IN_BUF_SIZE - c->in_len;
			if (c->bulk_last && c->in_len == 0 && room > NET_BULK_PEEK)
				room = NET_BULK_PEEK;
			r = conn_recv(c, c->in + c->in_len, room);
			if (r > 0) {
				c->in_len += (size_t)r;
				conn_process(c);
				continue;
			}
		}
		if (r == 0) {
			if (c->cur) {
				/* Hung up in the middle of a write payload: that write never runs.
				 */
				struct nbd_creq *q = c->cur;
				c->cur = NULL;
				q->unsent = 0;
				creq_free(q);
			}
			if (c->in_flight || conn_out_pending(c)) {
				/* Half-close: answer what is in flight, then close. */
				c->stop_reading = true;
				ev_io_stop(c->srv->loop, &c->rio);
				conn_mark_dirty(c);
			} else {
				conn_close(c, c->state < C_TX_HDR
				                  ? "it hung up during the handshake"
				                  : NULL);
			}
			return;
		}
		if (c->state == C_CLOSED || errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		if (errno == EINTR)
			continue;
		conn_close(c, strerror(errno));
		return;
	}
	conn_tls_kick(c);
}

static void conn_hs_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct nbd_conn *c = w->data;
	(void)loop;
	(void)revents;
	char why[128];
	snprintf(why, sizeof(why), "the handshake (TLS included) did not finish within %.1f s",
	         c->srv->opts.handshake_timeout);
	c->srv->st.protocol_errors++;
	conn_close(c, why);
}

/* ---- listeners --------------------------------------------------------------------------- */

static const struct nbd_export *server_lookup(void *ctx, const char *name, size_t len)
{
	struct nbd_server *s = ctx;
	if (len == 0 || (strlen(s->exp.name) == len && memcmp(s->exp.name, name, len) == 0))
		return &s->exp;
	return NULL;
}

/* "ADDR:PORT" of a TCP client ("[V6]:PORT"), for the messages about it. */
static void peer_name(const struct sockaddr_storage *ss, socklen_t len, char *buf, size_t buflen)
{
	char host[INET6_ADDRSTRLEN] = "?";
	const struct sockaddr_in *in4 = (const struct sockaddr_in *)ss;
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

	if (len == 0 || ss->ss_family == AF_UNIX) {
		snprintf(buf, buflen, "UNIX socket");
	} else if (ss->ss_family == AF_INET) {
		inet_ntop(AF_INET, &in4->sin_addr, host, sizeof(host));
		snprintf(buf, buflen, "%s:%u", host, ntohs(in4->sin_port));
	} else {
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, buflen, "[%s]:%u", host, ntohs(in6->sin6_port));
	}
}

static void server_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct nbd_server *s = w->data;
	enum nbd_tls_mode mode = s->tls_mode[w == &s->lio[1] ? 1 : 0];
	(void)revents;
	for (int i = 0; i < 16; i++) {
		struct sockaddr_storage ss;
		socklen_t sslen = sizeof(ss);
		int fd =
		    accept4(w->fd, (struct sockaddr *)&ss, &sslen, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_vol(LOG_LVL_WARN, s->exp.name, NULL,
				        "Accepting an NBD client failed: %s.", strerror(errno));
			return;
		}
		if (s->shutting_down || s->st.clients >= s->opts.max_clients) {
			s->st.rejected++;
			log_vol(
			    LOG_LVL_WARN, s->exp.name, NULL,
			    "Refusing an NBD client: %u clients are connected (max-clients %u).",
			    s->st.clients, s->opts.max_clients);
			close(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct nbd_conn *c = calloc(1, sizeof(*c));
		uint8_t *in = malloc(IN_BUF_SIZE);
		struct outq_item *greet = calloc(1, sizeof(*greet));
		if (!c || !in || !greet) {
			free(c);
			free(in);
			free(greet);
			close(fd);
			continue;
		}
		c->srv = s;
		c->id = ++s->next_id;
		c->fd = fd;
		c->in = in;
		peer_name(&ss, sslen, c->peer, sizeof(c->peer));
		c->neg.tls_mode = mode;
		c->neg.lookup = server_lookup;
		c->neg.lookup_ctx = s;
		c->neg.list = s->exp_list;
		c->neg.n_list = 1;
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		s->st.clients++;
		s->st.connections++;
		ev_io_init(&c->rio, conn_read_cb, fd, EV_READ);
		ev_io_init(&c->wio, conn_write_cb, fd, EV_WRITE);
		ev_io_init(&c->tio, conn_tls_cb, fd, EV_READ);
		ev_timer_init(&c->hs_timer, conn_hs_timeout_cb, s->opts.handshake_timeout, 0);
		c->rio.data = c->wio.data = c->tio.data = c->hs_timer.data = c;
		ev_io_start(loop, &c->rio);
		ev_timer_start(loop, &c->hs_timer);
		nbd_greeting(greet->hdr);
		greet->hdr_len = 18;
		greet->sent = outq_free_item_and_data; /* data is NULL: frees just the item */
		out_push(c, greet);
		log_vol(LOG_LVL_DEBUG, s->exp.name, NULL, "Client %llu connected from %s (TLS %s).",
		        (unsigned long long)c->id, c->peer, nbd_tls_mode_name(mode));
	}
}

/* The TLS context and each listener's mode. A TCP export in the clear is said out loud. */
static int server_tls_setup(struct nbd_server *s, const char *volume)
{
	const struct nbd_server_opts *o = &s->opts;
	struct nbd_tls_files f = {o->tls_cert_file, o->tls_key_file, o->tls_ca_file,
	                          o->tls_psk_file};
	char err[1024];

	s->tls_mode[0] = s->tls_mode[1] = NBD_TLS_OFF;
	if (o->tcp_tls == NBD_TLS_OFF) {
		if (o->tcp_listen)
			log_vol(
			    LOG_LVL_WARN, volume, NULL,
			    "Volume %s is served over NBD on TCP %s without TLS: whoever reaches "
			    "that port can read and write it.",
			    volume, o->tcp_listen);
		return 0;
	}
	if (nbd_tls_ctx_create(&f, volume, &s->tls_ctx, err, sizeof(err)) < 0) {
		log_vol(LOG_LVL_ERR, volume, NULL, "%s", err);
		return -1;
	}
	s->tls_mode[0] = NBD_TLS_ON;
	s->tls_mode[1] = (enum nbd_tls_mode)o->tcp_tls;
	return 0;
}

int nbd_server_create(struct ev_loop *loop, struct volume *vol, const struct nbd_server_opts *o,
                      struct nbd_server **out)
{
	const struct hak_volume_cfg *cfg = volume_cfg(vol);
	struct nbd_server *s = calloc(1, sizeof(*s));
	int saved;
	if (!s)
		return -1;
	s->loop = loop;
	s->vol = vol;
	s->opts = *o;
	if (!s->opts.max_clients)
		s->opts.max_clients = HAK_DEFAULT_MAX_CLIENTS;
	if (s->opts.handshake_timeout <= 0)
		s->opts.handshake_timeout = 30.0;
	s->lfd[0] = s->lfd[1] = -1;
	s->exp.name = cfg->name;
	if (cfg->description) {
		s->exp.description = cfg->description;
	} else {
		snprintf(s->desc, sizeof(s->desc), "hak volume %s (%s)", cfg->name, cfg->backing);
		s->exp.description = s->desc;
	}
	s->exp.size = volume_size(vol);
	s->exp.min_block = cfg->block_size_min ? cfg->block_size_min : cfg->direct_io ? 4096 : 512;
	if (s->exp.size % s->exp.min_block)
		s->exp.min_block = 1; /* an odd-sized file must stay fully addressable */
	s->exp.pref_block = s->exp.min_block > 4096 ? s->exp.min_block : 4096;
	s->exp.max_payload = cfg->max_payload ? cfg->max_payload : HAK_DEFAULT_MAX_PAYLOAD;
	s->exp.read_only = cfg->read_only;
	s->exp_list[0] = &s->exp;
	if (server_tls_setup(s, cfg->name) < 0)
		goto fail;
	s->unix_path = strdup(o->unix_path);
	if (!s->unix_path)
		goto fail;
	s->lfd[0] = usock_listen(o->unix_path, 128);
	if (s->lfd[0] < 0) {
		log_vol(LOG_LVL_ERR, cfg->name, NULL, "Cannot listen on UNIX socket %s: %s.",
		        o->unix_path, strerror(errno));
		goto fail;
	}
	if (o->tcp_listen) {
		s->lfd[1] = net_listen(o->tcp_listen, 0);
		if (s->lfd[1] < 0) {
			log_vol(LOG_LVL_ERR, cfg->name, NULL, "Cannot listen on TCP %s: %s.",
			        o->tcp_listen, strerror(errno));
			goto fail;
		}
	}
	for (int i = 0; i < 2; i++) {
		if (s->lfd[i] < 0)
			continue;
		ev_io_init(&s->lio[i], server_accept_cb, s->lfd[i], EV_READ);
		s->lio[i].data = s;
		ev_io_start(loop, &s->lio[i]);
	}
	ev_prepare_init(&s->prep, server_prepare_cb);
	s->prep.data = s;
	ev_prepare_start(loop, &s->prep);
	log_vol(LOG_LVL_INFO, cfg->name, NULL,
	        "Serving %s (%llu bytes, block sizes %u/%u/%u) over NBD on %s%s%s (TLS on the "
	        "UNIX socket: %s%s%s).",
	        cfg->backing, (unsigned long long)s->exp.size, s->exp.min_block, s->exp.pref_block,
	        s->exp.max_payload, o->unix_path, o->tcp_listen ? " and TCP " : "",
	        o->tcp_listen ? o->tcp_listen : "", nbd_tls_mode_name(s->tls_mode[0]),
	        o->tcp_listen ? "; on TCP: " : "",
	        o->tcp_listen ? nbd_tls_mode_name(s->tls_mode[1]) : "");
	*out = s;
	return 0;
fail:
	saved = errno;
	for (int i = 0; i < 2; i++)
		if (s->lfd[i] >= 0)
			close(s->lfd[i]);
	if (s->lfd[0] >= 0)
		unlink(o->unix_path);
	free(s->unix_path);
	nbd_tls_ctx_free(s->tls_ctx);
	free(s);
	errno = saved;
	return -1;
}

void nbd_server_set_refuse(struct nbd_server *s, const char *reason)
{
	s->exp.refuse_reason = reason;
}

void nbd_server_shutdown(struct nbd_server *s)
{
	if (s->shutting_down)
		return;
	s->shutting_down = true;
	for (int i = 0; i < 2; i++) {
		if (s->lfd[i] < 0)
			continue;
		ev_io_stop(s->loop, &s->lio[i]);
		close(s->lfd[i]);
		s->lfd[i] = -1;
	}
	unlink(s->unix_path);
	for (struct nbd_conn *c = s->conns; c; c = c->next) {
		if (c->state < C_TX_HDR) {
			conn_close(c, "the server is shutting down");
			continue;
		}
		/* Finish the request whose payload is arriving, then stop. */
		if (c->state == C_TX_PAYLOAD || c->state == C_TX_DISCARD)
			continue;
		c->stop_reading = true;
		ev_io_stop(s->loop, &c->rio);
		conn_mark_dirty(c);
	}
}

bool nbd_server_idle(const struct nbd_server *s)
{
	return s->conns == NULL;
}

void nbd_server_destroy(struct nbd_server *s)
{
	if (!s)
		return;
	nbd_server_shutdown(s);
	while (s->conns) {
		struct nbd_conn *c = s->conns;
		conn_close(c, NULL);
		if (c->in_flight)
			break; /* cannot free buffers the volume still holds; leak rather than crash
			        */
		s->dirty = NULL;
		conn_free(c);
	}
	ev_prepare_stop(s->loop, &s->prep);
	nbd_tls_ctx_free(s->tls_ctx);
	free(s->unix_path);
	free(s);
}

void nbd_server_stats(const struct nbd_server *s, struct nbd_server_stats *out)
{
	*out = s->st;
}
