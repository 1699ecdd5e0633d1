/* SPDX-License-Identifier: MIT */
/* Unit tests for nbd_proto: negotiation replies byte by byte, and request validation rules. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nbd/nbd_proto.h"

static struct nbd_export exp_rw = {
    .name = "vol0",
    .description = "test volume",
    .size = 1 << 20,
    .min_block = 512,
    .pref_block = 4096,
    .max_payload = 32u << 20,
};

static const struct nbd_export *lookup(void *ctx, const char *name, size_t len)
{
	struct nbd_export *e = ctx;
	if (len == 0 || (len == strlen(e->name) && memcmp(name, e->name, len) == 0))
		return e;
	return NULL;
}

static const struct nbd_export *list_one[1] = {&exp_rw};

static void neg_init(struct nbd_neg *n, struct nbd_export *e)
{
	memset(n, 0, sizeof(*n));
	n->lookup = lookup;
	n->lookup_ctx = e;
	n->list = list_one;
	n->n_list = 1;
}

/* One parsed option reply. */
struct rep {
	uint32_t opt, type, len;
	const uint8_t *data;
};

/* Split an output buffer into option replies; returns how many. */
static int parse_replies(const struct nbd_buf *b, struct rep *r, int max)
{
	size_t pos = 0;
	int n = 0;
	while (pos < b->len && n < max) {
		ck_assert_uint_ge(b->len - pos, NBD_OPT_REPLY_HDR_SIZE);
		ck_assert(be_get64(b->data + pos) == NBD_MAGIC_OPT_REPLY);
		r[n].opt = be_get32(b->data + pos + 8);
		r[n].type = be_get32(b->data + pos + 12);
		r[n].len = be_get32(b->data + pos + 16);
		r[n].data = b->data + pos + 20;
		pos += NBD_OPT_REPLY_HDR_SIZE + r[n].len;
		ck_assert_uint_le(pos, b->len);
		n++;
	}
	ck_assert_uint_eq(pos, b->len);
	return n;
}

/* Build GO/INFO data: name + info requests. */
static size_t go_data(uint8_t *d, const char *name, const uint16_t *reqs, uint16_t n)
{
	size_t nl = strlen(name);
	be_put32(d, (uint32_t)nl);
	memcpy(d + 4, name, nl);
	be_put16(d + 4 + nl, n);
	for (uint16_t i = 0; i < n; i++)
		be_put16(d + 6 + nl + 2 * i, reqs[i]);
	return 6 + nl + 2u * n;
}

START_TEST(greeting_and_flags)
{
	uint8_t g[18];
	struct nbd_neg n;
	neg_init(&n, &exp_rw);
	nbd_greeting(g);
	ck_assert(be_get64(g) == NBD_MAGIC_INIT);
	ck_assert(be_get64(g + 8) == NBD_MAGIC_OPTS);
	ck_assert_uint_eq(be_get16(g + 16), NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	ck_assert_int_eq(nbd_client_flags(&n, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES), 0);
	ck_assert(n.no_zeroes);
	errno = 0;
	ck_assert_int_eq(nbd_client_flags(&n, 1u << 5), -1);
	ck_assert_int_eq(errno, EPROTO);
}
END_TEST

START_TEST(go_success)
{
	struct nbd_neg n;
	struct nbd_buf out = {0};
	struct rep r[8];
	uint8_t d[64];
	uint16_t reqs[] = {NBD_INFO_NAME, NBD_INFO_DESCRIPTION, NBD_INFO_BLOCK_SIZE};
	neg_init(&n, &exp_rw);
	size_t len = go_data(d, "vol0", reqs, 3);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_GO, d, (uint32_t)len, &out), NBD_OPT_DONE_GO);
	int k = parse_replies(&out, r, 8);
	ck_assert_int_eq(k, 5);
	ck_assert_uint_eq(r[0].type, NBD_REP_INFO);
	ck_assert_uint_eq(be_get16(r[0].data), NBD_INFO_NAME);
	ck_assert_int_eq(memcmp(r[0].data + 2, "vol0", 4), 0);
	ck_assert_uint_eq(be_get16(r[1].data), NBD_INFO_DESCRIPTION);
	ck_assert_int_eq(memcmp(r[1].data + 2, "test volume", 11), 0);
	ck_assert_uint_eq(be_get16(r[2].data), NBD_INFO_BLOCK_SIZE);
	ck_assert_uint_eq(be_get32(r[2].data + 2), 512);
	ck_assert_uint_eq(be_get32(r[2].data + 6), 4096);
	ck_assert_uint_eq(be_get32(r[2].data + 10), 32u << 20);
	ck_assert_uint_eq(be_get16(r[3].data), NBD_INFO_EXPORT);
	ck_assert_uint_eq(r[3].len, 12);
	ck_assert(be_get64(r[3].data + 2) == (1u << 20));
	uint16_t f = be_get16(r[3].data + 10);
	ck_assert(f & NBD_FLAG_HAS_FLAGS);
	ck_assert(f & NBD_FLAG_SEND_FLUSH);
	ck_assert(f & NBD_FLAG_SEND_FUA);
	ck_assert(f & NBD_FLAG_CAN_MULTI_CONN);
	ck_assert(f & NBD_FLAG_SEND_TRIM);
	ck_assert(f & NBD_FLAG_SEND_FAST_ZERO);
	ck_assert(!(f & NBD_FLAG_SEND_DF)); /* no structured replies negotiated */
	ck_assert(!(f & NBD_FLAG_READ_ONLY));
	ck_assert_uint_eq(r[4].type, NBD_REP_ACK);
	ck_assert_uint_eq(r[4].opt, NBD_OPT_GO);
	ck_assert_ptr_eq(n.chosen, &exp_rw);
	nbd_buf_free(&out);
}
END_TEST

