/* SPDX-License-Identifier: MIT */
/*
 * The HTTP side of the metrics endpoint: a strict HTTP/1.x request parser that knows exactly one
 * resource, GET /metrics, and a small libev server around it. The server lives on the main loop
 * and never blocks: a client may take MHTTP_TIMEOUT seconds to send its request and to read the
 * answer, at most MHTTP_MAX_CLIENTS are served at once, the request may not exceed
 * MHTTP_MAX_REQUEST bytes, and every connection is closed after its one response. Whatever a
 * client sends costs one slot for at most the timeout and a response of a few hundred bytes.
 */
#ifndef HAK_METRICS_HTTP_H
#define HAK_METRICS_HTTP_H

#include <stddef.h>

#define MHTTP_MAX_REQUEST 4096u /* bytes of request line and headers together */
#define MHTTP_MAX_CLIENTS 16u
#define MHTTP_TIMEOUT     5.0 /* seconds from accept to the response's last byte */
#define MHTTP_MAX_HEADERS 64u

/*
 * Judge the request head received so far (buf, len bytes, not NUL-terminated). Returns 0 while
 * it is incomplete and still well-formed, otherwise the HTTP status to answer with: 200 for
 * GET /metrics (a query string is ignored), 404 for any other path, 405 for another method,
 * 400 for anything malformed (bad request line, header syntax, a version other than HTTP/1.0 or
 * 1.1, an HTTP/1.1 request without Host, a body announced by Content-Length or
 * Transfer-Encoding), 431 when MHTTP_MAX_REQUEST bytes hold no complete head. A bare LF ends a
 * line as CRLF does. Pure: no allocation, never reads past len.
 */
int mhttp_parse(const char *buf, size_t len);

/*
 * The complete response for status (200 with body, body_len bytes; the error statuses above
 * and 503 with a short text of their own, body ignored), as a malloc'ed buffer of *out_len
 * bytes. NULL with errno ENOMEM.
 */
char *mhttp_response(int status, const char *body, size_t body_len, size_t *out_len);

struct ev_loop;
struct mhttp_server;

/*
 * Produce the body of a GET /metrics: a malloc'ed buffer of *len bytes, or NULL (the client
 * gets a 500).
 */
typedef char *(*mhttp_body_fn)(void *ctx, size_t *len);

/*
 * Listen on addr ("HOST:PORT" or "[V6]:PORT") and serve from loop. Returns 0, or -1 with errno
 * and a sentence in err.
 */
int mhttp_server_start(struct ev_loop *loop, const char *addr, mhttp_body_fn body, void *ctx,
                       struct mhttp_server **out, char *err, size_t errlen);
/* Close the listener and every client. ms may be NULL. */
void mhttp_server_stop(struct mhttp_server *ms);

#endif
