/* SPDX-License-Identifier: MIT */
#include "wire.h"

#include <stdio.h>
#include <string.h>

#include "lib/endian.h"

/* Payload sizes each frame type may have: [min, max]. */
static const struct {
	const char *name;
	uint32_t min, max;
	uint16_t flags;
} types[WIRE_TYPE_MAX + 1] = {
    [WIRE_HELLO] = {"HELLO", WIRE_HELLO_SIZE, WIRE_HELLO_SIZE, WIRE_F_SWITCH},
    [WIRE_DATA] = {"DATA", WIRE_IO_SIZE + 1, WIRE_MAX_PAYLOAD,
                   WIRE_F_FUA | WIRE_F_RECV_ACK | WIRE_F_CRC},
    [WIRE_TRIM] = {"TRIM", WIRE_IO_SIZE, WIRE_IO_SIZE, WIRE_F_FUA | WIRE_F_RECV_ACK},
    [WIRE_ZERO] = {"ZERO", WIRE_IO_SIZE, WIRE_IO_SIZE,
                   WIRE_F_FUA | WIRE_F_RECV_ACK | WIRE_F_NO_HOLE},
    [WIRE_BARRIER] = {"BARRIER", WIRE_ID_SIZE, WIRE_ID_SIZE, 0},
    [WIRE_RECV_ACK] = {"RECV_ACK", WIRE_ID_SIZE, WIRE_ID_SIZE, 0},
    [WIRE_WRITE_ACK] = {"WRITE_ACK", WIRE_ACK_SIZE, WIRE_ACK_SIZE, 0},
    [WIRE_BARRIER_ACK] = {"BARRIER_ACK", WIRE_ID_SIZE, WIRE_ID_SIZE, 0},
    [WIRE_PING] = {"PING", WIRE_ID_SIZE, WIRE_ID_SIZE, 0},
    [WIRE_PONG] = {"PONG", WIRE_ID_SIZE, WIRE_ID_SIZE, 0},
    [WIRE_BITMAP] = {"BITMAP", 16, 8 + 8 * WIRE_BITMAP_WORDS, 0},
    [WIRE_BITMAP_DONE] = {"BITMAP_DONE", WIRE_ID_SIZE, WIRE_ID_SIZE, 0},
    [WIRE_RS_DATA] = {"RS_DATA", WIRE_IO_SIZE, WIRE_MAX_PAYLOAD, WIRE_F_HOLE | WIRE_F_CRC},
    [WIRE_RS_ACK] = {"RS_ACK", WIRE_ACK_SIZE, WIRE_ACK_SIZE, 0},
    [WIRE_RS_REQUEST] = {"RS_REQUEST", 24 + 4, 24 + 64 * 32, 0},
    [WIRE_STATE] = {"STATE", WIRE_STATE_SIZE, WIRE_STATE_SIZE, 0},
    [WIRE_RS_DONE] = {"RS_DONE", WIRE_ID_SIZE, WIRE_ID_SIZE, 0},
    /* Hash runs (hashrun.h): a 24-byte header, replies up to 64 hashes of 32 bytes. */
    [WIRE_VERIFY_REQ] = {"VERIFY_REQ", 24, 24, 0},
    [WIRE_VERIFY_REPLY] = {"VERIFY_REPLY", 24 + 4, 24 + 64 * 32, 0},
    [WIRE_CSUM_REQ] = {"CSUM_REQ", 24, 24, 0},
    [WIRE_RS_IN_SYNC] = {"RS_IN_SYNC", WIRE_IO_SIZE, WIRE_IO_SIZE, 0},
    [WIRE_READ_REQ] = {"READ_REQ", WIRE_IO_SIZE, WIRE_IO_SIZE, 0},
    [WIRE_READ_REPLY] = {"READ_REPLY", WIRE_RREPLY_SIZE, WIRE_RREPLY_SIZE + WIRE_READ_MAX, 0},
    [WIRE_RS_PAUSE] = {"RS_PAUSE", WIRE_ID_SIZE, WIRE_ID_SIZE, 0},
    [WIRE_AUTH_CHALLENGE] = {"AUTH_CHALLENGE", WIRE_AUTH_CHAL_SIZE, WIRE_AUTH_CHAL_SIZE, 0},
    [WIRE_AUTH_RESPONSE] = {"AUTH_RESPONSE", WIRE_AUTH_MAC_SIZE, WIRE_AUTH_MAC_SIZE, 0},
    [WIRE_SWITCH] = {"SWITCH", WIRE_ID_SIZE, WIRE_ID_SIZE, 0},
};

const char *wire_type_name(uint16_t type)
{
	return type >= 1 && type <= WIRE_TYPE_MAX && types[type].name ? types[type].name
	                                                              : "UNKNOWN";
}

void wire_hdr_encode(uint8_t out[WIRE_HDR_SIZE], uint16_t type, uint16_t flags, uint32_t len)
{
	be_put32(out, WIRE_MAGIC);
	be_put16(out + 4, type);
	be_put16(out + 6, flags);
	be_put32(out + 8, len);
}