START_TEST(go_errors)
{
	struct nbd_neg n;
	struct nbd_buf out = {0};
	struct rep r[4];
	uint8_t d[64];
	neg_init(&n, &exp_rw);
	size_t len = go_data(d, "nope", NULL, 0);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_GO, d, (uint32_t)len, &out), NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 1);
	ck_assert_uint_eq(r[0].type, NBD_REP_ERR_UNKNOWN);
	ck_assert(memmem(r[0].data, r[0].len, "'nope'", 6) != NULL);
	ck_assert_ptr_null(n.chosen);
	nbd_buf_free(&out);

	/* Declared request count does not match the length. */
	len = go_data(d, "vol0", NULL, 0);
	be_put16(d + 8, 3);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_INFO, d, (uint32_t)len, &out),
	                 NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 1);
	ck_assert_uint_eq(r[0].type, NBD_REP_ERR_INVALID);
	nbd_buf_free(&out);

	/* Name length beyond the data. */
	be_put32(d, 1000);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_GO, d, 10, &out), NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 1);
	ck_assert_uint_eq(r[0].type, NBD_REP_ERR_INVALID);
	nbd_buf_free(&out);

	/* A refused export says why. */
	struct nbd_export refused = exp_rw;
	refused.refuse_reason = "this node is secondary";
	neg_init(&n, &refused);
	len = go_data(d, "", NULL, 0);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_GO, d, (uint32_t)len, &out), NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 1);
	ck_assert_uint_eq(r[0].type, NBD_REP_ERR_POLICY);
	ck_assert(memmem(r[0].data, r[0].len, "secondary", 9) != NULL);
	nbd_buf_free(&out);
}
END_TEST

