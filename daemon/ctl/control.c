/* SPDX-License-Identifier: MIT */
#include "control.h"

#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <ev.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctlperm.h"
#include "lib/log.h"
#include "lib/usock.h"

#define MAX_CMDS 64

struct ctl_cmd {
	const char *name;
	enum control_level level;
	control_handler fn;
	control_stream_fn stream;
	void *ctx;
};

struct ctl_client {
	struct control *ctl;
	struct control_caller who;
	int fd;
	ev_io rio, wio;
	char *in;
	size_t in_len;
	char *out;
	size_t out_len, out_sent;
	struct ctl_client *prev, *next;
};

struct control {
	struct ev_loop *loop;
	char *path;
	char *group; /* whose members are CONTROL_READ clients; NULL: nobody's */
	uid_t euid;  /* hakd's own user, an admin like root */
	int lfd;
	ev_io lio;
	struct ctl_cmd cmds[MAX_CMDS];
	size_t n_cmds;
	struct ctl_client *clients;
	unsigned n_clients;
};

/* o as one compact line ending in a newline (malloc'ed), or NULL when out of memory. */
static char *reply_line(const json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL, *r;
	size_t n;

	if (!s)
		return NULL;
	n = strlen(s);
	r = realloc(s, n + 2);
	if (!r) {
		free(s);
		return NULL;
	}
	r[n] = '\n';
	r[n + 1] = '\0';
	return r;
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629, as jansson checks it: no overlong forms,
 * no surrogates, nothing above U+10FFFF), or 0 when the bytes there are not one. */
static size_t control_utf8_len(const unsigned char *s)
{
	unsigned c = s[0], min, cp;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2, min = 0x80, cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3, min = 0x800, cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4, min = 0x10000, cp = c & 0x07;
	} else {
		return 0;
	}
	/* A NUL ends the string, and is no continuation byte, so this never reads past it. */
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* Replace, in place, every byte of s that is not part of well-formed UTF-8 with '?'. Error texts
 * quote the client's bytes (jansson's "near '...'" context, a command name cut at a byte count),
 * and json_pack refuses a string that is not UTF-8: without this such a request got no reply. */
static void control_utf8_sanitize(char *s)
{
	unsigned char *p = (unsigned char *)s;

	while (*p) {
		size_t n = control_utf8_len(p);
		if (n == 0) {
			*p++ = '?';
			continue;
		}
		p += n;
	}
}

static char *reply_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *reply_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	control_utf8_sanitize(msg);
	json_t *o = json_pack("{s:b, s:s}", "ok", 0, "error", msg);
	char *r = reply_line(o);
	json_decref(o);
	return r;
}

/* The refusal of cmd for a caller below its level, or NULL when the caller may run it. */
static char *level_refusal(const struct control *ctl, const struct ctl_cmd *cmd,
                           const struct control_caller *who)
{
	char reads[256] = "";
	size_t n = 0;

	if (who->level >= cmd->level)
		return NULL;
	for (size_t i = 0; i < ctl->n_cmds && n < sizeof(reads); i++)
		if (ctl->cmds[i].level == CONTROL_READ)
			n += (size_t)snprintf(reads + n, sizeof(reads) - n, "%s%s", n ? ", " : "",
			                      ctl->cmds[i].name);
	log_notice("Refused command '%s' of control client uid %u: it changes hakd's state and "
	           "the client may only read.",
	           cmd->name, (unsigned)who->uid);
	return reply_error("Command '%s' changes hakd's state and needs root; uid %u may run only "
	                   "the read-only commands (%s).",
	                   cmd->name, (unsigned)who->uid, reads[0] ? reads : "none");
}

