/* SPDX-License-Identifier: MIT */
/* Unit tests for the replication frame codec: every rejection names what is wrong. */
#include <check.h>
#include <string.h>

#include "lib/endian.h"
#include "transport/wire.h"

static char err[256];

START_TEST(header_checks)
{
	uint8_t b[WIRE_HDR_SIZE];
	struct wire_hdr h;
	wire_hdr_encode(b, WIRE_DATA, WIRE_F_FUA, WIRE_IO_SIZE + 4096);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), 0);
	ck_assert_uint_eq(h.type, WIRE_DATA);
	ck_assert_uint_eq(h.flags, WIRE_F_FUA);
	ck_assert_uint_eq(h.len, WIRE_IO_SIZE + 4096);

	b[0] ^= 0xff;
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "magic"));

	wire_hdr_encode(b, 99, 0, 8);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "unknown frame type 99"));

	wire_hdr_encode(b, WIRE_PING, WIRE_F_FUA, 8);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "unknown flags"));

	wire_hdr_encode(b, WIRE_DATA, 0, 0x80000000u);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "payload of 2147483648 bytes"));

	wire_hdr_encode(b, WIRE_BITMAP, 0, 8 + 12);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "whole words"));
}
END_TEST

static struct wire_hello good_hello(void)
{
	struct wire_hello h = {.version = WIRE_VERSION,
	                       .stream = WIRE_STREAM_DATA,
	                       .role = 1,
	                       .disk = 0,
	                       .mode = 2,
	                       .size = 1ull << 30,
	                       .block_size = 4096,
	                       .gen_flags = 3,
	                       .gen = {1, 2, 3, 4},
	                       .bits_set = 5,
	                       .sb_policy = 4,
	                       .sb_victim = 0xdeadbeef,
	                       .promoted_ms = 1700000000123ull};
	strcpy(h.node, "alpha");
	strcpy(h.volume, "db");
	memset(h.uuid, 0xab, 16);
	return h;
}

START_TEST(hello_round_trip)
{
	uint8_t b[WIRE_HELLO_SIZE];
	struct wire_hello in = good_hello(), out;
	wire_hello_encode(b, &in);
	ck_assert_int_eq(wire_hello_decode(b, sizeof(b), &out, err, sizeof(err)), 0);
	ck_assert_str_eq(out.node, "alpha");
	ck_assert_str_eq(out.volume, "db");
	ck_assert_int_eq(memcmp(out.uuid, in.uuid, 16), 0);
	ck_assert(out.size == in.size && out.gen[3] == 4 && out.bits_set == 5 && out.mode == 2);
	ck_assert(out.sb_policy == 4 && out.sb_victim == 0xdeadbeef &&
	          out.promoted_ms == 1700000000123ull);

	in.sb_policy = 5;
	wire_hello_encode(b, &in);
	ck_assert_int_eq(wire_hello_decode(b, sizeof(b), &out, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "policy 5"));
	in = good_hello();
	wire_hello_encode(b, &in);
	b[WIRE_HELLO_SIZE - 14] = 1; /* a reserved byte after the policy */
	ck_assert_int_eq(wire_hello_decode(b, sizeof(b), &out, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "reserved"));
	in = good_hello();

	in.version = 99;
	wire_hello_encode(b, &in);
	ck_assert_int_eq(wire_hello_decode(b, sizeof(b), &out, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "version 99"));

	in = good_hello();
	in.block_size = 3000;
	wire_hello_encode(b, &in);
	ck_assert_int_eq(wire_hello_decode(b, sizeof(b), &out, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "block size 3000"));

	in = good_hello();
	wire_hello_encode(b, &in);
	b[8 + 2] = 0x01; /* a control byte inside the node name */
	ck_assert_int_eq(wire_hello_decode(b, sizeof(b), &out, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "node field"));

	ck_assert_int_eq(wire_hello_decode(b, sizeof(b) - 1, &out, err, sizeof(err)), -1);
}
END_TEST

