/* SPDX-License-Identifier: MIT */
/*
 * Private to daemon/repl/ (scripts/check-includes.sh refuses it elsewhere): the state of one
 * replicated volume, struct repl, in sections by the file that owns each field (the only file
 * that writes it; others of the folder may read it), and the objects that live in its queues.
 * Each file's functions are declared in its own header (ship.h, apply.h, resync.h, ...); this
 * one declares those of repl.c that the rest of the folder calls.
 */
#ifndef HAK_REPL_INT_H
#define HAK_REPL_INT_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

#include "conf/config.h"
#include "meta/gen.h"
#include "io/io.h"
#include "lib/hooks.h"
#include "lib/lathist.h"
#include "lib/rangelock.h"
#include "meta/meta.h"
#include "repl.h"
#include "rsctl.h"
#include "tlog.h"
#include "transport/transport.h"
#include "transport/wire.h"

#define PEND_SLOTS      8192u /* replicated requests in flight to the peer */
#define APPLY_MAX       1024u /* secondary: applies in flight before reading pauses */
#define APPLY_MAX_BYTES (64u << 20)
/* Secondary: resync payload received and not yet written before reading pauses. The source may
 * have a whole resync-fill-target in flight, mostly written and waiting for a flush; what waits
 * for the disk is what costs memory here, and this much keeps the disk's queue full. */
#define RS_APPLY_MAX_BYTES (16u << 20)
#define RS_CHUNK           (256u * 1024u) /* resync run size */
#define RS_SCAN_AHEAD      (1ull << 30)   /* how far one hole scan looks past its run */
/* Resync runs being read at once. A read from the page cache is copied inside io_uring_enter,
 * on the loop: a whole window of them in one submission held the loop for milliseconds in which
 * nothing was sent, so the link and the target idled. A few at a time keep reads and sends
 * interleaved, and the window (resync-fill-target) still bounds what is in flight. */
#define RS_READS_MAX 4u
/* Resync bytes read and still waiting for the socket: what the source's memory holds for the
 * resync, whatever the window. The window counts bytes until the target's ack, which comes only
 * after its flush, so it must be large to keep the link busy; buffers need not be. */
#define RS_UNSENT_MAX (4u << 20)
#define BARRIERS_MAX  256u
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
/* Accepted connections waiting for their HELLO: a peer opens two streams, and may have a stale
 * pair in flight while it reconnects. */
#define REPL_PENDING_MAX 4

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
	int64_t sent_ns; /* CLOCK_MONOTONIC, for the round-trip histograms (ev_now is too coarse) */
	uint64_t tl_seq; /* a barrier: the transfer log entries it covers (tlog_barrier) */
};

/* Secondary: one write (application or resync) being applied. */
struct apply {
	struct range range; /* in repl.applying or repl.apply_waiting */
	struct apply *next; /* in repl.rs_unsynced or repl.rs_syncing, once applied */
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
	uint64_t zero_pos; /* AS_ZEROES: the next byte to write (apply.c) */
	struct io_req io;
};

struct barrier_wait {
	uint64_t id;
	uint64_t epoch;
	uint64_t pending;
	int64_t recv_ns, ready_ns; /* arrived; its writes all done (0: not yet) */
};

/* A secondary's side of a commit, per barrier from its arrival (CLOCK_MONOTONIC): until the
 * writes before it were done, then waiting for a flush to start (one was running), the flush
 * itself (once per flush, which may answer several barriers), and arrival to ack. */
struct barrier_lat {
	struct lathist writes, queue, fsync, total;
	int64_t fsync_start;
};

