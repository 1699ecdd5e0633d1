/* SPDX-License-Identifier: MIT */
/*
 * The event stream: every state transition an operator or a script may react to (resync
 * start/end/interrupt, verify result, split brain, detach, role and link changes) becomes one line
 * `<type> key:value key:value ...` in the log and on every `hakctl events` subscription, in the
 * spirit of `drbdsetup events2`. Values never contain spaces (callers pass names and numbers).
 */
#ifndef HAK_EVENTS_H
#define HAK_EVENTS_H

struct control;

/* Subscribers come from this control socket (`{"cmd":"events"}`); NULL: log only. */
void events_init(struct control *ctl);

/* type: e.g. "resync-start"; fmt: the key:value pairs, printf-style. */
void events_emit(const char *type, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
