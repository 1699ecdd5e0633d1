/* SPDX-License-Identifier: MIT */
/*
 * The control socket hakctl talks to: a UNIX socket speaking JSON lines. Each request is one
 * object {"cmd": NAME, ...}; each answer one object {"ok": true, ...} or
 * {"ok": false, "error": "sentence"}. Commands are registered by the modules that own them, each
 * with the level a client needs to run it.
 *
 * Who is which level is decided when a client connects, from its SO_PEERCRED credentials: root
 * and hakd's own user are CONTROL_ADMIN; the members of the control group (control_set_group)
 * are CONTROL_READ; anyone else gets one error line and is closed. The socket's mode (0660, group
 * the control group, or 0600 without one) keeps the others out first; this is the second wall.
 */
#ifndef HAK_CONTROL_H
#define HAK_CONTROL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ev_loop;
struct control;

#define CONTROL_MAX_LINE    (64u * 1024u)
#define CONTROL_MAX_CLIENTS 32u

/* What a command needs, and what a client may: each level may do what the ones below it may. */
enum control_level {
	CONTROL_READ = 1,  /* looks without changing anything: status, events, version */
	CONTROL_ADMIN = 2, /* changes hakd's state: roles, connections, resyncs, groups, drills */
};

/* Who sent a request: the level its connection was given, and its uid for messages. */
struct control_caller {
	enum control_level level;
	uid_t uid;
};

/*
 * A command handler. Returns a new JSON object to merge into {"ok": true}, or NULL with a
 * sentence in err (sent back as {"ok": false, "error": err}).
 */
typedef json_t *(*control_handler)(void *ctx, json_t *req, char *err, size_t errlen);

/* With loop == NULL the control has no socket: requests come only through control_handle_line. */
int control_create(struct ev_loop *loop, const char *path, struct control **out);
/*
 * Let the members of group (copied) connect and run the CONTROL_READ commands: the socket becomes
 * mode 0660 with that group, and its directory traversable by it. A group the system does not
 * know (configured: it was written as control-group, for the message) leaves the socket root-only
 * with a warning in the log; so does any failure to change the modes. -1 with errno only when
 * memory ran out. Without it (and for a detached control) only admins are let in.
 */
int control_set_group(struct control *ctl, const char *group, bool configured);
int control_register(struct control *ctl, const char *cmd, enum control_level level,
                     control_handler fn, void *ctx);

/*
 * A streaming command: the client that sends it leaves the request/answer protocol and its socket
 * is handed to fn, which owns fd from then on (and writes its own first line) when it returns 0.
 * On -1 the client gets {"ok":false,"error":err} and stays an ordinary client. Only over the
 * socket: control_handle_line answers such a command with an error.
 */
typedef int (*control_stream_fn)(void *ctx, int fd, char *err, size_t errlen);
int control_register_stream(struct control *ctl, const char *cmd, enum control_level level,
                            control_stream_fn fn, void *ctx);
/* The loop the control socket runs on (NULL for a detached control). */
struct ev_loop *control_loop(const struct control *ctl);
void control_destroy(struct control *ctl);

/*
 * Pure request handling, shared by the socket code and the fuzzer: one line in, one line out
 * (malloc'ed, newline-terminated, valid UTF-8 JSON). Every input gets an answer, whatever its
 * bytes (invalid UTF-8, NULs, not JSON at all: {"ok": false, "error": ...}); NULL means only that
 * memory ran out. A command above who->level is refused with a sentence naming the command and
 * who->uid.
 */
char *control_handle_line(struct control *ctl, const struct control_caller *who, const char *line,
                          size_t len);

#endif