char *control_handle_line(struct control *ctl, const struct control_caller *who, const char *line,
                          size_t len)
{
	json_error_t jerr;
	char err[512] = "";
	char *out = NULL;
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	json_t *resp = NULL;

	if (!req)
		return reply_error("The request is not valid UTF-8 JSON (column %d: %s).",
		                   jerr.column, jerr.text);
	const char *cmd = json_string_value(json_object_get(req, "cmd"));
	if (!json_is_object(req) || !cmd) {
		out = reply_error("The request must be a JSON object with a string \"cmd\".");
		goto done;
	}
	for (size_t i = 0; i < ctl->n_cmds; i++) {
		if (strcmp(ctl->cmds[i].name, cmd) != 0)
			continue;
		if ((out = level_refusal(ctl, &ctl->cmds[i], who)))
			goto done;
		if (ctl->cmds[i].stream) {
			out = reply_error("Command '%.64s' streams and needs the control socket.",
			                  cmd);
			goto done;
		}
		resp = ctl->cmds[i].fn(ctl->cmds[i].ctx, req, err, sizeof(err));
		if (!resp) {
			out = reply_error("%s", err[0] ? err : "The command failed.");
			goto done;
		}
		json_object_set_new(resp, "ok", json_true());
		out = reply_line(resp);
		/* A handler's answer jansson cannot encode still gets a reply, so the client is
		 * never left waiting for one; only running out of memory leaves it without. */
		if (!out)
			out = reply_error(
			    "The answer to command '%.64s' could not be encoded as JSON.", cmd);
		goto done;
	}
	out = reply_error("Unknown command '%.64s'; try 'hakctl --help'.", cmd);
done:
	json_decref(resp);
	json_decref(req);
	return out;
}

/* Forget the client; its fd is closed unless keep_fd (handed to a streaming command). */
static void client_release(struct ctl_client *cl, bool keep_fd)
{
	struct control *ctl = cl->ctl;
	ev_io_stop(ctl->loop, &cl->rio);
	ev_io_stop(ctl->loop, &cl->wio);
	if (!keep_fd)
		close(cl->fd);
	if (cl->prev)
		cl->prev->next = cl->next;
	else
		ctl->clients = cl->next;
	if (cl->next)
		cl->next->prev = cl->prev;
	ctl->n_clients--;
	free(cl->in);
	free(cl->out);
	free(cl);
}

static void client_free(struct ctl_client *cl)
{
	client_release(cl, false);
}

/* The streaming command this line asks for, if any. */
static const struct ctl_cmd *stream_cmd(const struct control *ctl, const char *line, size_t len)
{
	const struct ctl_cmd *found = NULL;
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	const char *cmd = json_string_value(json_object_get(req, "cmd"));
	for (size_t i = 0; cmd && i < ctl->n_cmds; i++)
		if (ctl->cmds[i].stream && strcmp(ctl->cmds[i].name, cmd) == 0)
			found = &ctl->cmds[i];
	json_decref(req);
	return found;
}

static int client_flush(struct ctl_client *cl)
{
	while (cl->out_sent < cl->out_len) {
		ssize_t w = send(cl->fd, cl->out + cl->out_sent, cl->out_len - cl->out_sent,
		                 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ev_io_start(cl->ctl->loop, &cl->wio);
				ev_io_stop(cl->ctl->loop, &cl->rio);
				return 0;
			}
			if (errno == EINTR)
				continue;
			return -1;
		}
		cl->out_sent += (size_t)w;
	}
	free(cl->out);
	cl->out = NULL;
	cl->out_len = cl->out_sent = 0;
	ev_io_stop(cl->ctl->loop, &cl->wio);
	ev_io_start(cl->ctl->loop, &cl->rio);
	return 0;
}

/* Answer every complete line in the input buffer; stop at the first reply that must wait. 1: the
 * client became a stream and is gone. */
static int client_process(struct ctl_client *cl)
{
	while (!cl->out) {
		char *nl = memchr(cl->in, '\n', cl->in_len);
		if (!nl)
			return 0;
		size_t len = (size_t)(nl - cl->in);
		const struct ctl_cmd *sc = stream_cmd(cl->ctl, cl->in, len);
		if (!sc) {
			cl->out = control_handle_line(cl->ctl, &cl->who, cl->in, len);
		} else if (!(cl->out = level_refusal(cl->ctl, sc, &cl->who))) {
			char err[256] = "";
			if (sc->stream(sc->ctx, cl->fd, err, sizeof(err)) == 0) {
				client_release(cl, true);
				return 1;
			}
			cl->out = reply_error("%s", err[0] ? err : "The command failed.");
		}
		memmove(cl->in, nl + 1, cl->in_len - len - 1);
		cl->in_len -= len + 1;
		if (!cl->out)
			return -1;
		cl->out_len = strlen(cl->out);
		cl->out_sent = 0;
		if (client_flush(cl) < 0)
			return -1;
	}
	return 0;
}

