/* SPDX-License-Identifier: MIT */
/*
 * A collector for the messages a parser reports through a callback (conf_parse's warnings,
 * config_check_all's errors): the first eight kept, all counted.
 */
#ifndef HAK_TEST_HEARD_H
#define HAK_TEST_HEARD_H

#include <stdio.h>

struct heard {
	char lines[8][512];
	unsigned n;
};

static inline void hear(void *arg, const char *message)
{
	struct heard *h = arg;

	if (h->n < 8)
		snprintf(h->lines[h->n], sizeof(h->lines[0]), "%s", message);
	h->n++;
}

#endif
