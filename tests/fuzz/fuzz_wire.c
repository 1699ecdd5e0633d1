/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: a replication byte stream as a hostile peer would send it, through the
 * header, HELLO, I/O-range and hash-run validators. Accepted ranges must lie inside the volume.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "transport/hashrun.h"
#include "transport/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint64_t vol = 1ull << 30;
	char err[256];
	size_t pos = 0;
	while (size - pos >= WIRE_HDR_SIZE) {
		struct wire_hdr h;
		if (wire_hdr_decode(data + pos, &h, err, sizeof(err)) < 0)
			return 0;
		pos += WIRE_HDR_SIZE;
		if (size - pos < h.len)
			return 0;
		const uint8_t *p = data + pos;
		pos += h.len;
		if (h.type == WIRE_HELLO) {
			struct wire_hello hello;
			(void)wire_hello_decode(p, h.len, &hello, err, sizeof(err));
		} else if (h.type == WIRE_VERIFY_REQ || h.type == WIRE_VERIFY_REPLY ||
		           h.type == WIRE_CSUM_REQ || h.type == WIRE_RS_REQUEST) {
			struct hashrun run;
			const uint8_t *hashes = NULL;
			const uint32_t bs = 4096, max = 256 * 1024;
			if (hashrun_decode(&h, p, vol, bs, max, &run, &hashes, err, sizeof(err)) ==
			        0 &&
			    (run.off > vol || vol - run.off < run.len || run.len == 0 ||
			     run.len > max || run.off % bs || hash_alg_size(run.alg) == 0 ||
			     (hashes && hashes + (size_t)hashrun_blocks(run.len, bs) *
			                             hash_alg_size(run.alg) !=
			                    p + h.len)))
				abort();
		} else if (h.type == WIRE_DATA || h.type == WIRE_TRIM || h.type == WIRE_ZERO ||
		           h.type == WIRE_RS_DATA || h.type == WIRE_RS_IN_SYNC ||
		           h.type == WIRE_READ_REQ) {
			struct wire_io io;
			if (wire_io_decode(&h, p, vol, 512, &io, err, sizeof(err)) == 0 &&
			    (io.off > vol || vol - io.off < io.len || io.len == 0 ||
			     (io.off | io.len) % 512 ||
			     (h.type == WIRE_READ_REQ && io.len > WIRE_READ_MAX)))
				abort();
		} else if (h.type == WIRE_READ_REPLY) {
			/* The length asked is the receiver's: take it from the data itself. */
			uint64_t id;
			uint32_t status, want = h.len > WIRE_RREPLY_SIZE ? p[0] * 512u : 0;
			if (wire_rreply_decode(&h, p, want, &id, &status, err, sizeof(err)) == 0 &&
			    h.len != WIRE_RREPLY_SIZE + (status == 0 ? want : 0))
				abort();
		}
	}
	return 0;
}
