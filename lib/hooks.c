/* SPDX-License-Identifier: MIT */
#include "hooks.h"

#include <errno.h>

#include "log.h"

int hooks_add(struct hooks *h, int order, void (*fn)(void *ctx), void *ctx, const char *name)
{
	if (h->n == HOOKS_MAX) {
		log_err("Cannot register the hook %s: the list already holds %u.", name, HOOKS_MAX);
		errno = ENOSPC;
		return -1;
	}
	unsigned i = h->n++;
	/* insertion sort: stable, so equal orders keep their registration order */
	while (i > 0 && h->v[i - 1].order > order) {
		h->v[i] = h->v[i - 1];
		i--;
	}
	h->v[i] = (struct hook){.order = order, .fn = fn, .ctx = ctx, .name = name};
	return 0;
}

void hooks_run(const struct hooks *h)
{
	for (unsigned i = 0; i < h->n; i++)
		h->v[i].fn(h->v[i].ctx);
}