START_TEST(simple_options)
{
	struct nbd_neg n;
	struct nbd_buf out = {0};
	struct rep r[4];
	neg_init(&n, &exp_rw);

	ck_assert_int_eq(nbd_neg_option(&n, 99, NULL, 0, &out), NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 1);
	ck_assert_uint_eq(r[0].type, NBD_REP_ERR_UNSUP);
	ck_assert_uint_eq(r[0].opt, 99);
	nbd_buf_free(&out);

	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_STARTTLS, NULL, 0, &out), NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 1);
	ck_assert_uint_eq(r[0].type, NBD_REP_ERR_POLICY);
	nbd_buf_free(&out);

	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_LIST, NULL, 0, &out), NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 2);
	ck_assert_uint_eq(r[0].type, NBD_REP_SERVER);
	ck_assert_uint_eq(be_get32(r[0].data), 4);
	ck_assert_int_eq(memcmp(r[0].data + 4, "vol0test volume", 15), 0);
	ck_assert_uint_eq(r[1].type, NBD_REP_ACK);
	nbd_buf_free(&out);

	uint8_t junk[3] = {1, 2, 3};
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_STRUCTURED_REPLY, junk, 3, &out),
	                 NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 1);
	ck_assert_uint_eq(r[0].type, NBD_REP_ERR_INVALID);
	ck_assert(!n.structured);
	nbd_buf_free(&out);

	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_STRUCTURED_REPLY, NULL, 0, &out),
	                 NBD_OPT_CONTINUE);
	ck_assert(n.structured);
	nbd_buf_free(&out);

	ck_assert_int_eq(nbd_neg_too_big(&n, NBD_OPT_INFO, &out), NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 1);
	ck_assert_uint_eq(r[0].type, NBD_REP_ERR_TOO_BIG);
	nbd_buf_free(&out);
	ck_assert_int_eq(nbd_neg_too_big(&n, NBD_OPT_EXPORT_NAME, &out), NBD_OPT_CLOSE);

	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_ABORT, NULL, 0, &out), NBD_OPT_CLOSE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 1);
	ck_assert_uint_eq(r[0].type, NBD_REP_ACK);
	nbd_buf_free(&out);
}
END_TEST

/* One option's replies: exactly one, of type want, for opt. */
static void expect_one(struct nbd_buf *out, uint32_t opt, uint32_t want)
{
	struct rep r[4];
	ck_assert_int_eq(parse_replies(out, r, 4), 1);
	ck_assert_uint_eq(r[0].opt, opt);
	ck_assert_uint_eq(r[0].type, want);
	nbd_buf_free(out);
}

START_TEST(starttls_on)
{
	struct nbd_neg n;
	struct nbd_buf out = {0};
	uint8_t d[64];
	neg_init(&n, &exp_rw);
	n.tls_mode = NBD_TLS_ON;

	/* Optional TLS: the clear text works as before. */
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_STRUCTURED_REPLY, NULL, 0, &out),
	                 NBD_OPT_CONTINUE);
	expect_one(&out, NBD_OPT_STRUCTURED_REPLY, NBD_REP_ACK);
	ck_assert(n.structured);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_STARTTLS, d, 1, &out), NBD_OPT_CONTINUE);
	expect_one(&out, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_STARTTLS, NULL, 0, &out), NBD_OPT_STARTTLS_ACK);
	expect_one(&out, NBD_OPT_STARTTLS, NBD_REP_ACK);
	ck_assert(!n.tls_active);

	/* After the handshake the clear-text state is gone and a second STARTTLS is invalid. */
	nbd_neg_tls_started(&n);
	ck_assert(n.tls_active);
	ck_assert(!n.structured);
	ck_assert(!n.meta_alloc);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_STARTTLS, NULL, 0, &out), NBD_OPT_CONTINUE);
	expect_one(&out, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID);
	size_t len = go_data(d, "vol0", NULL, 0);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_GO, d, (uint32_t)len, &out), NBD_OPT_DONE_GO);
	nbd_buf_free(&out);
	ck_assert_ptr_eq(n.chosen, &exp_rw);
}
END_TEST

