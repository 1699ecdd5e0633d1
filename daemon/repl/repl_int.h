/* SPDX-License-Identifier: MIT */
/* Private to repl.c and resync.c: the state of one replicated volume. */
#ifndef HAK_REPL_INT_H
#define HAK_REPL_INT_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

#include "diskless.h"
#include "meta/gen.h"
#include "io/io.h"
#include "meta/meta.h"
#include "repl.h"
#include "rsctl.h"
#include "tlog.h"
#include "transport/transport.h"
#include "transport/wire.h"

#define PEND_SLOTS      8192u /* replicated requests in flight to the peer */
#define APPLY_MAX       1024u /* secondary: applies in flight before reading pauses */
#define APPLY_MAX_BYTES (64u << 20)
#define RS_CHUNK        (256u * 1024u) /* resync run size */
#define RS_SCAN_AHEAD   (1ull << 30)   /* how far one hole scan looks past its run */
#define BARRIERS_MAX    256u
/* The resync target acknowledges runs once an fdatasync covered them; one flush covers every run
 * written while the previous one ran, and starts early once this many bytes wait for it. */
#define RS_SYNC_BATCH (2u << 20)
/* The transfer log (tlog.h): writes the peer acknowledged but has not yet flushed; writes wait
 * while it is full. Resync runs need none: the target acknowledges them once on disk. */
#define TLOG_SLOTS 65536u
/* An epoch (the writes between two barriers) closes with a barrier of its own after
 * max-epoch-size writes, EPOCH_MAX_BYTES bytes or EPOCH_MAX_AGE seconds, so what a peer that
 * loses power may lose stays small; at most AUTO_BARRIERS_MAX of these go unanswered. */
#define EPOCH_MAX_BYTES   (8u << 20)
#define EPOCH_MAX_AGE     0.1
#define AUTO_BARRIERS_MAX 32u
/* The ack latency in status is the mean over the acks of a window this long, and its maximum:
 * a running average per ack jumped by a tenth of every slow one (a flush on the peer, another
 * process taking the CPU for a moment), so it mostly showed the last hiccup. */
#define ACK_LAT_WINDOW 1.0
/* Async mode: how long data and acks may wait to share a packet (tstream_set_lazy). The data's
 * delay is RPO the peer lags by; the acks' only holds pend slots and activity-log references. */
#define ASYNC_DATA_DELAY 0.0005
#define ASYNC_DATA_BYTES (256u * 1024u)
#define ASYNC_ACK_DELAY  0.002
#define ASYNC_ACK_BYTES  4096u

/* A request sent to the peer and not yet acknowledged. */
struct pend {
	uint64_t id;
	bool used;
	bool write_acked;
	bool auto_barrier; /* sent by ship_epoch_close, not for a client's flush */
	uint16_t type;     /* WIRE_DATA / TRIM / ZERO / BARRIER */
	uint64_t off;
	uint32_t len;
	struct vol_io *vio; /* NULL once completed (async) */
	uint8_t *copy;      /* async payload copy, until sent */
	double sent_at;
	uint64_t tl_seq; /* a barrier: the transfer log entries it covers (tlog_barrier) */
};

/* Secondary: one write (application or resync) being applied. */
struct apply {
	struct apply *next;
	struct repl *r;
	uint16_t type;
	uint16_t flags;
	uint64_t id;
	uint64_t off;
	uint32_t len;
	uint8_t *frame; /* the received payload (owned), data at frame + data_off */
	uint32_t frame_len;
	uint32_t data_off;
	uint64_t epoch;
	bool resync;
	bool active;
	bool bulk;     /* written through volume_bulk_fd() */
	uint64_t conn; /* repl.conn_seq when it arrived */
	int stage;
	struct io_req io;
};

struct barrier_wait {
	uint64_t id;
	uint64_t epoch;
	uint64_t pending;
	bool flushing;
};