/* Source: one resync run being read. */
struct rs_op {
	struct range range; /* in repl.rs_reading while its data is read */
	struct rs_op *next; /* in repl.rs_sent or repl.rs_csum */
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
/* Forwarded read chunks in flight (at most WIRE_READ_MAX each: 64 MiB of buffers); the attach
 * pull keeps ATTACH_WINDOW more. The serving side accepts no more than both together. */
#define RREAD_SLOTS   64u
#define ATTACH_WINDOW 8u
struct pull_op {
	struct range range; /* in repl.pulling until written (or orphaned by pull_abort) */
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

/*
 * The hooks of repl.on_conn_lost, in the order they run when the connection drops (after the
 * streams are closed and conn_seq counts the loss), and why in that order: the resync and the
 * verify stop reading first, so no run takes a slot that is about to be failed; forwarded reads
 * fail; the send side puts whatever the peer may lack into the bitmap and answers its waiters;
 * the secondary forgets what it was applying; then a primary starts a new generation, and only
 * then are the writes held behind resync reads let go (into the bitmap).
 */
enum {
	CONN_LOST_FENCE = 5, /* before any write learns that its peer is lost */
	CONN_LOST_RESYNC = 10,
	CONN_LOST_VERIFY = 20,
	CONN_LOST_DISKLESS = 30,
	CONN_LOST_SHIP = 40,
	CONN_LOST_APPLY = 50,
	CONN_LOST_GENERATION = 60,
	CONN_LOST_HELD_WRITES = 70,
};
/* repl.on_write_done (a primary's local write finished, its range is free) and
 * repl.on_apply_done (a secondary's apply finished): whoever waits behind a range may go. */
enum {
	RANGE_FREE_HELD_WRITES = 10,
	RANGE_FREE_RESYNC = 20,
	RANGE_FREE_VERIFY = 30,
	RANGE_FREE_PULL = 40,
	RANGE_FREE_SERVED_READS = 50,
};

struct tls_ctx;

struct repl {
	/* ---- repl.c: the volume's role and states, the connection, the handshake ---- */
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
	bool zero_fallback_logged; /* apply.c wrote zeroes for an unsupported punch (once) */
	char last_refusal[512];
	bool initiator;
	struct tlistener *listener; /* the acceptor's; NULL on the connecting side */
	/* transport rdma,tcp, the acceptor: the TCP listener beside r->listener (RDMA), which is
	 * NULL while RDMA cannot listen (tswitch_tick retries). */
	struct tlistener *listener_fb;
	/* Peer authentication of every connection, both sides (transport/peerauth.h); NULL with
	 * insecure-no-auth. The pending slots below then hold only authenticated streams. */
	struct tauth *auth;
	struct tls_ctx *tls; /* transport tls: made from the configuration by repl_create */
	ev_timer conn_timer;
	ev_timer ping_timer;
	ev_timer flush_timer;
	struct tstream *data, *meta_s;
	uint64_t pings_sent; /* status: shows the ping-interval in force */
	/* Accepted streams that have not yet named themselves with a HELLO. Each has the handshake
	 * limit (the connector's, conn_timer_cb) from its accept to do so, and an accept that finds
	 * every slot taken closes the oldest: a silent connection cannot hold a slot for long. */
	struct tstream *pending_accept[REPL_PENDING_MAX];
	double pending_since[REPL_PENDING_MAX];  /* ev_now() at the accept */
	char pending_from[REPL_PENDING_MAX][64]; /* the remote address, for the log */
	struct tconnect *connecting[2];          /* data and meta streams on their way */
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
	uint64_t conn_seq;    /* counts dropped connections */
	uint64_t connections; /* counts connections that completed their handshake */
	double handshake_start;
	double reject_logged_at; /* rate limit for bad incoming connections: the window's start */
	unsigned reject_logged;  /* ... lines logged in it */
	unsigned reject_suppressed;
	double ping_rtt;
	double ping_sent;
	double ping_tick;      /* ev_now of the ping timer's last run */
	uint64_t promoted_ms;  /* wall clock of the last promotion (not persisted) */
	bool lost_established; /* on_conn_lost runs for a connection past its handshake */
	bool stopping;         /* repl_shutdown: a lost connection is no reason to fence */
	/* Who else must act when the connection drops, or a range is free (the orders above). */
	struct hooks on_conn_lost, on_write_done, on_apply_done;

	/* ---- tswitch.c: transport rdma,tcp, the fallback and the move back in place ---- */
	/* TCP for rdma,tcp in a build with RDMA (r->p.transport is then RDMA); NULL otherwise. */
	const struct transport_ops *fallback;
	const struct transport_ops *conn_t; /* of the connection, or of the attempt in progress */
	bool fb_announced;                  /* the log last said: replicating over the fallback */
	bool fb_listen_said;                /* the acceptor logged that RDMA cannot listen */
	bool sw_fail_said;                  /* a failed move was logged on this connection */
	double sw_deadline; /* ev_now by which the move in progress must have its streams */
	struct tlisten_params sw_lp; /* the acceptor's, for the RDMA listener's retries */
	double listen_next;          /* ev_now of the RDMA listener's next try */
	ev_timer sw_timer;           /* closes the old streams once both markers passed */
	double sw_next;    /* ev_now of the next RDMA try while connected over the fallback */
	uint64_t switches; /* connections moved onto RDMA in place */
	/* Before the move: the new streams (data, meta), their connects, their HELLOs. */
	struct tconnect *sw_connecting[2];
	struct tstream *sw_new[2];
	bool sw_hello_sent[2], sw_hello_rcvd[2];
	/* After it: the old streams, read until the peer's SWITCH marker (sw_marker_rcvd) and
	 * closed once ours is written too (sw_marker_sent). */
	struct tstream *sw_old[2];
	bool sw_marker_rcvd[2], sw_marker_sent[2];
	struct outq_item sw_marker[2];

