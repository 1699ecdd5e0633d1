/* SPDX-License-Identifier: MIT */
/*
 * The RDMA transport's verbs half (rdma_flow.c is the device-free half). Data path, chosen by
 * measurement (bench/rdma_design.sh; numbers and reasons in daemon/transport/README.md):
 *   - SENDs into posted receives, with credits, not RDMA WRITE: the only WRITE that wakes the
 *     receiver without a spinning core is WRITE with immediate, which consumes a posted receive
 *     just as a SEND does, and adds remote addresses and keys per message; on rxe WRITE was not
 *     clearly faster at hak's sizes (4 KiB writes, messages up to 64 KiB).
 *   - Frames copied into buffers registered once per connection, not registered per write:
 *     ibv_reg_mr + ibv_dereg_mr of 4 KiB cost about 66 times a memcpy of it in the guest (and a
 *     4 KiB memcpy takes 30 ns on a real CPU); an NBD write's buffer lives for one request, so a
 *     registration could not be reused.
 * Failures: failed completions, rdma_cm's DISCONNECTED and DEVICE_REMOVAL, and the device's
 * asynchronous events (port down, a queue pair or the device in error) fail the streams they
 * concern; when a port comes back the listeners on it listen again.
 */
#include "rdma.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/log.h"
#include "lib/net.h"
#include "rdma_flow.h"

/* rdma_cm's own timeout for address and route resolution. */
#define RESOLVE_MS 2000
/* Completions handled per wake-up before the loop gets a turn. */
#define CQ_BUDGET 256
/* Completion events acknowledged in batches (each acknowledgement takes a lock in the library). */
#define CQ_ACK_BATCH 64

/* The verbs objects of one connection; a connect or an accept builds them, the stream takes them
 * over. */
struct rdma_res {
	struct rdma_event_channel *ch; /* the connection's own channel, NULL while the listener's */
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *mem; /* RDMA_RECV_DEPTH receive buffers, then RDMA_SEND_DEPTH send buffers */
	unsigned cq_unacked;
	bool qp;
};

struct rdma_async;

struct rdma_stream {
	struct tstream base; /* first: a struct tstream * is a struct rdma_stream * */
	struct ev_loop *loop;
	struct rdma_res r;
	struct rdma_async *async; /* the watcher of its device's asynchronous events */
	struct rdma_stream *async_next;
	ev_io cm_w, cq_w;
	ev_prepare prep;
	ev_timer lazy_w;
	double lazy_delay;
	size_t lazy_bytes;
	struct outq q;
	struct rdma_flow flow;
	/* Receives completed and not yet read (in order), and how far into the first. */
	uint32_t rx_idx[RDMA_RECV_DEPTH], rx_len[RDMA_RECV_DEPTH];
	unsigned rx_head, rx_count;
	uint32_t rx_pos;
	struct rdma_rx rx;
	uint32_t send_free[RDMA_SEND_DEPTH];
	unsigned nfree;
	double last_rx;
	bool dead, paused, close_pending;
	int in_cb;
	char peer[80];
};

struct rdma_accepting {
	struct rdma_accepting *next;
	struct rdma_listener *l;
	struct rdma_res r;
	ev_io cm_w;
};

struct rdma_listener {
	struct tlistener base;
	struct tlisten_params p; /* addr is not kept */
	struct sockaddr_storage sa;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id; /* NULL while its device is gone */
	ev_io cm_w;
	ev_timer retry_w;
	struct rdma_accepting *pending;
	struct rdma_async *async; /* while bound to a device */
	struct rdma_listener *async_next;
};

struct rdma_connect {
	struct tconnect base;
	struct tconnect_params p; /* addr and bind_host are not kept */
	struct rdma_res r;
	ev_io cm_w;
	bool in_done;
};

/* The asynchronous events of one device context (port down or up, a queue pair or the device
 * failed): its async_fd on the loop, shared by every stream and listener on the device, since
 * rdma_cm opens each device once per process. Replication runs on one loop, so one list is
 * enough. */
struct rdma_async {
	struct rdma_async *next;
	struct ibv_context *ctx;
	struct ev_loop *loop;
	ev_io w;
	struct rdma_stream *streams;
	struct rdma_listener *listeners;
	bool in_cb;
};

static struct rdma_async *async_list;

static void stream_fail(struct rdma_stream *s, const char *why);
static void listener_relisten(struct rdma_listener *l, const char *dev, int port);

static struct rdma_stream *rs_of(struct tstream *s)
{
	return (struct rdma_stream *)s;
}

static const struct rdma_stream *rs_of_const(const struct tstream *s)
{
	return (const struct rdma_stream *)s;
}

/* ---- verbs resources --------------------------------------------------------------------- */

static uint8_t *res_recv_buf(const struct rdma_res *r, uint32_t i)
{
	return r->mem + (size_t)i * RDMA_MSG_SIZE;
}

