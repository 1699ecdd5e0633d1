/* SPDX-License-Identifier: MIT */
/* The life of one volume request: see req.h. */
#include "req.h"

#include <errno.h>
#include <stdlib.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/testhook.h"
#include "volume_int.h"

static const char *const event_names[REQ_EVENT_COUNT] = {
    [REQ_SUBMIT] = "submit",       [REQ_RESUME] = "resume",     [REQ_FAIL] = "fail",
    [REQ_SENT] = "sent",           [REQ_RECEIVED] = "received", [REQ_ACKED] = "acked",
    [REQ_PEER_LOST] = "peer-lost", [REQ_PEER_HAS] = "peer-has", [REQ_LOCAL_DONE] = "local-done",
    [REQ_UNFREEZE] = "unfreeze",
};

const char *req_event_name(enum req_event ev)
{
	return (unsigned)ev < REQ_EVENT_COUNT ? event_names[ev] : "unknown";
}

/*
 * An event the request's state does not allow: a bug in whoever sent it. Answering twice or
 * starting I/O twice could hand a client a success for data nobody has, so the event is dropped
 * and logged; the test builds abort, so a test finds the bug instead of a client.
 */
static bool req_violation(const struct vol_io *vio, enum req_event ev, const char *rule)
{
	log_vol(LOG_LVL_ERR, volume_name(vio->vol), NULL,
	        "Internal error: a request (op %d, %llu bytes at %llu) got the event %s in state "
	        "0x%x, which breaks the rule that %s; the event is ignored.",
	        (int)vio->op, (unsigned long long)vio->len, (unsigned long long)vio->off,
	        req_event_name(ev), vio->rq, rule);
#ifdef HAK_TESTHOOKS_BUILT
	abort();
#endif
	return false;
}

/* Every event checks its rule: inline, with the report out of line. */
static inline bool req_allowed(const struct vol_io *vio, enum req_event ev, bool ok,
                               const char *rule)
{
	return __builtin_expect(ok, 1) ? true : req_violation(vio, ev, rule);
}

/* Which latency record a request feeds, or NULL: only writes and flushes are timed (three clock
 * reads each), since they are what a commit waits for. */
static struct vol_lat *req_lat(const struct vol_io *vio)
{
	struct volume *v = vio->vol;
	if (vio->op == VOL_WRITE)
		return &v->st.lat[VOL_LAT_WRITE];
	if (vio->op == VOL_FLUSH)
		return &v->st.lat[VOL_LAT_FLUSH];
	return NULL;
}

static int req_result(const struct vol_io *vio)
{
	const struct volume *v = vio->vol;
	int err = vio->local_err;
	if (!req_is_write(vio))
		return err;
	/* Without a local copy a write exists only where the peer confirmed it. */
	if (vio->rq & RQ_REMOTE)
		err = (vio->rq & RQ_NET_OK) ? 0 : EIO;
	/* Stepping down without quorum: a write the peer may be promoted without is no success. */
	if (v->failing && v->repl && !(vio->rq & RQ_NET_OK))
		err = EIO;
	return err;
}

static void req_answer(struct vol_io *vio)
{
	struct volume *v = vio->vol;
	int err = req_result(vio);
	struct vol_lat *lat = req_lat(vio);
	vio->rq |= RQ_DONE;
	vio->err = err;
	v->st.in_flight--;
	if (lat)
		lathist_add(&lat->total, clock_mono_ns() - vio->t_start);
	if (err)
		v->st.errors++;
	else if (vio->op == VOL_READ)
		v->st.bytes_read += vio->len;
	else if (vio->op == VOL_WRITE)
		v->st.bytes_written += vio->len;
	vio->done(vio);
}

static void req_answer_if_settled(struct vol_io *vio)
{
	if ((vio->rq & RQ_LOCAL_DONE) && !(vio->rq & (RQ_NET_WAIT | RQ_FENCED)))
		req_answer(vio);
}

/* The peer was lost while the volume fences: the write may be acknowledged only once the peer
 * is known to be Outdated (or fail, if this node steps down), so it waits here. */
static void req_fence_park(struct vol_io *vio)
{
	struct volume *v = vio->vol;
	vio->rq |= RQ_FENCED;
	vio->fence_next = NULL;
	if (v->fence_tail)
		v->fence_tail->fence_next = vio;
	else
		v->fence_head = vio;
	v->fence_tail = vio;
	v->fence_parked++;
}

void req_fence_release(struct volume *v)
{
	struct vol_io *vio = v->fence_head;
	v->fence_head = v->fence_tail = NULL;
	v->fence_parked = 0;
	while (vio) {
		struct vol_io *next = vio->fence_next;
		vio->fence_next = NULL;
		vio->rq &= ~RQ_FENCED;
		req_answer_if_settled(vio);
		vio = next;
	}
}

