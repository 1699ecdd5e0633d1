/* SPDX-License-Identifier: MIT */
#include "buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#define MIN_SHIFT   12           /* 4 KiB */
#define MAX_SHIFT   26           /* 64 MiB */
#define CACHE_LIMIT (128u << 20) /* cached bytes kept for reuse, over all classes */

struct free_buf {
	struct free_buf *next;
};

static struct free_buf *lists[MAX_SHIFT + 1];
static size_t cached;
/* Per class: buffers in the free list, and the fewest there were since the last buf_age(): that
 * many sat unused the whole time. */
static unsigned counts[MAX_SHIFT + 1], idle[MAX_SHIFT + 1];

static unsigned buf_class(size_t len)
{
	unsigned s = MIN_SHIFT;
	while (s <= MAX_SHIFT && ((size_t)1 << s) < len)
		s++;
	return s;
}

void *buf_get(size_t len)
{
	unsigned c = buf_class(len ? len : 1);
	void *p = NULL;

	if (c <= MAX_SHIFT && lists[c]) {
		struct free_buf *f = lists[c];
		lists[c] = f->next;
		cached -= (size_t)1 << c;
		if (--counts[c] < idle[c])
			idle[c] = counts[c];
		return f;
	}
	size_t size = c <= MAX_SHIFT ? (size_t)1 << c : len;
	if (posix_memalign(&p, 4096, size) != 0) {
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

void *buf_get_at(size_t len, size_t at)
{
	if (at == 0)
		return buf_get(len);
	if (at > 4096 - sizeof(size_t)) {
		errno = EINVAL;
		return NULL;
	}
	size_t head = 4096 - at, size = len + head;
	unsigned char *base = buf_get(size);
	if (!base)
		return NULL;
	/* The head holds at least a size_t, and buf_put finds it by rounding down: the buffer is
	 * 4096-aligned and the head shorter than a page. */
	*(size_t *)base = size;
	return base + head;
}

void buf_put(void *p, size_t len)
{
	if (!p)
		return;
	if ((uintptr_t)p & 4095) {
		p = (void *)((uintptr_t)p & ~(uintptr_t)4095);
		len = *(size_t *)p;
	}
	unsigned c = buf_class(len ? len : 1);
	if (c > MAX_SHIFT || cached + ((size_t)1 << c) > CACHE_LIMIT) {
		free(p);
		return;
	}
	struct free_buf *f = p;
	f->next = lists[c];
	lists[c] = f;
	cached += (size_t)1 << c;
	counts[c]++;
}

size_t buf_age(void)
{
	size_t freed = 0;
	for (unsigned c = MIN_SHIFT; c <= MAX_SHIFT; c++) {
		for (unsigned n = idle[c]; n > 0 && lists[c]; n--) {
			struct free_buf *f = lists[c];
			lists[c] = f->next;
			free(f);
			counts[c]--;
			cached -= (size_t)1 << c;
			freed += (size_t)1 << c;
		}
		idle[c] = counts[c];
	}
	return freed;
}

void buf_trim(void)
{
	for (unsigned c = 0; c <= MAX_SHIFT; c++) {
		while (lists[c]) {
			struct free_buf *f = lists[c];
			lists[c] = f->next;
			free(f);
		}
		counts[c] = idle[c] = 0;
	}
	cached = 0;
}

size_t buf_cached(void)
{
	return cached;
}