int wire_hdr_decode(const uint8_t in[WIRE_HDR_SIZE], struct wire_hdr *h, char *err, size_t errlen)
{
	uint32_t magic = be_get32(in);
	h->type = be_get16(in + 4);
	h->flags = be_get16(in + 6);
	h->len = be_get32(in + 8);
	if (magic != WIRE_MAGIC) {
		snprintf(err, errlen, "bad frame magic 0x%08x (expected 0x%08x)", magic,
		         WIRE_MAGIC);
		return -1;
	}
	if (h->type < 1 || h->type > WIRE_TYPE_MAX || !types[h->type].name) {
		snprintf(err, errlen, "unknown frame type %u", h->type);
		return -1;
	}
	if (h->flags & ~types[h->type].flags) {
		snprintf(err, errlen, "%s frame with unknown flags 0x%x", types[h->type].name,
		         h->flags);
		return -1;
	}
	if (h->len < types[h->type].min || h->len > types[h->type].max) {
		snprintf(err, errlen, "%s frame payload of %u bytes (allowed %u..%u)",
		         types[h->type].name, h->len, types[h->type].min, types[h->type].max);
		return -1;
	}
	if (h->type == WIRE_BITMAP && (h->len - 8) % 8 != 0) {
		snprintf(err, errlen, "BITMAP frame payload of %u bytes is not whole words",
		         h->len);
		return -1;
	}
	return 0;
}

static void put_name(uint8_t *out, const char *s)
{
	size_t n = strnlen(s, WIRE_NAME_MAX);
	memset(out, 0, WIRE_NAME_MAX);
	memcpy(out, s, n);
}

void wire_hello_encode(uint8_t out[WIRE_HELLO_SIZE], const struct wire_hello *h)
{
	uint8_t *p = out;
	be_put32(p, h->version);
	p[4] = h->stream;
	p[5] = h->role;
	p[6] = h->disk;
	p[7] = h->mode;
	p += 8;
	put_name(p, h->node);
	p += WIRE_NAME_MAX;
	put_name(p, h->volume);
	p += WIRE_NAME_MAX;
	memcpy(p, h->uuid, 16);
	p += 16;
	be_put64(p, h->size);
	be_put32(p + 8, h->block_size);
	be_put32(p + 12, h->gen_flags);
	p += 16;
	for (int i = 0; i < 4; i++, p += 8)
		be_put64(p, h->gen[i]);
	be_put64(p, h->bits_set);
	p += 8;
	p[0] = h->sb_policy;
	p[1] = p[2] = p[3] = 0;
	be_put32(p + 4, h->sb_victim);
	be_put64(p + 8, h->promoted_ms);
}

/* A name on the wire: printable, NUL-padded, not empty. */
static int get_name(const uint8_t *in, char *out, const char *what, char *err, size_t errlen)
{
	size_t n = 0;
	while (n < WIRE_NAME_MAX && in[n])
		n++;
	for (size_t i = 0; i < WIRE_NAME_MAX; i++) {
		bool ok = i < n ? (in[i] > 0x20 && in[i] < 0x7f) : in[i] == 0;
		if (!ok) {
			snprintf(err, errlen, "HELLO %s field has a bad byte 0x%02x at %zu", what,
			         in[i], i);
			return -1;
		}
	}
	if (n == 0) {
		snprintf(err, errlen, "HELLO %s field is empty", what);
		return -1;
	}
	memcpy(out, in, n);
	out[n] = '\0';
	return 0;
}