static uint8_t *res_send_buf(const struct rdma_res *r, uint32_t i)
{
	return r->mem + (size_t)(RDMA_RECV_DEPTH + i) * RDMA_MSG_SIZE;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int res_post_recv(struct rdma_res *r, uint32_t i)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)res_recv_buf(r, i), .length = RDMA_MSG_SIZE, .lkey = r->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;
	int rc = ibv_post_recv(r->id->qp, &wr, &bad);
	if (rc)
		errno = rc;
	return rc ? -1 : 0;
}

static struct rdma_event_channel *channel_open(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (ch && set_nonblock(ch->fd) < 0) {
		int saved = errno;
		rdma_destroy_event_channel(ch);
		errno = saved;
		ch = NULL;
	}
	return ch;
}

static void res_teardown(struct rdma_res *r)
{
	if (r->qp)
		rdma_destroy_qp(r->id);
	if (r->cq) {
		if (r->cq_unacked)
			ibv_ack_cq_events(r->cq, r->cq_unacked);
		ibv_destroy_cq(r->cq);
	}
	if (r->cc)
		ibv_destroy_comp_channel(r->cc);
	if (r->mr)
		ibv_dereg_mr(r->mr);
	free(r->mem);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	if (r->id)
		rdma_destroy_id(r->id);
	if (r->ch)
		rdma_destroy_event_channel(r->ch);
	memset(r, 0, sizeof(*r));
}

/* The queue pair of r->id, its completion queue and registered buffers, every receive posted
 * (before the connection is up, so the peer's first credits are real): 0, or -1 with errno. */
static int res_setup(struct rdma_res *r)
{
	struct ibv_context *v = r->id->verbs;
	size_t size = (size_t)(RDMA_RECV_DEPTH + RDMA_SEND_DEPTH) * RDMA_MSG_SIZE;
	if (!(r->pd = ibv_alloc_pd(v)) || !(r->cc = ibv_create_comp_channel(v)) ||
	    set_nonblock(r->cc->fd) < 0 ||
	    !(r->cq = ibv_create_cq(v, RDMA_RECV_DEPTH + RDMA_SEND_DEPTH, NULL, r->cc, 0)))
		return -1;
	int rc = ibv_req_notify_cq(r->cq, 0);
	if (rc) {
		errno = rc;
		return -1;
	}
	struct ibv_qp_init_attr qa = {.send_cq = r->cq,
	                              .recv_cq = r->cq,
	                              .qp_type = IBV_QPT_RC,
	                              .sq_sig_all = 1,
	                              .cap = {.max_send_wr = RDMA_SEND_DEPTH,
	                                      .max_recv_wr = RDMA_RECV_DEPTH,
	                                      .max_send_sge = 1,
	                                      .max_recv_sge = 1}};
	if (rdma_create_qp(r->id, r->pd, &qa) < 0)
		return -1;
	r->qp = true;
	r->mem = aligned_alloc(4096, size);
	if (!r->mem) {
		errno = ENOMEM;
		return -1;
	}
	r->mr = ibv_reg_mr(r->pd, r->mem, size, IBV_ACCESS_LOCAL_WRITE);
	if (!r->mr)
		return -1;
	for (uint32_t i = 0; i < RDMA_RECV_DEPTH; i++)
		if (res_post_recv(r, i) < 0)
			return -1;
	return 0;
}

static void conn_params(struct rdma_conn_param *cp)
{
	memset(cp, 0, sizeof(*cp));
	/* SENDs only, no RDMA READ: no responder resources. A lost packet is retried 7 times
	 * before the queue pair fails and the stream reports it, like TCP's retransmissions. */
	cp->retry_count = 7;
	cp->rnr_retry_count = 7;
}

/* An error event of rdma_cm as an errno. */
static int cm_errno(const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		return ECONNREFUSED;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		return ev->status < 0 ? -ev->status : EHOSTUNREACH;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return ENODEV;
	default:
		return ev->status < 0 ? -ev->status : ECONNABORTED;
	}
}

/* ---- asynchronous events of a device ------------------------------------------------------ */

/* Which streams an event concerns. */
enum async_scope { ASYNC_NONE, ASYNC_QP, ASYNC_CQ, ASYNC_PORT, ASYNC_DEVICE };

static enum async_scope async_scope_of(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_PATH_MIG_ERR:
		return ASYNC_QP;
	case IBV_EVENT_CQ_ERR:
		return ASYNC_CQ;
	case IBV_EVENT_PORT_ERR:
		return ASYNC_PORT;
	case IBV_EVENT_DEVICE_FATAL:
		return ASYNC_DEVICE;
	default:
		/* Port active, GID or LID changes, communication established, queue drained:
		 * nothing a stream has to give up for. */
		return ASYNC_NONE;
	}
}

static bool async_concerns(const struct rdma_stream *s, enum async_scope scope,
                           const struct ibv_async_event *ev)
{
	switch (scope) {
	case ASYNC_QP:
		return s->r.id->qp == ev->element.qp;
	case ASYNC_CQ:
		return s->r.cq == ev->element.cq;
	case ASYNC_PORT:
		return s->r.id->port_num == ev->element.port_num;
	case ASYNC_DEVICE:
		return true;
	default:
		return false;
	}
}

