/* SPDX-License-Identifier: MIT */
/*
 * hak-evilpeer: a hostile replication peer for integration tests. It connects to a hakd's
 * replication address (run it inside the real peer's network namespace, with the real peer
 * stopped) and plays one scenario, then reports how hakd reacted.
 *
 *   hak-evilpeer --connect HOST:PORT --scenario NAME [--bind HOST] [--after-handshake]
 *                [--node NAME] [--volume NAME] [--uuid 8-4-4-4-12] [--size BYTES]
 *                [--block-size BYTES] [--gen CURRENT:BITMAP:HIST0:HIST1] [--gen-flags N]
 *                [--timeout S] [--hold S] [--key FILE] [--peer NAME]
 *
 * With --key, every connection first passes the peer authentication (transport/peerauth.h) as
 * node --node talking to --peer (default beta) under that key: the scenarios then test what an
 * authenticated but broken peer can do. Without it they test what reaches an unauthenticated
 * connection. Scenario replay (needs --key) authenticates once, then opens a second connection
 * and answers its fresh challenge with the first connection's recorded response and nonce; the
 * server must drop it.
 *
 * Scenarios on a fresh connection (the first bytes hakd sees; with --after-handshake the same
 * bytes follow a perfect handshake instead):
 *   garbage        4 KiB of random bytes
 *   bad-magic      a frame whose magic is not "HAKW"
 *   truncated      a DATA header announcing a 4 KiB payload, 100 bytes of it, then a half-close
 *   huge-frame     a DATA header with a payload length of 2^31
 * HELLO scenarios (fresh connection only): wrong-version (99), wrong-uuid, wrong-size.
 * After a perfect handshake (HELLO on the data then the meta stream with the identity and the
 * generation IDs given on the command line, so the peer decides "no sync"):
 *   past-end       DATA at the volume size
 *   unaligned      DATA at 4097
 *   len-mismatch   DATA whose range length (8 KiB) differs from its payload (4 KiB)
 *   unknown-type   a frame of type 99
 *   hostile-offsets  the four above, one connection each
 *   handshake-only the control case: handshake, then keep the link alive for --hold seconds; hakd
 *                  must NOT drop it
 *
 * While waiting, the meta stream answers PINGs and sends its own, so a drop is hakd's reaction to
 * the scenario and not its ping timeout. Each case prints one "result:" line.
 *
 * Exit status: 0 when hakd dropped the connection within --timeout (default 5 s), or, for
 * handshake-only, kept it for --hold seconds; 2 when it did not; 1 for usage errors, a failed
 * connect and a refused handshake.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hak/wire.h>

#include "lib/clock.h"
#include "lib/keyfile.h"
#include "transport/peerauth.h"
#include "transport/wire.h"

#define EXIT_OK       0
#define EXIT_ERROR    1
#define EXIT_MISMATCH 2
#define PING_EVERY_S  0.2
#define FRAME_MAX     (WIRE_HDR_SIZE + WIRE_HELLO_SIZE)
#define TYPE_UNKNOWN  99u
#define BAD_MAGIC     0xdeadbeefu
#define DATA_LEN      4096u

struct opts {
	const char *connect;
	const char *bind;
	const char *scenario;
	const char *node;
	const char *volume;
	bool after_handshake;
	uint8_t uuid[16];
	uint64_t size;
	uint32_t block_size;
	uint64_t gen[4];
	uint32_t gen_flags;
	double timeout;
	double hold;
	const char *key_file;
	const char *peer;
	struct tauth *auth; /* from key_file, or NULL */
};

/* What one authentication exchange sent, for the replay scenario. */
struct auth_record {
	uint8_t nonce[WIRE_AUTH_NONCE];
	uint8_t response[WIRE_AUTH_MAC_SIZE];
};

/* The two streams of one impersonated connection; meta frames are parsed in mbuf. */
struct link {
	int fd[2];
	uint8_t mbuf[4096];
	size_t mlen;
	uint64_t rx_bytes;
};

static void usage(void)
{
	fprintf(stderr,
	        "usage: hak-evilpeer --connect HOST:PORT --scenario NAME [--bind HOST]\n"
	        "         [--after-handshake] [--node NAME] [--volume NAME] [--uuid UUID]\n"
	        "         [--size BYTES] [--block-size BYTES] [--gen C:B:H0:H1] [--gen-flags N]\n"
	        "         [--timeout S] [--hold S]\n"
	        "scenarios: garbage bad-magic truncated huge-frame wrong-version wrong-uuid\n"
	        "           wrong-size past-end unaligned len-mismatch unknown-type\n"
	        "           hostile-offsets handshake-only\n");
}

