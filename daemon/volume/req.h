/* SPDX-License-Identifier: MIT */
/*
 * The life of one volume request, in one place (DRBD's req_mod()): every module that has a say
 * in when a request is answered — the volume's local I/O, replication's send side, its acks, a
 * lost connection, the cluster manager's freeze — reports an event here, and req_mod() moves the
 * request on and answers it once nothing it waits for is left.
 *
 *   SUBMIT ─▶ (frozen) ─▶ replication's submit ─▶ (held: activity log, slot, overlap) ─▶ RESUME
 *                                                                                         │
 *        local I/O ◀──────────────────────────────────────────────────────────────────────┘
 *            │  SENT ─▶ RECEIVED (memsync) │ ACKED │ PEER_LOST │ PEER_HAS
 *            ▼
 *       LOCAL_DONE ─▶ answered when the local side is done and the peer side is settled
 *
 * The result: the local side's, except that a request whose local disk does not count (Diskless,
 * or being re-attached) succeeds only if the peer confirmed it, and a write of a volume that is
 * stepping down without quorum succeeds only if the peer confirmed it (otherwise only this node
 * would have it, and the peer may be promoted without it).
 *
 * Invariants, checked at every event (a violation is logged with the request and its state, and
 * aborts the test builds): a request is answered exactly once and gets no event after that; the
 * peer side is waited for at most once at a time; the local side finishes exactly once; a held
 * request is resumed or failed exactly once.
 */
#ifndef HAK_REQ_H
#define HAK_REQ_H

#include <stdbool.h>

#include "volume.h"

/* State bits of vol_io.rq. */
#define RQ_HELD       (1u << 0) /* waits before its local I/O (frozen, or held by replication) */
#define RQ_FROZEN     (1u << 1) /* ... in the volume's frozen queue */
#define RQ_LOCAL      (1u << 2) /* its local I/O (or forwarded read) is in flight */
#define RQ_LOCAL_DONE (1u << 3) /* the local side finished: local_err holds its result */
#define RQ_NET_WAIT   (1u << 4) /* the answer also waits for the peer */
#define RQ_NET_OK     (1u << 5) /* the peer confirmed it on its disk */
#define RQ_REMOTE     (1u << 6) /* the local disk does not count: the peer's answer decides */
#define RQ_DONE       (1u << 7) /* answered */
#define RQ_FENCED     (1u << 8) /* its peer was lost while the volume fences: parked */

enum req_event {
	REQ_SUBMIT = 0, /* a new request from a client (volume_submit) */
	REQ_RESUME,     /* replication let a held request go: its local I/O starts */
	REQ_FAIL,       /* a held request fails before any I/O (err: a positive errno) */
	REQ_SENT,       /* replication sent it (or adopted it): the answer waits for the peer */
	REQ_RECEIVED,   /* memsync: the peer has it in memory, which is all that mode waits for */
	REQ_ACKED,      /* the peer answered: on its disk (err 0), or it failed it (err) */
	REQ_PEER_LOST,  /* the connection dropped before the peer answered: it is in the bitmap */
	REQ_PEER_HAS,   /* the peer is known to have it without an answer (its bits are clear) */
	REQ_LOCAL_DONE, /* the local I/O (or, for a Diskless read, the peer's reply) finished: err
	                 */
	REQ_UNFREEZE,   /* the volume thawed: a frozen request goes on as if it arrived now */
	REQ_EVENT_COUNT
};

/* Move vio on by event ev (err: a positive errno where the event carries a result, else 0). */
void req_mod(struct vol_io *vio, enum req_event ev, int err);
const char *req_event_name(enum req_event ev);

/* WRITE, TRIM, ZERO or FLUSH: the operations replication sees. */
static inline bool req_is_write(const struct vol_io *vio)
{
	return vio->op == VOL_WRITE || vio->op == VOL_TRIM || vio->op == VOL_ZERO ||
	       vio->op == VOL_FLUSH;
}

/* The local disk does not count for this request: only the peer's copy will hold it. */
static inline bool req_remote_only(const struct vol_io *vio)
{
	return (vio->rq & RQ_REMOTE) != 0;
}

/* The peer confirmed the request on its disk (or is known to have it). */
static inline bool req_peer_ok(const struct vol_io *vio)
{
	return (vio->rq & RQ_NET_OK) != 0;
}

#endif