/* Source: one resync run being read. */
struct rs_op {
	struct rs_op *next;
	struct repl *r;
	uint64_t id;
	uint64_t off;
	uint32_t len;
	int stage;
	bool hole;
	bool orphan; /* the connection went away while reading */
	uint8_t *buf;
	uint8_t *hashes; /* checksum resync: the target's hashes of the run */
	struct io_extent map[1];
	struct io_req io;
	struct outq_item item;
};

/* Primary, diskless: one read chunk forwarded to the peer. */
struct rread {
	uint64_t id; /* valid while vio != NULL */
	struct vol_io *vio;
	uint32_t len;
	uint8_t *dst;
};

/* Primary, attach: one run pulled from the peer (requested, then written locally). */
#define ATTACH_ID_BIT (UINT64_C(1) << 63)
struct pull_op {
	struct pull_op *next;
	struct repl *r;
	uint64_t id, off;
	uint32_t len;
	bool writing, orphan;
	uint8_t *buf;
	struct io_req io;
};

/* Secondary: one READ_REQ being served. */
struct rserve {
	struct rserve *next;
	struct repl *r;
	uint64_t id, off, conn_seq;
	uint32_t len;
	int status;
	uint8_t *buf;
	struct io_req io;
	struct outq_item item;
};

struct repl {
	struct repl_params p;
	const char *name;
	struct meta *meta;
	struct meta_sb sb;
	struct bitmap *bm;
	enum repl_role role;
	enum repl_disk disk;
	enum repl_link link;
	enum repl_mode mode;
	bool crashed_primary;
	bool al_tail;       /* crashed_primary: the crash tail is in the bitmap (al_io.h) */
	struct al_io *alio; /* NULL: no activity log */
	bool want_connect;
	bool split_brain;
	char last_refusal[512];
	bool initiator;

	/* Peer. */
	struct tlistener *listener; /* the acceptor's; NULL on the connecting side */
	ev_timer conn_timer;
	ev_timer ping_timer;
	ev_timer flush_timer;
	struct tstream *data, *meta_s;
	struct tstream *pending_accept[4];
	struct tconnect *connecting[2]; /* data and meta streams on their way */
	bool hello_sent[2], hello_rcvd[2];
	struct wire_hello peer_hello;
	/* The acceptor may start talking before the connector has read the second HELLO: such a
	 * frame is held (its stream paused) until the handshake completes. */
	struct {
		struct tstream *s;
		struct wire_hdr h;
		uint8_t *payload;
	} early[2];
	enum repl_role peer_role;
	enum repl_disk peer_disk;
	bool connected;
	uint64_t conn_seq; /* counts dropped connections */
	double handshake_start;
	double reject_logged_at; /* rate limit for bad incoming connections: the window's start */
	unsigned reject_logged;  /* ... lines logged in it */
	unsigned reject_suppressed;

	/* Primary send side. */
	struct pend pend[PEND_SLOTS];
	uint64_t next_id;
	uint64_t oldest_id;
	unsigned pend_count;
	struct vol_io *wait_head, *wait_tail; /* waiting for a free slot */
	struct vol_io *active_writes;         /* local I/O in flight (for resync overlap) */
	/* Writes held back, in arrival order: behind a resync read of their blocks, or behind an
	 * older overlapping write still in flight (so both copies apply the two in one order). */
	struct vol_io *deferred, *deferred_tail;
	uint64_t async_bytes;
	struct tlog tl;         /* acknowledged, not yet flushed by the peer (tlog.h) */
	ev_timer epoch_timer;   /* closes an epoch that got old (EPOCH_MAX_AGE) */
	unsigned auto_barriers; /* sent by ship_epoch_close, not yet answered */
	/* Ack latency (seconds): the mean and the largest of the last complete window of
	 * ACK_LAT_WINDOW seconds, and the sums of the window being filled (ship_ack). */
	double ack_latency, ack_latency_max;
	double ack_win_start, ack_win_sum, ack_win_max;
	uint64_t ack_win_n;
	double ping_rtt;
	double ping_sent;

