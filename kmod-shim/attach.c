/* SPDX-License-Identifier: MIT */
#include "attach.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netlink/genl/ctrl.h>

#include "lib/endian.h"
#include "lib/errbuf.h"
#include "lib/usock.h"

_Static_assert(ATTACH_KFLAG_HAS_FLAGS == NBD_FLAG_HAS_FLAGS, "HAS_FLAGS differs from the kernel");
_Static_assert(ATTACH_KFLAG_READ_ONLY == NBD_FLAG_READ_ONLY, "READ_ONLY differs from the kernel");
_Static_assert(ATTACH_KFLAG_SEND_FLUSH == NBD_FLAG_SEND_FLUSH, "SEND_FLUSH differs");
_Static_assert(ATTACH_KFLAG_SEND_FUA == NBD_FLAG_SEND_FUA, "SEND_FUA differs from the kernel");
_Static_assert(ATTACH_KFLAG_SEND_TRIM == NBD_FLAG_SEND_TRIM, "SEND_TRIM differs from the kernel");
_Static_assert(ATTACH_KFLAG_CAN_MULTI_CONN == NBD_FLAG_CAN_MULTI_CONN, "CAN_MULTI_CONN differs");

/* An oldstyle server sends this where a newstyle one sends IHAVEOPT. */
#define ATTACH_MAGIC_OLDSTYLE UINT64_C(0x0000420281861253)
/* A GO exchange is a handful of small replies; anything bigger is a broken or hostile server. */
#define ATTACH_MAX_REPLY_LEN (UINT32_C(1) << 20)
#define ATTACH_MAX_REPLIES   64

/*
 * Move exactly len bytes. poll() bounds each step instead of SO_RCVTIMEO because the kernel keeps
 * using this very socket after CONNECT, and an inherited receive timeout would make its receive
 * worker fail on an idle device.
 */
static int xfer(int fd, void *buf, size_t len, bool sending)
{
	uint8_t *p = buf;
	size_t done = 0;
	int ret = -1;

	while (done < len) {
		struct pollfd pfd = {.fd = fd, .events = sending ? POLLOUT : POLLIN};
		int n = poll(&pfd, 1, ATTACH_HANDSHAKE_TIMEOUT_MS);
		ssize_t r;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto out;
		if (n == 0) {
			errno = ETIMEDOUT;
			goto out;
		}
		if (sending)
			r = send(fd, p + done, len - done, MSG_NOSIGNAL);
		else
			r = recv(fd, p + done, len - done, 0);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0)
			goto out;
		if (r == 0) {
			errno = ECONNRESET;
			goto out;
		}
		done += (size_t)r;
	}
	ret = 0;
out:
	return ret;
}

/* Report an I/O failure of step `what`, keeping errno for the caller. */
static int io_fail(char *err, size_t errlen, const char *what)
{
	int e = errno;

	if (e == ECONNRESET)
		errbuf_set(err, errlen, "The NBD server closed the connection while %s.", what);
	else if (e == ETIMEDOUT)
		errbuf_set(err, errlen, "The NBD server sent nothing for %d ms while %s.",
		           ATTACH_HANDSHAKE_TIMEOUT_MS, what);
	else
		errbuf_set(err, errlen, "The connection to the NBD server failed while %s: %s.",
		           what, strerror(e));
	errno = e;
	return -1;
}

static int proto_fail(int e)
{
	errno = e;
	return -1;
}

static const char *rep_name(uint32_t type)
{
	switch (type) {
	case NBD_REP_ERR_UNSUP:
		return "NBD_REP_ERR_UNSUP (option not supported)";
	case NBD_REP_ERR_POLICY:
		return "NBD_REP_ERR_POLICY (forbidden by server policy)";
	case NBD_REP_ERR_INVALID:
		return "NBD_REP_ERR_INVALID (invalid request)";
	case NBD_REP_ERR_PLATFORM:
		return "NBD_REP_ERR_PLATFORM (not supported on this platform)";
	case NBD_REP_ERR_TLS_REQD:
		return "NBD_REP_ERR_TLS_REQD (TLS required)";
	case NBD_REP_ERR_UNKNOWN:
		return "NBD_REP_ERR_UNKNOWN (unknown export)";
	case NBD_REP_ERR_SHUTDOWN:
		return "NBD_REP_ERR_SHUTDOWN (server shutting down)";
	case NBD_REP_ERR_BLOCK_SIZE_REQD:
		return "NBD_REP_ERR_BLOCK_SIZE_REQD (block size required)";
	case NBD_REP_ERR_TOO_BIG:
		return "NBD_REP_ERR_TOO_BIG (request too big)";
	default:
		return "an unknown error reply";
	}
}

