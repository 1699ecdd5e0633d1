/* SPDX-License-Identifier: MIT */
#include "rangelock.h"

void rangelock_init(struct rangelock *rl)
{
	rl->head = rl->tail = NULL;
	rl->count = 0;
}

void rangelock_add(struct rangelock *rl, struct range *e, uint64_t off, uint64_t len)
{
	e->off = off;
	e->len = len;
	e->owner = rl;
	e->next = NULL;
	e->prev = rl->tail;
	if (rl->tail)
		rl->tail->next = e;
	else
		rl->head = e;
	rl->tail = e;
	rl->count++;
}

void rangelock_del(struct range *e)
{
	struct rangelock *rl = e->owner;
	if (!rl)
		return;
	if (e->prev)
		e->prev->next = e->next;
	else
		rl->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		rl->tail = e->prev;
	rl->count--;
	e->prev = e->next = NULL;
	e->owner = NULL;
}

struct range *rangelock_find(const struct rangelock *rl, uint64_t off, uint64_t len,
                             const struct range *before)
{
	for (struct range *e = rl->head; e && e != before; e = e->next)
		if (range_overlaps(e->off, e->len, off, len))
			return e;
	return NULL;
}