	/* ---- ship.c: the primary's send side ---- */
	struct pend pend[PEND_SLOTS];
	uint64_t next_id;
	unsigned pend_count;
	/* Every write of a primary is in exactly one of these (its vio->range) until its local
	 * I/O is done: waiting for a free send slot; held back, in arrival order, behind a resync
	 * or attach read of its blocks or an older overlapping write (so both copies apply the two
	 * in one order); or in flight locally (resync and verify reads wait for those). */
	struct rangelock slot_wait, writes_held, writes_active;
	uint64_t async_bytes;
	struct tlog tl;         /* acknowledged, not yet flushed by the peer (tlog.h) */
	ev_timer epoch_timer;   /* closes an epoch that got old (EPOCH_MAX_AGE) */
	unsigned auto_barriers; /* sent by ship_epoch_close, not yet answered */
	/* Ack latency (seconds): the mean and the largest of the last complete window of
	 * ACK_LAT_WINDOW seconds, and the sums of the window being filled (ship_ack). */
	double ack_latency, ack_latency_max;
	double ack_win_start, ack_win_sum, ack_win_max;
	uint64_t ack_win_n;
	/* Every acknowledged client write and flush barrier, sent to acked (the metrics), and the
	 * bytes of client writes shipped. */
	struct lathist rtt_write, rtt_flush;
	uint64_t shipped_bytes;

	/* ---- apply.c: the secondary's apply side ---- */
	/* Being applied, and waiting behind an overlapping one (arrival order). */
	struct rangelock applying, apply_waiting;
	unsigned apply_count;
	uint64_t apply_bytes;
	uint64_t epoch;
	struct barrier_wait barriers[BARRIERS_MAX];
	unsigned nbarriers;
	unsigned barriers_flushing; /* the oldest barriers the flush in progress answers */
	uint64_t barrier_flushes, barriers_acked;
	struct barrier_lat bar_lat;
	bool data_paused;
	/* Resync target: runs written but not yet flushed (their RS_ACK waits), and the runs the
	 * flush in progress covers. */
	struct apply *rs_unsynced, *rs_syncing;
	uint64_t rs_unsynced_bytes;
	unsigned rs_applying;      /* resync runs being written */
	uint64_t rs_apply_bytes;   /* their frames' bytes, held until written */
	uint64_t integrity_errors; /* payloads whose checksum did not match */

	/* ---- resync.c: bitmap exchange and the resync, either side ---- */
	bool bm_sent, bm_done_rcvd, resync_running, resync_full, rs_finishing;
	uint64_t rs_cursor;
	/* Source: [rs_data_lo, rs_data_hi) was data when last scanned, so runs inside it skip
	 * the hole scan. A trim since then costs only a read: zeros still travel as a hole. */
	uint64_t rs_data_lo, rs_data_hi;
	uint64_t rs_inflight;
	uint64_t rs_unsent; /* bytes of resync buffers queued and not yet written to the socket */
	struct rangelock rs_reading; /* runs being read: application writes to them wait */
	struct rs_op *rs_sent;       /* queued to the peer, waiting for RS_ACK */
	uint64_t rs_next_id;
	uint64_t rs_total, rs_done_bytes, rs_sent_bytes, rs_hole_bytes;
	double rs_start, rs_rate;
	uint64_t rs_rate_bytes;
	double rs_rate_t;
	uint64_t bytes_resynced_total;
	uint64_t resyncs_completed;
	struct {
		bool valid, csums, full;
		uint64_t marked, sent, equal, holes;
		double seconds;
	} last_rs;          /* the last resync this node finished as source */
	struct rsctl rsctl; /* rate control of the resync we source */
	ev_timer rs_timer;  /* the rate limit allows more later */