static int rep_errno(uint32_t type)
{
	switch (type) {
	case NBD_REP_ERR_UNKNOWN:
		return ENOENT;
	case NBD_REP_ERR_POLICY:
	case NBD_REP_ERR_TLS_REQD:
		return EPERM;
	case NBD_REP_ERR_SHUTDOWN:
		return ESHUTDOWN;
	case NBD_REP_ERR_TOO_BIG:
		return E2BIG;
	case NBD_REP_ERR_UNSUP:
	case NBD_REP_ERR_PLATFORM:
		return EOPNOTSUPP;
	default:
		return EPROTO;
	}
}

static int hs_greeting(int fd, uint16_t *hsflags, char *err, size_t errlen)
{
	uint8_t buf[18];
	uint64_t magic, opts;
	int ret = -1;

	if (xfer(fd, buf, sizeof(buf), false) < 0) {
		io_fail(err, errlen, "reading its greeting");
		goto out;
	}
	magic = be_get64(buf);
	opts = be_get64(buf + 8);
	*hsflags = be_get16(buf + 16);
	if (magic != NBD_MAGIC_INIT) {
		errbuf_set(
		    err, errlen,
		    "The peer's greeting starts with 0x%016llx instead of NBDMAGIC, so it is "
		    "not an NBD server.",
		    (unsigned long long)magic);
		proto_fail(EPROTO);
	} else if (opts == ATTACH_MAGIC_OLDSTYLE) {
		errbuf_set(err, errlen,
		           "The NBD server speaks the oldstyle protocol, which has no "
		           "option negotiation; hak-attach needs fixed newstyle.");
		proto_fail(EPROTO);
	} else if (opts != NBD_MAGIC_OPTS) {
		errbuf_set(err, errlen,
		           "The NBD server sent 0x%016llx where IHAVEOPT was expected.",
		           (unsigned long long)opts);
		proto_fail(EPROTO);
	} else if (!(*hsflags & NBD_FLAG_FIXED_NEWSTYLE)) {
		errbuf_set(
		    err, errlen,
		    "The NBD server does not offer fixed newstyle negotiation (handshake flags "
		    "0x%04x), which hak-attach requires.",
		    *hsflags);
		proto_fail(EPROTO);
	} else {
		ret = 0;
	}
out:
	return ret;
}

static int opt_send(int fd, uint32_t opt, const void *data, uint32_t len)
{
	uint8_t hdr[NBD_OPT_HEADER_SIZE];
	int ret = -1;

	be_put64(hdr, NBD_MAGIC_OPTS);
	be_put32(hdr + 8, opt);
	be_put32(hdr + 12, len);
	if (xfer(fd, hdr, sizeof(hdr), true) < 0)
		goto out;
	if (len > 0 && xfer(fd, (void *)data, len, true) < 0)
		goto out;
	ret = 0;
out:
	return ret;
}

/*
 * NBD_OPT_GO with the export name. Asking for NBD_INFO_BLOCK_SIZE promises the server that its
 * constraints are honoured, which attach_check_export() makes sure the kernel will do.
 */
static int opt_send_go(int fd, const char *export, size_t namelen)
{
	uint8_t buf[4 + NBD_MAX_STRING + 6];

	be_put32(buf, (uint32_t)namelen);
	memcpy(buf + 4, export, namelen);
	be_put16(buf + 4 + namelen, 2);
	be_put16(buf + 6 + namelen, NBD_INFO_BLOCK_SIZE);
	be_put16(buf + 8 + namelen, NBD_INFO_NAME);
	return opt_send(fd, NBD_OPT_GO, buf, (uint32_t)(namelen + 10));
}