/* ---- sockets ------------------------------------------------------------------------------ */

static int resolve(const char *addr, int passive, struct addrinfo **ai)
{
	char host[256];
	const char *colon = strrchr(addr, ':');
	const char *port = colon ? colon + 1 : "0";
	size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
	int rc;

	if (n >= sizeof(host)) {
		fprintf(stderr, "hak-evilpeer: the address %s is too long.\n", addr);
		return -1;
	}
	memcpy(host, addr, n);
	host[n] = '\0';
	rc = getaddrinfo(host, port, &hints, ai);
	if (rc != 0) {
		fprintf(stderr, "hak-evilpeer: cannot resolve %s: %s.\n", addr, gai_strerror(rc));
		return -1;
	}
	return 0;
}

static int tcp_open(const struct opts *o)
{
	struct addrinfo *ai = NULL, *bai = NULL;
	int fd = -1;

	if (resolve(o->connect, 0, &ai) < 0)
		goto out;
	if (o->bind && resolve(o->bind, 1, &bai) < 0)
		goto out;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto out;
	if (bai && bind(fd, bai->ai_addr, bai->ai_addrlen) < 0) {
		fprintf(stderr, "hak-evilpeer: cannot bind to %s: %s.\n", o->bind, strerror(errno));
		goto fail;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		fprintf(stderr, "hak-evilpeer: cannot connect to %s: %s.\n", o->connect,
		        strerror(errno));
		goto fail;
	}
	goto out;
fail:
	close(fd);
	fd = -1;
out:
	if (ai)
		freeaddrinfo(ai);
	if (bai)
		freeaddrinfo(bai);
	return fd;
}

/* 0 when all was sent; 1 when the server had already closed (EPIPE/ECONNRESET); -1 otherwise. */
static int send_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	while (n > 0) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return (errno == EPIPE || errno == ECONNRESET) ? 1 : -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Reads one whole frame (at most FRAME_MAX bytes) within ms: 0, 1 on EOF/reset, -1 otherwise. */
static int read_frame(int fd, uint8_t *buf, struct wire_hdr *h, int ms)
{
	double deadline = clock_mono() + ms / 1000.0;
	size_t have = 0, want = WIRE_HDR_SIZE;
	char err[200];

	while (have < want) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = (int)((deadline - clock_mono()) * 1000.0);
		if (left <= 0 || poll(&p, 1, left) == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		ssize_t r = recv(fd, buf + have, want - have, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return 1;
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0)
			return -1;
		have += (size_t)r;
		if (have == WIRE_HDR_SIZE && want == WIRE_HDR_SIZE) {
			if (wire_hdr_decode(buf, h, err, sizeof(err)) < 0 ||
			    h->len > FRAME_MAX - WIRE_HDR_SIZE) {
				fprintf(stderr, "hak-evilpeer: the server sent a bad frame: %s.\n",
				        err);
				errno = EPROTO;
				return -1;
			}
			want += h->len;
		}
	}
	return 0;
}

/* ---- authentication ----------------------------------------------------------------------- */

static int send_frame(int fd, uint16_t type, const void *payload, uint32_t len)
{
	uint8_t f[WIRE_HDR_SIZE + WIRE_AUTH_CHAL_SIZE];
	wire_hdr_encode(f, type, 0, len);
	memcpy(f + WIRE_HDR_SIZE, payload, len);
	return send_all(fd, f, WIRE_HDR_SIZE + len);
}

/*
 * The connector's side of the exchange on fd. With replay set, send its nonce and response
 * instead of fresh ones (and expect the server to drop us); rec (may be NULL) gets what was
 * sent. 0 when the server accepted, 1 when it dropped the connection, -1 otherwise (printed).
 */
static int auth_exchange(const struct opts *o, int fd, const struct auth_record *replay,
                         struct auth_record *rec)
{
	uint8_t f[FRAME_MAX], chal[WIRE_AUTH_CHAL_SIZE], peer_nonce[WIRE_AUTH_NONCE], role;
	struct auth_record mine;
	struct wire_hdr h;
	char err[160];
	int rc;