static void async_free(struct rdma_async *a)
{
	struct rdma_async **pp = &async_list;
	while (*pp != a)
		pp = &(*pp)->next;
	*pp = a->next;
	ev_io_stop(a->loop, &a->w);
	free(a);
}

/* Nobody left on a: free it, unless it is the one calling. */
static void async_put(struct rdma_async *a)
{
	if (!a->streams && !a->listeners && !a->in_cb)
		async_free(a);
}

/* The first live stream of a that ev concerns, or NULL. */
static struct rdma_stream *async_target(const struct rdma_async *a, enum async_scope scope,
                                        const struct ibv_async_event *ev)
{
	for (struct rdma_stream *s = a->streams; s; s = s->async_next)
		if (!s->dead && async_concerns(s, scope, ev))
			return s;
	return NULL;
}

/* Fail the live streams ev concerns; ev is acknowledged already, so only its values are read. */
static void async_fail_streams(struct rdma_async *a, enum async_scope scope,
                               const struct ibv_async_event *ev)
{
	const char *dev = ibv_get_device_name(a->ctx->device);
	const char *what = ibv_event_type_str(ev->event_type);
	char why[240];
	struct rdma_stream *s;
	/* One at a time from the head: a failed stream's error callback may close others. */
	while ((s = async_target(a, scope, ev))) {
		if (scope == ASYNC_PORT)
			snprintf(why, sizeof(why),
			         "port %d of the RDMA device %s went down (%s), cutting the "
			         "connection to %s",
			         ev->element.port_num, dev, what, s->peer);
		else
			snprintf(why, sizeof(why),
			         "the RDMA device %s reported %s, cutting the connection to %s",
			         dev, what, s->peer);
		stream_fail(s, why);
	}
}

/* A port came back: the listeners bound to the device listen again. Measured with Linux 6.1's
 * rxe: a listening id that lived through its port going down rejects every connection request
 * afterwards (REJECTED, status 8), while a new one accepts them. */
static void async_port_active(struct rdma_async *a, int port)
{
	const char *dev = ibv_get_device_name(a->ctx->device);
	for (struct rdma_listener *l = a->listeners; l; l = l->async_next)
		listener_relisten(l, dev, port);
}

static void async_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdma_async *a = w->data;
	struct ibv_async_event ev;
	(void)loop;
	(void)revents;
	a->in_cb = true;
	/* Bounded: the fd is non-blocking and each event is taken once. */
	for (int n = 0; n < 64 && ibv_get_async_event(a->ctx, &ev) == 0; n++) {
		struct ibv_async_event copy = ev;
		enum async_scope scope = async_scope_of(ev.event_type);
		/* Acknowledged before anything is destroyed: destroying a queue pair or a
		 * completion queue waits for the acknowledgement of its events. */
		ibv_ack_async_event(&ev);
		if (scope != ASYNC_NONE)
			async_fail_streams(a, scope, &copy);
		else
			log_info("The RDMA device %s reported %s.",
			         ibv_get_device_name(a->ctx->device),
			         ibv_event_type_str(copy.event_type));
		if (copy.event_type == IBV_EVENT_PORT_ACTIVE)
			async_port_active(a, copy.element.port_num);
	}
	a->in_cb = false;
	async_put(a);
}