/* Read a reply payload: keep the first `cap` bytes in buf, discard the rest. */
static int payload_read(int fd, uint32_t len, uint8_t *buf, size_t cap)
{
	uint8_t sink[512];
	size_t keep = len < cap ? len : cap;
	size_t left = len - keep;
	int ret = -1;

	if (keep > 0 && xfer(fd, buf, keep, false) < 0)
		goto out;
	while (left > 0) {
		size_t n = left < sizeof(sink) ? left : sizeof(sink);

		if (xfer(fd, sink, n, false) < 0)
			goto out;
		left -= n;
	}
	ret = 0;
out:
	return ret;
}

struct rep_hdr {
	uint32_t type;
	uint32_t len;
};

static int rep_read_hdr(int fd, uint32_t opt, struct rep_hdr *r, char *err, size_t errlen)
{
	uint8_t buf[NBD_OPT_REPLY_HDR_SIZE];
	int ret = -1;

	if (xfer(fd, buf, sizeof(buf), false) < 0) {
		io_fail(err, errlen, "reading an option reply");
		goto out;
	}
	r->type = be_get32(buf + 12);
	r->len = be_get32(buf + 16);
	if (be_get64(buf) != NBD_MAGIC_OPT_REPLY) {
		errbuf_set(err, errlen,
		           "The NBD server sent an option reply with bad magic 0x%016llx.",
		           (unsigned long long)be_get64(buf));
		proto_fail(EPROTO);
	} else if (be_get32(buf + 8) != opt) {
		errbuf_set(err, errlen,
		           "The NBD server answered option %u while option %u was asked.",
		           be_get32(buf + 8), opt);
		proto_fail(EPROTO);
	} else if (r->len > ATTACH_MAX_REPLY_LEN) {
		errbuf_set(err, errlen,
		           "The NBD server announced a %u-byte option reply; the limit is %u.",
		           r->len, ATTACH_MAX_REPLY_LEN);
		proto_fail(EPROTO);
	} else {
		ret = 0;
	}
out:
	return ret;
}

/* Turn an error reply into a sentence that carries the server's own text. */
static int rep_error(int fd, const char *what, const char *export, const struct rep_hdr *r,
                     char *err, size_t errlen)
{
	uint8_t text[256];
	size_t n = r->len < sizeof(text) - 1 ? r->len : sizeof(text) - 1;

	if (payload_read(fd, r->len, text, sizeof(text) - 1) < 0)
		return io_fail(err, errlen, "reading an error message");
	/* The sentence below supplies its own full stop; servers often end with one or a newline.
	 */
	while (n > 0 && (text[n - 1] == '.' || !isgraph(text[n - 1])))
		n--;
	for (size_t i = 0; i < n; i++)
		if (!isprint(text[i]))
			text[i] = '?';
	text[n] = '\0';
	errbuf_set(err, errlen, "The NBD server refused %s for export '%s' with %s: %s.", what,
	           export, rep_name(r->type), n > 0 ? (const char *)text : "(no message)");
	return proto_fail(rep_errno(r->type));
}

