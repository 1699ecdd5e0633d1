/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the input is a client's byte stream — client flags, then options — fed to the
 * negotiation exactly as nbd.c frames it; after GO/EXPORT_NAME the rest is parsed as requests.
 * Each input runs under the three TLS modes; an acknowledged STARTTLS continues as if the TLS
 * handshake had succeeded (nbd.c's conn_tls_handshake), so the options after it are parsed with
 * TLS active.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nbd/nbd_proto.h"

static struct nbd_export exp = {
    .name = "vol0",
    .description = "fuzz",
    .size = 1 << 20,
    .min_block = 512,
    .pref_block = 4096,
    .max_payload = 32u << 20,
};
static const struct nbd_export *list[1] = {&exp};

static const struct nbd_export *lookup(void *ctx, const char *name, size_t len)
{
	(void)ctx;
	if (len == 0 || (len == 4 && memcmp(name, "vol0", 4) == 0))
		return &exp;
	return NULL;
}

static void run(const uint8_t *data, size_t size, enum nbd_tls_mode mode)
{
	struct nbd_neg n = {.tls_mode = mode, .lookup = lookup, .list = list, .n_list = 1};
	size_t pos = 0;
	if (size < 4 || nbd_client_flags(&n, be_get32(data)) < 0)
		return;
	pos = 4;
	while (size - pos >= NBD_OPT_HEADER_SIZE) {
		struct nbd_buf out = {0};
		if (be_get64(data + pos) != NBD_MAGIC_OPTS)
			return;
		uint32_t opt = be_get32(data + pos + 8), len = be_get32(data + pos + 12);
		pos += NBD_OPT_HEADER_SIZE;
		int rc;
		if (len > NBD_OPT_MAX_LEN) {
			rc = nbd_neg_too_big(&n, opt, &out);
			len = size - pos < len ? (uint32_t)(size - pos) : len;
		} else {
			if (size - pos < len)
				return;
			rc = nbd_neg_option(&n, opt, data + pos, len, &out);
		}
		pos += len;
		nbd_buf_free(&out);
		if (rc == NBD_OPT_CLOSE || rc < 0)
			return;
		if (rc == NBD_OPT_STARTTLS_ACK)
			nbd_neg_tls_started(&n);
		if (rc == NBD_OPT_DONE_GO || rc == NBD_OPT_DONE_EXPORT)
			break;
	}
	if (!n.chosen)
		return;
	while (size - pos >= NBD_REQUEST_SIZE) {
		struct nbd_request r;
		if (nbd_request_decode(data + pos, &r) < 0)
			return;
		pos += NBD_REQUEST_SIZE;
		(void)nbd_request_validate(&n, n.chosen, &r);
		if (r.type == NBD_CMD_WRITE)
			pos += size - pos < r.length ? size - pos : r.length;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run(data, size, NBD_TLS_OFF);
	run(data, size, NBD_TLS_ON);
	run(data, size, NBD_TLS_REQUIRE);
	return 0;
}