START_TEST(io_ranges)
{
	uint8_t b[WIRE_IO_SIZE];
	struct wire_hdr h = {.type = WIRE_DATA, .flags = 0, .len = WIRE_IO_SIZE + 4096};
	struct wire_io io = {.id = 7, .off = 8192, .len = 4096}, out;
	const uint64_t size = 1 << 20;
	wire_io_encode(b, &io);
	ck_assert_int_eq(wire_io_decode(&h, b, size, 512, &out, err, sizeof(err)), 0);
	ck_assert(out.id == 7 && out.off == 8192 && out.len == 4096);

	h.len = WIRE_IO_SIZE + 100; /* payload does not match the range */
	ck_assert_int_eq(wire_io_decode(&h, b, size, 512, &out, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "expected 4116"));

	h.len = WIRE_IO_SIZE + 4096;
	io.off = size - 2048;
	wire_io_encode(b, &io);
	ck_assert_int_eq(wire_io_decode(&h, b, size, 512, &out, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "outside the volume"));

	io.off = UINT64_MAX - 100;
	wire_io_encode(b, &io);
	ck_assert_int_eq(wire_io_decode(&h, b, size, 512, &out, err, sizeof(err)), -1);

	io.off = 100;
	wire_io_encode(b, &io);
	ck_assert_int_eq(wire_io_decode(&h, b, size, 512, &out, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "not aligned"));

	/* A hole in a resync run carries no payload. */
	struct wire_hdr hh = {.type = WIRE_RS_DATA, .flags = WIRE_F_HOLE, .len = WIRE_IO_SIZE};
	io.off = 0;
	io.len = 65536;
	wire_io_encode(b, &io);
	ck_assert_int_eq(wire_io_decode(&hh, b, size, 512, &out, err, sizeof(err)), 0);
	ck_assert_uint_eq(wire_io_data_off(&hh), WIRE_IO_SIZE);
	ck_assert_uint_eq(wire_payload_align(&hh), 0); /* nothing to write from the buffer */

	/* Where a received payload is aligned: at the data of writes, nowhere for other frames. */
	struct wire_hdr d = {.type = WIRE_DATA, .len = WIRE_IO_SIZE + 4096};
	ck_assert_uint_eq(wire_payload_align(&d), WIRE_IO_SIZE);
	d.flags = WIRE_F_CRC;
	d.len += WIRE_CRC_SIZE;
	ck_assert_uint_eq(wire_payload_align(&d), WIRE_IO_SIZE + WIRE_CRC_SIZE);
	d.type = WIRE_RS_DATA;
	ck_assert_uint_eq(wire_payload_align(&d), WIRE_IO_SIZE + WIRE_CRC_SIZE);
	d.type = WIRE_READ_REPLY;
	ck_assert_uint_eq(wire_payload_align(&d), 0);
}
END_TEST

/* data-integrity: a checksum between the fixed part and the data, only where there is data. */
START_TEST(crc_frames)
{
	uint8_t b[WIRE_IO_SIZE], hb[WIRE_HDR_SIZE];
	struct wire_io io = {.id = 1, .off = 4096, .len = 4096}, out;
	struct wire_hdr h;
	const uint64_t size = 1 << 20;
	wire_io_encode(b, &io);
	static const struct {
		uint16_t type, flags;
		uint32_t len;
		int hdr_ok, io_ok;
	} rows[] = {
	    {WIRE_DATA, WIRE_F_CRC, WIRE_IO_SIZE + WIRE_CRC_SIZE + 4096, 0, 0},
	    {WIRE_DATA, WIRE_F_CRC, WIRE_IO_SIZE + 4096, 0, -1}, /* checksum missing */
	    {WIRE_DATA, 0, WIRE_IO_SIZE + WIRE_CRC_SIZE + 4096, 0, -1},
	    {WIRE_RS_DATA, WIRE_F_CRC, WIRE_IO_SIZE + WIRE_CRC_SIZE + 4096, 0, 0},
	    {WIRE_RS_DATA, WIRE_F_CRC | WIRE_F_HOLE, WIRE_IO_SIZE + WIRE_CRC_SIZE, 0, -1},
	    {WIRE_TRIM, WIRE_F_CRC, WIRE_IO_SIZE, -1, -1},
	    {WIRE_ZERO, WIRE_F_CRC, WIRE_IO_SIZE, -1, -1},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		wire_hdr_encode(hb, rows[i].type, rows[i].flags, rows[i].len);
		int rc = wire_hdr_decode(hb, &h, err, sizeof(err));
		ck_assert_msg(rc == rows[i].hdr_ok, "row %zu: header %d: %s", i, rc, err);
		if (rc < 0)
			continue;
		rc = wire_io_decode(&h, b, size, 512, &out, err, sizeof(err));
		ck_assert_msg(rc == rows[i].io_ok, "row %zu: io %d: %s", i, rc, err);
		if (rc == 0)
			ck_assert_uint_eq(wire_io_data_off(&h), WIRE_IO_SIZE + WIRE_CRC_SIZE);
	}
}
END_TEST

/* transport rdma,tcp moving a connection: only a HELLO may join it (WIRE_F_SWITCH), and the SWITCH
 * marker carries exactly a u64. */
START_TEST(switch_frames)
{
	uint8_t b[WIRE_HDR_SIZE];
	struct wire_hdr h;
	wire_hdr_encode(b, WIRE_HELLO, WIRE_F_SWITCH, WIRE_HELLO_SIZE);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), 0);
	ck_assert_uint_eq(h.flags, WIRE_F_SWITCH);
	wire_hdr_encode(b, WIRE_HELLO, WIRE_F_SWITCH | WIRE_F_FUA, WIRE_HELLO_SIZE);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "HELLO frame with unknown flags"));
	wire_hdr_encode(b, WIRE_DATA, WIRE_F_SWITCH, WIRE_IO_SIZE + 512);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	wire_hdr_encode(b, WIRE_SWITCH, 0, WIRE_ID_SIZE);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), 0);
	ck_assert_str_eq(wire_type_name(WIRE_SWITCH), "SWITCH");
	wire_hdr_encode(b, WIRE_SWITCH, 0, 0);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "SWITCH frame payload of 0 bytes (allowed 8..8)"));
	wire_hdr_encode(b, WIRE_SWITCH, WIRE_F_SWITCH, WIRE_ID_SIZE);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	wire_hdr_encode(b, WIRE_SWITCH + 1, 0, WIRE_ID_SIZE);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "unknown frame type 29"));
}
END_TEST

