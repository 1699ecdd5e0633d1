/* SPDX-License-Identifier: MIT */
#include "tlog.h"

#include <errno.h>
#include <stdlib.h>

int tlog_init(struct tlog *t, uint32_t cap)
{
	*t = (struct tlog){0};
	if (cap < 2 || (cap & (cap - 1)) != 0) {
		errno = EINVAL;
		return -1;
	}
	t->ring = calloc(cap, sizeof(*t->ring));
	if (!t->ring)
		return -1;
	t->cap = cap;
	return 0;
}

void tlog_destroy(struct tlog *t)
{
	free(t->ring);
	*t = (struct tlog){0};
}

int tlog_add(struct tlog *t, uint64_t off, uint64_t len)
{
	if (t->head > t->tail && t->head > t->epoch_start) {
		struct tlog_range *n = &t->ring[(t->head - 1) & (t->cap - 1)];
		if (off <= n->off + n->len && n->off <= off + len) {
			uint64_t end = off + len > n->off + n->len ? off + len : n->off + n->len;
			n->off = off < n->off ? off : n->off;
			n->len = end - n->off;
			goto counted;
		}
	}
	if (tlog_used(t) == t->cap) {
		errno = ENOSPC;
		return -1;
	}
	t->ring[t->head & (t->cap - 1)] = (struct tlog_range){off, len};
	t->head++;
counted:
	t->epoch_writes++;
	t->epoch_bytes += len;
	return 0;
}

uint64_t tlog_barrier(struct tlog *t)
{
	t->epoch_start = t->head;
	t->epoch_writes = t->epoch_bytes = 0;
	return t->head;
}

void tlog_stable(struct tlog *t, uint64_t seq)
{
	if (seq > t->head)
		seq = t->head;
	if (seq > t->tail)
		t->tail = seq;
}

void tlog_drain(struct tlog *t, void (*fn)(void *ctx, uint64_t off, uint64_t len), void *ctx)
{
	for (uint64_t s = t->tail; s < t->head; s++) {
		const struct tlog_range *e = &t->ring[s & (t->cap - 1)];
		fn(ctx, e->off, e->len);
	}
	t->tail = t->epoch_start = t->head;
	t->epoch_writes = t->epoch_bytes = 0;
}
