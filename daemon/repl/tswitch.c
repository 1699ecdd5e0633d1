/* SPDX-License-Identifier: MIT */
#include "tswitch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conf/config.h"
#include "ctl/events.h"
#include "lib/endian.h"
#include "lib/log.h"
#include "repl_int.h"
#include "transport/wire.h"

static const char *upper(const struct transport_ops *t)
{
	return strcmp(t->name, "rdma") == 0  ? "RDMA"
	       : strcmp(t->name, "tcp") == 0 ? "TCP"
	                                     : t->name;
}

int tswitch_configure(struct repl *r, char *err, size_t errlen)
{
	enum hak_transport want = r->p.vcfg->transport;
	const char *name = want == HAK_TRANSPORT_TCP ? "tcp" : "rdma";
	r->p.transport = transport_find(name);
	if (want == HAK_TRANSPORT_RDMA_TCP && !r->p.transport) {
		repl_log(r, LOG_LVL_NOTICE,
		         "Volume %s replicates over TCP: its transport is rdma,tcp, but this build "
		         "has no RDMA (it was built without librdmacm and libibverbs).",
		         r->name);
		r->p.transport = transport_find("tcp");
	} else if (want == HAK_TRANSPORT_RDMA_TCP) {
		r->fallback = transport_find("tcp");
	}
	if (!r->p.transport) {
		snprintf(err, errlen, "Volume %s: this build has no %s transport.", r->name, name);
		return -1;
	}
	r->conn_t = r->p.transport;
	return 0;
}

/* ---- the acceptor's listeners ------------------------------------------------------------ */

static void listen_rdma(struct repl *r)
{
	char addr[96];
	snprintf(addr, sizeof(addr), "%s (+%u)", r->sw_lp.addr, r->sw_lp.port_offset);
	r->listen_next = ev_now(r->p.loop) + TSWITCH_RETRY;
	if (tlistener_open(r->p.transport, &r->sw_lp, &r->listener) < 0) {
		r->listener = NULL;
		if (!r->fb_listen_said)
			repl_log(r, LOG_LVL_WARN,
			         "No RDMA listener at %s: %s; the peer connects over TCP, and "
			         "RDMA is tried again every %.0f s.",
			         addr, strerror(errno), TSWITCH_RETRY);
		r->fb_listen_said = true;
		return;
	}
	if (r->fb_listen_said)
		repl_log(r, LOG_LVL_NOTICE, "Listening for RDMA at %s again.", addr);
	r->fb_listen_said = false;
}

int tswitch_listen(struct repl *r, const struct tlisten_params *p)
{
	r->sw_lp = *p;
	if (tlistener_open(r->fallback, p, &r->listener_fb) < 0) {
		r->listener_fb = NULL;
		return -1;
	}
	listen_rdma(r);
	return 0;
}

void tswitch_unlisten(struct repl *r)
{
	tlistener_close(r->listener_fb);
	r->listener_fb = NULL;
}

/* ---- falling back, and saying so ---------------------------------------------------------- */

bool tswitch_fall_back(struct repl *r, int err)
{
	if (!r->fallback || r->conn_t == r->fallback)
		return false;
	if (!r->fb_announced)
		repl_log(r, LOG_LVL_WARN,
		         "Volume %s: no %s path to %s at %s: %s; replicating over %s.", r->name,
		         upper(r->conn_t), r->p.peer->name, r->p.peer->address, strerror(err),
		         upper(r->fallback));
	else
		repl_log(r, LOG_LVL_DEBUG, "Still no %s path to %s: %s.", upper(r->conn_t),
		         r->p.peer->name, strerror(err));
	r->fb_announced = true;
	r->conn_t = r->fallback;
	return true;
}