START_TEST(read_forward_frames)
{
	uint8_t b[WIRE_HDR_SIZE + WIRE_IO_SIZE];
	struct wire_hdr h;
	struct wire_io io = {.id = 9, .off = 1 << 20, .len = 65536}, out;
	uint64_t size = 1ull << 30, id;
	uint32_t status;

	/* Header: READ_REQ has exactly the fixed part; the unassigned types below it are unknown.
	 */
	wire_hdr_encode(b, WIRE_READ_REQ, 0, WIRE_IO_SIZE);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), 0);
	ck_assert_str_eq(wire_type_name(WIRE_READ_REQ), "READ_REQ");
	wire_hdr_encode(b, WIRE_READ_REQ, 0, WIRE_IO_SIZE + 4096);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "READ_REQ frame payload of 4116 bytes"));
	wire_hdr_encode(b, WIRE_READ_REQ, WIRE_F_FUA, WIRE_IO_SIZE);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "unknown flags"));
	/* 18 is unassigned (19 pauses resyncs, 20..23 belong to verify and checksum resync). */
	for (uint16_t t = 18; t < WIRE_RS_PAUSE; t++) {
		wire_hdr_encode(b, t, 0, 0);
		ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
		ck_assert_ptr_nonnull(strstr(err, "unknown frame type"));
		ck_assert_str_eq(wire_type_name(t), "UNKNOWN");
	}
	wire_hdr_encode(b, WIRE_READ_REPLY, 0, WIRE_RREPLY_SIZE + WIRE_READ_MAX + 1);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);
	wire_hdr_encode(b, WIRE_READ_REPLY, 0, WIRE_RREPLY_SIZE - 1);
	ck_assert_int_eq(wire_hdr_decode(b, &h, err, sizeof(err)), -1);

	/* READ_REQ range: inside the volume, aligned, at most WIRE_READ_MAX. */
	h = (struct wire_hdr){.type = WIRE_READ_REQ, .len = WIRE_IO_SIZE};
	wire_io_encode(b, &io);
	ck_assert_int_eq(wire_io_decode(&h, b, size, 512, &out, err, sizeof(err)), 0);
	ck_assert(out.id == 9 && out.off == 1 << 20 && out.len == 65536);
	io.len = WIRE_READ_MAX + 512;
	wire_io_encode(b, &io);
	ck_assert_int_eq(wire_io_decode(&h, b, size, 512, &out, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "exceeds the limit"));
	io.len = 4096;
	io.off = size;
	wire_io_encode(b, &io);
	ck_assert_int_eq(wire_io_decode(&h, b, size, 512, &out, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "outside the volume"));
	io.off = 4095;
	wire_io_encode(b, &io);
	ck_assert_int_eq(wire_io_decode(&h, b, size, 512, &out, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "not aligned"));
	io.off = 0;
	io.len = 0;
	wire_io_encode(b, &io);
	ck_assert_int_eq(wire_io_decode(&h, b, size, 512, &out, err, sizeof(err)), -1);

	/* READ_REPLY: data only with status 0, exactly the length that was asked. */
	uint8_t r[WIRE_RREPLY_SIZE];
	wire_rreply_encode(r, 77, 0);
	h = (struct wire_hdr){.type = WIRE_READ_REPLY, .len = WIRE_RREPLY_SIZE + 4096};
	ck_assert_int_eq(wire_rreply_decode(&h, r, 4096, &id, &status, err, sizeof(err)), 0);
	ck_assert(id == 77 && status == 0);
	ck_assert_int_eq(wire_rreply_decode(&h, r, 8192, &id, &status, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "expected 8204"));
	h.len = WIRE_RREPLY_SIZE;
	ck_assert_int_eq(wire_rreply_decode(&h, r, 4096, &id, &status, err, sizeof(err)), -1);
	wire_rreply_encode(r, 78, 5);
	ck_assert_int_eq(wire_rreply_decode(&h, r, 4096, &id, &status, err, sizeof(err)), 0);
	ck_assert(id == 78 && status == 5);
	h.len = WIRE_RREPLY_SIZE + 4096; /* an error carries no data */
	ck_assert_int_eq(wire_rreply_decode(&h, r, 4096, &id, &status, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "status 5"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wire");
	TCase *t = tcase_create("core");
	tcase_add_test(t, header_checks);
	tcase_add_test(t, hello_round_trip);
	tcase_add_test(t, io_ranges);
	tcase_add_test(t, crc_frames);
	tcase_add_test(t, read_forward_frames);
	tcase_add_test(t, switch_frames);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