	/* ---- csum.c: checksum-based resync, source side ---- */
	bool rs_csums;         /* this resync compares hashes first */
	bool rs_after_crash;   /* this resync is owed to a primary that crashed */
	struct rs_op *rs_csum; /* CSUM_REQ sent, waiting for the target's RS_REQUEST */
	unsigned rs_csum_count;
	uint64_t rs_payload_bytes, rs_equal_bytes;

	/* ---- splitbrain.c ---- */
	struct sb_hook *sb_hooks; /* split-brain hooks still running */
	unsigned sb_resolved;     /* split brains a policy resolved */

	/* ---- verify.c: online verify and the hash responder ---- */
	struct verify *vf;

	/* ---- diskless.c: disk failure, forwarded reads ---- */
	char detach_reason[192];
	struct rread rread[RREAD_SLOTS];
	unsigned rread_count;
	uint64_t rread_next_id;
	struct rangelock rread_wait; /* forwarded reads waiting for a slot (vio->range) */
	uint64_t remote_reads;       /* chunks the peer served */
	struct rserve *rserve_wait;  /* behind overlapping applies, arrival order */
	unsigned rserve_count;       /* reading or waiting */

	/* ---- fence.c: fencing (the primary) and the Outdated mark (the secondary) ---- */
	enum hak_fencing fencing_policy;
	bool fencing;            /* writes frozen until the peer is known Outdated */
	bool fence_stuck;        /* ... for longer than fence-timeout */
	double fence_start;      /* ev_now when the freeze began */
	uint64_t fence_prev_gen; /* the current generation when the peer was lost */
	ev_timer fence_timer;    /* fence-timeout */
	uint64_t fences, fence_ms_total, fence_ms_last;
	char fence_how[96];        /* how the last freeze ended */
	struct proc *fence_proc;   /* the fence-peer handler, while it runs */
	struct proc *unfence_proc; /* the unfence-peer handler, while it runs */
	bool unfence_owed;         /* fence-peer succeeded; unfence-peer has not yet */
	double unfence_next;       /* ev_now before which a failed unfence-peer is not rerun */

	/* ---- pull.c: hakctl attach, the re-attached disk filled from the peer ---- */
	struct bitmap *pull_bm;   /* blocks the re-attached disk still lacks */
	struct rangelock pulling; /* runs requested or being written */
	uint64_t pull_cursor, pull_next_id, pull_done_bytes;
	double pull_start;
};

/* repl.c, for the rest of the folder */
void repl_log(const struct repl *r, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int repl_write_sb(struct repl *r);
/* End the connection (why: a sentence fragment for the log, NULL at shutdown) and run the
 * on_conn_lost hooks. */
void repl_drop_connection(struct repl *r, const char *why);
/* Our role and disk state to the peer (a WIRE_STATE), when connected. */
void repl_send_state(struct repl *r);
/* A new random generation ID, never 0. */
uint64_t repl_fresh_gen(void);
/* The initiator's connect to the peer, over the preferred transport. */
void repl_start_connect(struct repl *r);
/* Our HELLO for stream (WIRE_STREAM_*) on s; flags 0 starts a connection, WIRE_F_SWITCH joins
 * new streams to the one up (tswitch.h). */
void repl_send_hello(struct repl *r, struct tstream *s, uint8_t stream, uint16_t flags);
/* What every replication stream's owner hears (repl.c), and where a connect lands. */
extern const struct tstream_ops repl_stream_ops;
/* The parameters of a connect to the peer whose streams repl_stream_ops serves. */
struct tconnect_params repl_connect_params(struct repl *r,
                                           void (*done)(void *ctx, struct tconnect *c,
                                                        struct tstream *s, int err),
                                           void *topts);
struct gen_ids repl_gen_local(const struct repl *r);
/* Into the superblock in memory (repl_write_sb persists it). */
void repl_gen_store(struct repl *r, const struct gen_ids *g);
void repl_refuse(struct repl *r, bool standalone, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* This node's changes are dropped: the next connection makes it a full resync target. */
void repl_discard_local(struct repl *r);
/* Whether the bitmap marks any block of [off, off+len) out of sync. */
bool repl_range_dirty(const struct bitmap *bm, uint64_t off, uint64_t len);

#endif
