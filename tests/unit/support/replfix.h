/* SPDX-License-Identifier: MIT */
/*
 * One side of a replication pair for the unit tests, driven without sockets: a real struct repl
 * (repl_create on a temp backing file with internal metadata made by meta_create_ex, the real
 * volume and I/O engine, an ev loop the test steps) whose peer is played by the test through the
 * in-memory transport (memtransport.h). The test injects the peer's frames and reads what hakd
 * sends; requests come in through volume_submit as NBD's would.
 *
 *   rf_open()              the node, not connected (it listens: its name sorts after the peer's)
 *   rf_hello(), rf_connect()  the peer's HELLO on both streams; the handshake decides
 *   rf_step(), rf_until()  run the loop (bounded in steps and in time), flushing both streams
 *   rf_close()             everything is drained, freed, unlinked (the suites' teardown)
 *
 * One fixture at a time (Check forks every test). The log is captured while it is open (stderr
 * is swapped for a memory stream) so tests can assert on log lines; it is echoed to the real
 * stderr when the fixture closes or the process exits.
 */
#ifndef HAK_REPLFIX_H
#define HAK_REPLFIX_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "conf/config.h"
#include "memtransport.h"
#include "repl/repl.h"
#include "repl/repl_int.h"
#include "volume/req.h"
#include "volume/volume.h"

#define RF_SELF      "beta" /* the node under test: it accepts (its name sorts last) */
#define RF_PEER      "alpha"
#define RF_SELF_ADDR "192.0.2.2:7789"
#define RF_PEER_ADDR "192.0.2.1:7789"
#define RF_SIZE      (16u << 20) /* data bytes the volume exports */
#define RF_BLOCK     4096u       /* bitmap block size */

/* Bounds of every wait: a test that waits longer has failed. */
#define RF_MAX_STEPS   200000u
#define RF_MAX_SECONDS 10.0

struct rf_opts {
	enum hak_repl_mode mode;
	bool integrity;     /* data-integrity crc32c */
	unsigned max_epoch; /* max-epoch-size; 0: the default */
	bool al;            /* the activity log (off by default: writes need no transaction) */
};

/* A client request: answered (answers, err) through vio.done. */
struct rf_req {
	struct vol_io vio;
	int answers;
	int err;
	uint8_t *buf;
	struct rf_req *next;
};

struct replfix {
	bool open;
	struct ev_loop *loop;
	struct io_engine *eng;
	struct hak_config *cfg;
	struct hak_volume_cfg *vc;
	struct hak_node_cfg self, peer;
	struct volume *vol;
	struct repl *r;
	char path[64]; /* /proc/self/fd/N of the (unlinked) backing file */
	uint64_t gen;  /* the blank generation both copies started with */
	/* hakd's two streams as the peer sees them (recorded frames) */
	struct memwire data, meta;
	struct rf_req *reqs;
	/* what the scripted peer acknowledged: WRITE_ACKs with status 0, the highest BARRIER_ACK */
	uint64_t *acked;
	size_t n_acked, cap_acked;
	uint64_t barrier_acked;
	/* log capture */
	FILE *real_stderr, *log;
	char *log_buf;
	size_t log_len, log_cap;
	int fd; /* the backing file, for the test's own reads and writes */
};

/* A node of a fresh, blank volume (generation f->gen, UpToDate, empty bitmap), not connected. */
struct replfix *rf_open(const struct rf_opts *o);
/* Drain and free the open fixture, if any (safe to call twice: the suites' teardown). */
void rf_close(void);

/* The peer's HELLO for this volume: secondary, UpToDate, consistent, generation f->gen. */
void rf_hello(const struct replfix *f, struct wire_hello *h);
/* The peer's HELLO h on stream w (h->stream says which). */
void rf_inject_hello(struct memwire *w, const struct wire_hello *h);
/* The peer connects with HELLO h on both streams (the records of an earlier connection are
 * dropped). Asserts that hakd answered each with its own HELLO and forgets those frames. */
void rf_connect(struct replfix *f, const struct wire_hello *h);
/* Connected with no resync (equal generations): as primary (promoted after the handshake, peer
 * secondary) or as secondary (the peer is primary). Both streams' records are empty after. */
void rf_connect_primary(struct replfix *f);
void rf_connect_secondary(struct replfix *f);

/* The invariants of the send and apply sides, asserted (after every step, injection and
 * submission): the pend table matches pend_count; a write the peer has not acknowledged is in a
 * pend slot or in the bitmap, one acknowledged but not yet covered by an acknowledged barrier
 * is in the transfer log or in the bitmap; every received write being applied or waiting is
 * counted; the data stream is paused exactly when the apply side says so. */
void rf_invariants(struct replfix *f);
/* One turn of the loop without blocking, then both streams are flushed. */
void rf_step(struct replfix *f);
/* Turns of the loop for `seconds` (to show that something does not happen). */
void rf_run_for(struct replfix *f, double seconds);