static bool pow2(uint32_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

static int rep_info(int fd, const struct rep_hdr *r, struct attach_export *out, bool *have_export,
                    char *err, size_t errlen)
{
	uint8_t buf[2 + ATTACH_NAME_MAX];
	uint16_t type;
	int ret = -1;

	if (r->len < 2) {
		errbuf_set(err, errlen, "The NBD server sent a %u-byte NBD_REP_INFO.", r->len);
		proto_fail(EPROTO);
		goto out;
	}
	if (payload_read(fd, r->len, buf, sizeof(buf)) < 0) {
		io_fail(err, errlen, "reading NBD_REP_INFO");
		goto out;
	}
	type = be_get16(buf);
	if ((type == NBD_INFO_EXPORT && r->len != 12) ||
	    (type == NBD_INFO_BLOCK_SIZE && r->len != 14)) {
		errbuf_set(err, errlen, "The NBD server sent information type %u with length %u.",
		           type, r->len);
		proto_fail(EPROTO);
		goto out;
	}
	if (type == NBD_INFO_EXPORT) {
		out->size = be_get64(buf + 2);
		out->flags = be_get16(buf + 10);
		*have_export = true;
	} else if (type == NBD_INFO_BLOCK_SIZE) {
		out->min_block = be_get32(buf + 2);
		out->pref_block = be_get32(buf + 6);
		out->max_block = be_get32(buf + 10);
		out->has_block_size = true;
		if (!pow2(out->min_block) || !pow2(out->pref_block) ||
		    out->max_block < out->min_block) {
			errbuf_set(err, errlen,
			           "The NBD server announced inconsistent block sizes (minimum %u, "
			           "preferred %u, maximum %u).",
			           out->min_block, out->pref_block, out->max_block);
			proto_fail(EPROTO);
			goto out;
		}
	} else if (type == NBD_INFO_NAME) {
		size_t n = r->len - 2 < ATTACH_NAME_MAX - 1 ? r->len - 2 : ATTACH_NAME_MAX - 1;

		for (size_t i = 0; i < n; i++)
			out->name[i] = isprint(buf[2 + i]) ? (char)buf[2 + i] : '?';
		out->name[n] = '\0';
	}
	/* DESCRIPTION and types newer than this code carry nothing the kernel needs. */
	ret = 0;
out:
	return ret;
}

/* Returns 0 when the export is negotiated, 1 when the server does not know NBD_OPT_GO. */
static int go_replies(int fd, const char *export, struct attach_export *out, char *err,
                      size_t errlen)
{
	bool have_export = false;
	struct rep_hdr r;
	int ret = -1;

	for (int i = 0; i < ATTACH_MAX_REPLIES; i++) {
		if (rep_read_hdr(fd, NBD_OPT_GO, &r, err, errlen) < 0)
			goto out;
		if (r.type == NBD_REP_INFO) {
			if (rep_info(fd, &r, out, &have_export, err, errlen) < 0)
				goto out;
			continue;
		}
		if (r.type == NBD_REP_ERR_UNSUP) {
			ret = payload_read(fd, r.len, NULL, 0) < 0 ? -1 : 1;
			if (ret < 0)
				io_fail(err, errlen, "reading an error message");
			goto out;
		}
		if (r.type & NBD_REP_ERR_BIT) {
			rep_error(fd, "NBD_OPT_GO", export, &r, err, errlen);
			goto out;
		}
		if (r.type != NBD_REP_ACK || r.len != 0) {
			errbuf_set(
			    err, errlen,
			    "The NBD server answered NBD_OPT_GO with reply type %u of %u bytes.",
			    r.type, r.len);
			proto_fail(EPROTO);
			goto out;
		}
		if (!have_export) {
			errbuf_set(err, errlen,
			           "The NBD server acknowledged NBD_OPT_GO without sending "
			           "NBD_INFO_EXPORT, so the export size is unknown.");
			proto_fail(EPROTO);
			goto out;
		}
		ret = 0;
		goto out;
	}
	errbuf_set(err, errlen, "The NBD server sent more than %d replies to NBD_OPT_GO.",
	           ATTACH_MAX_REPLIES);
	proto_fail(EPROTO);
out:
	return ret;
}

/* For servers without NBD_OPT_GO: the old way, which cannot report errors or block sizes. */
static int export_name_fallback(int fd, const char *export, size_t namelen, bool no_zeroes,
                                struct attach_export *out, char *err, size_t errlen)
{
	uint8_t buf[10 + 124];
	int ret = -1;

	if (opt_send(fd, NBD_OPT_EXPORT_NAME, export, (uint32_t)namelen) < 0) {
		io_fail(err, errlen, "sending NBD_OPT_EXPORT_NAME");
		goto out;
	}
	if (xfer(fd, buf, no_zeroes ? 10 : sizeof(buf), false) < 0) {
		if (errno != ECONNRESET) {
			io_fail(err, errlen, "reading the NBD_OPT_EXPORT_NAME reply");
			goto out;
		}
		errbuf_set(
		    err, errlen,
		    "The NBD server closed the connection after NBD_OPT_EXPORT_NAME, which means "
		    "it has no export named '%s'.",
		    export);
		proto_fail(ENOENT);
		goto out;
	}
	out->size = be_get64(buf);
	out->flags = be_get16(buf + 8);
	ret = 0;
out:
	return ret;
}

/* Tell the server we are leaving, without waiting: the connection is being closed anyway. */
static void opt_abort(int fd)
{
	uint8_t hdr[NBD_OPT_HEADER_SIZE];
	int e = errno;

	be_put64(hdr, NBD_MAGIC_OPTS);
	be_put32(hdr + 8, NBD_OPT_ABORT);
	be_put32(hdr + 12, 0);
	(void)!send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL | MSG_DONTWAIT);
	errno = e;
}