void tswitch_connected(struct repl *r)
{
	if (!r->fallback || !r->data)
		return;
	bool over_fb = r->data->t == r->fallback;
	if (over_fb && !r->fb_announced)
		repl_log(r, LOG_LVL_WARN,
		         "Volume %s: the peer %s connected over %s, not %s; replicating over %s.",
		         r->name, r->p.peer->name, upper(r->fallback), upper(r->p.transport),
		         upper(r->fallback));
	else if (!over_fb && r->fb_announced)
		repl_log(r, LOG_LVL_NOTICE, "Volume %s: replicating over %s again.", r->name,
		         upper(r->p.transport));
	r->fb_announced = over_fb;
	r->sw_fail_said = false;
	r->sw_next = ev_now(r->p.loop) + TSWITCH_RETRY;
}

/* ---- the move's streams ------------------------------------------------------------------- */

static int new_index(const struct repl *r, const struct tstream *s)
{
	return s && s == r->sw_new[0] ? 0 : s && s == r->sw_new[1] ? 1 : -1;
}

static int old_index(const struct repl *r, const struct tstream *s)
{
	return s && s == r->sw_old[0] ? 0 : s && s == r->sw_old[1] ? 1 : -1;
}

bool tswitch_is_new(const struct repl *r, const struct tstream *s)
{
	return new_index(r, s) >= 0;
}

bool tswitch_draining(const struct repl *r, const struct tstream *s)
{
	int k = old_index(r, s);
	return k >= 0 && !r->sw_marker_rcvd[k];
}

/* Who may read now, per stream pair k: the old stream up to the peer's marker, then the new one;
 * the data stream's reader also obeys the apply backpressure. */
static void pause_if(struct tstream *s, bool paused)
{
	if (s)
		tstream_pause(s, paused);
}

/* Each call re-reads the state: a stream let go may deliver frames at once, and one of them may
 * end the move or the connection. Pausing first, then resuming, keeps the order either way. */
static void apply_pauses(struct repl *r)
{
	for (int k = 0; k < 2; k++) {
		bool bp = k == 0 && r->data_paused;
#define CUR (k ? r->meta_s : r->data)
		if (r->sw_old[k]) {
			if (r->sw_marker_rcvd[k])
				pause_if(r->sw_old[k], true);
			else
				pause_if(CUR, true);
			if (r->sw_old[k] && !r->sw_marker_rcvd[k])
				pause_if(r->sw_old[k], bp);
			else if (r->sw_old[k])
				pause_if(CUR, bp);
		} else {
			if (r->sw_new[k] && r->sw_hello_rcvd[k])
				pause_if(r->sw_new[k], true);
			pause_if(CUR, r->sw_marker_rcvd[k] || bp);
		}
#undef CUR
	}
}

static bool switch_active(const struct repl *r)
{
	return r->sw_old[0] || r->sw_old[1] || r->sw_new[0] || r->sw_new[1] ||
	       r->sw_marker_rcvd[0] || r->sw_marker_rcvd[1];
}

void tswitch_data_pause(struct repl *r, bool paused)
{
	r->data_paused = paused;
	if (switch_active(r))
		apply_pauses(r);
	else if (r->data)
		tstream_pause(r->data, paused);
}

/* The new streams go, the connection stays: the next try comes after TSWITCH_RETRY. */
static void abort_new(struct repl *r, const char *why)
{
	/* Said once per connection: the initiator tries again every TSWITCH_RETRY s. */
	if (why)
		repl_log(r, r->sw_fail_said ? LOG_LVL_DEBUG : LOG_LVL_INFO,
		         "Moving the connection to %s onto %s failed: %s; it stays on %s.",
		         r->p.peer->name, upper(r->p.transport), why,
		         r->data ? upper(r->data->t) : "its transport");
	for (int k = 0; k < 2; k++) {
		tconnect_cancel(r->sw_connecting[k]);
		r->sw_connecting[k] = NULL;
		tstream_close(r->sw_new[k]);
		r->sw_new[k] = NULL;
		r->sw_hello_sent[k] = r->sw_hello_rcvd[k] = false;
		/* A marker without a move would be the peer's error: dropped with the connection.
		 */
	}
	r->sw_fail_said |= why != NULL;
	r->sw_next = ev_now(r->p.loop) + TSWITCH_RETRY;
}

