/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: request headers against exports and negotiated states chosen by the input;
 * checks invariants of the validator (an accepted request is always inside the export).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "nbd/nbd_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 12)
		return 0;
	struct nbd_export e = {
	    .name = "x",
	    .size = be_get64(data) >> (data[8] & 63),
	    .min_block = 1u << (data[9] % 17),
	    .pref_block = 4096,
	    .max_payload = 32u << 20,
	    .read_only = data[10] & 1,
	};
	struct nbd_neg n = {.structured = data[11] & 1, .meta_alloc = (data[11] >> 1) & 1};
	for (size_t pos = 12; size - pos >= NBD_REQUEST_SIZE; pos += NBD_REQUEST_SIZE) {
		struct nbd_request r;
		if (nbd_request_decode(data + pos, &r) < 0)
			continue;
		uint32_t err = nbd_request_validate(&n, &e, &r);
		if (err == 0 && r.type != NBD_CMD_DISC && r.type != NBD_CMD_FLUSH) {
			/* Accepted: must be in bounds and, for payload commands, within limits. */
			if (r.offset > e.size || e.size - r.offset < r.length || r.length == 0)
				abort();
			if ((r.type == NBD_CMD_READ || r.type == NBD_CMD_WRITE) &&
			    r.length > e.max_payload)
				abort();
		}
		(void)nbd_errno_to_nbd((int)(r.cookie & 0xff));
	}
	return 0;
}