int attach_handshake(int fd, const char *export, struct attach_export *out, char *err,
                     size_t errlen)
{
	uint8_t cflags[4];
	uint16_t hsflags;
	size_t namelen;
	int ret = -1, r;

	memset(out, 0, sizeof(*out));
	if (!export)
		export = "";
	namelen = strlen(export);
	if (namelen > NBD_MAX_STRING) {
		errbuf_set(err, errlen, "The export name is %zu bytes long; NBD allows at most %u.",
		           namelen, NBD_MAX_STRING);
		proto_fail(EINVAL);
		goto out;
	}
	if (hs_greeting(fd, &hsflags, err, errlen) < 0)
		goto out;
	/* Only echo NO_ZEROES when offered: a server that did not offer it would reject it. */
	be_put32(cflags, NBD_FLAG_C_FIXED_NEWSTYLE | (hsflags & NBD_FLAG_NO_ZEROES));
	if (xfer(fd, cflags, sizeof(cflags), true) < 0 || opt_send_go(fd, export, namelen) < 0) {
		io_fail(err, errlen, "sending NBD_OPT_GO");
		goto out;
	}
	r = go_replies(fd, export, out, err, errlen);
	if (r == 1)
		r = export_name_fallback(fd, export, namelen, hsflags & NBD_FLAG_NO_ZEROES, out,
		                         err, errlen);
	if (r < 0) {
		opt_abort(fd);
		goto out;
	}
	ret = 0;
out:
	return ret;
}

static bool block_size_valid(uint64_t bs)
{
	return bs >= ATTACH_MIN_BLOCK_SIZE && bs <= ATTACH_MAX_BLOCK_SIZE && (bs & (bs - 1)) == 0;
}

int attach_check_export(const struct attach_export *e, uint64_t bs, char *err, size_t errlen)
{
	int ret = -1;

	if (!block_size_valid(bs))
		errbuf_set(err, errlen,
		           "The block size %llu is not a power of two between %u and %u bytes.",
		           (unsigned long long)bs, ATTACH_MIN_BLOCK_SIZE, ATTACH_MAX_BLOCK_SIZE);
	else if (e->size == 0 || e->size > INT64_MAX)
		errbuf_set(err, errlen, "The export size %llu bytes cannot be given to the kernel.",
		           (unsigned long long)e->size);
	else if (e->size % bs != 0)
		errbuf_set(
		    err, errlen,
		    "The export size %llu bytes is not a multiple of the block size %llu; use a "
		    "smaller --block-size or resize the volume.",
		    (unsigned long long)e->size, (unsigned long long)bs);
	else if (e->has_block_size && e->min_block > bs)
		errbuf_set(err, errlen,
		           "The NBD server needs requests aligned to %u bytes but the kernel block "
		           "size is %llu; use --block-size %u if it is at most %u.",
		           e->min_block, (unsigned long long)bs, e->min_block,
		           ATTACH_MAX_BLOCK_SIZE);
	else if (e->has_block_size && e->max_block < ATTACH_KERNEL_MAX_REQUEST)
		errbuf_set(
		    err, errlen,
		    "The NBD server accepts requests of at most %u bytes but the kernel may send "
		    "up to %u bytes in one request.",
		    e->max_block, ATTACH_KERNEL_MAX_REQUEST);
	else
		ret = 0;
	if (ret < 0)
		errno = EINVAL;
	return ret;
}

void attach_params_init(struct attach_params *p)
{
	memset(p, 0, sizeof(*p));
	p->index = -1;
	p->block_size = ATTACH_DEFAULT_BLOCK_SIZE;
	/*
	 * No per-request timeout: with one, a single slow request (a resync, a stalled peer in
	 * sync mode) makes the kernel shut the socket down and, with no live socket left, fail
	 * I/O with EIO, which a filesystem on top answers by going read-only. Daemon restarts are
	 * covered by dead_conn_timeout instead.
	 */
	p->timeout = ATTACH_DEFAULT_TIMEOUT;
	p->dead_conn_timeout = ATTACH_DEFAULT_DEAD_CONN_TIMEOUT;
}