START_TEST(starttls_require)
{
	struct nbd_neg n;
	struct nbd_buf out = {0};
	uint8_t d[64];
	static const uint32_t opts[] = {NBD_OPT_LIST,
	                                NBD_OPT_INFO,
	                                NBD_OPT_GO,
	                                NBD_OPT_STRUCTURED_REPLY,
	                                NBD_OPT_LIST_META_CONTEXT,
	                                NBD_OPT_SET_META_CONTEXT,
	                                99};
	neg_init(&n, &exp_rw);
	n.tls_mode = NBD_TLS_REQUIRE;
	size_t len = go_data(d, "vol0", NULL, 0);

	/* Nothing about the export before TLS: every option gets TLS_REQD, none changes state. */
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		ck_assert_int_eq(nbd_neg_option(&n, opts[i], d, (uint32_t)len, &out),
		                 NBD_OPT_CONTINUE);
		expect_one(&out, opts[i], NBD_REP_ERR_TLS_REQD);
	}
	ck_assert(!n.structured);
	ck_assert_ptr_null(n.chosen);
	ck_assert_int_eq(nbd_neg_too_big(&n, NBD_OPT_GO, &out), NBD_OPT_CONTINUE);
	expect_one(&out, NBD_OPT_GO, NBD_REP_ERR_TLS_REQD);
	/* EXPORT_NAME cannot be answered with an error: the connection closes. */
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_EXPORT_NAME, (const uint8_t *)"vol0", 4, &out),
	                 NBD_OPT_CLOSE);
	ck_assert_uint_eq(out.len, 0);
	ck_assert_ptr_null(n.chosen);

	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_STARTTLS, NULL, 0, &out), NBD_OPT_STARTTLS_ACK);
	expect_one(&out, NBD_OPT_STARTTLS, NBD_REP_ACK);
	nbd_neg_tls_started(&n);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_LIST, NULL, 0, &out), NBD_OPT_CONTINUE);
	struct rep r[4];
	ck_assert_int_eq(parse_replies(&out, r, 4), 2);
	ck_assert_uint_eq(r[0].type, NBD_REP_SERVER);
	nbd_buf_free(&out);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_GO, d, (uint32_t)len, &out), NBD_OPT_DONE_GO);
	nbd_buf_free(&out);
	ck_assert_ptr_eq(n.chosen, &exp_rw);
}
END_TEST

START_TEST(starttls_require_abort)
{
	struct nbd_neg n;
	struct nbd_buf out = {0};
	neg_init(&n, &exp_rw);
	n.tls_mode = NBD_TLS_REQUIRE;
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_ABORT, NULL, 0, &out), NBD_OPT_CLOSE);
	expect_one(&out, NBD_OPT_ABORT, NBD_REP_ACK);
	ck_assert_str_eq(nbd_tls_mode_name(NBD_TLS_REQUIRE), "require");
	ck_assert_str_eq(nbd_tls_mode_name(NBD_TLS_ON), "on");
	ck_assert_str_eq(nbd_tls_mode_name(NBD_TLS_OFF), "off");
}
END_TEST

START_TEST(export_name)
{
	struct nbd_neg n;
	struct nbd_buf out = {0};
	neg_init(&n, &exp_rw);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_EXPORT_NAME, (const uint8_t *)"vol0", 4, &out),
	                 NBD_OPT_DONE_EXPORT);
	ck_assert_uint_eq(out.len, 134);
	ck_assert(be_get64(out.data) == (1u << 20));
	nbd_buf_free(&out);
	n.no_zeroes = true;
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_EXPORT_NAME, NULL, 0, &out),
	                 NBD_OPT_DONE_EXPORT);
	ck_assert_uint_eq(out.len, 10);
	nbd_buf_free(&out);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_EXPORT_NAME, (const uint8_t *)"x", 1, &out),
	                 NBD_OPT_CLOSE);
	ck_assert_uint_eq(out.len, 0);
	nbd_buf_free(&out);
}
END_TEST

static size_t meta_data(uint8_t *d, const char *name, const char *const *q, unsigned nq)
{
	size_t nl = strlen(name), pos;
	be_put32(d, (uint32_t)nl);
	memcpy(d + 4, name, nl);
	be_put32(d + 4 + nl, nq);
	pos = 8 + nl;
	for (unsigned i = 0; i < nq; i++) {
		size_t ql = strlen(q[i]);
		be_put32(d + pos, (uint32_t)ql);
		memcpy(d + pos + 4, q[i], ql);
		pos += 4 + ql;
	}
	return pos;
}