static void client_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctl_client *cl = w->data;
	(void)loop;
	(void)revents;
	ssize_t r = read(cl->fd, cl->in + cl->in_len, CONTROL_MAX_LINE - cl->in_len);
	if (r <= 0) {
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		client_free(cl);
		return;
	}
	cl->in_len += (size_t)r;
	int pr = client_process(cl);
	if (pr < 0) {
		client_free(cl);
		return;
	}
	if (pr > 0)
		return;
	if (cl->in_len == CONTROL_MAX_LINE) {
		log_warn("A control client sent a line longer than %u bytes; closing it.",
		         CONTROL_MAX_LINE);
		char *msg =
		    reply_error("The request line is longer than %u bytes.", CONTROL_MAX_LINE);
		if (msg) {
			(void)!send(cl->fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT);
			free(msg);
		}
		client_free(cl);
	}
}

static void client_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctl_client *cl = w->data;
	(void)loop;
	(void)revents;
	if (client_flush(cl) < 0)
		client_free(cl);
	else if (client_process(cl) < 0)
		client_free(cl);
}

/* Tell a client that is not let in why, in one line (the socket is new: the line fits). */
static void client_refuse(const struct control *ctl, int fd, const struct ctlperm_peer *p)
{
	char *msg;

	log_warn("Refused control client uid %u (pid %d): it is neither root nor a member of group "
	         "'%s'.",
	         (unsigned)p->uid, (int)p->pid, ctl->group ? ctl->group : "(none configured)");
	if (ctl->group)
		msg =
		    reply_error("uid %u may not use hakd's control socket: only root may, and the "
		                "members of group '%s' for the read-only commands.",
		                (unsigned)p->uid, ctl->group);
	else
		msg =
		    reply_error("uid %u may not use hakd's control socket: only root may (hakd has "
		                "no control group).",
		                (unsigned)p->uid);
	if (msg)
		(void)!send(fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT);
	free(msg);
}

/*
 * Who the client on fd is: 0 with who filled in, or -1 when it may not use the socket (it was
 * told why). The group is looked up at every connection, so a group created, renamed or given
 * other members while hakd runs counts as it is now.
 */
