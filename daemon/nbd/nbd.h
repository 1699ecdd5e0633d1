/* SPDX-License-Identifier: MIT */
/*
 * NBD server: listeners, connections, handshake and transmission phase for one volume. It turns
 * requests into volume operations (volume.h) and knows nothing of replication.
 *
 * Every connection runs on the main libev loop. Many requests are in flight per connection and
 * replies go out in completion order; replies produced in one loop iteration are written with one
 * writev. A connection that misbehaves (bad magic, unknown flags, never reading its replies) costs
 * only itself: input is parsed with bounded buffers and reading stops while too much is in flight.
 */
#ifndef HAK_NBD_H_SERVER
#define HAK_NBD_H_SERVER

#include <stdbool.h>
#include <stdint.h>

struct ev_loop;
struct volume;
struct nbd_server;

/*
 * TLS (nbd_tls.h): tcp_tls is the TCP listener's mode (enum nbd_tls_mode: off, on, require);
 * the UNIX socket offers TLS whenever tcp_tls is not off but never requires it (its file mode
 * already decides who connects). tls holds the credentials when tcp_tls is not off.
 */
struct nbd_server_opts {
	const char *unix_path;    /* required: UNIX socket path (removed and re-created) */
	const char *tcp_listen;   /* optional "ADDR:PORT" or "[V6]:PORT" */
	unsigned max_clients;     /* connections beyond this are closed at once */
	double handshake_timeout; /* seconds a client may spend before transmission, TLS
	                           * handshake included */
	int tcp_tls;              /* enum nbd_tls_mode */
	const char *tls_cert_file, *tls_key_file, *tls_ca_file, *tls_psk_file;
};

struct nbd_server_stats {
	unsigned clients;            /* connections open now */
	uint64_t connections;        /* accepted since start */
	uint64_t rejected;           /* closed at accept because of max_clients */
	uint64_t protocol_errors;    /* connections dropped for violating the protocol */
	uint64_t invalid_requests;   /* requests answered with an error before any I/O */
	uint64_t in_flight;          /* requests submitted and not yet replied to */
	uint64_t tls_sessions;       /* TLS handshakes completed */
	uint64_t tls_failures;       /* TLS handshakes that failed (timeouts not included) */
	uint64_t write_bytes_copied; /* write payload bytes that came through the input buffer,
	                              * copied once more: the rest was read straight into place */
};

int nbd_server_create(struct ev_loop *loop, struct volume *vol, const struct nbd_server_opts *o,
                      struct nbd_server **out);
/* Refuse new exports with reason (NULL to accept again); e.g. "this node is secondary". */
void nbd_server_set_refuse(struct nbd_server *s, const char *reason);
/* Stop accepting and reading; connections close once their in-flight requests are answered. */
void nbd_server_shutdown(struct nbd_server *s);
/* True when no connection is left (after nbd_server_shutdown). */
bool nbd_server_idle(const struct nbd_server *s);
/* Close everything immediately; call after the loop drained. */
void nbd_server_destroy(struct nbd_server *s);
void nbd_server_stats(const struct nbd_server *s, struct nbd_server_stats *out);

#endif