static void sw_connect_done(void *ctx, struct tconnect *c, struct tstream *s, int err);

/*
 * One new stream k over the preferred transport; the meta stream's after the data stream's is
 * up. One at a time because librdmacm's first calls after a device appeared block (measured in
 * the TCG guest with ASan: up to 0.55 s for rdma_create_id and rdma_resolve_addr), and two of
 * those in one turn of the loop kept pings unanswered past a 1 s ping-timeout.
 */
static void connect_new(struct repl *r, int k)
{
	struct tconnect_params cp = repl_connect_params(r, sw_connect_done, NULL);
	if (tconnect_start(r->p.transport, &cp, &r->sw_connecting[k]) < 0) {
		r->sw_connecting[k] = NULL;
		repl_log(r, LOG_LVL_DEBUG, "No %s path to %s at %s yet: %s.", upper(r->p.transport),
		         r->p.peer->name, r->p.peer->address, strerror(errno));
		abort_new(r, NULL);
	}
}

static void sw_connect_done(void *ctx, struct tconnect *c, struct tstream *s, int err)
{
	struct repl *r = ctx;
	int k = c == r->sw_connecting[0] ? 0 : 1;
	r->sw_connecting[k] = NULL;
	if (err) {
		repl_log(r, LOG_LVL_DEBUG, "No %s path to %s at %s yet: %s.", upper(r->p.transport),
		         r->p.peer->name, r->p.peer->address, strerror(err));
		abort_new(r, NULL);
		return;
	}
	r->sw_new[k] = s;
	repl_send_hello(r, s, (uint8_t)(k + 1), WIRE_F_SWITCH);
	r->sw_hello_sent[k] = true;
	if (k == 0)
		connect_new(r, 1);
}

void tswitch_tick(struct repl *r)
{
	if (!r->fallback)
		return;
	double now = ev_now(r->p.loop);
	if (!r->initiator && !r->listener && r->listener_fb && now >= r->listen_next)
		listen_rdma(r);
	if (r->initiator && r->connected && r->data && r->data->t == r->fallback &&
	    !switch_active(r) && !r->sw_connecting[0] && !r->sw_connecting[1] &&
	    now >= r->sw_next) {
		r->sw_next = now + TSWITCH_RETRY;
		r->sw_deadline = now + TSWITCH_LIMIT;
		connect_new(r, 0);
	}
	bool pending = r->sw_connecting[0] || r->sw_connecting[1] || r->sw_new[0] || r->sw_new[1];
	if (pending && !r->sw_old[0] && !r->sw_old[1] && now > r->sw_deadline)
		abort_new(r, "the new streams were not up within the limit");
}

/* ---- the move ----------------------------------------------------------------------------- */

static void marker_sent(struct outq_item *it, int err)
{
	struct repl *r = it->ctx;
	int k = it == &r->sw_marker[1];
	if (err)
		return; /* the old stream failed: that is the connection's loss, reported by it */
	r->sw_marker_sent[k] = true;
	ev_timer_start(r->p.loop, &r->sw_timer);
}

/* Close the old streams whose markers went both ways. From a timer: the marker's sent()
 * runs inside the old stream's own write path. */
static void reap_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct repl *r = w->data;
	(void)loop;
	(void)revents;
	for (int k = 0; k < 2; k++) {
		if (r->sw_old[k] && r->sw_marker_rcvd[k] && r->sw_marker_sent[k]) {
			tstream_close(r->sw_old[k]);
			r->sw_old[k] = NULL;
			r->sw_marker_rcvd[k] = r->sw_marker_sent[k] = false;
		}
	}
}