/* The watcher of ctx's events on loop, made on first use: it, or NULL with errno. */
static struct rdma_async *async_get(struct ev_loop *loop, struct ibv_context *ctx)
{
	struct rdma_async *a = async_list;
	while (a && (a->ctx != ctx || a->loop != loop))
		a = a->next;
	if (a)
		return a;
	int fl = fcntl(ctx->async_fd, F_GETFL);
	if (fl < 0 || fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return NULL;
	if (!(a = calloc(1, sizeof(*a)))) {
		errno = ENOMEM;
		return NULL;
	}
	a->ctx = ctx;
	a->loop = loop;
	ev_io_init(&a->w, async_cb, ctx->async_fd, EV_READ);
	a->w.data = a;
	ev_io_start(loop, &a->w);
	a->next = async_list;
	async_list = a;
	return a;
}

/* Put s on the watcher of its device's events: 0, or -1 with errno. */
static int async_attach(struct rdma_stream *s)
{
	struct rdma_async *a = async_get(s->loop, s->r.id->verbs);
	if (!a)
		return -1;
	s->async = a;
	s->async_next = a->streams;
	a->streams = s;
	return 0;
}

static void async_detach(struct rdma_stream *s)
{
	struct rdma_async *a = s->async;
	if (!a)
		return;
	struct rdma_stream **pp = &a->streams;
	while (*pp != s)
		pp = &(*pp)->async_next;
	*pp = s->async_next;
	s->async = NULL;
	async_put(a);
}

/* ---- stream ------------------------------------------------------------------------------ */

static void stream_stop(struct rdma_stream *s)
{
	ev_io_stop(s->loop, &s->cm_w);
	ev_io_stop(s->loop, &s->cq_w);
	ev_prepare_stop(s->loop, &s->prep);
	ev_timer_stop(s->loop, &s->lazy_w);
}

static void stream_free(struct rdma_stream *s)
{
	stream_stop(s);
	outq_drop(&s->q, ECANCELED);
	rdma_rx_reset(&s->rx);
	async_detach(s);
	/* Tell the peer at once rather than let its retries run out. */
	rdma_disconnect(s->r.id);
	res_teardown(&s->r);
	free(s);
}

static void stream_fail(struct rdma_stream *s, const char *why)
{
	if (s->dead)
		return;
	s->dead = true;
	stream_stop(s);
	s->in_cb++;
	s->base.ops->error(s->base.ctx, &s->base, why);
	s->in_cb--;
	if (s->close_pending && !s->in_cb)
		stream_free(s);
}

/* Post one message from send buffer i: 0, or -1 with errno. */
static int stream_post(struct rdma_stream *s, uint32_t i, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)res_send_buf(&s->r, i),
	                      .length = RDMA_MSG_HDR + len,
	                      .lkey = s->r.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = RDMA_RECV_DEPTH + i,
	                         .sg_list = &sge,
	                         .num_sge = 1,
	                         .opcode = IBV_WR_SEND,
	                         .send_flags = IBV_SEND_SIGNALED},
	                   *bad;
	int rc = ibv_post_send(s->r.id->qp, &wr, &bad);
	if (rc)
		errno = rc;
	return rc ? -1 : 0;
}

/* Copy queued frames into free send buffers and post them while credits last, or return owed
 * credits in a header-only message: 0, or -1 with errno. */
static int stream_post_all(struct rdma_stream *s)
{
	while (s->nfree && !s->dead) {
		bool data = s->q.head && rdma_flow_can_send_data(&s->flow);
		if (!data && !rdma_flow_wants_credit_msg(&s->flow))
			break;
		uint32_t i = s->send_free[--s->nfree];
		uint8_t *buf = res_send_buf(&s->r, i);
		uint32_t n = data ? (uint32_t)rdma_pack(&s->q, buf + RDMA_MSG_HDR,
		                                        RDMA_MSG_SIZE - RDMA_MSG_HDR)
		                  : 0;
		rdma_msg_encode(buf, rdma_flow_take(&s->flow), n);
		if (stream_post(s, i, n) < 0)
			return -1;
	}
	return 0;
}

static void rt_try_flush(struct tstream *ts)
{
	struct rdma_stream *s = rs_of(ts);
	if (!s->dead)
		(void)stream_post_all(s);
}

