/* SPDX-License-Identifier: MIT */
/*
 * The transfer log (DRBD keeps one of the same name): the ranges written to the peer since the
 * oldest barrier it has not yet acknowledged. A WRITE_ACK only says the peer's write completed;
 * its disk may still lose it in a power cut. A BARRIER_ACK says the peer flushed
 * everything received before that barrier. So until then the ranges are kept here, and when the
 * peer goes away every range still here goes into the bitmap: the next resync covers what a
 * powered-off peer may have lost.
 *
 * Entries are numbered by an ever-growing sequence; a barrier covers every entry below the
 * sequence tlog_barrier() returned when it was sent, and barriers are acknowledged in order. A
 * range that touches or overlaps the newest entry of the open epoch is merged into it, so
 * sequential writes cost one entry.
 */
#ifndef HAK_TLOG_H
#define HAK_TLOG_H

#include <stdint.h>

struct tlog_range {
	uint64_t off, len;
};

struct tlog {
	struct tlog_range *ring;
	uint32_t cap;         /* a power of two */
	uint64_t head, tail;  /* entries [tail, head) */
	uint64_t epoch_start; /* head when the last barrier went out: older entries never grow */
	uint64_t epoch_writes, epoch_bytes; /* added since that barrier (merged ones included) */
};

/* cap: entries, a power of two >= 2. 0, or -1 with errno (EINVAL, ENOMEM). */
int tlog_init(struct tlog *t, uint32_t cap);
void tlog_destroy(struct tlog *t);
static inline uint32_t tlog_used(const struct tlog *t)
{
	return (uint32_t)(t->head - t->tail);
}
/* Records [off, off+len) as sent. 0, or -1 with errno ENOSPC when full (nothing recorded). */
int tlog_add(struct tlog *t, uint64_t off, uint64_t len);
/* A barrier goes out now: the sequence it covers, for tlog_stable() when it is acknowledged. */
uint64_t tlog_barrier(struct tlog *t);
/* The barrier that covers seq was acknowledged: the entries below seq are on stable storage. */
void tlog_stable(struct tlog *t, uint64_t seq);
/* The peer is gone: fn for every range kept (oldest first), then the log is empty. */
void tlog_drain(struct tlog *t, void (*fn)(void *ctx, uint64_t off, uint64_t len), void *ctx);

#endif