static bool fds_valid(const int *fds, size_t nfds)
{
	if (!fds || nfds == 0 || nfds > ATTACH_MAX_SOCKETS)
		return false;
	for (size_t i = 0; i < nfds; i++)
		if (fds[i] < 0)
			return false;
	return true;
}

static bool identifier_valid(const char *id)
{
	size_t n;

	if (!id)
		return true;
	n = strlen(id);
	if (n == 0 || n >= ATTACH_MAX_IDENTIFIER)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isgraph((unsigned char)id[i]))
			return false;
	return true;
}

static bool family_valid(int family)
{
	return family > 0 && family <= UINT16_MAX;
}

static bool connect_params_valid(int family, const struct attach_params *p)
{
	if (!family_valid(family) || p->index < -1 || !block_size_valid(p->block_size))
		return false;
	if (p->size == 0 || p->size > INT64_MAX || p->size % p->block_size != 0)
		return false;
	if (p->server_flags > UINT16_MAX || p->timeout > ATTACH_MAX_TIMEOUT ||
	    p->dead_conn_timeout > ATTACH_MAX_TIMEOUT)
		return false;
	if (!fds_valid(p->fds, p->nfds) || !identifier_valid(p->identifier))
		return false;
	/* The kernel refuses this too, but only after the sockets have been set up. */
	if (p->nfds > 1 && !(p->server_flags & NBD_FLAG_CAN_MULTI_CONN))
		return false;
	return true;
}

static int put_header(struct nl_msg *msg, int family, uint8_t cmd)
{
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, 0, cmd, NBD_GENL_VERSION))
		return -1;
	return 0;
}

static int put_sockets(struct nl_msg *msg, const int *fds, size_t nfds)
{
	struct nlattr *socks = nla_nest_start(msg, NBD_ATTR_SOCKETS);
	int ret = -1;

	if (!socks)
		goto out;
	for (size_t i = 0; i < nfds; i++) {
		struct nlattr *item = nla_nest_start(msg, NBD_SOCK_ITEM);

		if (!item || nla_put_u32(msg, NBD_SOCK_FD, (uint32_t)fds[i]) < 0)
			goto out;
		nla_nest_end(msg, item);
	}
	nla_nest_end(msg, socks);
	ret = 0;
out:
	return ret;
}

int attach_build_connect(struct nl_msg *msg, int family, const struct attach_params *p)
{
	uint64_t cflags = p->disconnect_on_close ? NBD_CFLAG_DISCONNECT_ON_CLOSE : 0;
	int ret = -1;

	if (!connect_params_valid(family, p)) {
		errno = EINVAL;
		goto out;
	}
	errno = EMSGSIZE;
	if (put_header(msg, family, NBD_CMD_CONNECT) < 0)
		goto out;
	if (p->index >= 0 && nla_put_u32(msg, NBD_ATTR_INDEX, (uint32_t)p->index) < 0)
		goto out;
	if (nla_put_u64(msg, NBD_ATTR_SIZE_BYTES, p->size) < 0 ||
	    nla_put_u64(msg, NBD_ATTR_BLOCK_SIZE_BYTES, p->block_size) < 0 ||
	    nla_put_u64(msg, NBD_ATTR_SERVER_FLAGS, p->server_flags) < 0 ||
	    nla_put_u64(msg, NBD_ATTR_TIMEOUT, p->timeout) < 0 ||
	    nla_put_u64(msg, NBD_ATTR_DEAD_CONN_TIMEOUT, p->dead_conn_timeout) < 0 ||
	    nla_put_u64(msg, NBD_ATTR_CLIENT_FLAGS, cflags) < 0)
		goto out;
	if (p->identifier && nla_put_string(msg, NBD_ATTR_BACKEND_IDENTIFIER, p->identifier) < 0)
		goto out;
	if (put_sockets(msg, p->fds, p->nfds) < 0)
		goto out;
	ret = 0;
out:
	return ret;
}