static void stream_flush(struct rdma_stream *s)
{
	ev_timer_stop(s->loop, &s->lazy_w);
	ev_prepare_stop(s->loop, &s->prep);
	if (stream_post_all(s) < 0) {
		char why[200];
		snprintf(why, sizeof(why), "posting an RDMA send to %s failed: %s", s->peer,
		         strerror(errno));
		stream_fail(s, why);
	}
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

/* Frames out of the received buffers, each buffer reposted once read. The caller holds in_cb. */
static void stream_deliver(struct rdma_stream *s)
{
	char why[200];
	while (!s->dead && !s->paused && s->rx_count) {
		uint32_t i = s->rx_idx[s->rx_head], len = s->rx_len[s->rx_head];
		const uint8_t *buf = res_recv_buf(&s->r, i);
		if (s->rx_pos < RDMA_MSG_HDR + len) {
			bool done;
			struct wire_hdr h;
			uint8_t *p = NULL;
			long k =
			    rdma_rx_feed(&s->rx, buf + s->rx_pos, RDMA_MSG_HDR + len - s->rx_pos,
			                 s->base.max_payload, &done, &h, &p, why, sizeof(why));
			if (k < 0) {
				stream_fail(s, why);
				return;
			}
			s->rx_pos += (uint32_t)k;
			if (done)
				s->base.ops->frame(s->base.ctx, &s->base, &h, p);
			continue;
		}
		s->rx_head = (s->rx_head + 1) % RDMA_RECV_DEPTH;
		s->rx_count--;
		s->rx_pos = RDMA_MSG_HDR;
		if (res_post_recv(&s->r, i) < 0) {
			snprintf(why, sizeof(why), "reposting an RDMA receive from %s failed: %s",
			         s->peer, strerror(errno));
			stream_fail(s, why);
			return;
		}
		rdma_flow_reposted(&s->flow);
	}
}

/* One completion: 0, or -1 once the stream failed. */
static int stream_complete(struct rdma_stream *s, const struct ibv_wc *wc)
{
	char why[200];
	bool recv = wc->wr_id < RDMA_RECV_DEPTH;
	if (wc->status != IBV_WC_SUCCESS) {
		snprintf(why, sizeof(why),
		         "the RDMA connection to %s failed: %s (a %s completed with "
		         "status %d)",
		         s->peer, ibv_wc_status_str(wc->status), recv ? "receive" : "send",
		         (int)wc->status);
		stream_fail(s, why);
		return -1;
	}
	if (!recv) {
		s->send_free[s->nfree++] = (uint32_t)(wc->wr_id - RDMA_RECV_DEPTH);
		return 0;
	}
	uint32_t credits, len;
	const uint8_t *buf = res_recv_buf(&s->r, (uint32_t)wc->wr_id);
	if (rdma_msg_decode(buf, wc->byte_len, &credits, &len, why, sizeof(why)) < 0 ||
	    rdma_flow_granted(&s->flow, credits) < 0) {
		if (errno == EPROTO)
			snprintf(why, sizeof(why),
			         "%s returned %u RDMA credits, more than the %u it could owe",
			         s->peer, credits, s->flow.depth - s->flow.credits);
		stream_fail(s, why);
		return -1;
	}
	unsigned tail = (s->rx_head + s->rx_count) % RDMA_RECV_DEPTH;
	s->rx_idx[tail] = (uint32_t)wc->wr_id;
	s->rx_len[tail] = len;
	s->rx_count++;
	s->last_rx = ev_now(s->loop);
	return 0;
}

static void stream_poll(struct rdma_stream *s)
{
	struct ibv_wc wc[32];
	int total = 0;
	while (total < CQ_BUDGET && !s->dead) {
		int n = ibv_poll_cq(s->r.cq, 32, wc);
		if (n < 0) {
			stream_fail(s, "polling the RDMA completion queue failed");
			return;
		}
		for (int i = 0; i < n; i++)
			if (stream_complete(s, &wc[i]) < 0)
				return;
		if (n < 32)
			return;
		total += n;
	}
	/* More may wait, and the channel will not signal them again: come back after the loop
	 * had its turn. */
	if (!s->dead)
		ev_feed_event(s->loop, &s->cq_w, EV_READ);
}

static void cq_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdma_stream *s = w->data;
	struct ibv_cq *cq;
	void *ctx;
	(void)loop;
	(void)revents;
	if (ibv_get_cq_event(s->r.cc, &cq, &ctx) == 0 && ++s->r.cq_unacked >= CQ_ACK_BATCH) {
		ibv_ack_cq_events(s->r.cq, s->r.cq_unacked);
		s->r.cq_unacked = 0;
	}
	/* Re-arm before polling, so a completion arriving meanwhile signals again. */
	ibv_req_notify_cq(s->r.cq, 0);
	s->in_cb++;
	stream_poll(s);
	stream_deliver(s);
	if (!s->dead)
		stream_flush(s);
	s->in_cb--;
	if (s->close_pending && !s->in_cb)
		stream_free(s);
}

static void stream_cm_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdma_stream *s = w->data;
	struct rdma_cm_event *ev;
	(void)loop;
	(void)revents;
	s->in_cb++;
	while (!s->dead && rdma_get_cm_event(s->r.ch, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;
		rdma_ack_cm_event(ev);
		char why[200];
		if (type == RDMA_CM_EVENT_DISCONNECTED) {
			snprintf(why, sizeof(why), "%s closed the RDMA connection", s->peer);
			stream_fail(s, why);
		} else if (type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
			snprintf(why, sizeof(why),
			         "the RDMA device of the connection to %s was removed", s->peer);
			stream_fail(s, why);
		}
	}
	s->in_cb--;
	if (s->close_pending && !s->in_cb)
		stream_free(s);
}

/* A stream over the connected r (taken over, zeroed): 0, or -1 with errno (r left). */
static int stream_create(struct ev_loop *loop, struct rdma_res *r, const struct tstream_ops *ops,
                         void *ctx, struct tstream **out)
{
	struct rdma_stream *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return -1;
	}
	s->base.t = &transport_rdma;
	s->base.ops = ops;
	s->base.ctx = ctx;
	s->loop = loop;
	s->r = *r;
	memset(r, 0, sizeof(*r));
	rdma_flow_init(&s->flow, RDMA_RECV_DEPTH);
	s->rx_pos = RDMA_MSG_HDR;
	for (uint32_t i = 0; i < RDMA_SEND_DEPTH; i++)
		s->send_free[s->nfree++] = RDMA_SEND_DEPTH - 1 - i;
	struct sockaddr *sa = rdma_get_peer_addr(s->r.id);
	socklen_t salen =
	    sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (net_addr_name(sa, salen, s->peer, sizeof(s->peer)) < 0)
		snprintf(s->peer, sizeof(s->peer), "an unknown address");
	if (async_attach(s) < 0) {
		int saved = errno;
		*r = s->r; /* the caller still owns them */
		free(s);
		errno = saved;
		return -1;
	}
	s->last_rx = ev_now(loop);
	ev_io_init(&s->cm_w, stream_cm_cb, s->r.ch->fd, EV_READ);
	ev_io_init(&s->cq_w, cq_cb, s->r.cc->fd, EV_READ);
	ev_prepare_init(&s->prep, prep_cb);
	ev_timer_init(&s->lazy_w, lazy_cb, 0., 0.);
	s->cm_w.data = s->cq_w.data = s->prep.data = s->lazy_w.data = s;
	ev_io_start(loop, &s->cm_w);
	ev_io_start(loop, &s->cq_w);
	/* Completions may have arrived before the watcher: look once. */
	ev_feed_event(loop, &s->cq_w, EV_READ);
	*out = &s->base;
	return 0;
}