static int client_identify(const struct control *ctl, int fd, struct control_caller *who)
{
	struct ctlperm_peer p;
	gid_t gid;
	int member = 0;

	if (ctlperm_peer_get(fd, &p) < 0) {
		log_warn("Cannot read the credentials of a control client: %s; closing it.",
		         strerror(errno));
		return -1;
	}
	who->uid = p.uid;
	who->level = CONTROL_ADMIN;
	if (p.uid == 0 || p.uid == ctl->euid)
		return 0;
	who->level = CONTROL_READ;
	if (ctl->group && ctlperm_group_gid(ctl->group, &gid) == 0)
		member = ctlperm_member(p.uid, p.gid, gid);
	if (member < 0)
		log_warn("Cannot read the groups of uid %u: %s; it is taken as no member of '%s'.",
		         (unsigned)p.uid, strerror(errno), ctl->group);
	if (member > 0)
		return 0;
	client_refuse(ctl, fd, &p);
	return -1;
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct control *ctl = w->data;
	struct control_caller who;
	(void)revents;
	int fd = accept4(ctl->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (client_identify(ctl, fd, &who) < 0) {
		close(fd);
		return;
	}
	struct ctl_client *cl = NULL;
	if (ctl->n_clients >= CONTROL_MAX_CLIENTS || !(cl = calloc(1, sizeof(*cl))) ||
	    !(cl->in = malloc(CONTROL_MAX_LINE))) {
		log_warn(
		    "Refusing a control client: %u are connected (limit %u) or memory ran out.",
		    ctl->n_clients, CONTROL_MAX_CLIENTS);
		free(cl);
		close(fd);
		return;
	}
	cl->ctl = ctl;
	cl->who = who;
	cl->fd = fd;
	ev_io_init(&cl->rio, client_read_cb, fd, EV_READ);
	ev_io_init(&cl->wio, client_write_cb, fd, EV_WRITE);
	cl->rio.data = cl->wio.data = cl;
	ev_io_start(loop, &cl->rio);
	cl->next = ctl->clients;
	if (ctl->clients)
		ctl->clients->prev = cl;
	ctl->clients = cl;
	ctl->n_clients++;
}

static int mkdir_parent(const char *path)
{
	char *copy = strdup(path);
	int rc = 0;
	if (!copy)
		return -1;
	char *dir = dirname(copy);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		rc = -1;
	free(copy);
	return rc;
}

int control_create(struct ev_loop *loop, const char *path, struct control **out)
{
	struct control *ctl = NULL;
	int rc = -1, saved;

	ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -1;
	ctl->loop = loop;
	ctl->euid = geteuid();
	ctl->lfd = -1;
	if (!loop) {
		/* Detached: requests only through control_handle_line() (tests, fuzzing). */
		*out = ctl;
		return 0;
	}
	ctl->path = strdup(path);
	if (!ctl->path)
		goto out;
	mkdir_parent(path);
	/* Root-only until control_set_group() names who else may connect. */
	ctl->lfd = usock_listen(path, 16);
	if (ctl->lfd < 0) {
		log_err("Cannot listen on control socket %s: %s.", path, strerror(errno));
		goto out;
	}
	ev_io_init(&ctl->lio, accept_cb, ctl->lfd, EV_READ);
	ctl->lio.data = ctl;
	ev_io_start(loop, &ctl->lio);
	*out = ctl;
	ctl = NULL;
	rc = 0;
out:
	saved = errno;
	if (ctl) {
		if (ctl->lfd >= 0)
			close(ctl->lfd);
		free(ctl->path);
		free(ctl);
	}
	errno = saved;
	return rc;
}

/* Why a group that exists is not let in, logged; the socket stays (or goes back to) 0600. */
static void group_share(struct control *ctl, gid_t gid)
{
	char err[512];

	if (ctlperm_share_socket(ctl->path, gid, err, sizeof(err)) < 0) {
		log_warn("%s The control socket stays mode 0600, for its owner only.", err);
		return;
	}
	if (ctlperm_share_dir(ctl->path, gid, ctl->group, err, sizeof(err)) < 0) {
		log_warn("%s", err);
		return;
	}
	log_info("Control socket %s: root may run every command, the members of group '%s' "
	         "(gid %u) the read-only ones.",
	         ctl->path, ctl->group, (unsigned)gid);
}

int control_set_group(struct control *ctl, const char *group, bool configured)
{
	char *copy = strdup(group);
	gid_t gid;

	if (!copy)
		return -1;
	free(ctl->group);
	ctl->group = copy;
	if (!ctl->loop)
		return 0;
	if (ctlperm_group_gid(group, &gid) == 0) {
		group_share(ctl, gid);
	} else if (errno != ENOENT) {
		log_warn("Cannot look up group '%s' (%s), so control socket %s stays root-only.",
		         group, strerror(errno), ctl->path);
	} else if (configured) {
		log_warn(
		    "Group '%s' set by control-group does not exist, so control socket %s stays "
		    "root-only; create it (groupadd %s) or fix control-group, then restart hakd.",
		    group, ctl->path, group);
	} else {
		log_warn(
		    "Group '%s' does not exist, so control socket %s stays root-only; create it "
		    "(groupadd %s) and restart hakd to let its members run the read-only hakctl "
		    "commands.",
		    group, ctl->path, group);
	}
	return 0;
}

static int cmd_add(struct control *ctl, struct ctl_cmd c)
{
	if (c.level != CONTROL_READ && c.level != CONTROL_ADMIN) {
		errno = EINVAL;
		return -1;
	}
	if (ctl->n_cmds == MAX_CMDS) {
		errno = ENOSPC;
		return -1;
	}
	ctl->cmds[ctl->n_cmds++] = c;
	return 0;
}

int control_register(struct control *ctl, const char *cmd, enum control_level level,
                     control_handler fn, void *ctx)
{
	return cmd_add(ctl, (struct ctl_cmd){cmd, level, fn, NULL, ctx});
}

int control_register_stream(struct control *ctl, const char *cmd, enum control_level level,
                            control_stream_fn fn, void *ctx)
{
	return cmd_add(ctl, (struct ctl_cmd){cmd, level, NULL, fn, ctx});
}

struct ev_loop *control_loop(const struct control *ctl)
{
	return ctl->loop;
}

void control_destroy(struct control *ctl)
{
	if (!ctl)
		return;
	while (ctl->clients)
		client_free(ctl->clients);
	if (ctl->lfd >= 0) {
		ev_io_stop(ctl->loop, &ctl->lio);
		close(ctl->lfd);
		unlink(ctl->path);
	}
	free(ctl->path);
	free(ctl->group);
	free(ctl);
}