START_TEST(meta_context)
{
	struct nbd_neg n;
	struct nbd_buf out = {0};
	struct rep r[4];
	uint8_t d[256];
	const char *const qs[] = {"qemu:dirty-bitmap:x", "base:allocation"};
	neg_init(&n, &exp_rw);
	size_t len = meta_data(d, "vol0", qs, 2);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_SET_META_CONTEXT, d, (uint32_t)len, &out),
	                 NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 1);
	ck_assert_uint_eq(r[0].type, NBD_REP_ERR_INVALID); /* before STRUCTURED_REPLY */
	nbd_buf_free(&out);
	n.structured = true;
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_SET_META_CONTEXT, d, (uint32_t)len, &out),
	                 NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 2);
	ck_assert_uint_eq(r[0].type, NBD_REP_META_CONTEXT);
	ck_assert_uint_eq(be_get32(r[0].data), NBD_META_ALLOC_ID);
	ck_assert_int_eq(memcmp(r[0].data + 4, "base:allocation", 15), 0);
	ck_assert_uint_eq(r[1].type, NBD_REP_ACK);
	ck_assert(n.meta_alloc);
	nbd_buf_free(&out);

	/* LIST with no queries names every context; it does not select anything. */
	len = meta_data(d, "vol0", NULL, 0);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_LIST_META_CONTEXT, d, (uint32_t)len, &out),
	                 NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 2);
	ck_assert_uint_eq(r[0].type, NBD_REP_META_CONTEXT);
	ck_assert_uint_eq(be_get32(r[0].data), 0);
	nbd_buf_free(&out);

	/* Truncated query framing. */
	len = meta_data(d, "vol0", qs, 2);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_SET_META_CONTEXT, d, (uint32_t)len - 3, &out),
	                 NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 1);
	ck_assert_uint_eq(r[0].type, NBD_REP_ERR_INVALID);
	nbd_buf_free(&out);

	/* Unknown export. */
	len = meta_data(d, "other", qs, 2);
	ck_assert_int_eq(nbd_neg_option(&n, NBD_OPT_SET_META_CONTEXT, d, (uint32_t)len, &out),
	                 NBD_OPT_CONTINUE);
	ck_assert_int_eq(parse_replies(&out, r, 4), 1);
	ck_assert_uint_eq(r[0].type, NBD_REP_ERR_UNKNOWN);
	nbd_buf_free(&out);
}
END_TEST

START_TEST(request_decode)
{
	uint8_t b[NBD_REQUEST_SIZE];
	struct nbd_request r;
	be_put32(b, NBD_MAGIC_REQUEST);
	be_put16(b + 4, NBD_CMD_FLAG_FUA);
	be_put16(b + 6, NBD_CMD_WRITE);
	be_put64(b + 8, 0x1122334455667788ull);
	be_put64(b + 16, 4096);
	be_put32(b + 24, 512);
	ck_assert_int_eq(nbd_request_decode(b, &r), 0);
	ck_assert_uint_eq(r.flags, NBD_CMD_FLAG_FUA);
	ck_assert_uint_eq(r.type, NBD_CMD_WRITE);
	ck_assert(r.cookie == 0x1122334455667788ull);
	ck_assert(r.offset == 4096);
	ck_assert_uint_eq(r.length, 512);
	b[0] ^= 1;
	ck_assert_int_eq(nbd_request_decode(b, &r), -1);
	ck_assert_int_eq(errno, EPROTO);
}
END_TEST

struct vcase {
	uint16_t type, flags;
	uint64_t off;
	uint32_t len;
	bool structured, meta, ro;
	uint32_t want;
};

