/* SPDX-License-Identifier: MIT */
#include "nbd_proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_ALLOC "base:allocation"

static int nbd_buf_put(struct nbd_buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *d = realloc(b->data, cap);
		if (!d)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

void nbd_buf_free(struct nbd_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void nbd_greeting(uint8_t out[18])
{
	be_put64(out, NBD_MAGIC_INIT);
	be_put64(out + 8, NBD_MAGIC_OPTS);
	be_put16(out + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
}

int nbd_client_flags(struct nbd_neg *neg, uint32_t flags)
{
	if (flags & ~(uint32_t)(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
		errno = EPROTO;
		return -1;
	}
	neg->client_flags = flags;
	neg->no_zeroes = (flags & NBD_FLAG_C_NO_ZEROES) != 0;
	return 0;
}

static int opt_reply(struct nbd_buf *out, uint32_t opt, uint32_t type, const void *data,
                     uint32_t len)
{
	uint8_t h[NBD_OPT_REPLY_HDR_SIZE];
	be_put64(h, NBD_MAGIC_OPT_REPLY);
	be_put32(h + 8, opt);
	be_put32(h + 12, type);
	be_put32(h + 16, len);
	if (nbd_buf_put(out, h, sizeof(h)) < 0 || nbd_buf_put(out, data, len) < 0)
		return -1;
	return 0;
}

static int opt_error(struct nbd_buf *out, uint32_t opt, uint32_t type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int opt_error(struct nbd_buf *out, uint32_t opt, uint32_t type, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	return opt_reply(out, opt, type, msg, (uint32_t)n);
}

/* Transmission flags for an export given the negotiated state. */
static uint16_t nbd_tflags(const struct nbd_neg *neg, const struct nbd_export *e)
{
	uint16_t f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
	             NBD_FLAG_SEND_CACHE | NBD_FLAG_CAN_MULTI_CONN;
	if (e->read_only)
		f |= NBD_FLAG_READ_ONLY;
	else
		f |= NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_SEND_FAST_ZERO;
	if (e->rotational)
		f |= NBD_FLAG_ROTATIONAL;
	if (neg->structured)
		f |= NBD_FLAG_SEND_DF;
	return f;
}

/* A bounded copy of a wire string for use in messages. */
static void name_copy(char *dst, size_t dstlen, const uint8_t *src, size_t len)
{
	size_t n = len < dstlen - 1 ? len : dstlen - 1;
	for (size_t i = 0; i < n; i++)
		dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? (char)src[i] : '?';
	dst[n] = '\0';
}

static const struct nbd_export *neg_lookup(struct nbd_neg *neg, const uint8_t *name, size_t len)
{
	if (!neg->lookup)
		return NULL;
	return neg->lookup(neg->lookup_ctx, (const char *)name, len);
}

static int opt_list(struct nbd_neg *neg, uint32_t len, struct nbd_buf *out)
{
	if (len != 0)
		return opt_error(out, NBD_OPT_LIST, NBD_REP_ERR_INVALID,
		                 "NBD_OPT_LIST carries no data, but %u bytes were sent.", len);
	for (size_t i = 0; i < neg->n_list; i++) {
		const struct nbd_export *e = neg->list[i];
		size_t nl = strlen(e->name);
		size_t dl = e->description ? strlen(e->description) : 0;
		uint8_t hdr[4];
		if (nl > NBD_MAX_STRING || dl > NBD_MAX_STRING)
			continue;
		be_put32(hdr, (uint32_t)nl);
		uint8_t rh[NBD_OPT_REPLY_HDR_SIZE];
		be_put64(rh, NBD_MAGIC_OPT_REPLY);
		be_put32(rh + 8, NBD_OPT_LIST);
		be_put32(rh + 12, NBD_REP_SERVER);
		be_put32(rh + 16, (uint32_t)(4 + nl + dl));
		if (nbd_buf_put(out, rh, sizeof(rh)) < 0 || nbd_buf_put(out, hdr, 4) < 0 ||
		    nbd_buf_put(out, e->name, nl) < 0 || nbd_buf_put(out, e->description, dl) < 0)
			return -1;
	}
	return opt_reply(out, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
}

static int info_reply(struct nbd_buf *out, uint32_t opt, const void *p, uint32_t len)
{
	return opt_reply(out, opt, NBD_REP_INFO, p, len);
}

/* An NBD_INFO_NAME or NBD_INFO_DESCRIPTION reply: the type, then the text without its NUL. */
static int info_text_reply(struct nbd_buf *out, uint32_t opt, uint16_t type, const char *text)
{
	size_t len = strlen(text);
	uint8_t *p = malloc(2 + len);
	int rc;

	if (!p)
		return -1;
	be_put16(p, type);
	memcpy(p + 2, text, len);
	rc = info_reply(out, opt, p, (uint32_t)(2 + len));
	free(p);
	return rc;
}

static int send_infos(struct nbd_neg *neg, uint32_t opt, const struct nbd_export *e,
                      const uint8_t *reqs, uint16_t nreqs, struct nbd_buf *out)
{
	uint8_t b[14];
	for (uint16_t i = 0; i < nreqs; i++) {
		uint16_t t = be_get16(reqs + 2 * i);
		if (t == NBD_INFO_NAME && info_text_reply(out, opt, t, e->name) < 0)
			return -1;
		if (t == NBD_INFO_DESCRIPTION && e->description &&
		    info_text_reply(out, opt, t, e->description) < 0)
			return -1;
	}
	/* Block sizes go out whether asked or not: a client that did not ask may still honour them,
	 * and the spec allows it. */
	be_put16(b, NBD_INFO_BLOCK_SIZE);
	be_put32(b + 2, e->min_block);
	be_put32(b + 6, e->pref_block);
	be_put32(b + 10, e->max_payload);
	if (info_reply(out, opt, b, 14) < 0)
		return -1;
	be_put16(b, NBD_INFO_EXPORT);
	be_put64(b + 2, e->size);
	be_put16(b + 10, nbd_tflags(neg, e));
	if (info_reply(out, opt, b, 12) < 0)
		return -1;
	return opt_reply(out, opt, NBD_REP_ACK, NULL, 0);
}

static int opt_info_go(struct nbd_neg *neg, uint32_t opt, const uint8_t *d, uint32_t len,
                       struct nbd_buf *out)
{
	const char *oname = opt == NBD_OPT_GO ? "NBD_OPT_GO" : "NBD_OPT_INFO";
	char shown[80];
	if (len < 6)
		return opt_error(out, opt, NBD_REP_ERR_INVALID,
		                 "%s data is %u bytes, shorter than the 6-byte minimum.", oname,
		                 len);
	uint32_t nl = be_get32(d);
	if (nl > NBD_MAX_STRING || (uint64_t)nl + 6 > len)
		return opt_error(out, opt, NBD_REP_ERR_INVALID,
		                 "%s export name length %u does not fit in %u bytes of data.",
		                 oname, nl, len);
	uint16_t nreq = be_get16(d + 4 + nl);
	if ((uint64_t)4 + nl + 2 + 2u * nreq != len)
		return opt_error(
		    out, opt, NBD_REP_ERR_INVALID,
		    "%s announces %u information requests, but the data length %u does "
		    "not match.",
		    oname, nreq, len);
	name_copy(shown, sizeof(shown), d + 4, nl);
	const struct nbd_export *e = neg_lookup(neg, d + 4, nl);
	if (!e)
		return opt_error(out, opt, NBD_REP_ERR_UNKNOWN,
		                 "Export '%s' is not served on this socket.", shown);
	if (e->refuse_reason)
		return opt_error(out, opt, NBD_REP_ERR_POLICY, "Export '%s' is not available: %s",
		                 e->name, e->refuse_reason);
	if (neg->meta_alloc &&
	    (strlen(neg->meta_export) != nl || memcmp(neg->meta_export, d + 4, nl) != 0)) {
		/* The context was selected for another export: it does not carry over. */
		neg->meta_alloc = false;
	}
	if (send_infos(neg, opt, e, d + 4 + nl + 2, nreq, out) < 0)
		return -1;
	if (opt == NBD_OPT_GO) {
		neg->chosen = e;
		return NBD_OPT_DONE_GO;
	}
	return NBD_OPT_CONTINUE;
}

static int opt_export_name(struct nbd_neg *neg, const uint8_t *d, uint32_t len, struct nbd_buf *out)
{
	const struct nbd_export *e = len <= NBD_MAX_STRING ? neg_lookup(neg, d, len) : NULL;
	if (!e || e->refuse_reason)
		return NBD_OPT_CLOSE; /* the protocol has no way to say why here */
	uint8_t b[10 + 124];
	memset(b, 0, sizeof(b));
	be_put64(b, e->size);
	be_put16(b + 8, nbd_tflags(neg, e));
	if (nbd_buf_put(out, b, neg->no_zeroes ? 10 : sizeof(b)) < 0)
		return -1;
	neg->chosen = e;
	return NBD_OPT_DONE_EXPORT;
}

static int opt_meta(struct nbd_neg *neg, uint32_t opt, const uint8_t *d, uint32_t len,
                    struct nbd_buf *out)
{
	bool set = opt == NBD_OPT_SET_META_CONTEXT;
	char shown[80];
	if (!neg->structured)
		return opt_error(out, opt, NBD_REP_ERR_INVALID,
		                 "Meta contexts need NBD_OPT_STRUCTURED_REPLY first.");
	if (len < 8)
		return opt_error(out, opt, NBD_REP_ERR_INVALID,
		                 "Meta context data is %u bytes, shorter than the 8-byte minimum.",
		                 len);
	uint32_t nl = be_get32(d);
	if (nl > NBD_MAX_STRING || (uint64_t)nl + 8 > len)
		return opt_error(out, opt, NBD_REP_ERR_INVALID,
		                 "Meta context export name length %u does not fit in %u bytes.", nl,
		                 len);
	uint32_t nq = be_get32(d + 4 + nl);
	/* Walk the queries once to validate the framing before answering anything. */
	uint64_t pos = 8 + (uint64_t)nl;
	for (uint32_t i = 0; i < nq; i++) {
		if (pos + 4 > len)
			return opt_error(out, opt, NBD_REP_ERR_INVALID,
			                 "Meta context query %u is truncated.", i);
		uint32_t ql = be_get32(d + pos);
		if (ql > NBD_MAX_STRING || pos + 4 + ql > len)
			return opt_error(out, opt, NBD_REP_ERR_INVALID,
			                 "Meta context query %u has length %u beyond the data.", i,
			                 ql);
		pos += 4 + ql;
	}
	if (pos != len)
		return opt_error(out, opt, NBD_REP_ERR_INVALID,
		                 "Meta context data has %llu trailing bytes.",
		                 (unsigned long long)(len - pos));
	name_copy(shown, sizeof(shown), d + 4, nl);
	if (!neg_lookup(neg, d + 4, nl))
		return opt_error(out, opt, NBD_REP_ERR_UNKNOWN,
		                 "Export '%s' is not served on this socket.", shown);
	if (set)
		neg->meta_alloc = false;
	uint8_t rep[4 + sizeof(META_ALLOC) - 1];
	be_put32(rep, set ? NBD_META_ALLOC_ID : 0);
	memcpy(rep + 4, META_ALLOC, sizeof(META_ALLOC) - 1);
	bool answered = false;
	pos = 8 + (uint64_t)nl;
	for (uint32_t i = 0; i < nq; i++) {
		uint32_t ql = be_get32(d + pos);
		const uint8_t *q = d + pos + 4;
		pos += 4 + ql;
		bool exact = ql == sizeof(META_ALLOC) - 1 && memcmp(q, META_ALLOC, ql) == 0;
		bool ns = !set && ql == 5 && memcmp(q, "base:", 5) == 0;
		if ((exact || ns) && !answered) {
			if (opt_reply(out, opt, NBD_REP_META_CONTEXT, rep, sizeof(rep)) < 0)
				return -1;
			answered = true;
		}
	}
	if (nq == 0 && !set && opt_reply(out, opt, NBD_REP_META_CONTEXT, rep, sizeof(rep)) < 0)
		return -1;
	if (set && answered) {
		neg->meta_alloc = true;
		memcpy(neg->meta_export, d + 4, nl);
		neg->meta_export[nl] = '\0';
	}
	return opt_reply(out, opt, NBD_REP_ACK, NULL, 0);
}

static int opt_starttls(struct nbd_neg *neg, uint32_t len, struct nbd_buf *out)
{
	int rc;
	if (neg->tls_mode == NBD_TLS_OFF)
		rc = opt_error(out, NBD_OPT_STARTTLS, NBD_REP_ERR_POLICY,
		               "TLS is not configured on this server; connect without TLS.");
	else if (len != 0)
		rc = opt_error(out, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID,
		               "NBD_OPT_STARTTLS carries no data, but %u bytes were sent.", len);
	else if (neg->tls_active)
		rc = opt_error(out, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID,
		               "TLS is already active on this connection.");
	else
		return opt_reply(out, NBD_OPT_STARTTLS, NBD_REP_ACK, NULL, 0) < 0
		           ? -1
		           : NBD_OPT_STARTTLS_ACK;
	return rc < 0 ? -1 : NBD_OPT_CONTINUE;
}

/* FORCEDTLS before the handshake: true when opt was answered (or must close) for that. */
static bool tls_refused(const struct nbd_neg *neg, uint32_t opt)
{
	return neg->tls_mode == NBD_TLS_REQUIRE && !neg->tls_active && opt != NBD_OPT_STARTTLS &&
	       opt != NBD_OPT_ABORT;
}

static int opt_tls_reqd(uint32_t opt, struct nbd_buf *out)
{
	/* EXPORT_NAME has no error reply: the spec says to drop the connection. */
	if (opt == NBD_OPT_EXPORT_NAME)
		return NBD_OPT_CLOSE;
	if (opt_error(out, opt, NBD_REP_ERR_TLS_REQD,
	              "This server requires TLS; send NBD_OPT_STARTTLS before option %u.", opt) < 0)
		return -1;
	return NBD_OPT_CONTINUE;
}

int nbd_neg_option(struct nbd_neg *neg, uint32_t opt, const uint8_t *data, uint32_t len,
                   struct nbd_buf *out)
{
	int rc;
	if (tls_refused(neg, opt))
		return opt_tls_reqd(opt, out);
	switch (opt) {
	case NBD_OPT_EXPORT_NAME:
		return opt_export_name(neg, data, len, out);
	case NBD_OPT_ABORT:
		rc = opt_reply(out, opt, NBD_REP_ACK, NULL, 0);
		return rc < 0 ? -1 : NBD_OPT_CLOSE;
	case NBD_OPT_LIST:
		rc = opt_list(neg, len, out);
		break;
	case NBD_OPT_STARTTLS:
		return opt_starttls(neg, len, out);
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		return opt_info_go(neg, opt, data, len, out);
	case NBD_OPT_STRUCTURED_REPLY:
		if (len != 0) {
			rc =
			    opt_error(out, opt, NBD_REP_ERR_INVALID,
			              "NBD_OPT_STRUCTURED_REPLY carries no data, but %u bytes were "
			              "sent.",
			              len);
			break;
		}
		neg->structured = true;
		rc = opt_reply(out, opt, NBD_REP_ACK, NULL, 0);
		break;
	case NBD_OPT_LIST_META_CONTEXT:
	case NBD_OPT_SET_META_CONTEXT:
		rc = opt_meta(neg, opt, data, len, out);
		break;
	default:
		rc = opt_error(out, opt, NBD_REP_ERR_UNSUP, "Option %u is not supported by hakd.",
		               opt);
		break;
	}
	return rc < 0 ? -1 : NBD_OPT_CONTINUE;
}

int nbd_neg_too_big(struct nbd_neg *neg, uint32_t opt, struct nbd_buf *out)
{
	if (opt == NBD_OPT_EXPORT_NAME)
		return NBD_OPT_CLOSE;
	if (tls_refused(neg, opt))
		return opt_tls_reqd(opt, out);
	if (opt_error(out, opt, NBD_REP_ERR_TOO_BIG,
	              "Option %u data is larger than the %u-byte limit.", opt, NBD_OPT_MAX_LEN) < 0)
		return -1;
	return NBD_OPT_CONTINUE;
}

void nbd_neg_tls_started(struct nbd_neg *neg)
{
	neg->tls_active = true;
	neg->structured = false;
	neg->meta_alloc = false;
	neg->meta_export[0] = '\0';
	neg->chosen = NULL;
}

const char *nbd_tls_mode_name(enum nbd_tls_mode mode)
{
	switch (mode) {
	case NBD_TLS_ON:
		return "on";
	case NBD_TLS_REQUIRE:
		return "require";
	default:
		return "off";
	}
}

int nbd_request_decode(const uint8_t in[NBD_REQUEST_SIZE], struct nbd_request *out)
{
	if (be_get32(in) != NBD_MAGIC_REQUEST) {
		errno = EPROTO;
		return -1;
	}
	out->flags = be_get16(in + 4);
	out->type = be_get16(in + 6);
	out->cookie = be_get64(in + 8);
	out->offset = be_get64(in + 16);
	out->length = be_get32(in + 24);
	return 0;
}

uint32_t nbd_request_validate(const struct nbd_neg *neg, const struct nbd_export *e,
                              const struct nbd_request *r)
{
	uint16_t allowed = NBD_CMD_FLAG_FUA;
	bool writes = false, payload = false, aligned = true;

	switch (r->type) {
	case NBD_CMD_READ:
		payload = true;
		if (neg->structured)
			allowed |= NBD_CMD_FLAG_DF;
		break;
	case NBD_CMD_WRITE:
		payload = writes = true;
		break;
	case NBD_CMD_DISC:
		return 0;
	case NBD_CMD_FLUSH:
		if (r->flags & ~allowed)
			return NBD_EINVAL;
		return (r->offset || r->length) ? NBD_EINVAL : 0;
	case NBD_CMD_TRIM:
		writes = true;
		break;
	case NBD_CMD_WRITE_ZEROES:
		writes = true;
		allowed |= NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FAST_ZERO;
		break;
	case NBD_CMD_CACHE:
		break;
	case NBD_CMD_BLOCK_STATUS:
		if (!neg->meta_alloc)
			return NBD_EINVAL;
		allowed |= NBD_CMD_FLAG_REQ_ONE;
		aligned = false;
		break;
	default:
		return NBD_EINVAL;
	}
	if (r->flags & ~allowed)
		return NBD_EINVAL;
	if (writes && e->read_only)
		return NBD_EPERM;
	if (r->length == 0)
		return NBD_EINVAL;
	if (payload && r->length > e->max_payload)
		return r->type == NBD_CMD_READ ? NBD_EOVERFLOW : NBD_EINVAL;
	if (r->offset > e->size || e->size - r->offset < r->length)
		return (r->type == NBD_CMD_WRITE || r->type == NBD_CMD_WRITE_ZEROES) ? NBD_ENOSPC
		                                                                     : NBD_EINVAL;
	if (aligned && e->min_block > 1 &&
	    ((r->offset % e->min_block) != 0 || (r->length % e->min_block) != 0))
		return NBD_EINVAL;
	return 0;
}

uint32_t nbd_errno_to_nbd(int err)
{
	switch (err) {
	case 0:
		return 0;
	case EPERM:
	case EROFS:
		return NBD_EPERM;
	case ENOMEM:
		return NBD_ENOMEM;
	case EINVAL:
		return NBD_EINVAL;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return NBD_ENOSPC;
	case EOVERFLOW:
		return NBD_EOVERFLOW;
	case ENOTSUP:
		return NBD_ENOTSUP;
	case ESHUTDOWN:
		return NBD_ESHUTDOWN;
	default:
		return NBD_EIO;
	}
}

const char *nbd_cmd_name(uint16_t type)
{
	static const char *const names[] = {"READ", "WRITE", "DISC",         "FLUSH",
	                                    "TRIM", "CACHE", "WRITE_ZEROES", "BLOCK_STATUS"};
	return type < sizeof(names) / sizeof(names[0]) ? names[type] : "UNKNOWN";
}

void nbd_simple_reply(uint8_t out[NBD_SIMPLE_REPLY_SIZE], uint64_t cookie, uint32_t err)
{
	be_put32(out, NBD_MAGIC_SIMPLE_REPLY);
	be_put32(out + 4, err);
	be_put64(out + 8, cookie);
}

void nbd_chunk_header(uint8_t out[NBD_STRUCT_REPLY_SIZE], uint64_t cookie, uint16_t flags,
                      uint16_t type, uint32_t len)
{
	be_put32(out, NBD_MAGIC_STRUCT_REPLY);
	be_put16(out + 4, flags);
	be_put16(out + 6, type);
	be_put64(out + 8, cookie);
	be_put32(out + 16, len);
}