static void rt_send(struct tstream *ts, struct outq_item *it)
{
	struct rdma_stream *s = rs_of(ts);
	if (s->dead) {
		if (it->sent)
			it->sent(it, ECONNRESET);
		return;
	}
	outq_push(&s->q, it);
	ev_prepare_start(s->loop, &s->prep);
}

static void rt_set_lazy(struct tstream *ts, double delay, size_t bytes)
{
	struct rdma_stream *s = rs_of(ts);
	s->lazy_delay = delay;
	s->lazy_bytes = bytes;
}

static void rt_send_lazy(struct tstream *ts, struct outq_item *it)
{
	struct rdma_stream *s = rs_of(ts);
	bool waiting = s->q.head != NULL; /* earlier items wait for credits or the flush */
	if (s->dead || s->lazy_delay <= 0) {
		rt_send(ts, it);
		return;
	}
	outq_push(&s->q, it);
	if (ev_is_active(&s->prep) || (waiting && !ev_is_active(&s->lazy_w)))
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

static int rt_send_small(struct tstream *ts, uint16_t type, uint16_t flags, const void *payload,
                         uint32_t len, bool lazy)
{
	struct outq_item *it = tstream_small_item(type, flags, payload, len);
	if (!it)
		return -1;
	if (lazy)
		rt_send_lazy(ts, it);
	else
		rt_send(ts, it);
	return 0;
}

static size_t rt_queued(const struct tstream *ts)
{
	return rs_of_const(ts)->q.bytes;
}

static void rt_pause(struct tstream *ts, bool paused)
{
	struct rdma_stream *s = rs_of(ts);
	if (s->dead || s->paused == paused)
		return;
	s->paused = paused;
	if (paused)
		return; /* completions still count credits; the buffers wait unread */
	s->in_cb++;
	stream_deliver(s);
	if (!s->dead)
		ev_prepare_start(s->loop, &s->prep); /* credits for the buffers just read */
	s->in_cb--;
	if (s->close_pending && !s->in_cb)
		stream_free(s);
}

static double rt_idle(const struct tstream *ts)
{
	const struct rdma_stream *s = rs_of_const(ts);
	return ev_now(s->loop) - s->last_rx;
}

static void rt_close(struct tstream *ts)
{
	struct rdma_stream *s = rs_of(ts);
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

static int rt_peer_name(const struct tstream *ts, char *buf, size_t len)
{
	snprintf(buf, len, "%s", rs_of_const(ts)->peer);
	return 0;
}

/* ---- connect ----------------------------------------------------------------------------- */

static void connect_finish(struct rdma_connect *c, int err)
{
	struct tstream *s = NULL;
	ev_io_stop(c->p.loop, &c->cm_w);
	if (!err && stream_create(c->p.loop, &c->r, c->p.ops, c->p.ctx, &s) < 0)
		err = errno;
	res_teardown(&c->r); /* nothing left when the stream took it */
	c->in_done = true;
	c->p.done(c->p.ctx, &c->base, s, err);
	free(c);
}

/* The next step of an outgoing connection after event type: 0, or an errno that ends it. */
static int connect_step(struct rdma_connect *c, enum rdma_cm_event_type type)
{
	struct rdma_conn_param cp;
	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		return rdma_resolve_route(c->r.id, RESOLVE_MS) < 0 ? errno : 0;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (res_setup(&c->r) < 0)
			return errno;
		conn_params(&cp);
		return rdma_connect(c->r.id, &cp) < 0 ? errno : 0;
	default:
		return 0;
	}
}

static void connect_cm_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdma_connect *c = w->data;
	struct rdma_cm_event *ev;
	(void)loop;
	(void)revents;
	while (rdma_get_cm_event(c->r.ch, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;
		int err = type == RDMA_CM_EVENT_ADDR_RESOLVED ||
		                  type == RDMA_CM_EVENT_ROUTE_RESOLVED ||
		                  type == RDMA_CM_EVENT_ESTABLISHED
		              ? 0
		              : cm_errno(ev);
		int status = ev->status;
		rdma_ack_cm_event(ev);
		if (err)
			log_debug("An outgoing RDMA connection got %s (status %d).",
			          rdma_event_str(type), status);
		if (!err)
			err = connect_step(c, type);
		if (err || type == RDMA_CM_EVENT_ESTABLISHED) {
			connect_finish(c, err);
			return;
		}
	}
}

/* Where to leave from: bind_host at any port, or NULL. */
static int connect_source(const struct tconnect_params *p, int family, struct sockaddr_storage *src)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = family}, *ai;
	if (!p->bind_host || getaddrinfo(p->bind_host, NULL, &hints, &ai) != 0)
		return -1;
	memcpy(src, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return 0;
}