static void move(struct repl *r)
{
	const char *from = upper(r->data->t);
	struct tstream *nw[2] = {r->sw_new[0], r->sw_new[1]};
	r->switches++;
	for (int k = 0; k < 2; k++) {
		struct tstream *old = k ? r->meta_s : r->data;
		struct outq_item *it = &r->sw_marker[k];
		nw[k]->max_payload = old->max_payload;
		memset(it, 0, sizeof(*it));
		wire_hdr_encode(it->hdr, WIRE_SWITCH, 0, WIRE_ID_SIZE);
		be_put64(it->hdr + WIRE_HDR_SIZE, r->switches);
		it->hdr_len = WIRE_HDR_SIZE + WIRE_ID_SIZE;
		it->sent = marker_sent;
		it->ctx = r;
		tstream_send(old, it); /* written before the loop sleeps, with what is queued */
		r->sw_old[k] = old;
		r->sw_new[k] = NULL;
		r->sw_hello_sent[k] = r->sw_hello_rcvd[k] = false;
	}
	r->data = nw[0];
	r->meta_s = nw[1];
	if (r->mode == MODE_ASYNC) {
		/* As handshake_complete set them on the old streams. */
		tstream_set_lazy(r->data, ASYNC_DATA_DELAY, ASYNC_DATA_BYTES);
		tstream_set_lazy(r->meta_s, ASYNC_ACK_DELAY, ASYNC_ACK_BYTES);
	}
	r->fb_announced = false;
	repl_log(r, LOG_LVL_NOTICE,
	         "Volume %s: moved the connection to %s from %s onto %s in place (move %llu): "
	         "no reconnect, no resync; replicating over %s.",
	         r->name, r->p.peer->name, from, upper(r->data->t), (unsigned long long)r->switches,
	         upper(r->data->t));
	events_emit("transport-switch", "volume:%s peer:%s from:%s to:%s", r->name, r->p.peer->name,
	            r->sw_old[0]->t->name, r->data->t->name);
	apply_pauses(r);
}

static bool move_ready(const struct repl *r)
{
	return r->sw_new[0] && r->sw_new[1] && r->sw_hello_sent[0] && r->sw_hello_sent[1] &&
	       r->sw_hello_rcvd[0] && r->sw_hello_rcvd[1];
}

/* The acceptor: an authenticated stream that names itself as joining the connection. Whatever
 * its transport: the initiator decides when to move, and a move onto the same transport is
 * harmless (the unit tests' in-memory transport does just that). */
static void accept_new(struct repl *r, struct tstream *s, int k)
{
	if (!r->sw_new[0] && !r->sw_new[1])
		r->sw_deadline = ev_now(r->p.loop) + TSWITCH_LIMIT;
	if (r->sw_new[k] && r->sw_new[k] != s) {
		/* The initiator gave up on its last try and made a new one. */
		tstream_close(r->sw_new[k]);
		r->sw_hello_rcvd[k] = false;
	}
	r->sw_new[k] = s;
	repl_send_hello(r, s, (uint8_t)(k + 1), WIRE_F_SWITCH);
	r->sw_hello_sent[k] = true;
}

void tswitch_hello(struct repl *r, struct tstream *s, uint16_t flags, const struct wire_hello *h,
                   const char *bad, int pi)
{
	int k = new_index(r, s);
	if (pi >= 0)
		r->pending_accept[pi] = NULL;
	if (s == r->data || s == r->meta_s) {
		repl_drop_connection(r, "the peer sent a HELLO that moves the connection on one of "
		                        "its own streams");
		return;
	}
	if (bad || !(flags & WIRE_F_SWITCH) || !r->connected || (k >= 0 && k != h->stream - 1)) {
		char why[320];
		snprintf(why, sizeof(why), "a new stream's HELLO %s",
		         bad                        ? bad
		         : !(flags & WIRE_F_SWITCH) ? "does not join the connection"
		         : !r->connected            ? "joins a connection that is not up"
		                                    : "names the other stream");
		if (k >= 0) {
			abort_new(r, why);
		} else {
			repl_log(r, LOG_LVL_WARN, "Refused a replication stream from %s: %s.",
			         r->p.peer->name, why);
			tstream_close(s);
		}
		return;
	}
	k = h->stream - 1;
	bool again = new_index(r, s) >= 0 && r->sw_hello_rcvd[k];
	if (again || r->sw_old[0] || r->sw_old[1]) {
		/* A second HELLO on a new stream, or a move while the last one still drains (a
		 * new stream that replaces a stale one of a try given up is accept_new's). */
		if (new_index(r, s) >= 0)
			abort_new(r, "the peer sent a second HELLO that moves the connection");
		else
			tstream_close(s);
		repl_log(r, LOG_LVL_WARN, "Refused a stream from %s that joins the connection: %s.",
		         r->p.peer->name,
		         r->sw_old[0] || r->sw_old[1] ? "the last move still drains"
		                                      : "that stream has joined already");
		return;
	}
	if (!r->initiator)
		accept_new(r, s, k);
	r->sw_hello_rcvd[k] = true;
	/* Nothing of it may be read before the peer's marker ends the old stream. */
	tstream_pause(s, true);
	if (move_ready(r))
		move(r);
}