int attach_build_reconfigure(struct nl_msg *msg, int family, int index, const int *fds, size_t nfds,
                             const char *identifier)
{
	int ret = -1;

	if (!family_valid(family) || index < 0 || !fds_valid(fds, nfds) ||
	    !identifier_valid(identifier)) {
		errno = EINVAL;
		goto out;
	}
	errno = EMSGSIZE;
	if (put_header(msg, family, NBD_CMD_RECONFIGURE) < 0 ||
	    nla_put_u32(msg, NBD_ATTR_INDEX, (uint32_t)index) < 0)
		goto out;
	if (identifier && nla_put_string(msg, NBD_ATTR_BACKEND_IDENTIFIER, identifier) < 0)
		goto out;
	if (put_sockets(msg, fds, nfds) < 0)
		goto out;
	ret = 0;
out:
	return ret;
}

int attach_build_disconnect(struct nl_msg *msg, int family, int index)
{
	int ret = -1;

	if (!family_valid(family) || index < 0) {
		errno = EINVAL;
		goto out;
	}
	errno = EMSGSIZE;
	if (put_header(msg, family, NBD_CMD_DISCONNECT) < 0 ||
	    nla_put_u32(msg, NBD_ATTR_INDEX, (uint32_t)index) < 0)
		goto out;
	ret = 0;
out:
	return ret;
}

int attach_parse_reply(struct nl_msg *msg, int *index)
{
	struct nla_policy policy[NBD_ATTR_MAX + 1];
	struct nlattr *tb[NBD_ATTR_MAX + 1];
	uint32_t v;
	int ret = -1;

	memset(policy, 0, sizeof(policy));
	policy[NBD_ATTR_INDEX].type = NLA_U32;
	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, NBD_ATTR_MAX, policy) < 0 || !tb[NBD_ATTR_INDEX]) {
		errno = EPROTO;
		goto out;
	}
	v = nla_get_u32(tb[NBD_ATTR_INDEX]);
	if (v > INT_MAX) {
		errno = EPROTO;
		goto out;
	}
	*index = (int)v;
	ret = 0;
out:
	return ret;
}

int attach_parse_device(const char *dev, int *index)
{
	const char *p = dev;
	long long v = 0;
	int ret = -1;

	if (!p)
		goto out;
	if (strncmp(p, "/dev/", 5) == 0)
		p += 5;
	if (strncmp(p, "nbd", 3) != 0)
		goto out;
	p += 3;
	if (*p == '\0')
		goto out;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			goto out;
		v = v * 10 + (*p - '0');
		if (v > INT_MAX)
			goto out;
	}
	*index = (int)v;
	ret = 0;
out:
	if (ret < 0)
		errno = EINVAL;
	return ret;
}