static int rt_connect_start(const struct tconnect_params *p, struct tconnect **out)
{
	struct sockaddr_storage dst, src;
	socklen_t dlen;
	int saved;
	struct rdma_connect *c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return -1;
	}
	if (net_addr_resolve(p->addr, p->port_offset, 0, &dst, &dlen) < 0 ||
	    !(c->r.ch = channel_open()) || rdma_create_id(c->r.ch, &c->r.id, c, RDMA_PS_TCP) < 0)
		goto fail;
	bool bound = connect_source(p, dst.ss_family, &src) == 0;
	if (rdma_resolve_addr(c->r.id, bound ? (struct sockaddr *)&src : NULL,
	                      (struct sockaddr *)&dst, RESOLVE_MS) < 0)
		goto fail;
	c->base.t = &transport_rdma;
	c->p = *p;
	c->p.addr = c->p.bind_host = NULL;
	ev_io_init(&c->cm_w, connect_cm_cb, c->r.ch->fd, EV_READ);
	c->cm_w.data = c;
	ev_io_start(p->loop, &c->cm_w);
	*out = &c->base;
	return 0;
fail:
	saved = errno;
	res_teardown(&c->r);
	free(c);
	errno = saved;
	return -1;
}

static void rt_connect_cancel(struct tconnect *tc)
{
	struct rdma_connect *c = (struct rdma_connect *)tc;
	if (c->in_done)
		return; /* the resources went to the stream or were freed; freed after done() */
	ev_io_stop(c->p.loop, &c->cm_w);
	res_teardown(&c->r);
	free(c);
}

/* ---- listen ------------------------------------------------------------------------------ */

static void accepting_free(struct rdma_accepting *a)
{
	struct rdma_accepting **pp = &a->l->pending;
	while (*pp != a)
		pp = &(*pp)->next;
	*pp = a->next;
	ev_io_stop(a->l->p.loop, &a->cm_w);
	res_teardown(&a->r);
	free(a);
}

static void accepting_cm_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdma_accepting *a = w->data;
	struct rdma_listener *l = a->l;
	struct rdma_cm_event *ev;
	(void)revents;
	while (rdma_get_cm_event(a->r.ch, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;
		int status = ev->status;
		rdma_ack_cm_event(ev);
		if (type != RDMA_CM_EVENT_ESTABLISHED) {
			/* Anything else before the connection is up ends it (rejected, error,
			 * disconnected, device gone). */
			log_debug("An incoming RDMA connection ended before it was established: "
			          "%s (status %d).",
			          rdma_event_str(type), status);
			accepting_free(a);
			return;
		}
		struct tstream *s;
		int rc = stream_create(loop, &a->r, l->p.ops, l->p.ctx, &s);
		accepting_free(a);
		/* Last: accepted() may close the listener. */
		if (rc == 0)
			l->p.accepted(l->p.ctx, &l->base, s);
		return;
	}
}

/* A connection request on the listener: move it to its own channel, build its queue pair, accept.
 */
static void listener_request(struct rdma_listener *l, struct rdma_cm_id *id)
{
	struct rdma_conn_param cp;
	struct rdma_accepting *a = calloc(1, sizeof(*a));
	if (!a) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	a->l = l;
	a->r.id = id;
	a->next = l->pending;
	l->pending = a;
	ev_init(&a->cm_w, accepting_cm_cb);
	conn_params(&cp);
	if (!(a->r.ch = channel_open()) || rdma_migrate_id(id, a->r.ch) < 0 ||
	    res_setup(&a->r) < 0 || rdma_accept(id, &cp) < 0) {
		log_warn("Accepting an RDMA connection failed: %s.", strerror(errno));
		rdma_reject(id, NULL, 0);
		accepting_free(a);
		return;
	}
	ev_io_set(&a->cm_w, a->r.ch->fd, EV_READ);
	a->cm_w.data = a;
	ev_io_start(l->p.loop, &a->cm_w);
}

/* Listen on l->sa: 0, or -1 with errno (ENODEV while no RDMA device holds the address). Bound to
 * a device, the listener also follows its events (async_port_active). */
