/* SPDX-License-Identifier: MIT */
/*
 * NBD protocol logic without I/O: request decoding and validation, option negotiation and reply
 * encoding. nbd.c moves bytes; this module decides what they mean, so it can be unit-tested and
 * fuzzed on its own.
 */
#ifndef HAK_NBD_PROTO_H
#define HAK_NBD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hak/nbd.h>

#include "lib/endian.h"

/* What one export offers; the negotiation and the validator read it. */
struct nbd_export {
	const char *name;
	const char *description; /* may be NULL */
	uint64_t size;
	uint32_t min_block;
	uint32_t pref_block;
	uint32_t max_payload;
	bool read_only;
	bool rotational;
	/* When set, GO/INFO/EXPORT_NAME are refused with this reason (e.g. the node is secondary).
	 */
	const char *refuse_reason;
};

/* Lookup used by the negotiation: return the export called name (len bytes; "" = default). */
typedef const struct nbd_export *(*nbd_export_lookup_fn)(void *ctx, const char *name, size_t len);

/*
 * What a listener does about TLS (NBD's NOTLS, optional TLS, FORCEDTLS). Under REQUIRE every
 * option but STARTTLS and ABORT is refused with NBD_REP_ERR_TLS_REQD until TLS is up, so nothing
 * about the export leaks and nothing is served in the clear.
 */
enum nbd_tls_mode {
	NBD_TLS_OFF = 0, /* STARTTLS is answered NBD_REP_ERR_POLICY */
	NBD_TLS_ON,      /* STARTTLS is accepted; clients may also stay in the clear */
	NBD_TLS_REQUIRE, /* nothing but STARTTLS and ABORT before TLS */
};

/* Per-connection negotiation state. */
struct nbd_neg {
	enum nbd_tls_mode tls_mode; /* set by the listener before the first option */
	bool tls_active;            /* the TLS handshake completed (nbd_neg_tls_started) */
	uint32_t client_flags;
	bool no_zeroes;
	bool structured;                      /* STRUCTURED_REPLY acknowledged */
	bool meta_alloc;                      /* base:allocation selected */
	char meta_export[NBD_MAX_STRING + 1]; /* export the meta context was set for */
	const struct nbd_export *chosen;      /* set when GO / EXPORT_NAME succeeds */
	nbd_export_lookup_fn lookup;
	void *lookup_ctx;
	const struct nbd_export *const *list; /* for NBD_OPT_LIST */
	size_t n_list;
};

#define NBD_META_ALLOC_ID 1u /* the context id we hand out for base:allocation */

/* An output buffer the negotiation appends replies to; grows with realloc. */
struct nbd_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};
void nbd_buf_free(struct nbd_buf *b);

/* The 18-byte server greeting. */
void nbd_greeting(uint8_t out[18]);
/* Check the client flags; -1 (errno EPROTO) if unknown bits: the spec says drop the connection. */
int nbd_client_flags(struct nbd_neg *neg, uint32_t flags);

enum nbd_opt_result {
	NBD_OPT_CONTINUE = 0, /* replies appended; read the next option */
	NBD_OPT_DONE_GO,      /* transmission starts after the appended replies */
	NBD_OPT_DONE_EXPORT,  /* EXPORT_NAME accepted: appended its reply; transmission starts */
	NBD_OPT_CLOSE,        /* flush the appended replies (if any) and close */
	NBD_OPT_STARTTLS_ACK, /* ACK appended: flush it, then run the TLS handshake; input that
	                       * arrived before the ACK was sent is a protocol violation */
};

/* Largest option payload we buffer; longer ones are discarded and answered ERR_TOO_BIG. */
#define NBD_OPT_MAX_LEN (64u * 1024u)

/*
 * Handle one complete option (opt, its data). Appends replies to out. Never reads beyond len.
 * Returns an nbd_opt_result, or -1 with errno=ENOMEM.
 */
int nbd_neg_option(struct nbd_neg *neg, uint32_t opt, const uint8_t *data, uint32_t len,
                   struct nbd_buf *out);
/* Reply to an option whose data was too large to buffer. */
int nbd_neg_too_big(struct nbd_neg *neg, uint32_t opt, struct nbd_buf *out);
/*
 * The TLS handshake after NBD_OPT_STARTTLS completed: the spec discards everything negotiated
 * in the clear (structured replies, meta contexts), and the haggling starts again.
 */
void nbd_neg_tls_started(struct nbd_neg *neg);
const char *nbd_tls_mode_name(enum nbd_tls_mode mode);

struct nbd_request {
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint32_t length;
};

/* Decode a 28-byte request header. -1 with errno=EPROTO on bad magic (the stream is lost). */
int nbd_request_decode(const uint8_t in[NBD_REQUEST_SIZE], struct nbd_request *out);
/* 0 when the request may run, otherwise the NBD error code to reply with. */
uint32_t nbd_request_validate(const struct nbd_neg *neg, const struct nbd_export *e,
                              const struct nbd_request *r);
/* Map an errno from the I/O path to the NBD error code the spec asks for. */
uint32_t nbd_errno_to_nbd(int err);
const char *nbd_cmd_name(uint16_t type);

/* Encoders for transmission replies. */
void nbd_simple_reply(uint8_t out[NBD_SIMPLE_REPLY_SIZE], uint64_t cookie, uint32_t err);
void nbd_chunk_header(uint8_t out[NBD_STRUCT_REPLY_SIZE], uint64_t cookie, uint16_t flags,
                      uint16_t type, uint32_t len);

#endif