static const struct vcase vcases[] = {
    {NBD_CMD_READ, 0, 0, 4096, false, false, false, 0},
    {NBD_CMD_READ, NBD_CMD_FLAG_FUA, 0, 4096, false, false, false, 0},
    {NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 4096, false, false, false, NBD_EINVAL},
    {NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 4096, true, false, false, 0},
    {NBD_CMD_READ, 0, (1 << 20) - 512, 1024, false, false, false, NBD_EINVAL},
    {NBD_CMD_READ, 0, 1ull << 62, 512, false, false, false, NBD_EINVAL},
    {NBD_CMD_READ, 0, 100, 512, false, false, false, NBD_EINVAL},
    {NBD_CMD_READ, 0, 0, 100, false, false, false, NBD_EINVAL},
    {NBD_CMD_READ, 0, 0, 0, false, false, false, NBD_EINVAL},
    {NBD_CMD_READ, 0, 0, (32u << 20) + 512, false, false, false, NBD_EOVERFLOW},
    {NBD_CMD_WRITE, 0, (1 << 20) - 512, 1024, false, false, false, NBD_ENOSPC},
    {NBD_CMD_WRITE, 0, 0, 512, false, false, true, NBD_EPERM},
    {NBD_CMD_WRITE, NBD_CMD_FLAG_NO_HOLE, 0, 512, false, false, false, NBD_EINVAL},
    {NBD_CMD_WRITE, 1u << 9, 0, 512, false, false, false, NBD_EINVAL},
    {NBD_CMD_FLUSH, 0, 0, 0, false, false, false, 0},
    {NBD_CMD_FLUSH, NBD_CMD_FLAG_FUA, 0, 0, false, false, false, 0},
    {NBD_CMD_FLUSH, 0, 512, 0, false, false, false, NBD_EINVAL},
    {NBD_CMD_TRIM, NBD_CMD_FLAG_FUA, 0, 8192, false, false, false, 0},
    {NBD_CMD_TRIM, 0, 0, 8192, false, false, true, NBD_EPERM},
    {NBD_CMD_TRIM, 0, 1 << 20, 512, false, false, false, NBD_EINVAL},
    {NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FAST_ZERO, 0, 8192, false, false,
     false, 0},
    {NBD_CMD_WRITE_ZEROES, 0, (1 << 20) - 512, 1024, false, false, false, NBD_ENOSPC},
    {NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_REQ_ONE, 0, 512, false, false, false, NBD_EINVAL},
    {NBD_CMD_CACHE, 0, 0, 1 << 20, false, false, false, 0},
    {NBD_CMD_BLOCK_STATUS, 0, 0, 1 << 20, true, false, false, NBD_EINVAL},
    {NBD_CMD_BLOCK_STATUS, NBD_CMD_FLAG_REQ_ONE, 0, 1 << 20, true, true, false, 0},
    {NBD_CMD_BLOCK_STATUS, 0, 1, 100, true, true, false, 0},
    {NBD_CMD_BLOCK_STATUS, NBD_CMD_FLAG_DF, 0, 512, true, true, false, NBD_EINVAL},
    {42, 0, 0, 512, false, false, false, NBD_EINVAL},
    {NBD_CMD_DISC, 0, 0, 0, false, false, false, 0},
};

START_TEST(request_validate)
{
	const struct vcase *c = &vcases[_i];
	struct nbd_neg n = {.structured = c->structured, .meta_alloc = c->meta};
	struct nbd_export e = exp_rw;
	struct nbd_request r = {
	    .flags = c->flags, .type = c->type, .offset = c->off, .length = c->len};
	e.read_only = c->ro;
	ck_assert_msg(nbd_request_validate(&n, &e, &r) == c->want,
	              "case %d (%s flags=0x%x off=%llu len=%u): got %u, want %u", _i,
	              nbd_cmd_name(c->type), c->flags, (unsigned long long)c->off, c->len,
	              nbd_request_validate(&n, &e, &r), c->want);
}
END_TEST

START_TEST(errno_mapping)
{
	ck_assert_uint_eq(nbd_errno_to_nbd(0), 0);
	ck_assert_uint_eq(nbd_errno_to_nbd(EROFS), NBD_EPERM);
	ck_assert_uint_eq(nbd_errno_to_nbd(EDQUOT), NBD_ENOSPC);
	ck_assert_uint_eq(nbd_errno_to_nbd(EFBIG), NBD_ENOSPC);
	ck_assert_uint_eq(nbd_errno_to_nbd(ENOTSUP), NBD_ENOTSUP);
	ck_assert_uint_eq(nbd_errno_to_nbd(EBADF), NBD_EIO);
	ck_assert_uint_eq(nbd_errno_to_nbd(ESHUTDOWN), NBD_ESHUTDOWN);
}
END_TEST

static Suite *nbd_proto_suite(void)
{
	Suite *s = suite_create("nbd_proto");
	TCase *t = tcase_create("core");
	tcase_add_test(t, greeting_and_flags);
	tcase_add_test(t, go_success);
	tcase_add_test(t, go_errors);
	tcase_add_test(t, simple_options);
	tcase_add_test(t, starttls_on);
	tcase_add_test(t, starttls_require);
	tcase_add_test(t, starttls_require_abort);
	tcase_add_test(t, export_name);
	tcase_add_test(t, meta_context);
	tcase_add_test(t, request_decode);
	tcase_add_loop_test(t, request_validate, 0, (int)(sizeof(vcases) / sizeof(vcases[0])));
	tcase_add_test(t, errno_mapping);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(nbd_proto_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
