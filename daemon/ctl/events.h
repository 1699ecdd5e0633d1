/* SPDX-License-Identifier: MIT */
/*
 * The event stream: every state transition an operator or a script may react to (resync
 * start/end/interrupt, verify result, split brain, detach, role and link changes) becomes one line
 * `<type> time:<unix.ms> key:value key:value ...` in the log and on every `hakctl events`
 * subscription, in the spirit of `drbdsetup events2`. Values never contain spaces: callers pass
 * names and numbers, and free text goes through events_token().
 */
#ifndef HAK_EVENTS_H
#define HAK_EVENTS_H

#include <stddef.h>
#include <stdint.h>

struct control;

/* Bytes of unsent lines a subscriber may have before it is dropped. */
#define EVENTS_SUB_BUF  (256u * 1024u)
#define EVENTS_MAX_SUBS 16u
#define EVENTS_LINE_MAX 1024u

/* Subscribers come from this control socket (`{"cmd":"events"}`); NULL: log only. */
void events_init(struct control *ctl);
/* Close every subscription (daemon exit). */
void events_shutdown(void);

/* type: e.g. "resync-start"; fmt: the key:value pairs, printf-style. */
void events_emit(const char *type, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- pure parts, exposed for the unit tests ---- */

/*
 * One event line, newline-terminated, into out: "<type> time:<sec>.<ms> <kv>\n". A line that does
 * not fit is cut and still ends in a newline. Returns the length written.
 */
size_t events_format(char *out, size_t outlen, const char *type, uint64_t unix_ms, const char *kv);

/* Free text as one value: whitespace becomes '-', ':' becomes '=', at most len-1 bytes. */
void events_token(char *out, size_t len, const char *text);

/* A subscriber's bounded queue of unsent bytes (a ring). */
struct events_queue {
	char buf[EVENTS_SUB_BUF];
	size_t head, len;
};

/* 0, or -1 (nothing queued) when the line does not fit in what is left. */
int events_queue_push(struct events_queue *q, const char *line, size_t n);
/* The next contiguous run of queued bytes (*n is 0 when empty). */
const char *events_queue_peek(const struct events_queue *q, size_t *n);
void events_queue_consume(struct events_queue *q, size_t n);

#endif
