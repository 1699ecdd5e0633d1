/* SPDX-License-Identifier: MIT */
/*
 * Encoding and validation of replication frames (include/hak/wire.h). Pure functions: every field
 * the peer sends is checked here before the replication code looks at it, so the same checks run
 * under the fuzzer.
 */
#ifndef HAK_WIRE_CODEC_H
#define HAK_WIRE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hak/wire.h>

struct wire_hdr {
	uint16_t type;
	uint16_t flags;
	uint32_t len;
};

struct wire_hello {
	uint32_t version;
	uint8_t stream;
	uint8_t role;
	uint8_t disk;
	uint8_t mode;
	char node[WIRE_NAME_MAX + 1];
	char volume[WIRE_NAME_MAX + 1];
	uint8_t uuid[16];
	uint64_t size;
	uint32_t block_size;
	uint32_t gen_flags;
	uint64_t gen[4]; /* current, bitmap, history[0], history[1] */
	uint64_t bits_set;
	uint8_t sb_policy;
	uint32_t sb_victim; /* crc32c of the discard-node name, 0: none */
	uint64_t promoted_ms;
};

struct wire_io {
	uint64_t id;
	uint64_t off;
	uint32_t len;
};

void wire_hdr_encode(uint8_t out[WIRE_HDR_SIZE], uint16_t type, uint16_t flags, uint32_t len);
/* 0, or -1 with a sentence in err: bad magic, unknown type, unknown flags, payload size wrong for
 * the type. */
int wire_hdr_decode(const uint8_t in[WIRE_HDR_SIZE], struct wire_hdr *h, char *err, size_t errlen);

void wire_hello_encode(uint8_t out[WIRE_HELLO_SIZE], const struct wire_hello *h);
int wire_hello_decode(const uint8_t *in, size_t len, struct wire_hello *h, char *err,
                      size_t errlen);

void wire_io_encode(uint8_t out[WIRE_IO_SIZE], const struct wire_io *io);
/*
 * Decode the fixed part of DATA/TRIM/ZERO/RS_DATA and check it against the frame and the volume:
 * the payload length matches, the range is inside size, aligned to align (power of two).
 */
int wire_io_decode(const struct wire_hdr *h, const uint8_t *in, uint64_t size, uint32_t align,
                   struct wire_io *io, char *err, size_t errlen);

/* Where the data starts in a DATA / RS_DATA payload: after the fixed part and the checksum. */
uint32_t wire_io_data_off(const struct wire_hdr *h);
/* Where the payload of a received frame should be page-aligned: the data of DATA and RS_DATA,
 * which the secondary writes straight from the receive buffer (O_DIRECT needs it aligned);
 * 0 for every other frame. */
uint32_t wire_payload_align(const struct wire_hdr *h);
/*
 * READ_REPLY: u64 id, u32 status (0 or an errno of the peer's read), then want_len bytes of data
 * when status is 0. decode checks the frame length against the read it answers (want_len, which
 * the caller looked up by id: an unknown id is the caller's error to report).
 */
void wire_rreply_encode(uint8_t out[WIRE_RREPLY_SIZE], uint64_t id, uint32_t status);
int wire_rreply_decode(const struct wire_hdr *h, const uint8_t *in, uint32_t want_len, uint64_t *id,
                       uint32_t *status, char *err, size_t errlen);

void wire_put_id(uint8_t *out, uint64_t id);
uint64_t wire_get_id(const uint8_t *in);

const char *wire_type_name(uint16_t type);

#endif
