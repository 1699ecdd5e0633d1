/* SPDX-License-Identifier: MIT */
/*
 * nbd-badclient: a deliberately misbehaving NBD client for integration tests. Each subcommand does
 * one kind of bad thing on a raw socket and checks the server's exact answer against the NBD
 * specification, printing "OK <case>: ..." or "FAIL <case>: expected ..., got ...".
 *
 *   nbd-badclient SUBCOMMAND SOCKET [--export NAME] [--pid SERVER_PID] [--rss-limit-mb N]
 *                 [--close-within-s N]
 *
 * SOCKET is a UNIX socket path, or HOST:PORT for a TCP listener. --pid lets the memory cases
 * watch the server's VmRSS while they run. --close-within-s bounds the wait of the STARTTLS
 * cases for the server to drop a client that never completes the TLS handshake (default 10). Exit
 * status: 0 when every check passed, 1 on a mismatch, 2 on a usage or local error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hak/nbd.h>

#include "lib/clock.h"
#include "lib/endian.h"
#include "lib/net.h"
#include "lib/usock.h"

#define IO_TIMEOUT_MS 10000
#define MiB           (1024u * 1024u)

struct opts {
	const char *sock;
	const char *export;
	long pid;
	long rss_limit_mb;
	long close_within_s;
};

struct conn {
	int fd;
	uint64_t size;
	uint16_t tflags;
	uint64_t cookie;
};

static const char *cur_case = "?";
static int failures;

static void check_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void check_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("FAIL %s: ", cur_case);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	failures++;
}

static void check_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void check_ok(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("OK %s: ", cur_case);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
}

/* The server's resident set in KiB, or -1 when there is no --pid or it is gone. */
static long rss_kb(long pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

static bool server_alive(long pid)
{
	return pid <= 0 || kill((pid_t)pid, 0) == 0;
}

/* ---- socket I/O with a deadline ----------------------------------------------------------------
 */

static int wait_fd(int fd, short ev, int ms);

/* A TCP connection to "HOST:PORT", connected (or -1 with errno) within the I/O timeout. */
static int tcp_open(const char *addr)
{
	int fd = net_connect(addr, 0, NULL, NULL), err = 0;
	socklen_t len = sizeof(err);

	if (fd < 0)
		return -1;
	if (wait_fd(fd, POLLOUT, IO_TIMEOUT_MS) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
		if (err)
			errno = err;
		close(fd);
		return -1;
	}
	return fd;
}

static int conn_open(const char *path)
{
	int fd = path[0] == '/' ? usock_connect(path) : tcp_open(path);

	if (fd < 0)
		fprintf(stderr, "Cannot connect to %s: %s.\n", path, strerror(errno));
	return fd;
}

/* Waits for fd to become ready for ev; 0 when ready, -1 with errno ETIMEDOUT otherwise. */
static int wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int r;

	do {
		r = poll(&p, 1, ms);
	} while (r < 0 && errno == EINTR);
	if (r == 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	return r < 0 ? -1 : 0;
}

/* Reads exactly n bytes: 0 on success, 1 on EOF (the server closed), -1 on error or timeout. */
static int read_full(int fd, void *buf, size_t n)
{
	char *p = buf;
	ssize_t r;

	while (n > 0) {
		if (wait_fd(fd, POLLIN, IO_TIMEOUT_MS) < 0)
			return -1;
		r = recv(fd, p, n, MSG_DONTWAIT);
		if (r == 0)
			return 1;
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET ? 1 : -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Writes exactly n bytes: 0 on success, 1 when the server closed, -1 on error or timeout. */
static int write_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	ssize_t r;

	while (n > 0) {
		if (wait_fd(fd, POLLOUT, IO_TIMEOUT_MS) < 0)
			return -1;
		r = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return (errno == EPIPE || errno == ECONNRESET) ? 1 : -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/*
 * Waits until the server closes the connection, discarding anything it still sends. Returns true
 * on EOF within ms milliseconds; *extra gets the number of bytes received before it.
 */
static bool expect_close(int fd, int ms, size_t *extra)
{
	double deadline = clock_mono() + ms / 1000.0;
	char buf[4096];
	ssize_t r;

	*extra = 0;
	while (clock_mono() < deadline) {
		if (wait_fd(fd, POLLIN, 200) < 0) {
			if (errno == ETIMEDOUT)
				continue;
			return false;
		}
		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return true;
		if (r > 0)
			*extra += (size_t)r;
	}
	return false;
}

/* ---- handshake ------------------------------------------------------------------------------- */

/* Connects and reads the 18-byte greeting; -1 (with a FAIL line) if it is not fixed newstyle. */
static int hs_greet(const struct opts *o)
{
	unsigned char g[18];
	int fd = conn_open(o->sock);

	if (fd < 0) {
		check_fail("cannot connect to %s", o->sock);
		return -1;
	}
	if (read_full(fd, g, sizeof(g)) != 0) {
		check_fail("no 18-byte greeting from the server");
		goto err;
	}
	if (be_get64(g) != NBD_MAGIC_INIT || be_get64(g + 8) != NBD_MAGIC_OPTS) {
		check_fail("greeting magics %016" PRIx64 " %016" PRIx64 ", want NBDMAGIC IHAVEOPT",
		           be_get64(g), be_get64(g + 8));
		goto err;
	}
	if (!(be_get16(g + 16) & NBD_FLAG_FIXED_NEWSTYLE)) {
		check_fail("handshake flags 0x%x lack FIXED_NEWSTYLE", be_get16(g + 16));
		goto err;
	}
	return fd;
err:
	close(fd);
	return -1;
}

/* Greeting plus client flags FIXED_NEWSTYLE|NO_ZEROES: ready for options. */
static int hs_open(const struct opts *o)
{
	unsigned char f[4];
	int fd = hs_greet(o);

	if (fd < 0)
		return -1;
	be_put32(f, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	if (write_full(fd, f, sizeof(f)) != 0) {
		check_fail("cannot send client flags");
		close(fd);
		return -1;
	}
	return fd;
}

static int opt_send_magic(int fd, uint64_t magic, uint32_t opt, const void *data, uint32_t len)
{
	unsigned char h[NBD_OPT_HEADER_SIZE];
	int r;

	be_put64(h, magic);
	be_put32(h + 8, opt);
	be_put32(h + 12, len);
	r = write_full(fd, h, sizeof(h));
	if (r == 0 && len > 0)
		r = write_full(fd, data, len);
	return r;
}

static int opt_send(int fd, uint32_t opt, const void *data, uint32_t len)
{
	return opt_send_magic(fd, NBD_MAGIC_OPTS, opt, data, len);
}

struct opt_reply {
	uint32_t opt;
	uint32_t type;
	uint32_t len;
	unsigned char data[4096];
};

/* Reads one option reply (payload beyond 4096 bytes is discarded); 0, 1 on EOF, -1 on error. */
static int opt_reply_read(int fd, struct opt_reply *rep)
{
	unsigned char h[NBD_OPT_REPLY_HDR_SIZE], skip[4096];
	uint32_t keep, rest;
	int r;

	r = read_full(fd, h, sizeof(h));
	if (r != 0)
		return r;
	if (be_get64(h) != NBD_MAGIC_OPT_REPLY) {
		check_fail("option reply magic %016" PRIx64 ", want %016" PRIx64, be_get64(h),
		           (uint64_t)NBD_MAGIC_OPT_REPLY);
		return -1;
	}
	rep->opt = be_get32(h + 8);
	rep->type = be_get32(h + 12);
	rep->len = be_get32(h + 16);
	keep = rep->len < sizeof(rep->data) ? rep->len : (uint32_t)sizeof(rep->data);
	r = read_full(fd, rep->data, keep);
	for (rest = rep->len - keep; r == 0 && rest > 0;) {
		uint32_t n = rest < sizeof(skip) ? rest : (uint32_t)sizeof(skip);

		r = read_full(fd, skip, n);
		rest -= n;
	}
	return r;
}

/* Sends option opt and expects exactly one reply of type want (echoing opt). */
static bool opt_expect(int fd, uint32_t opt, const void *data, uint32_t len, uint32_t want,
                       struct opt_reply *rep)
{
	int r;

	if (opt_send(fd, opt, data, len) != 0) {
		check_fail("cannot send option %u", opt);
		return false;
	}
	r = opt_reply_read(fd, rep);
	if (r != 0) {
		check_fail("option %u: %s instead of a reply", opt,
		           r == 1 ? "connection closed" : "no reply within 10 s");
		return false;
	}
	if (rep->opt != opt || rep->type != want) {
		check_fail("option %u: reply for option %u of type 0x%x, want type 0x%x", opt,
		           rep->opt, rep->type, want);
		return false;
	}
	return true;
}

/*
 * NBD_OPT_GO for name; fills c->size and c->tflags from NBD_INFO_EXPORT. Returns 0 on ACK, the
 * error reply type when the server refused, or -1 on a protocol failure.
 */
static long opt_go(struct conn *c, const char *name)
{
	unsigned char buf[NBD_MAX_STRING + 8];
	uint32_t nlen = (uint32_t)strlen(name);
	struct opt_reply rep;
	bool have_export = false;
	int i;

	be_put32(buf, nlen);
	memcpy(buf + 4, name, nlen);
	be_put16(buf + 4 + nlen, 1);
	be_put16(buf + 6 + nlen, NBD_INFO_BLOCK_SIZE);
	if (opt_send(c->fd, NBD_OPT_GO, buf, nlen + 8) != 0)
		return -1;
	for (i = 0; i < 64; i++) {
		if (opt_reply_read(c->fd, &rep) != 0)
			return -1;
		if (rep.type & NBD_REP_ERR_BIT)
			return (long)rep.type;
		if (rep.type == NBD_REP_ACK)
			return have_export ? 0 : -1;
		if (rep.type == NBD_REP_INFO && rep.len >= 12 &&
		    be_get16(rep.data) == NBD_INFO_EXPORT) {
			c->size = be_get64(rep.data + 2);
			c->tflags = be_get16(rep.data + 10);
			have_export = true;
		}
	}
	return -1;
}

/* A connection in transmission phase (simple replies only) to the --export export. */
static bool conn_go(const struct opts *o, struct conn *c)
{
	long r;

	memset(c, 0, sizeof(*c));
	c->cookie = 0x1000;
	c->fd = hs_open(o);
	if (c->fd < 0)
		return false;
	r = opt_go(c, o->export);
	if (r != 0) {
		check_fail("GO for export '%s' failed (reply 0x%lx)", o->export, r);
		close(c->fd);
		c->fd = -1;
		return false;
	}
	return true;
}

/* ---- transmission ---------------------------------------------------------------------------- */

static int req_send(struct conn *c, uint16_t flags, uint16_t type, uint64_t off, uint32_t len,
                    const void *payload, size_t plen)
{
	unsigned char h[NBD_REQUEST_SIZE];
	int r;

	be_put32(h, NBD_MAGIC_REQUEST);
	be_put16(h + 4, flags);
	be_put16(h + 6, type);
	be_put64(h + 8, ++c->cookie);
	be_put64(h + 16, off);
	be_put32(h + 24, len);
	r = write_full(c->fd, h, sizeof(h));
	if (r == 0 && plen > 0)
		r = write_full(c->fd, payload, plen);
	return r;
}

/*
 * Reads the simple reply to the last request; for a successful READ also its dlen data bytes into
 * data (may be NULL to discard). Returns the NBD error, or -1 on a broken/closed connection.
 */
static long reply_read(struct conn *c, void *data, size_t dlen)
{
	unsigned char h[NBD_SIMPLE_REPLY_SIZE];
	static unsigned char sink[64 * 1024];
	uint32_t err;
	int r;

	r = read_full(c->fd, h, sizeof(h));
	if (r != 0) {
		check_fail("%s while waiting for the reply to request %" PRIu64,
		           r == 1 ? "connection closed" : "timeout or error", c->cookie);
		return -1;
	}
	if (be_get32(h) != NBD_MAGIC_SIMPLE_REPLY || be_get64(h + 8) != c->cookie) {
		check_fail("reply magic 0x%x cookie %" PRIu64 ", want 0x%x cookie %" PRIu64,
		           be_get32(h), be_get64(h + 8), NBD_MAGIC_SIMPLE_REPLY, c->cookie);
		return -1;
	}
	err = be_get32(h + 4);
	while (err == 0 && dlen > 0) {
		size_t n = data ? dlen : (dlen < sizeof(sink) ? dlen : sizeof(sink));

		if (read_full(c->fd, data ? data : sink, n) != 0) {
			check_fail("short read data for request %" PRIu64, c->cookie);
			return -1;
		}
		dlen -= n;
	}
	return err;
}

/* One request with the given payload; checks the reply error is one of want[0..nwant). */
static bool req_expect(struct conn *c, const char *what, uint16_t flags, uint16_t type,
                       uint64_t off, uint32_t len, const void *payload, size_t plen,
                       const uint32_t *want, int nwant)
{
	long err;
	int i;

	if (req_send(c, flags, type, off, len, payload, plen) != 0) {
		check_fail("%s: cannot send the request", what);
		return false;
	}
	err = reply_read(c, NULL, type == NBD_CMD_READ ? len : 0);
	if (err < 0)
		return false;
	for (i = 0; i < nwant; i++) {
		if ((uint32_t)err == want[i]) {
			check_ok("%s -> error %ld", what, err);
			return true;
		}
	}
	check_fail("%s: server replied error %ld, want %u%s", what, err, want[0],
	           nwant > 1 ? " (or an alternative)" : "");
	return false;
}

/* READ of len bytes at off that must succeed and return the bytes in want (if non-NULL). */
static bool read_check(struct conn *c, const char *what, uint64_t off, uint32_t len,
                       const unsigned char *want)
{
	unsigned char *buf = malloc(len);
	bool ok = false;
	long err;

	if (!buf)
		return false;
	if (req_send(c, 0, NBD_CMD_READ, off, len, NULL, 0) != 0) {
		check_fail("%s: cannot send READ", what);
		goto out;
	}
	err = reply_read(c, buf, len);
	if (err != 0) {
		if (err > 0)
			check_fail("%s: READ %u at %" PRIu64 " failed with error %ld", what, len,
			           off, err);
		goto out;
	}
	if (want && memcmp(buf, want, len) != 0) {
		check_fail("%s: READ %u at %" PRIu64 " returned different data", what, len, off);
		goto out;
	}
	ok = true;
out:
	free(buf);
	return ok;
}

/* ---- negotiation cases ----------------------------------------------------------------------- */

/* Sends the 4 bytes as client flags; the server must drop the connection. */
static void case_client_flags(const struct opts *o, const char *name, const unsigned char f[4])
{
	size_t extra;
	int fd;

	cur_case = name;
	fd = hs_greet(o);
	if (fd < 0)
		return;
	if (write_full(fd, f, 4) == 0 && opt_send(fd, NBD_OPT_LIST, NULL, 0) != -1 &&
	    expect_close(fd, 5000, &extra))
		check_ok("server closed the connection (%zu bytes sent before)", extra);
	else
		check_fail("connection still open 5 s after client flags %02x%02x%02x%02x", f[0],
		           f[1], f[2], f[3]);
	close(fd);
}

static void case_bad_opt_magic(const struct opts *o)
{
	size_t extra;
	int fd;

	cur_case = "opt-bad-magic";
	fd = hs_open(o);
	if (fd < 0)
		return;
	opt_send_magic(fd, UINT64_C(0x1122334455667788), NBD_OPT_LIST, NULL, 0);
	if (expect_close(fd, 5000, &extra))
		check_ok("server closed the connection (%zu bytes sent before)", extra);
	else
		check_fail("connection still open 5 s after an option with a bad magic");
	close(fd);
}

/* Unknown option 99 -> ERR_UNSUP, then negotiation goes on: GO and a READ work. */
static void case_unknown_opt(const struct opts *o)
{
	struct opt_reply rep;
	struct conn c = {.cookie = 1};
	long r;

	cur_case = "opt-unknown";
	c.fd = hs_open(o);
	if (c.fd < 0)
		return;
	if (!opt_expect(c.fd, 99, "hello", 5, NBD_REP_ERR_UNSUP, &rep))
		goto out;
	check_ok("option 99 -> NBD_REP_ERR_UNSUP");
	r = opt_go(&c, o->export);
	if (r != 0) {
		check_fail("GO after the unknown option failed (0x%lx)", r);
		goto out;
	}
	if (read_check(&c, "read after the unknown option", 0, 4096, NULL))
		check_ok("GO and READ work after the unknown option");
out:
	close(c.fd);
}

/* STARTTLS on a server without TLS -> ERR_POLICY; NBD_OPT_LIST still works afterwards. */
static void case_starttls(const struct opts *o)
{
	struct opt_reply rep;
	int fd, i;

	cur_case = "opt-starttls";
	fd = hs_open(o);
	if (fd < 0)
		return;
	if (!opt_expect(fd, NBD_OPT_STARTTLS, NULL, 0, NBD_REP_ERR_POLICY, &rep))
		goto out;
	check_ok("STARTTLS -> NBD_REP_ERR_POLICY");
	if (opt_send(fd, NBD_OPT_LIST, NULL, 0) != 0)
		goto out;
	for (i = 0; i < 64; i++) {
		if (opt_reply_read(fd, &rep) != 0 || rep.type != NBD_REP_SERVER)
			break;
	}
	if (rep.type == NBD_REP_ACK && i > 0)
		check_ok("LIST after STARTTLS: %d export(s), then ACK", i);
	else
		check_fail("LIST after STARTTLS: reply type 0x%x after %d SERVER replies", rep.type,
		           i);
	if (opt_expect(fd, NBD_OPT_ABORT, NULL, 0, NBD_REP_ACK, &rep))
		check_ok("ABORT -> ACK");
out:
	close(fd);
}

/* ---- TLS cases (a listener with nbd-tls on or require) ----------------------------------------
 */

/* Negotiates up to STARTTLS's ACK; the fd, or -1 after a failed check. */
static int starttls_open(const struct opts *o)
{
	struct opt_reply rep;
	int fd = hs_open(o);

	if (fd < 0)
		return -1;
	if (!opt_expect(fd, NBD_OPT_STARTTLS, NULL, 0, NBD_REP_ACK, &rep)) {
		close(fd);
		return -1;
	}
	check_ok("STARTTLS -> ACK");
	return fd;
}

/* Under nbd-tls require: nothing but STARTTLS and ABORT before TLS; EXPORT_NAME is dropped. */
static void case_tls_required(const struct opts *o)
{
	static const uint32_t opts[] = {NBD_OPT_LIST, NBD_OPT_INFO, NBD_OPT_GO,
	                                NBD_OPT_STRUCTURED_REPLY, 99};
	unsigned char go[6] = {0};
	struct opt_reply rep;
	size_t i, extra = 0;
	int fd;

	cur_case = "tls-required";
	fd = hs_open(o);
	if (fd < 0)
		return;
	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		if (!opt_expect(fd, opts[i], go,
		                opts[i] == NBD_OPT_INFO || opts[i] == NBD_OPT_GO ? 6 : 0,
		                NBD_REP_ERR_TLS_REQD, &rep))
			goto out;
		check_ok("option %u before TLS -> NBD_REP_ERR_TLS_REQD (%.*s)", opts[i],
		         (int)(rep.len < 200 ? rep.len : 200), (const char *)rep.data);
	}
	if (opt_send(fd, NBD_OPT_EXPORT_NAME, NULL, 0) == 0 && expect_close(fd, 5000, &extra) &&
	    extra == 0)
		check_ok("EXPORT_NAME before TLS: the server closed without exporting anything");
	else
		check_fail("EXPORT_NAME before TLS: connection open, or %zu bytes sent", extra);
out:
	close(fd);
}

/* STARTTLS, then bytes that are no TLS ClientHello: the server must hang up at once. */
static void case_starttls_garbage(const struct opts *o)
{
	static const char junk[] = "GET / HTTP/1.0\r\nHost: hak\r\n\r\n"
	                           "this is not a TLS ClientHello, not even close.\r\n";
	size_t extra;
	int fd;

	cur_case = "starttls-garbage";
	fd = starttls_open(o);
	if (fd < 0)
		return;
	if (write_full(fd, junk, sizeof(junk) - 1) == 0 && expect_close(fd, 5000, &extra))
		check_ok("garbage after STARTTLS: the server closed (%zu bytes sent before)",
		         extra);
	else
		check_fail("connection still open 5 s after garbage in place of a TLS handshake");
	close(fd);
}

/* STARTTLS, then silence: the handshake timeout must drop the client. */
static void case_starttls_stall(const struct opts *o)
{
	double t0 = clock_mono();
	size_t extra;
	int fd;

	cur_case = "starttls-stall";
	fd = starttls_open(o);
	if (fd < 0)
		return;
	if (expect_close(fd, (int)(o->close_within_s * 1000), &extra))
		check_ok("silent client after STARTTLS: dropped after %.1f s", clock_mono() - t0);
	else
		check_fail("connection still open %ld s after STARTTLS without a handshake",
		           o->close_within_s);
	close(fd);
}

/*
 * STARTTLS and another option in one write: the option would be read from the clear text as if
 * it came over TLS (an injection). The server must drop the connection.
 */
static void case_starttls_inject(const struct opts *o)
{
	unsigned char b[2 * NBD_OPT_HEADER_SIZE];
	size_t extra;
	int fd;

	cur_case = "starttls-inject";
	fd = hs_open(o);
	if (fd < 0)
		return;
	be_put64(b, NBD_MAGIC_OPTS);
	be_put32(b + 8, NBD_OPT_STARTTLS);
	be_put32(b + 12, 0);
	be_put64(b + 16, NBD_MAGIC_OPTS);
	be_put32(b + 24, NBD_OPT_LIST);
	be_put32(b + 28, 0);
	if (write_full(fd, b, sizeof(b)) == 0 && expect_close(fd, 5000, &extra))
		check_ok("an option pipelined after STARTTLS: the server closed (%zu bytes sent "
		         "before)",
		         extra);
	else
		check_fail("connection still open 5 s after an option pipelined behind STARTTLS");
	close(fd);
}

static void case_unknown_export(const struct opts *o)
{
	struct conn c = {.cookie = 1};
	char name[64];
	long r;

	cur_case = "go-unknown-export";
	c.fd = hs_open(o);
	if (c.fd < 0)
		return;
	snprintf(name, sizeof(name), "no-such-export-%ld", (long)getpid());
	/* opt_go only returns the type; read the message with a second, manual GO below. */
	r = opt_go(&c, name);
	if (r != (long)NBD_REP_ERR_UNKNOWN) {
		check_fail("GO '%s': reply 0x%lx, want NBD_REP_ERR_UNKNOWN 0x%x", name, r,
		           NBD_REP_ERR_UNKNOWN);
		goto out;
	}
	check_ok("GO '%s' -> NBD_REP_ERR_UNKNOWN", name);
	r = opt_go(&c, o->export);
	if (r == 0)
		check_ok("GO for '%s' on the same connection afterwards works", o->export);
	else
		check_fail("GO for '%s' after the unknown export failed (0x%lx)", o->export, r);
out:
	close(c.fd);
}

/* The error reply for an unknown export carries a human-readable message. */
static void case_unknown_export_msg(const struct opts *o)
{
	unsigned char buf[64];
	struct opt_reply rep;
	int fd;

	cur_case = "go-unknown-export-message";
	fd = hs_open(o);
	if (fd < 0)
		return;
	be_put32(buf, 7);
	memcpy(buf + 4, "nothere", 7);
	be_put16(buf + 11, 0);
	if (!opt_expect(fd, NBD_OPT_GO, buf, 13, NBD_REP_ERR_UNKNOWN, &rep))
		goto out;
	if (rep.len > 0)
		check_ok("message: %.*s", (int)(rep.len < 200 ? rep.len : 200), (char *)rep.data);
	else
		check_fail("NBD_REP_ERR_UNKNOWN carries no message");
out:
	close(fd);
}

static void case_meta_before_sr(const struct opts *o)
{
	unsigned char buf[NBD_MAX_STRING + 64];
	const char *q = "base:allocation";
	uint32_t nlen = (uint32_t)strlen(o->export), qlen = (uint32_t)strlen(q), len;
	struct opt_reply rep;
	int fd;

	cur_case = "meta-before-structured-reply";
	fd = hs_open(o);
	if (fd < 0)
		return;
	be_put32(buf, nlen);
	memcpy(buf + 4, o->export, nlen);
	be_put32(buf + 4 + nlen, 1);
	be_put32(buf + 8 + nlen, qlen);
	memcpy(buf + 12 + nlen, q, qlen);
	len = 12 + nlen + qlen;
	if (opt_expect(fd, NBD_OPT_SET_META_CONTEXT, buf, len, NBD_REP_ERR_INVALID, &rep))
		check_ok("SET_META_CONTEXT without STRUCTURED_REPLY -> NBD_REP_ERR_INVALID");
	if (opt_expect(fd, NBD_OPT_ABORT, NULL, 0, NBD_REP_ACK, &rep))
		check_ok("negotiation goes on: ABORT -> ACK");
	close(fd);
}

/* ---- memory-bound cases ---------------------------------------------------------------------- */

struct rss_watch {
	long pid;
	long base_kb;
	long max_kb;
};

static void rss_start(struct rss_watch *w, long pid)
{
	w->pid = pid;
	w->base_kb = rss_kb(pid);
	w->max_kb = w->base_kb;
}

static void rss_sample(struct rss_watch *w)
{
	long kb = rss_kb(w->pid);

	if (kb > w->max_kb)
		w->max_kb = kb;
}

/* Reports the growth; a FAIL when it exceeds limit_mb (only with --pid). */
static void rss_report(const struct rss_watch *w, long limit_mb)
{
	long grow;

	if (w->pid <= 0 || w->base_kb < 0) {
		check_ok("no --pid: server memory not watched");
		return;
	}
	grow = w->max_kb - w->base_kb;
	if (grow > limit_mb * 1024)
		check_fail("server RSS grew by %ld KiB (from %ld to %ld KiB), limit %ld MiB", grow,
		           w->base_kb, w->max_kb, limit_mb);
	else
		check_ok("server RSS grew by %ld KiB (from %ld to %ld KiB), limit %ld MiB", grow,
		         w->base_kb, w->max_kb, limit_mb);
}

/* Streams up to len bytes of zeros without blocking on a server that stops reading. */
static int stream_zeros(int fd, uint64_t len, struct rss_watch *w, bool *reply_ready)
{
	static unsigned char zeros[256 * 1024];
	struct pollfd p = {.fd = fd, .events = POLLOUT | POLLIN};
	double idle_since = clock_mono();
	ssize_t r;

	while (len > 0) {
		rss_sample(w);
		if (poll(&p, 1, 200) < 0 && errno != EINTR)
			return -1;
		if (p.revents & POLLIN) {
			*reply_ready = true;
			return 0;
		}
		if (p.revents & (POLLERR | POLLHUP))
			return 1;
		if (!(p.revents & POLLOUT)) {
			if (clock_mono() - idle_since > 10)
				return -1;
			continue;
		}
		r = send(fd, zeros, len < sizeof(zeros) ? len : sizeof(zeros),
		         MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0 && (errno == EPIPE || errno == ECONNRESET))
			return 1;
		if (r > 0) {
			len -= (uint64_t)r;
			idle_since = clock_mono();
		}
	}
	return 0;
}

/* A 100 MB option: the server must answer NBD_REP_ERR_TOO_BIG or close, without buffering it. */
static void case_opt_too_big(const struct opts *o)
{
	const uint32_t len = 100u * 1000u * 1000u;
	unsigned char h[NBD_OPT_HEADER_SIZE];
	bool reply_ready = false;
	struct opt_reply rep;
	struct rss_watch w;
	int fd, r;

	cur_case = "opt-too-big";
	fd = hs_open(o);
	if (fd < 0)
		return;
	rss_start(&w, o->pid);
	be_put64(h, NBD_MAGIC_OPTS);
	be_put32(h + 8, NBD_OPT_GO);
	be_put32(h + 12, len);
	r = write_full(fd, h, sizeof(h));
	if (r == 0)
		r = stream_zeros(fd, len, &w, &reply_ready);
	rss_sample(&w);
	if (r == 0) {
		/* Whole payload sent (or a reply is waiting): the answer is a reply or EOF. */
		r = opt_reply_read(fd, &rep);
		if (r == 1)
			check_ok("server closed the connection after %s the payload",
			         reply_ready ? "part of" : "all of");
		else if (r == 0 && rep.type == NBD_REP_ERR_TOO_BIG && rep.opt == NBD_OPT_GO)
			check_ok("NBD_REP_ERR_TOO_BIG");
		else if (r == 0)
			check_fail("reply type 0x%x for option %u, want NBD_REP_ERR_TOO_BIG 0x%x",
			           rep.type, rep.opt, NBD_REP_ERR_TOO_BIG);
		else
			check_fail("no reply and no close within 10 s of the end of the payload");
	} else if (r == 1) {
		check_ok("server closed the connection while the payload was being sent");
	} else {
		check_fail("the server stopped reading the option payload and did not answer");
	}
	rss_sample(&w);
	rss_report(&w, o->rss_limit_mb > 0 ? o->rss_limit_mb : 64);
	close(fd);
}

/*
 * 10000 READs of 1 MiB without ever reading a reply. A server that keeps reading requests would
 * have to buffer ~10 GB of replies; it must stop reading from this client instead.
 */
static void case_flood(const struct opts *o)
{
	const int nreq = 10000;
	unsigned char h[NBD_REQUEST_SIZE];
	struct rss_watch w;
	struct conn c;
	double t_start, t_end, idle_since;
	int sent = 0;
	size_t done = 0;

	cur_case = "flood-unread-replies";
	if (!conn_go(o, &c))
		return;
	rss_start(&w, o->pid);
	t_start = idle_since = clock_mono();
	t_end = t_start + 5;
	/*
	 * Unix sockets let a small send through now and then even when poll() says the buffer is
	 * full, so "stopped reading" is judged by memory, and the sending is capped in time.
	 */
	while (sent < nreq && clock_mono() - idle_since < 2 && clock_mono() < t_end) {
		ssize_t r;

		if (done == 0) {
			be_put32(h, NBD_MAGIC_REQUEST);
			be_put16(h + 4, 0);
			be_put16(h + 6, NBD_CMD_READ);
			be_put64(h + 8, (uint64_t)sent + 1);
			be_put64(h + 16, ((uint64_t)sent * MiB) % (c.size - MiB + 1) / 4096 * 4096);
			be_put32(h + 24, MiB);
		}
		rss_sample(&w);
		wait_fd(c.fd, POLLOUT, 100);
		r = send(c.fd, h + done, sizeof(h) - done, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0 && errno != EAGAIN && errno != EINTR)
			break;
		if (r > 0) {
			done += (size_t)r;
			idle_since = clock_mono();
			if (done == sizeof(h)) {
				done = 0;
				sent++;
			}
		}
	}
	t_end = clock_mono();
	/* Give the server time to (wrongly) keep reading and queueing. */
	for (double t = clock_mono() + 3; clock_mono() < t; usleep(100 * 1000))
		rss_sample(&w);
	check_ok("%d of %d requests went into the socket in %.1f s", sent, nreq, t_end - t_start);
	if (!server_alive(o->pid))
		check_fail("the server died");
	rss_report(&w, o->rss_limit_mb > 0 ? o->rss_limit_mb : 256);
	close(c.fd);
}

/* ---- transmission cases ---------------------------------------------------------------------- */

static const uint32_t e_inval[] = {NBD_EINVAL};
static const uint32_t e_nospc[] = {NBD_ENOSPC};
static const uint32_t e_big[] = {NBD_EINVAL, NBD_EOVERFLOW};

/* Out-of-range, misaligned and malformed requests on one connection, each with its exact error. */
static void tx_bounds(struct conn *c, unsigned char *buf)
{
	uint64_t s = c->size;

	req_expect(c, "READ 4096 at the export size", 0, NBD_CMD_READ, s, 4096, NULL, 0, e_inval,
	           1);
	req_expect(c, "READ 1024 across the end", 0, NBD_CMD_READ, s - 512, 1024, NULL, 0, e_inval,
	           1);
	req_expect(c, "WRITE 4096 at the export size", 0, NBD_CMD_WRITE, s, 4096, buf, 4096,
	           e_nospc, 1);
	req_expect(c, "WRITE 1024 across the end", 0, NBD_CMD_WRITE, s - 512, 1024, buf, 1024,
	           e_nospc, 1);
	req_expect(c, "READ at offset 100", 0, NBD_CMD_READ, 100, 512, NULL, 0, e_inval, 1);
	req_expect(c, "READ of length 100", 0, NBD_CMD_READ, 0, 100, NULL, 0, e_inval, 1);
	req_expect(c, "WRITE at offset 513", 0, NBD_CMD_WRITE, 513, 512, buf, 512, e_inval, 1);
	req_expect(c, "WRITE of length 1000", 0, NBD_CMD_WRITE, 4096, 1000, buf, 1000, e_inval, 1);
}

static void tx_malformed(struct conn *c)
{
	req_expect(c, "unknown command 42", 0, 42, 0, 0, NULL, 0, e_inval, 1);
	req_expect(c, "READ with unknown flag bit 10", 1u << 10, NBD_CMD_READ, 0, 4096, NULL, 0,
	           e_inval, 1);
	req_expect(c, "READ with DF but no structured replies", NBD_CMD_FLAG_DF, NBD_CMD_READ, 0,
	           4096, NULL, 0, e_inval, 1);
	req_expect(c, "BLOCK_STATUS without a meta context", 0, NBD_CMD_BLOCK_STATUS, 0, 4096, NULL,
	           0, e_inval, 1);
	req_expect(c, "READ of 64 MiB (over the 32 MiB maximum)", 0, NBD_CMD_READ, 0, 64 * MiB,
	           NULL, 0, e_big, 2);
}

static void case_tx_errors(const struct opts *o)
{
	const uint32_t big = 32 * MiB + 4096;
	unsigned char *pat = malloc(8192), *buf = calloc(1, big);
	struct conn c;

	cur_case = "transmission-errors";
	if (!pat || !buf || !conn_go(o, &c))
		goto out;
	if (c.size < 64 * MiB) {
		check_fail("the export is %" PRIu64 " bytes; this case needs at least 64 MiB",
		           c.size);
		goto close;
	}
	memset(buf, 0xee, big);
	/* A known pattern at 0..8K shows later that no rejected write touched it. */
	for (int i = 0; i < 8192; i++)
		pat[i] = (unsigned char)(i * 7 + 3);
	if (req_send(&c, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 0, 8192, pat, 8192) != 0 ||
	    reply_read(&c, NULL, 0) != 0) {
		check_fail("the initial 8 KiB WRITE failed");
		goto close;
	}
	tx_bounds(&c, buf);
	tx_malformed(&c);
	req_expect(&c, "WRITE of 32 MiB + 4 KiB", 0, NBD_CMD_WRITE, 0, big, buf, big, e_big, 2);
	if (read_check(&c, "data after all rejected requests", 0, 8192, pat))
		check_ok("connection alive; the pattern at 0..8K is unchanged");
close:
	close(c.fd);
out:
	free(pat);
	free(buf);
}

static void case_bad_request_magic(const struct opts *o)
{
	unsigned char h[NBD_REQUEST_SIZE] = {0};
	struct conn c;
	size_t extra;

	cur_case = "bad-request-magic";
	if (!conn_go(o, &c))
		return;
	be_put32(h, 0xdeadbeef);
	be_put16(h + 6, NBD_CMD_READ);
	be_put32(h + 24, 4096);
	write_full(c.fd, h, sizeof(h));
	if (expect_close(c.fd, 5000, &extra))
		check_ok("server closed the connection (%zu bytes sent before)", extra);
	else
		check_fail("connection still open 5 s after a request with magic 0xdeadbeef");
	close(c.fd);
}

/* Hangs up 100 KiB into a 1 MiB WRITE payload; a new connection must work afterwards. */
static void case_disconnect_mid_write(const struct opts *o)
{
	static unsigned char part[100 * 1024];
	struct conn c;

	cur_case = "disconnect-mid-write";
	if (!conn_go(o, &c))
		return;
	memset(part, 0x5e, sizeof(part));
	req_send(&c, 0, NBD_CMD_WRITE, c.size - 2 * MiB, MiB, part, sizeof(part));
	close(c.fd);
	usleep(200 * 1000);
	if (!server_alive(o->pid)) {
		check_fail("the server died");
		return;
	}
	if (!conn_go(o, &c))
		return;
	if (read_check(&c, "read on a new connection", 0, 4096, NULL))
		check_ok("the server survived; a new connection reads fine");
	close(c.fd);
}

/* One CACHE request (used by the hakctl counter test): must succeed. */
static void case_cache(const struct opts *o)
{
	static const uint32_t ok[] = {0};
	struct conn c;

	cur_case = "cache";
	if (!conn_go(o, &c))
		return;
	if (!(c.tflags & NBD_FLAG_SEND_CACHE))
		check_fail("transmission flags 0x%x lack SEND_CACHE", c.tflags);
	req_expect(&c, "CACHE 64 KiB at 0", 0, NBD_CMD_CACHE, 0, 65536, NULL, 0, ok, 1);
	req_send(&c, 0, NBD_CMD_DISC, 0, 0, NULL, 0);
	close(c.fd);
}

/* ---- main ------------------------------------------------------------------------------------ */

static void case_garbage_flags(const struct opts *o)
{
	case_client_flags(o, "client-flags-garbage", (const unsigned char *)"GET ");
}

static void case_unknown_flags(const struct opts *o)
{
	static const unsigned char f[4] = {0, 0, 0x01, 0x03};

	case_client_flags(o, "client-flags-unknown-bits", f);
}

static void case_negotiation(const struct opts *o)
{
	case_garbage_flags(o);
	case_unknown_flags(o);
	case_bad_opt_magic(o);
	case_unknown_opt(o);
	case_starttls(o);
	case_unknown_export(o);
	case_unknown_export_msg(o);
	case_meta_before_sr(o);
}

static void case_all(const struct opts *o);

static const struct {
	const char *name;
	void (*fn)(const struct opts *o);
} cases[] = {
    {"client-flags-garbage", case_garbage_flags},
    {"client-flags-unknown", case_unknown_flags},
    {"opt-bad-magic", case_bad_opt_magic},
    {"opt-unknown", case_unknown_opt},
    {"opt-starttls", case_starttls},
    {"opt-too-big", case_opt_too_big},
    {"go-unknown-export", case_unknown_export},
    {"go-unknown-export-message", case_unknown_export_msg},
    {"meta-before-sr", case_meta_before_sr},
    {"negotiation", case_negotiation},
    {"tx-errors", case_tx_errors},
    {"bad-request-magic", case_bad_request_magic},
    {"disconnect-mid-write", case_disconnect_mid_write},
    {"flood", case_flood},
    {"cache", case_cache},
    {"tls-required", case_tls_required},
    {"starttls-garbage", case_starttls_garbage},
    {"starttls-stall", case_starttls_stall},
    {"starttls-inject", case_starttls_inject},
    {"all", case_all},
};

static void case_all(const struct opts *o)
{
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].fn == case_all || cases[i].fn == case_negotiation ||
		    strncmp(cases[i].name, "tls", 3) == 0 ||
		    strncmp(cases[i].name, "starttls", 8) == 0)
			continue; /* the TLS cases need a server with TLS */
		cases[i].fn(o);
	}
}

static void usage(void)
{
	size_t i;

	fprintf(stderr, "usage: nbd-badclient SUBCOMMAND SOCKET|HOST:PORT [--export NAME] "
	                "[--pid SERVER_PID] [--rss-limit-mb N] [--close-within-s N]\nsubcommands:");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		fprintf(stderr, " %s", cases[i].name);
	fprintf(stderr, "\n");
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	int i;

	if (argc < 3)
		return -1;
	o->sock = argv[2];
	o->export = "";
	o->close_within_s = 10;
	for (i = 3; i < argc; i++) {
		if (i + 1 >= argc)
			return -1;
		if (strcmp(argv[i], "--export") == 0)
			o->export = argv[++i];
		else if (strcmp(argv[i], "--pid") == 0)
			o->pid = strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--rss-limit-mb") == 0)
			o->rss_limit_mb = strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--close-within-s") == 0)
			o->close_within_s = strtol(argv[++i], NULL, 10);
		else
			return -1;
	}
	return strlen(o->export) > NBD_MAX_STRING ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	size_t i;

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse_args(argc, argv, &o) < 0) {
		usage();
		return 2;
	}
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (strcmp(argv[1], cases[i].name) == 0)
			break;
	}
	if (i == sizeof(cases) / sizeof(cases[0])) {
		fprintf(stderr, "Unknown subcommand %s.\n", argv[1]);
		usage();
		return 2;
	}
	cases[i].fn(&o);
	if (o.pid > 0 && !server_alive(o.pid)) {
		printf("FAIL %s: the server (pid %ld) is gone\n", argv[1], o.pid);
		failures++;
	}
	return failures ? 1 : 0;
}