	if (replay)
		mine = *replay;
	else
		getrandom(mine.nonce, sizeof(mine.nonce), 0);
	peerauth_chal_encode(chal, 0, mine.nonce);
	if (send_frame(fd, WIRE_AUTH_CHALLENGE, chal, sizeof(chal)) != 0)
		return 1;
	rc = read_frame(fd, f, &h, 5000);
	if (rc != 0 || h.type != WIRE_AUTH_CHALLENGE ||
	    peerauth_chal_decode(f + WIRE_HDR_SIZE, h.len, &role, peer_nonce, err, sizeof(err)) <
	        0) {
		fprintf(stderr, "hak-evilpeer: no authentication challenge from the server.\n");
		return rc == 1 ? 1 : -1;
	}
	if (!replay)
		peerauth_mac(o->auth, 0, peer_nonce, mine.nonce, o->node, o->peer, mine.response);
	if (send_frame(fd, WIRE_AUTH_RESPONSE, mine.response, WIRE_AUTH_MAC_SIZE) != 0)
		return 1;
	rc = read_frame(fd, f, &h, 5000);
	if (rc != 0)
		return rc;
	uint8_t want[WIRE_AUTH_MAC_SIZE];
	peerauth_mac(o->auth, 1, mine.nonce, peer_nonce, o->peer, o->node, want);
	if (h.type != WIRE_AUTH_RESPONSE || memcmp(want, f + WIRE_HDR_SIZE, sizeof(want)) != 0) {
		fprintf(stderr, "hak-evilpeer: the server's authentication response is wrong.\n");
		return -1;
	}
	if (rec)
		*rec = mine;
	return 0;
}

