/* SPDX-License-Identifier: MIT */
/*
 * Ordered lists of callbacks that modules register for an event of another module ("the
 * connection dropped", "a write finished, so whoever waits behind it may go"). The module that
 * fires the event runs the list and knows none of them, so a new subsystem registers itself
 * instead of being called by hand from every place that fires it. The order is explicit (lower
 * first, then registration order), because teardown order matters and must be readable in one
 * place: the owner of the list documents its order constants.
 */
#ifndef HAK_HOOKS_H
#define HAK_HOOKS_H

#define HOOKS_MAX 12u

struct hook {
	int order;
	void (*fn)(void *ctx);
	void *ctx;
	const char *name; /* for the log when the list is full */
};

struct hooks {
	unsigned n;
	struct hook v[HOOKS_MAX];
};

/* 0, or -1 with errno ENOSPC when HOOKS_MAX hooks are there already (a programming error). */
int hooks_add(struct hooks *h, int order, void (*fn)(void *ctx), void *ctx, const char *name);
void hooks_run(const struct hooks *h);

#endif