int wire_hello_decode(const uint8_t *in, size_t len, struct wire_hello *h, char *err, size_t errlen)
{
	const uint8_t *p = in;
	if (len != WIRE_HELLO_SIZE) {
		snprintf(err, errlen, "HELLO of %zu bytes (expected %u)", len, WIRE_HELLO_SIZE);
		return -1;
	}
	memset(h, 0, sizeof(*h));
	h->version = be_get32(p);
	h->stream = p[4];
	h->role = p[5];
	h->disk = p[6];
	h->mode = p[7];
	p += 8;
	if (h->version != WIRE_VERSION) {
		snprintf(err, errlen, "peer speaks protocol version %u, this node speaks %u",
		         h->version, WIRE_VERSION);
		return -1;
	}
	if (h->stream != WIRE_STREAM_DATA && h->stream != WIRE_STREAM_META) {
		snprintf(err, errlen, "HELLO names unknown stream %u", h->stream);
		return -1;
	}
	if (h->role > WIRE_ROLE_PRIMARY || h->disk > WIRE_DISK_FAILED || h->mode > 2) {
		snprintf(err, errlen, "HELLO carries role %u, disk %u, mode %u out of range",
		         h->role, h->disk, h->mode);
		return -1;
	}
	if (get_name(p, h->node, "node", err, errlen) < 0 ||
	    get_name(p + WIRE_NAME_MAX, h->volume, "volume", err, errlen) < 0)
		return -1;
	p += 2 * WIRE_NAME_MAX;
	memcpy(h->uuid, p, 16);
	p += 16;
	h->size = be_get64(p);
	h->block_size = be_get32(p + 8);
	h->gen_flags = be_get32(p + 12);
	p += 16;
	for (int i = 0; i < 4; i++, p += 8)
		h->gen[i] = be_get64(p);
	h->bits_set = be_get64(p);
	p += 8;
	h->sb_policy = p[0];
	h->sb_victim = be_get32(p + 4);
	h->promoted_ms = be_get64(p + 8);
	if (h->sb_policy > WIRE_SB_POLICY_MAX || p[1] || p[2] || p[3]) {
		snprintf(err, errlen,
		         "HELLO carries after-split-brain policy %u (at most %u) or non-zero "
		         "reserved bytes",
		         h->sb_policy, WIRE_SB_POLICY_MAX);
		return -1;
	}
	if (h->block_size < 4096 || h->block_size > (1u << 20) ||
	    (h->block_size & (h->block_size - 1))) {
		snprintf(err, errlen, "HELLO bitmap block size %u is not a power of two in 4K..1M",
		         h->block_size);
		return -1;
	}
	return 0;
}

void wire_io_encode(uint8_t out[WIRE_IO_SIZE], const struct wire_io *io)
{
	be_put64(out, io->id);
	be_put64(out + 8, io->off);
	be_put32(out + 16, io->len);
}

int wire_io_decode(const struct wire_hdr *h, const uint8_t *in, uint64_t size, uint32_t align,
                   struct wire_io *io, char *err, size_t errlen)
{
	io->id = be_get64(in);
	io->off = be_get64(in + 8);
	io->len = be_get32(in + 16);
	bool payload =
	    h->type == WIRE_DATA || (h->type == WIRE_RS_DATA && !(h->flags & WIRE_F_HOLE));
	if ((h->flags & WIRE_F_CRC) && !payload) {
		snprintf(err, errlen, "%s frame without data carries a checksum flag",
		         wire_type_name(h->type));
		return -1;
	}
	if (h->type == WIRE_READ_REQ && io->len > WIRE_READ_MAX) {
		snprintf(err, errlen, "READ_REQ of %u bytes exceeds the limit of %u", io->len,
		         WIRE_READ_MAX);
		return -1;
	}
	uint64_t want = wire_io_data_off(h) + (payload ? (uint64_t)io->len : 0);
	if (h->len != want) {
		snprintf(err, errlen, "%s frame of %u bytes for a %u-byte range (expected %llu)",
		         wire_type_name(h->type), h->len, io->len, (unsigned long long)want);
		return -1;
	}
	if (io->len == 0 || io->off > size || size - io->off < io->len) {
		snprintf(err, errlen, "%s range %llu+%u is outside the volume (%llu bytes)",
		         wire_type_name(h->type), (unsigned long long)io->off, io->len,
		         (unsigned long long)size);
		return -1;
	}
	if (align > 1 && ((io->off | io->len) & (align - 1))) {
		snprintf(err, errlen, "%s range %llu+%u is not aligned to %u bytes",
		         wire_type_name(h->type), (unsigned long long)io->off, io->len, align);
		return -1;
	}
	return 0;
}

uint32_t wire_io_data_off(const struct wire_hdr *h)
{
	return WIRE_IO_SIZE + ((h->flags & WIRE_F_CRC) ? WIRE_CRC_SIZE : 0);
}

uint32_t wire_payload_align(const struct wire_hdr *h)
{
	if (h->type != WIRE_DATA && h->type != WIRE_RS_DATA)
		return 0;
	return h->len > wire_io_data_off(h) ? wire_io_data_off(h) : 0;
}

void wire_put_id(uint8_t *out, uint64_t id)
{
	be_put64(out, id);
}

uint64_t wire_get_id(const uint8_t *in)
{
	return be_get64(in);
}

void wire_rreply_encode(uint8_t out[WIRE_RREPLY_SIZE], uint64_t id, uint32_t status)
{
	be_put64(out, id);
	be_put32(out + 8, status);
}

int wire_rreply_decode(const struct wire_hdr *h, const uint8_t *in, uint32_t want_len, uint64_t *id,
                       uint32_t *status, char *err, size_t errlen)
{
	*id = be_get64(in);
	*status = be_get32(in + 8);
	uint64_t want = WIRE_RREPLY_SIZE + (*status == 0 ? (uint64_t)want_len : 0);
	if (h->len != want) {
		snprintf(err, errlen,
		         "READ_REPLY %llu of %u bytes with status %u for a %u-byte read "
		         "(expected %llu)",
		         (unsigned long long)*id, h->len, *status, want_len,
		         (unsigned long long)want);
		return -1;
	}
	return 0;
}
