/* SPDX-License-Identifier: MIT */
/*
 * An output queue for a non-blocking socket: items are a small inline header plus an optional
 * borrowed payload, written with one sendmsg per batch. Each item's sent() callback runs once the
 * socket took all of it (or when the queue is dropped), so owners release buffers exactly once.
 */
#ifndef HAK_OUTQ_H
#define HAK_OUTQ_H

#include <stddef.h>
#include <stdint.h>

struct iovec;

struct outq_item {
	struct outq_item *next;
	uint8_t hdr[48];
	uint32_t hdr_len;
	const uint8_t *data;
	size_t data_len;
	size_t sent_bytes;
	/* Called when fully written (err 0) or dropped (err = errno of the failure, or ECANCELED).
	 */
	void (*sent)(struct outq_item *it, int err);
	void *ctx;
};

struct outq {
	struct outq_item *head, *tail;
	size_t bytes; /* queued and not yet written */
	size_t items;
};

/* Ready-made sent() callbacks for heap-allocated items: free the item, or the item and its
 * (malloc'ed) data. */
void outq_free_item(struct outq_item *it, int err);
void outq_free_item_and_data(struct outq_item *it, int err);

void outq_push(struct outq *q, struct outq_item *it);
/* Write what the socket takes. 0 when empty, 1 when the socket would block, -1 with errno. */
int outq_flush(struct outq *q, int fd);
/* For writers other than sendmsg (a TLS layer): the unsent bytes of the first items as at most
 * max - 1 iovecs, and their count (0 when empty). */
int outq_iov(const struct outq *q, struct iovec *iov, int max);
/* n more bytes left: items now fully written leave the queue and their sent() runs (err 0). */
void outq_advance(struct outq *q, size_t n);
/* Drop everything queued, calling sent(it, err) for each. */
void outq_drop(struct outq *q, int err);

#endif
