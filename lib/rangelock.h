/* SPDX-License-Identifier: MIT */
/*
 * Byte ranges held by requests in flight, and the one overlap test that write ordering depends
 * on. Two overlapping writes in flight at once may land in either order on a disk, while the
 * peer applies them in arrival order; a resync read racing a write of the same blocks may send
 * the older data last. So the primary's writes, its resync and attach reads, and the secondary's
 * applies each hold their range in a rangelock, and a request that overlaps a held range waits
 * (hastd's rangelock, DRBD's conflicting-write detection).
 *
 * Entries are intrusive (a struct range lives inside the request that holds it: no allocation on
 * the I/O path) and kept in the order they were added, so a queue of waiters can ask "does
 * anything added before me overlap me?" and waiters start in arrival order. The lists are as
 * long as the queue depth, so a scan is cheaper than a tree would be.
 */
#ifndef HAK_RANGELOCK_H
#define HAK_RANGELOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct range {
	uint64_t off, len;
	struct range *prev, *next;
	struct rangelock *owner; /* NULL while in no rangelock */
};

struct rangelock {
	struct range *head, *tail; /* oldest first */
	unsigned count;
};

/* [a, a+alen) and [b, b+blen) share at least one byte (empty ranges share none). */
static inline bool range_overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

void rangelock_init(struct rangelock *rl);
/* Hold [off, off+len) with e (which must be in no rangelock), after every range held so far. */
void rangelock_add(struct rangelock *rl, struct range *e, uint64_t off, uint64_t len);
/* Release e; nothing happens if e is in no rangelock. */
void rangelock_del(struct range *e);
/* The oldest held range overlapping [off, off+len) that was added before `before` (NULL: any),
 * or NULL. */
struct range *rangelock_find(const struct rangelock *rl, uint64_t off, uint64_t len,
                             const struct range *before);
/* Inline for the common case on the write path: most range locks are empty most of the time. */
static inline bool rangelock_overlaps(const struct rangelock *rl, uint64_t off, uint64_t len)
{
	return rl->head && rangelock_find(rl, off, len, NULL) != NULL;
}
static inline bool rangelock_empty(const struct rangelock *rl)
{
	return rl->head == NULL;
}
static inline bool range_held(const struct range *e)
{
	return e->owner != NULL;
}

/* The struct that embeds range e as member m. */
#define range_entry(e, type, m) ((type *)(void *)((char *)(e)-offsetof(type, m)))

#endif