void tswitch_marker(struct repl *r, struct tstream *s)
{
	int k = old_index(r, s);
	if (k < 0 && (s == r->data || s == r->meta_s) && (r->sw_new[0] || r->sw_new[1]))
		k = s == r->data ? 0 : 1; /* the peer moved first */
	if (k < 0 || r->sw_marker_rcvd[k]) {
		repl_drop_connection(r, "the peer sent a SWITCH marker outside a move");
		return;
	}
	r->sw_marker_rcvd[k] = true;
	if (r->sw_old[k])
		ev_timer_start(r->p.loop, &r->sw_timer);
	apply_pauses(r); /* last: a stream let go may deliver frames at once */
}

bool tswitch_error(struct repl *r, struct tstream *s, const char *why)
{
	int k = old_index(r, s);
	if (new_index(r, s) >= 0) {
		if (r->sw_marker_rcvd[0] || r->sw_marker_rcvd[1])
			return false; /* the peer moved already: the connection cannot follow */
		abort_new(r, why);
		return true;
	}
	if (k >= 0 && r->sw_marker_rcvd[k] && r->sw_marker_sent[k]) {
		/* The peer closed it once both markers passed: what the move expects. */
		tstream_close(s);
		r->sw_old[k] = NULL;
		r->sw_marker_rcvd[k] = r->sw_marker_sent[k] = false;
		return true;
	}
	return false;
}

void tswitch_drop(struct repl *r)
{
	abort_new(r, NULL);
	ev_timer_stop(r->p.loop, &r->sw_timer);
	for (int k = 0; k < 2; k++) {
		struct tstream *old = r->sw_old[k];
		r->sw_old[k] = NULL;
		tstream_close(old); /* may run marker_sent(ECANCELED) */
		r->sw_marker_rcvd[k] = r->sw_marker_sent[k] = false;
	}
	/* r->conn_t stays: a failed attempt over the fallback must not fall back again (it
	 * would retry at once, in a loop); start_connect resets it for the next one. */
}

void tswitch_init(struct repl *r)
{
	ev_timer_init(&r->sw_timer, reap_cb, 0., 0.);
	r->sw_timer.data = r;
}

void tswitch_status(const struct repl *r, json_t *o)
{
	const struct transport_ops *now = r->connected && r->data ? r->data->t : r->p.transport;
	json_object_set_new(o, "transport", json_string(now->name));
	json_object_set_new(o, "transport_configured",
	                    json_string(r->p.vcfg->transport == HAK_TRANSPORT_RDMA_TCP
	                                    ? "rdma,tcp"
	                                    : r->p.transport->name));
	json_object_set_new(
	    o, "transport_retrying",
	    json_boolean(r->fallback && r->connected && r->data && r->data->t == r->fallback));
	json_object_set_new(o, "transport_switches", json_integer((json_int_t)r->switches));
	json_object_set_new(o, "connections", json_integer((json_int_t)r->connections));
}