static int listener_bind(struct rdma_listener *l)
{
	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP) < 0) {
		l->id = NULL;
		return -1;
	}
	if (rdma_bind_addr(l->id, (struct sockaddr *)&l->sa) < 0 || rdma_listen(l->id, 16) < 0) {
		int saved = errno;
		rdma_destroy_id(l->id);
		l->id = NULL;
		errno = saved;
		return -1;
	}
	if (!l->async && l->id->verbs) {
		struct rdma_async *a = async_get(l->p.loop, l->id->verbs);
		if (a) {
			l->async = a;
			l->async_next = a->listeners;
			a->listeners = l;
		} else {
			log_warn("Listening for RDMA connections without following the device's "
			         "events: %s; after a port goes down and up, restart hakd.",
			         strerror(errno));
		}
	}
	return 0;
}

/* Stop listening: the id destroyed, off its device's events. */
static void listener_unbind(struct rdma_listener *l)
{
	struct rdma_async *a = l->async;
	if (a) {
		struct rdma_listener **pp = &a->listeners;
		while (*pp != l)
			pp = &(*pp)->async_next;
		*pp = l->async_next;
		l->async = NULL;
		async_put(a);
	}
	if (l->id)
		rdma_destroy_id(l->id);
	l->id = NULL;
}

/* A new listening id in place of l's (called from async_cb, so l stays on its watcher). */
static void listener_relisten(struct rdma_listener *l, const char *dev, int port)
{
	char name[80];
	socklen_t salen =
	    l->sa.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (net_addr_name((struct sockaddr *)&l->sa, salen, name, sizeof(name)) < 0)
		snprintf(name, sizeof(name), "its address");
	if (l->id)
		rdma_destroy_id(l->id);
	l->id = NULL;
	if (listener_bind(l) == 0) {
		ev_timer_stop(l->p.loop, &l->retry_w);
		log_info(
		    "Listening for RDMA connections on %s again: port %d of the RDMA device %s "
		    "is back, and a listener that lived through the port going down refuses "
		    "connections.",
		    name, port, dev);
		return;
	}
	log_warn("Listening for RDMA connections on %s again, after port %d of the RDMA device %s "
	         "came back, failed: %s; retrying every second.",
	         name, port, dev, strerror(errno));
	ev_timer_again(l->p.loop, &l->retry_w);
}

static void listener_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rdma_listener *l = w->data;
	(void)revents;
	if (l->id || listener_bind(l) == 0)
		ev_timer_stop(loop, w);
}

static void listener_cm_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdma_listener *l = w->data;
	struct rdma_cm_event *ev;
	(void)revents;
	while (rdma_get_cm_event(l->ch, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;
		struct rdma_cm_id *id = ev->id;
		/* Acknowledged first: the new id migrates to its own channel, which waits for
		 * every event of this one to be acknowledged. */
		rdma_ack_cm_event(ev);
		if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			listener_request(l, id);
		} else if (type == RDMA_CM_EVENT_DEVICE_REMOVAL && id == l->id) {
			/* The listening id dies with its device; listen again once a device
			 * holds the address (a replaced adapter, a Soft-RoCE device re-added). */
			listener_unbind(l);
			ev_timer_again(loop, &l->retry_w);
		}
	}
}

static int rt_listen(const struct tlisten_params *p, struct tlistener **out)
{
	socklen_t salen;
	int saved;
	struct rdma_listener *l = calloc(1, sizeof(*l));
	if (!l) {
		errno = ENOMEM;
		return -1;
	}
	l->p = *p;
	l->p.addr = NULL;
	if (net_addr_resolve(p->addr, p->port_offset, 1, &l->sa, &salen) < 0 ||
	    !(l->ch = channel_open()) || listener_bind(l) < 0)
		goto fail;
	l->base.t = &transport_rdma;
	ev_io_init(&l->cm_w, listener_cm_cb, l->ch->fd, EV_READ);
	l->cm_w.data = l;
	ev_io_start(p->loop, &l->cm_w);
	ev_init(&l->retry_w, listener_retry_cb);
	l->retry_w.repeat = 1.0;
	l->retry_w.data = l;
	*out = &l->base;
	return 0;
fail:
	saved = errno;
	listener_unbind(l);
	if (l->ch)
		rdma_destroy_event_channel(l->ch);
	free(l);
	errno = saved;
	return -1;
}

static void rt_listener_close(struct tlistener *tl)
{
	struct rdma_listener *l = (struct rdma_listener *)tl;
	while (l->pending)
		accepting_free(l->pending);
	ev_io_stop(l->p.loop, &l->cm_w);
	ev_timer_stop(l->p.loop, &l->retry_w);
	listener_unbind(l);
	rdma_destroy_event_channel(l->ch);
	free(l);
}

const struct transport_ops transport_rdma = {
    .name = "rdma",
    .listen = rt_listen,
    .listener_close = rt_listener_close,
    .connect = rt_connect_start,
    .connect_cancel = rt_connect_cancel,
    .send = rt_send,
    .send_lazy = rt_send_lazy,
    .send_small = rt_send_small,
    .set_lazy = rt_set_lazy,
    .queued = rt_queued,
    .pause = rt_pause,
    .idle = rt_idle,
    .try_flush = rt_try_flush,
    .close = rt_close,
    .peer_name = rt_peer_name,
};
