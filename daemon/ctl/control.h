/* SPDX-License-Identifier: MIT */
/*
 * The control socket hakctl talks to: a root-only UNIX socket speaking JSON lines. Each request is
 * one object {"cmd": NAME, ...}; each answer one object {"ok": true, ...} or
 * {"ok": false, "error": "sentence"}. Commands are registered by the modules that own them.
 */
#ifndef HAK_CONTROL_H
#define HAK_CONTROL_H

#include <jansson.h>
#include <stddef.h>

struct ev_loop;
struct control;

#define CONTROL_MAX_LINE    (64u * 1024u)
#define CONTROL_MAX_CLIENTS 32u

/*
 * A command handler. Returns a new JSON object to merge into {"ok": true}, or NULL with a
 * sentence in err (sent back as {"ok": false, "error": err}).
 */
typedef json_t *(*control_handler)(void *ctx, json_t *req, char *err, size_t errlen);

/* With loop == NULL the control has no socket: requests come only through control_handle_line. */
int control_create(struct ev_loop *loop, const char *path, struct control **out);
int control_register(struct control *ctl, const char *cmd, control_handler fn, void *ctx);

/*
 * A streaming command: the client that sends it leaves the request/answer protocol and its socket
 * is handed to fn, which owns fd from then on (and writes its own first line) when it returns 0.
 * On -1 the client gets {"ok":false,"error":err} and stays an ordinary client. Only over the
 * socket: control_handle_line answers such a command with an error.
 */
typedef int (*control_stream_fn)(void *ctx, int fd, char *err, size_t errlen);
int control_register_stream(struct control *ctl, const char *cmd, control_stream_fn fn, void *ctx);
/* The loop the control socket runs on (NULL for a detached control). */
struct ev_loop *control_loop(const struct control *ctl);
void control_destroy(struct control *ctl);

/*
 * Pure request handling, shared by the socket code and the fuzzer: one line in, one line out
 * (malloc'ed, newline-terminated, valid UTF-8 JSON). Every input gets an answer, whatever its
 * bytes (invalid UTF-8, NULs, not JSON at all: {"ok": false, "error": ...}); NULL means only that
 * memory ran out.
 */
char *control_handle_line(struct control *ctl, const char *line, size_t len);

#endif
