/* SPDX-License-Identifier: MIT */
#include "events.h"

#include <stdarg.h>
#include <stdio.h>

#include "log.h"

static struct control *events_ctl;

void events_init(struct control *ctl)
{
	events_ctl = ctl;
}

void events_emit(const char *type, const char *fmt, ...)
{
	char kv[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(kv, sizeof(kv), fmt, ap);
	va_end(ap);
	/* Subscribers over the control socket arrive with the `hakctl events` command. */
	log_info("Event %s %s.", type, kv);
}