int attach_make_identifier(const char *export, char *out, size_t outlen)
{
	char name[65];
	uint64_t cookie;
	size_t n = 0;
	int ret = -1;

	if (getrandom(&cookie, sizeof(cookie), 0) != (ssize_t)sizeof(cookie))
		goto out;
	/* ':' separates the fields and the sysfs "backend" file is read back as text. */
	for (; export && export[n] && n < sizeof(name) - 1; n++) {
		char c = export[n];

		name[n] = (isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-') ? c : '_';
	}
	name[n] = '\0';
	if ((size_t)snprintf(out, outlen, "hak:%s:%016llx", n ? name : "default",
	                     (unsigned long long)cookie) >= outlen) {
		errno = ERANGE;
		goto out;
	}
	ret = 0;
out:
	return ret;
}

int attach_connect_unix(const char *path, char *err, size_t errlen)
{
	int fd = usock_connect(path), e = errno;

	if (fd < 0 && e == ENAMETOOLONG)
		errbuf_set(err, errlen, "The socket path %s is too long for a UNIX socket.", path);
	else if (fd < 0)
		errbuf_set(err, errlen, "Cannot connect to hakd at %s: %s%s.", path, strerror(e),
		           (e == ENOENT || e == ECONNREFUSED)
		               ? " (is hakd running and serving there?)"
		               : "");
	errno = e;
	return fd;
}

static int nlerr_errno(int nlerr)
{
	switch (nlerr < 0 ? -nlerr : nlerr) {
	case NLE_PERM:
		return EPERM;
	case NLE_BUSY:
		return EBUSY;
	case NLE_INVAL:
		return EINVAL;
	case NLE_OBJ_NOTFOUND:
		return ENOENT;
	case NLE_NOMEM:
		return ENOMEM;
	case NLE_NODEV:
		return ENODEV;
	case NLE_EXIST:
		return EEXIST;
	case NLE_RANGE:
		return ERANGE;
	case NLE_OPNOTSUPP:
		return EOPNOTSUPP;
	default:
		return EIO;
	}
}

int attach_nl_open(struct attach_nl *nl, char *err, size_t errlen)
{
	int r, ret = -1;

	nl->family = -1;
	nl->sk = nl_socket_alloc();
	if (!nl->sk) {
		errbuf_set(err, errlen, "Cannot allocate a netlink socket: out of memory.");
		errno = ENOMEM;
		goto out;
	}
	r = genl_connect(nl->sk);
	if (r < 0) {
		errbuf_set(err, errlen, "Cannot open a generic netlink socket: %s.",
		           nl_geterror(r));
		errno = nlerr_errno(r);
		goto out;
	}
	/* On a normal host this autoloads nbd.ko through its genl family alias. */
	r = genl_ctrl_resolve(nl->sk, NBD_GENL_FAMILY_NAME);
	if (r < 0) {
		errbuf_set(err, errlen,
		           "The kernel has no nbd generic-netlink family (%s): load the nbd module "
		           "(modprobe nbd) or use nbdfuse.",
		           nl_geterror(r));
		errno = r == -NLE_OBJ_NOTFOUND ? ENOENT : nlerr_errno(r);
		goto out;
	}
	nl->family = r;
	ret = 0;
out:
	if (ret < 0 && nl->sk) {
		r = errno;
		nl_socket_free(nl->sk);
		nl->sk = NULL;
		errno = r;
	}
	return ret;
}

static int on_valid(struct nl_msg *msg, void *arg)
{
	int *index = arg, v;

	if (attach_parse_reply(msg, &v) == 0)
		*index = v;
	return NL_OK;
}

static const char *nl_hint(int nlerr)
{
	switch (-nlerr) {
	case NLE_PERM:
		return " (binding NBD devices needs CAP_SYS_ADMIN)";
	case NLE_BUSY:
		return " (the device is already connected)";
	case NLE_INVAL:
		return " (the kernel rejected the parameters: block size, several sockets without "
		       "multi-conn, a missing or different backend identifier, or a device not "
		       "bound "
		       "through netlink)";
	default:
		return "";
	}
}

int attach_nl_send(struct attach_nl *nl, struct nl_msg *msg, int *index, char *err, size_t errlen)
{
	static const char *const names[] = {[NBD_CMD_CONNECT] = "NBD_CMD_CONNECT",
	                                    [NBD_CMD_DISCONNECT] = "NBD_CMD_DISCONNECT",
	                                    [NBD_CMD_RECONFIGURE] = "NBD_CMD_RECONFIGURE"};
	uint8_t cmd = genlmsg_hdr(nlmsg_hdr(msg))->cmd;
	const char *name =
	    cmd < sizeof(names) / sizeof(names[0]) && names[cmd] ? names[cmd] : "an NBD command";
	int idx = -1, r, ret = -1;

	nl_socket_modify_cb(nl->sk, NL_CB_VALID, NL_CB_CUSTOM, on_valid, &idx);
	r = nl_send_sync(nl->sk, msg);
	/* The callback points at this stack frame; never leave it behind. */
	nl_socket_modify_cb(nl->sk, NL_CB_VALID, NL_CB_DEFAULT, NULL, NULL);
	if (r < 0) {
		errbuf_set(err, errlen, "The kernel refused %s: %s%s.", name, nl_geterror(r),
		           nl_hint(r));
		errno = nlerr_errno(r);
		goto out;
	}
	if (index)
		*index = idx;
	ret = 0;
out:
	return ret;
}

void attach_nl_close(struct attach_nl *nl)
{
	if (nl->sk)
		nl_socket_free(nl->sk);
	nl->sk = NULL;
	nl->family = -1;
}