	/* Secondary apply side. */
	struct apply *applies;    /* active */
	struct apply *apply_wait; /* waiting behind an overlap, arrival order */
	unsigned apply_count;
	uint64_t apply_bytes;
	uint64_t epoch;
	struct barrier_wait barriers[BARRIERS_MAX];
	unsigned nbarriers;
	bool data_paused;
	/* Resync target: runs written but not yet flushed (their RS_ACK waits), and the runs the
	 * flush in progress covers. */
	struct apply *rs_unsynced, *rs_syncing;
	uint64_t rs_unsynced_bytes;
	unsigned rs_applying; /* resync runs being written */

	/* Resync. */
	bool bm_sent, bm_done_rcvd, resync_running, resync_full, rs_finishing;
	uint64_t rs_cursor;
	/* Source: [rs_data_lo, rs_data_hi) was data when last scanned, so runs inside it skip
	 * the hole scan. A trim since then costs only a read: zeros still travel as a hole. */
	uint64_t rs_data_lo, rs_data_hi;
	uint64_t rs_inflight;
	struct rs_op *rs_reading; /* being read: application writes to these blocks wait */
	struct rs_op *rs_sent;    /* queued to the peer, waiting for RS_ACK */
	uint64_t rs_next_id;
	uint64_t rs_total, rs_done_bytes, rs_sent_bytes, rs_hole_bytes;
	double rs_start, rs_rate;
	uint64_t rs_rate_bytes;
	double rs_rate_t;
	uint64_t bytes_resynced_total;
	uint64_t resyncs_completed;

	/* Guards. */
	uint64_t promoted_ms;      /* wall clock of the last promotion (not persisted) */
	struct sb_hook *sb_hooks;  /* split-brain hooks still running */
	unsigned sb_resolved;      /* split brains a policy resolved */
	uint64_t integrity_errors; /* payloads whose checksum did not match */
	/* Checksum-based resync (csum.c), source side. */
	bool rs_csums;         /* this resync compares hashes first */
	bool rs_after_crash;   /* this resync is owed to a primary that crashed */
	struct rs_op *rs_csum; /* CSUM_REQ sent, waiting for the target's RS_REQUEST */
	unsigned rs_csum_count;
	uint64_t rs_payload_bytes, rs_equal_bytes;
	struct {
		bool valid, csums, full;
		uint64_t marked, sent, equal, holes;
		double seconds;
	} last_rs; /* the last resync this node finished as source */

	struct verify *vf; /* online verify and the hash responder (verify.c) */
	/* Disk failure (diskless.c). */
	char detach_reason[192];
	struct rread rread[RREAD_SLOTS];
	unsigned rread_count;
	uint64_t rread_next_id;
	struct vol_io *rread_head, *rread_tail; /* waiting for a slot */
	uint64_t remote_reads;                  /* chunks the peer served */
	struct rserve *rserve_wait;             /* behind overlapping applies, arrival order */
	unsigned rserve_count;                  /* reading or waiting */

	/* Attach (attach.c): blocks the re-attached disk still lacks, runs being pulled. */
	struct bitmap *pull_bm;
	struct pull_op *pulls;
	unsigned pull_count;
	uint64_t pull_cursor, pull_next_id, pull_done_bytes;
	double pull_start;
	struct rsctl rsctl; /* rate control of the resync we source */
	ev_timer rs_timer;  /* the rate limit allows more later */
};