/* A connection, authenticated when --key was given. -1 (printed) on any failure. */
static int peer_open(const struct opts *o)
{
	int fd = tcp_open(o);
	if (fd >= 0 && o->auth && auth_exchange(o, fd, NULL, NULL) != 0) {
		fprintf(stderr, "hak-evilpeer: the server refused the authentication.\n");
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Authenticate once, then replay that exchange on a new connection: EXIT_OK when dropped. */
static int run_replay(const struct opts *o)
{
	struct auth_record rec;
	int fd = tcp_open(o), rc = EXIT_ERROR;
	if (fd < 0 || auth_exchange(o, fd, NULL, &rec) != 0) {
		fprintf(stderr, "hak-evilpeer: the genuine exchange failed.\n");
		goto out;
	}
	close(fd);
	fd = tcp_open(o);
	if (fd < 0)
		goto out;
	int r = auth_exchange(o, fd, &rec, NULL);
	printf("result: replay: %s\n", r == 1   ? "the server dropped the connection"
	                               : r == 0 ? "the server ACCEPTED the replayed exchange"
	                                        : "the exchange failed otherwise");
	rc = r == 1 ? EXIT_OK : r == 0 ? EXIT_MISMATCH : EXIT_ERROR;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* ---- frames ------------------------------------------------------------------------------- */

static void hello_fill(const struct opts *o, struct wire_hello *h, uint8_t stream)
{
	memset(h, 0, sizeof(*h));
	h->version = WIRE_VERSION;
	h->stream = stream;
	h->role = WIRE_ROLE_PRIMARY;
	h->disk = WIRE_DISK_UPTODATE;
	h->mode = 0; /* sync */
	snprintf(h->node, sizeof(h->node), "%s", o->node);
	snprintf(h->volume, sizeof(h->volume), "%s", o->volume);
	memcpy(h->uuid, o->uuid, 16);
	h->size = o->size;
	h->block_size = o->block_size;
	h->gen_flags = o->gen_flags;
	memcpy(h->gen, o->gen, sizeof(h->gen));
	h->bits_set = 0;
}

/* A HELLO frame, with the field the scenario corrupts. */
static size_t hello_frame(const struct opts *o, const char *sc, uint8_t stream, uint8_t *out)
{
	struct wire_hello h;

	hello_fill(o, &h, stream);
	if (strcmp(sc, "wrong-version") == 0)
		h.version = 99;
	else if (strcmp(sc, "wrong-uuid") == 0)
		h.uuid[15] ^= 0x5a;
	else if (strcmp(sc, "wrong-size") == 0)
		h.size += 1u << 20;
	wire_hdr_encode(out, WIRE_HELLO, 0, WIRE_HELLO_SIZE);
	wire_hello_encode(out + WIRE_HDR_SIZE, &h);
	if (strcmp(sc, "bad-magic") == 0)
		memcpy(out, "\xde\xad\xbe\xef", 4);
	return WIRE_HDR_SIZE + WIRE_HELLO_SIZE;
}

/* A DATA frame of plen payload bytes (0xEE, so a write that got through shows in a checksum). */
static uint8_t *data_frame(uint64_t off, uint32_t range, uint32_t plen, size_t *n)
{
	struct wire_io io = {.id = 1, .off = off, .len = range};
	uint8_t *f = malloc(WIRE_HDR_SIZE + WIRE_IO_SIZE + plen);

	if (!f)
		return NULL;
	wire_hdr_encode(f, WIRE_DATA, 0, WIRE_IO_SIZE + plen);
	wire_io_encode(f + WIRE_HDR_SIZE, &io);
	memset(f + WIRE_HDR_SIZE + WIRE_IO_SIZE, 0xee, plen);
	*n = WIRE_HDR_SIZE + WIRE_IO_SIZE + plen;
	return f;
}

/*
 * The bytes of a scenario; *shut asks for a half-close after them. For the payload-only cases
 * the header promises more than is sent, so hakd must act on the header alone.
 */
static uint8_t *scenario_bytes(const struct opts *o, const char *sc, size_t *n, bool *shut)
{
	uint8_t *f = NULL;

	*shut = false;
	if (strcmp(sc, "garbage") == 0) {
		f = malloc(DATA_LEN);
		if (f && getrandom(f, DATA_LEN, 0) != (ssize_t)DATA_LEN)
			memset(f, 0xa5, DATA_LEN);
		if (f && f[0] == 'H')
			f[0] = 'h'; /* never the magic by chance */
		*n = DATA_LEN;
	} else if (strcmp(sc, "bad-magic") == 0 && o->after_handshake) {
		f = data_frame(0, DATA_LEN, DATA_LEN, n);
		if (f)
			memcpy(f, "\xde\xad\xbe\xef", 4);
	} else if (strcmp(sc, "truncated") == 0) {
		f = data_frame(0, DATA_LEN, DATA_LEN, n);
		*n = WIRE_HDR_SIZE + 100;
		*shut = true;
	} else if (strcmp(sc, "huge-frame") == 0) {
		f = data_frame(0, DATA_LEN, 65536, n);
		if (f)
			wire_hdr_encode(f, WIRE_DATA, 0, 1u << 31);
	} else if (strcmp(sc, "past-end") == 0) {
		f = data_frame(o->size, DATA_LEN, DATA_LEN, n);
	} else if (strcmp(sc, "unaligned") == 0) {
		f = data_frame(DATA_LEN + 1, DATA_LEN, DATA_LEN, n);
	} else if (strcmp(sc, "len-mismatch") == 0) {
		f = data_frame(0, 2 * DATA_LEN, DATA_LEN, n);
	} else if (strcmp(sc, "frame-first") == 0) {
		/* a well-formed DATA frame where the HELLO belongs */
		f = data_frame(0, DATA_LEN, DATA_LEN, n);
	} else if (strcmp(sc, "unknown-type") == 0) {
		f = data_frame(0, DATA_LEN, 0, n);
		if (f)
			wire_hdr_encode(f, TYPE_UNKNOWN, 0, WIRE_IO_SIZE);
	} else {
		f = malloc(FRAME_MAX);
		if (f)
			*n = hello_frame(o, sc, WIRE_STREAM_DATA, f);
	}
	return f;
}

/* ---- the impersonated link ---------------------------------------------------------------- */

static void link_close(struct link *l)
{
	for (int i = 0; i < 2; i++) {
		if (l->fd[i] >= 0)
			close(l->fd[i]);
		l->fd[i] = -1;
	}
	l->mlen = 0;
}

static void print_peer_hello(const struct opts *o, const uint8_t *frame)
{
	struct wire_hello h;
	char err[200];

	if (wire_hello_decode(frame + WIRE_HDR_SIZE, WIRE_HELLO_SIZE, &h, err, sizeof(err)) < 0) {
		fprintf(stderr, "hak-evilpeer: the server's HELLO does not decode: %s.\n", err);
		return;
	}
	printf("handshake: %s answered as %s, disk %u, generation %016" PRIX64 " (sent %016" PRIX64
	       ")%s\n",
	       h.node, h.role ? "primary" : "secondary", h.disk, h.gen[0], o->gen[0],
	       memcmp(h.gen, o->gen, sizeof(h.gen)) ? "; the generation IDs DIFFER" : "");
}

/* Both streams with a valid HELLO each, and both answers read. 0, or -1 (printed). */
static int handshake(const struct opts *o, struct link *l)
{
	uint8_t f[FRAME_MAX];
	struct wire_hdr h;

	for (int i = 0; i < 2; i++) {
		l->fd[i] = peer_open(o);
		if (l->fd[i] < 0)
			return -1;
		size_t n = hello_frame(o, "", (uint8_t)(i + 1), f);
		if (send_all(l->fd[i], f, n) != 0) {
			fprintf(stderr, "hak-evilpeer: sending the HELLO failed: %s.\n",
			        strerror(errno));
			return -1;
		}
	}
	for (int i = 0; i < 2; i++) {
		int rc = read_frame(l->fd[i], f, &h, 5000);
		if (rc != 0 || h.type != WIRE_HELLO) {
			fprintf(stderr, "hak-evilpeer: no HELLO back on the %s stream: %s.\n",
			        i ? "meta" : "data",
			        rc == 1  ? "the server closed it"
			        : rc < 0 ? strerror(errno)
			                 : "another frame came");
			return -1;
		}
		if (i == 0)
			print_peer_hello(o, f);
	}
	return 0;
}

/* Meta stream: answer PINGs; anything else the server says is only counted. 0, or 1 on EOF. */
static int meta_input(struct link *l)
{
	ssize_t r = recv(l->fd[1], l->mbuf + l->mlen, sizeof(l->mbuf) - l->mlen, MSG_DONTWAIT);
	struct wire_hdr h;
	char err[200];

	if (r == 0 || (r < 0 && errno == ECONNRESET))
		return 1;
	if (r < 0)
		return 0;
	l->rx_bytes += (uint64_t)r;
	l->mlen += (size_t)r;
	while (l->mlen >= WIRE_HDR_SIZE) {
		if (wire_hdr_decode(l->mbuf, &h, err, sizeof(err)) < 0 ||
		    h.len > sizeof(l->mbuf) - WIRE_HDR_SIZE) {
			l->mlen = 0; /* not ours to judge; keep draining */
			break;
		}
		size_t whole = WIRE_HDR_SIZE + h.len;
		if (l->mlen < whole)
			break;
		if (h.type == WIRE_PING) {
			uint8_t pong[WIRE_HDR_SIZE + WIRE_ID_SIZE];
			wire_hdr_encode(pong, WIRE_PONG, 0, WIRE_ID_SIZE);
			memcpy(pong + WIRE_HDR_SIZE, l->mbuf + WIRE_HDR_SIZE, WIRE_ID_SIZE);
			(void)send_all(l->fd[1], pong, sizeof(pong));
		}
		memmove(l->mbuf, l->mbuf + whole, l->mlen - whole);
		l->mlen -= whole;
	}
	return 0;
}

/*
 * Wait up to secs for the server to close the connection, draining the data stream and keeping
 * the meta stream (if any) alive. Returns true on a close; *how says how it showed.
 */
static bool wait_drop(struct link *l, double secs, const char **how)
{
	double start = clock_mono(), last_ping = 0;
	uint8_t sink[65536];

	while (clock_mono() - start < secs) {
		struct pollfd p[2] = {{.fd = l->fd[0], .events = POLLIN},
		                      {.fd = l->fd[1], .events = POLLIN}};
		if (l->fd[1] >= 0 && clock_mono() - last_ping >= PING_EVERY_S) {
			uint8_t ping[WIRE_HDR_SIZE + WIRE_ID_SIZE] = {0};
			wire_hdr_encode(ping, WIRE_PING, 0, WIRE_ID_SIZE);
			(void)send_all(l->fd[1], ping, sizeof(ping));
			last_ping = clock_mono();
		}
		if (poll(p, 2, 50) <= 0)
			continue;
		if (p[0].revents) {
			ssize_t r = recv(l->fd[0], sink, sizeof(sink), MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno == ECONNRESET)) {
				*how = r == 0 ? "EOF on the data stream"
				              : "ECONNRESET on the data stream";
				return true;
			}
			if (r > 0)
				l->rx_bytes += (uint64_t)r;
		}
		if (p[1].revents && meta_input(l)) {
			*how = "EOF/ECONNRESET on the meta stream";
			return true;
		}
	}
	return false;
}

/* ---- scenarios ---------------------------------------------------------------------------- */

static bool is_hello_case(const char *sc)
{
	return strcmp(sc, "wrong-version") == 0 || strcmp(sc, "wrong-uuid") == 0 ||
	       strcmp(sc, "wrong-size") == 0;
}

static bool is_post_only(const char *sc)
{
	return strcmp(sc, "past-end") == 0 || strcmp(sc, "unaligned") == 0 ||
	       strcmp(sc, "len-mismatch") == 0 || strcmp(sc, "unknown-type") == 0;
}

static bool is_known(const char *sc)
{
	static const char *const any[] = {"garbage", "bad-magic", "truncated", "huge-frame",
	                                  "frame-first"};
	for (size_t i = 0; i < sizeof(any) / sizeof(any[0]); i++)
		if (strcmp(sc, any[i]) == 0)
			return true;
	return is_hello_case(sc) || is_post_only(sc);
}

/* One hostile case on its own connection. EXIT_OK when the server dropped it in time. */
static int run_case(const struct opts *o, const char *sc)
{
	struct link l = {.fd = {-1, -1}};
	bool post = o->after_handshake || is_post_only(sc), shut;
	size_t n = 0;
	const char *how = "";
	int rc = EXIT_ERROR, sent;
	uint8_t *bytes = NULL;

	if (post ? handshake(o, &l) < 0 : (l.fd[0] = peer_open(o)) < 0)
		goto out;
	bytes = scenario_bytes(o, sc, &n, &shut);
	if (!bytes) {
		fprintf(stderr, "hak-evilpeer: out of memory.\n");
		goto out;
	}
	double t0 = clock_mono();
	sent = send_all(l.fd[0], bytes, n);
	if (sent < 0) {
		fprintf(stderr, "hak-evilpeer: sending failed: %s.\n", strerror(errno));
		goto out;
	}
	if (shut)
		shutdown(l.fd[0], SHUT_WR);
	bool dropped = sent == 1 || wait_drop(&l, o->timeout, &how);
	if (sent == 1)
		how = "EPIPE/ECONNRESET while sending";
	printf("result: %s%s: sent %zu bytes%s; %s after %.3f s (%" PRIu64 " bytes received)\n", sc,
	       post ? " after the handshake" : "", n, shut ? " and half-closed" : "",
	       dropped ? "the server dropped the connection" : "the connection is STILL OPEN",
	       clock_mono() - t0, l.rx_bytes);
	if (dropped)
		printf("result: seen as %s\n", how);
	rc = dropped ? EXIT_OK : EXIT_MISMATCH;
out:
	free(bytes);
	link_close(&l);
	return rc;
}

/* The control case: a perfect handshake that hakd must keep for o->hold seconds. */
static int run_control(const struct opts *o)
{
	struct link l = {.fd = {-1, -1}};
	const char *how = "";
	int rc = EXIT_ERROR;

	if (handshake(o, &l) < 0)
		goto out;
	double t0 = clock_mono();
	bool dropped = wait_drop(&l, o->hold, &how);
	printf("result: handshake-only: %s after %.3f s (%" PRIu64 " bytes received)\n",
	       dropped ? "the server DROPPED the connection" : "the connection is still open",
	       clock_mono() - t0, l.rx_bytes);
	if (dropped)
		printf("result: seen as %s\n", how);
	rc = dropped ? EXIT_MISMATCH : EXIT_OK;
out:
	link_close(&l);
	return rc;
}

static int run(const struct opts *o)
{
	static const char *const hostile[] = {"past-end", "unaligned", "len-mismatch",
	                                      "unknown-type"};
	int worst = EXIT_OK;

	if (strcmp(o->scenario, "handshake-only") == 0)
		return run_control(o);
	if (strcmp(o->scenario, "replay") == 0)
		return run_replay(o);
	if (strcmp(o->scenario, "hostile-offsets") != 0)
		return run_case(o, o->scenario);
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		int rc = run_case(o, hostile[i]);
		if (rc > worst)
			worst = rc;
		if (rc == EXIT_ERROR)
			break;
		/* The server re-arms its accept after the drop it just logged. */
		usleep(300 * 1000);
	}
	return worst;
}

/* ---- options ------------------------------------------------------------------------------ */

static int parse_uuid(const char *s, uint8_t out[16])
{
	int n = 0;

	for (const char *p = s; *p; p++) {
		if (*p == '-')
			continue;
		unsigned v;
		if (n == 32 || sscanf(p, "%1x", &v) != 1)
			return -1;
		out[n / 2] = (uint8_t)(n % 2 ? out[n / 2] | v : v << 4);
		n++;
	}
	return n == 32 ? 0 : -1;
}

static int parse_gen(const char *s, uint64_t gen[4])
{
	char *end;

	for (int i = 0; i < 4; i++) {
		errno = 0;
		gen[i] = strtoull(s, &end, 16);
		if (errno || end == s || (i < 3 ? *end != ':' : *end != '\0'))
			return -1;
		s = end + 1;
	}
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool bad = false;
		if (strcmp(a, "--after-handshake") == 0) {
			o->after_handshake = true;
			continue;
		}
		if (!v) {
			fprintf(stderr, "hak-evilpeer: %s needs a value.\n", a);
			return -1;
		}
		i++;
		if (strcmp(a, "--connect") == 0)
			o->connect = v;
		else if (strcmp(a, "--bind") == 0)
			o->bind = v;
		else if (strcmp(a, "--scenario") == 0)
			o->scenario = v;
		else if (strcmp(a, "--node") == 0)
			o->node = v;
		else if (strcmp(a, "--volume") == 0)
			o->volume = v;
		else if (strcmp(a, "--size") == 0)
			o->size = strtoull(v, NULL, 0);
		else if (strcmp(a, "--block-size") == 0)
			o->block_size = (uint32_t)strtoul(v, NULL, 0);
		else if (strcmp(a, "--gen-flags") == 0)
			o->gen_flags = (uint32_t)strtoul(v, NULL, 0);
		else if (strcmp(a, "--timeout") == 0)
			o->timeout = strtod(v, NULL);
		else if (strcmp(a, "--hold") == 0)
			o->hold = strtod(v, NULL);
		else if (strcmp(a, "--uuid") == 0)
			bad = parse_uuid(v, o->uuid) < 0;
		else if (strcmp(a, "--gen") == 0)
			bad = parse_gen(v, o->gen) < 0;
		else if (strcmp(a, "--key") == 0)
			o->key_file = v;
		else if (strcmp(a, "--peer") == 0)
			o->peer = v;
		else
			bad = true;
		if (bad) {
			fprintf(stderr, "hak-evilpeer: bad option or value: %s %s.\n", a, v);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.node = "alpha",
	                 .volume = "db",
	                 .block_size = 4096,
	                 .gen_flags = 0x2, /* GEN_F_CONSISTENT */
	                 .timeout = 5.0,
	                 .hold = 2.0,
	                 .peer = "beta"};

	signal(SIGPIPE, SIG_IGN);
	if (parse_opts(argc, argv, &o) < 0 || !o.connect || !o.scenario) {
		usage();
		return EXIT_ERROR;
	}
	static struct tauth auth;
	if (o.key_file) {
		struct key_bytes key;
		char err[300];
		if (keyfile_load(o.key_file, "replication key", &key, err, sizeof(err)) < 0) {
			fprintf(stderr, "hak-evilpeer: %s\n", err);
			return EXIT_ERROR;
		}
		peerauth_init(&auth, &key, o.node, o.peer, o.volume);
		o.auth = &auth;
	}
	if (strcmp(o.scenario, "replay") == 0 && !o.auth) {
		fprintf(stderr, "hak-evilpeer: scenario replay needs --key.\n");
		return EXIT_ERROR;
	}
	bool ok = strcmp(o.scenario, "handshake-only") == 0 || strcmp(o.scenario, "replay") == 0 ||
	          strcmp(o.scenario, "hostile-offsets") == 0 || is_known(o.scenario);
	if (!ok || (o.after_handshake && (is_hello_case(o.scenario)))) {
		fprintf(stderr, "hak-evilpeer: unknown scenario '%s'%s.\n", o.scenario,
		        ok ? " with --after-handshake" : "");
		usage();
		return EXIT_ERROR;
	}
	if (o.size == 0 && strcmp(o.scenario, "replay") != 0 &&
	    (o.after_handshake || !is_known(o.scenario) || is_post_only(o.scenario) ||
	     is_hello_case(o.scenario))) {
		fprintf(stderr, "hak-evilpeer: scenario %s needs --size, --uuid and --gen.\n",
		        o.scenario);
		return EXIT_ERROR;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	return run(&o);
}