struct rf_bound {
	double start;
	unsigned steps;
};
struct rf_bound rf_bound_start(void);
/* false once the bound is exceeded (RF_MAX_STEPS or RF_MAX_SECONDS) */
bool rf_bound_ok(struct rf_bound *b);
/* Step until cond holds; fails the test when the bound runs out. */
#define rf_until(f, cond)                                                                          \
	do {                                                                                       \
		struct rf_bound rf_b_ = rf_bound_start();                                          \
		while (!(cond)) {                                                                  \
			ck_assert_msg(rf_bound_ok(&rf_b_), "timed out waiting for: %s", #cond);    \
			rf_step(f);                                                                \
		}                                                                                  \
	} while (0)

/* ---- frames hakd sent ---------------------------------------------------------------------- */

size_t rf_count(const struct memwire *w, uint16_t type);
/* The n-th (from 0) frame of type, or NULL. */
const struct mem_frame *rf_nth(const struct memwire *w, uint16_t type, size_t n);
/* Position of a frame in its stream's record. */
size_t rf_pos(const struct memwire *w, const struct mem_frame *fr);
/* The id of a BARRIER / *_ACK / RS_DONE frame, and the status of WRITE_ACK / RS_ACK. */
uint64_t rf_id(const struct mem_frame *fr);
uint32_t rf_status(const struct mem_frame *fr);
/* The frame of type whose id is id (acks, barriers), or NULL. */
const struct mem_frame *rf_find_id(const struct memwire *w, uint16_t type, uint64_t id);
/* DATA / TRIM / ZERO / RS_DATA decoded (asserted valid for this volume). */
struct rf_io {
	uint64_t id, off;
	uint32_t len;
	uint16_t flags;
	const uint8_t *data; /* NULL without payload */
	uint32_t crc;        /* with WIRE_F_CRC */
};
void rf_io_of(const struct mem_frame *fr, struct rf_io *io);
/* The io frame (of type) covering offset off, or NULL. */
const struct mem_frame *rf_find_io(const struct memwire *w, uint16_t type, uint64_t off);
/* Forget every frame recorded on both streams. */
void rf_clear(struct replfix *f);

/* ---- the peer's frames --------------------------------------------------------------------- */

/* DATA / TRIM / ZERO / RS_DATA on the data stream; with WIRE_F_CRC the right crc32c of data. */
void rf_inject_io(struct replfix *f, uint16_t type, uint16_t flags, uint64_t id, uint64_t off,
                  uint32_t len, const void *data);
/* The same with the crc given (a corrupted payload). */
void rf_inject_io_crc(struct replfix *f, uint16_t flags, uint64_t id, uint64_t off, uint32_t len,
                      const void *data, uint32_t crc);
/* A frame whose payload is an id (u64): BARRIER, BITMAP_DONE, RS_DONE on data; RECV_ACK and
 * BARRIER_ACK on meta. */
void rf_inject_id(struct replfix *f, struct memwire *w, uint16_t type, uint64_t id);
/* WRITE_ACK or RS_ACK on the meta stream. */
void rf_inject_ack(struct replfix *f, uint16_t type, uint64_t id, uint32_t status);
/* BITMAP: the peer's words from first_word on (host order). */
void rf_inject_bitmap(struct replfix *f, uint64_t first_word, const uint64_t *words, size_t n);

/* ---- client requests ----------------------------------------------------------------------- */

/* Deterministic, never all-zero bytes for a seed. */
void rf_pattern(uint8_t *buf, size_t len, unsigned seed);
/* A request submitted through volume_submit; WRITE data is rf_pattern(seed). Owned by the
 * fixture (it outlives the test function: freed after the final drain). */
struct rf_req *rf_submit(struct replfix *f, enum vol_op op, uint64_t off, uint64_t len,
                         unsigned seed, unsigned flags);

/* ---- the disk and the state ---------------------------------------------------------------- */

void rf_disk_read(const struct replfix *f, uint64_t off, void *buf, size_t len);
/* Write rf_pattern(seed) straight into the backing file (behind hakd's back). */
void rf_disk_write(const struct replfix *f, uint64_t off, size_t len, unsigned seed);
bool rf_disk_is(const struct replfix *f, uint64_t off, size_t len, unsigned seed);
bool rf_disk_zero(const struct replfix *f, uint64_t off, size_t len);
/* "out_of_sync_bytes" of repl_status_json */
uint64_t rf_oos_bytes(const struct replfix *f);
/* Whether every bitmap block of [off, off+len) is set (or, dirty=false, clear). */
bool rf_bits(const struct replfix *f, uint64_t off, uint64_t len, bool dirty);
/* The captured log holds needle. */
bool rf_log_has(struct replfix *f, const char *needle);

#endif