/* repl.c */
void repl_log(const struct repl *r, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int repl_write_sb(struct repl *r);
void repl_drop_connection(struct repl *r, const char *why);
/* ship.c: the primary's send side */
/* Requests held back behind a resync or attach read may go now. */
void repl_deferred_pump(struct repl *r);
/* A RECV_ACK, WRITE_ACK or BARRIER_ACK for slot id arrived. */
void ship_ack(struct repl *r, uint16_t type, uint64_t id, uint32_t status);
/* The peer is gone: every slot without its WRITE_ACK goes into the bitmap and completes; any
 * role (a secondary sourcing a resync has slots for its barriers). */
void ship_fail_all(struct repl *r);
/* Requests that waited for a free slot may take one now. */
void ship_wait_pump(struct repl *r);
/* The peer is gone: whatever it may not have flushed goes into the bitmap. */
void ship_unstable_lost(struct repl *r);
void ship_epoch_timer_cb(struct ev_loop *loop, ev_timer *w, int revents);
/* The activity log let a held write go (err 0) or failed it. */
void ship_al_resume(void *ctx, struct vol_io *vio, int err);
/* Ack latency in seconds, mean or maximum: of the last complete window, or until there is one,
 * of the window being filled (0: no ack yet). */
double ship_ack_latency(const struct repl *r, bool max);
/* The activity log is short of slots: end the open epoch now, so its barrier ack frees them. */
void ship_al_want_stable(void *ctx);
void repl_send_state(struct repl *r);
struct gen_ids repl_gen_local(const struct repl *r);
void repl_refuse(struct repl *r, bool standalone, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* This node's changes are dropped: the next connection makes it a full resync target. */
void repl_discard_local(struct repl *r);

/* splitbrain.c: split brain detected at the handshake; applies the policy (refuses, or discards
 * one side and reconnects). rule: how it was detected, lg/pg: the generation IDs for messages. */
void splitbrain_handle(struct repl *r, bool both_primary, const char *rule, const char *lg,
                       const char *pg);
void splitbrain_shutdown(struct repl *r);

/* apply.c: the secondary side */
void apply_frame(struct repl *r, const struct wire_hdr *h, uint8_t *payload);
void barrier_frame(struct repl *r, uint64_t id);
void apply_drop_waiting(struct repl *r);
/* Forget resync runs written but not yet acknowledged: the bits stay set on both sides. */
void apply_drop_unsynced(struct repl *r);
/* fdatasync the volume off the loop; then() runs when it is done, unless the connection that
 * asked is gone by then. 0, or -1 when out of memory. */
int apply_flush(struct repl *r, void (*then)(struct repl *r, int err));
bool apply_overlaps(const struct repl *r, uint64_t off, uint64_t len);

/* attach.c */
bool attach_overlaps(const struct repl *r, uint64_t off, uint64_t len);
void attach_pump(struct repl *r);
void attach_read_reply(struct repl *r, const struct wire_hdr *h, uint8_t *payload);
void attach_abort(struct repl *r);

/* resync.c */
void resync_begin(struct repl *r, enum gen_decision d, int rule, bool peer_resumable,
                  bool self_resumable);
void resync_frame(struct repl *r, const struct wire_hdr *h, uint8_t *payload);
void resync_pump(struct repl *r);
void resync_stop(struct repl *r);
bool resync_overlaps(const struct repl *r, uint64_t off, uint64_t len);
void resync_rs_ack(struct repl *r, uint64_t id, uint32_t status);
json_t *resync_status_json(const struct repl *r);
void resync_send_op(struct repl *r, struct rs_op *op);
void resync_free_op(struct rs_op *op);
bool resync_overlaps_write(const struct repl *r, uint64_t off, uint64_t len);

/* csum.c: checksum-based resync, source side */
bool csum_wanted(const struct repl *r);
int csum_start_run(struct repl *r, uint64_t off, uint32_t len);
void csum_frame(struct repl *r, const struct wire_hdr *h, uint8_t *payload);
void csum_stop(struct repl *r);
void resync_timer_cb(struct ev_loop *loop, ev_timer *w, int revents);
/* The peer paused (true) or resumed its resyncs (WIRE_RS_PAUSE). */
void resync_peer_pause(struct repl *r, bool paused);
/* Tell the peer whether this node holds resyncs paused. */
void resync_send_pause(struct repl *r);

#endif