/* The local side is over with err (0 or a positive errno). */
static void req_local_over(struct vol_io *vio, int err)
{
	struct volume *v = vio->vol;
	/* A failing backing store (not the peer: a forwarded read is a RQ_REMOTE read). */
	if (err && (!(vio->rq & RQ_REMOTE) || req_is_write(vio)) && vol_disk_error(vio, err))
		return; /* detached: vio goes on through the peer and comes back here */
	if (v->diskless && req_is_write(vio) && !(vio->rq & RQ_REMOTE)) {
		/* Finished locally after the detach: the local disk no longer counts. */
		vio->rq |= RQ_REMOTE;
		v->repl->adopt(v->repl_ctx, vio);
	}
	vio->rq = (vio->rq & ~RQ_LOCAL) | RQ_LOCAL_DONE;
	vio->local_err = err;
	struct vol_lat *lat = req_lat(vio);
	if (lat)
		lathist_add(&lat->local, clock_mono_ns() - vio->t_start);
	if (v->repl)
		v->repl->local_done(v->repl_ctx, vio);
	req_answer_if_settled(vio);
}

/* The peer answered (or was lost): how long that took, and whether the client waited for it. */
static void req_peer_timed(const struct vol_io *vio)
{
	struct vol_lat *lat = req_lat(vio);
	if (!lat)
		return;
	lathist_add(&lat->peer, clock_mono_ns() - vio->t_start);
	if (vio->rq & RQ_LOCAL_DONE)
		lat->peer_last++;
}

/* Past the freeze: replication's turn, then the local I/O. */
static void req_go(struct vol_io *vio)
{
	struct volume *v = vio->vol;
	if (v->repl && req_is_write(vio)) {
		vio->rq |= RQ_HELD; /* so replication may also resume it from inside submit */
		int held = v->repl->submit(v->repl_ctx, vio);
		if (held > 0)
			return;
		if (!req_allowed(vio, REQ_SUBMIT, vio->rq & RQ_HELD,
		                 "replication lets a request go either now or later, never both"))
			return;
		vio->rq &= ~RQ_HELD;
	}
	vol_local_start(vio);
}

static void req_submit(struct vol_io *vio)
{
	struct volume *v = vio->vol;
	vio->err = 0;
	vio->local_err = 0;
	vio->stage = 0;
	vio->rq = 0;
	vio->range.owner = NULL;
	/* While an attached disk resyncs it is no copy yet: writes count once the peer has them. */
	if (v->diskless || (v->repl && v->repl->attaching(v->repl_ctx)))
		vio->rq |= RQ_REMOTE;
	v->st.ops[vio->op]++;
	v->st.in_flight++;
	if (req_lat(vio))
		vio->t_start = clock_mono_ns();
	if (v->failing && req_is_write(vio)) {
		vio->local_err = EIO;
		vio->rq |= RQ_LOCAL_DONE;
		req_answer(vio);
		return;
	}
	if ((v->frozen || v->fencing) && req_is_write(vio)) {
		vio->rq |= RQ_HELD | RQ_FROZEN;
		rangelock_add(&v->frozen_q, &vio->range, vio->off, vio->len);
		return;
	}
	req_go(vio);
}

void req_mod(struct vol_io *vio, enum req_event ev, int err)
{
	unsigned rq = vio->rq;
	if (ev != REQ_SUBMIT &&
	    !req_allowed(vio, ev, !(rq & RQ_DONE), "an answered request gets no more events"))
		return;
	switch (ev) {
	case REQ_SUBMIT:
		req_submit(vio);
		break;
	case REQ_RESUME:
		if (req_allowed(vio, ev, (rq & RQ_HELD) && !(rq & RQ_FROZEN),
		                "only a request replication holds is resumed by it")) {
			vio->rq &= ~RQ_HELD;
			vol_local_start(vio);
		}
		break;
	case REQ_UNFREEZE:
		if (req_allowed(vio, ev, rq & RQ_FROZEN, "only a frozen request thaws")) {
			vio->rq &= ~(RQ_HELD | RQ_FROZEN);
			req_go(vio);
		}
		break;
	case REQ_FAIL:
		if (!req_allowed(vio, ev, rq & RQ_HELD, "only a held request fails before its I/O"))
			break;
		vio->rq &= ~(RQ_HELD | RQ_FROZEN);
		if (rq & RQ_FROZEN) {
			/* The volume refuses it: no disk is involved. */
			vio->local_err = err;
			vio->rq |= RQ_LOCAL_DONE;
			req_answer(vio);
		} else {
			req_local_over(vio, err);
		}
		break;
	case REQ_SENT:
		if (req_allowed(vio, ev, !(rq & RQ_NET_WAIT),
		                "the peer is waited for once at a time"))
			vio->rq |= RQ_NET_WAIT;
		break;
	case REQ_RECEIVED:
	case REQ_ACKED:
	case REQ_PEER_LOST:
		if (!req_allowed(vio, ev, rq & RQ_NET_WAIT,
		                 "the peer answers only what it was sent"))
			break;
		vio->rq &= ~RQ_NET_WAIT;
		if (ev == REQ_ACKED && err == 0)
			vio->rq |= RQ_NET_OK;
		req_peer_timed(vio);
		if (ev == REQ_PEER_LOST && vio->vol->fencing && !vio->vol->failing)
			req_fence_park(vio);
		req_answer_if_settled(vio);
		break;
	case REQ_PEER_HAS:
		vio->rq |= RQ_NET_OK;
		break;
	case REQ_LOCAL_DONE:
		if (req_allowed(vio, ev, (rq & RQ_LOCAL) && !(rq & RQ_LOCAL_DONE),
		                "the local side finishes once, after it started"))
			req_local_over(vio, err);
		break;
	default:
		req_allowed(vio, ev, false, "events are known");
		break;
	}
}
