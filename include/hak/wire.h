/* SPDX-License-Identifier: MIT */
/*
 * hak replication wire protocol, version 1.
 *
 * Two TCP streams per volume between the nodes: DATA carries writes, barriers, bitmaps and resync
 * data; META carries acknowledgements and pings, so an ack never waits behind megabytes of data.
 * Every frame is a 12-byte header followed by a payload; all integers are big-endian.
 *
 *   u32 magic 'HAKW' | u16 type | u16 flags | u32 payload length
 *
 * The lower-numbered node (by name) connects; the other accepts. Each stream begins with a HELLO in
 * both directions; a receiver checks every field and drops the connection, with a log line that
 * says what differs, on any mismatch.
 */
#ifndef HAK_WIRE_H
#define HAK_WIRE_H

#include <stdint.h>

#define WIRE_MAGIC       UINT32_C(0x48414b57) /* "HAKW" */
#define WIRE_VERSION     1u
#define WIRE_HDR_SIZE    12u
#define WIRE_MAX_PAYLOAD ((32u << 20) + 64u) /* one write of max-payload plus its fixed part */
#define WIRE_NAME_MAX    64u

enum wire_stream { WIRE_STREAM_DATA = 1, WIRE_STREAM_META = 2 };

enum wire_type {
	WIRE_HELLO = 1,        /* both streams, both directions, first frame */
	WIRE_DATA = 2,         /* DATA: an application write (payload follows the fixed part) */
	WIRE_TRIM = 3,         /* DATA: punch a range; no payload */
	WIRE_ZERO = 4,         /* DATA: zero a range; no payload */
	WIRE_BARRIER = 5,      /* DATA: all earlier writes stable, then BARRIER_ACK */
	WIRE_RECV_ACK = 6,     /* META: write received (memsync) */
	WIRE_WRITE_ACK = 7,    /* META: write on the peer's disk (sync); also sent in every mode */
	WIRE_BARRIER_ACK = 8,  /* META */
	WIRE_PING = 9,         /* META */
	WIRE_PONG = 10,        /* META */
	WIRE_BITMAP = 11,      /* DATA: a run of bitmap words, OR-ed into the receiver's bitmap */
	WIRE_BITMAP_DONE = 12, /* DATA: the sender's bitmap is complete */
	WIRE_RS_DATA = 13, /* DATA: resync block run from the source (payload, or none if hole) */
	WIRE_RS_ACK = 14,  /* META: the target wrote a resync run */
	/* DATA: checksum resync, the target's answer to CSUM_REQ: its block hashes of a dirty run;
	 * the source sends RS_DATA for the blocks that differ and RS_IN_SYNC for the rest. */
	WIRE_RS_REQUEST = 15,
	WIRE_STATE = 16,    /* META: role / disk state change */
	WIRE_RS_DONE = 17,  /* DATA: the source has sent everything */
	WIRE_RS_PAUSE = 19, /* META: byte 0 is 1: the sender paused resyncs (0: resumed) */
	WIRE_VERIFY_REQ =
	    20, /* DATA: online verify, hash your copy of this run (daemon/verify.c) */
	WIRE_VERIFY_REPLY = 21, /* DATA: the block hashes of a VERIFY_REQ run */
	WIRE_CSUM_REQ = 22,     /* DATA: checksum resync, the source asks the target for hashes */
	WIRE_RS_IN_SYNC = 23, /* DATA: checksum resync, these blocks are equal: clear their bits */
	WIRE_READ_REQ = 24, /* DATA: a diskless primary reads a range from the peer (no payload) */
	WIRE_READ_REPLY = 25, /* DATA: u64 id, u32 status, then the data when status is 0 */
	/* Peer authentication, before HELLO (daemon/transport/peerauth.h): */
	WIRE_AUTH_CHALLENGE = 26, /* u8 version, u8 role (0 connector, 1 acceptor), u16 0, nonce */
	WIRE_AUTH_RESPONSE = 27,  /* HMAC-SHA-256 over both nonces, the names and the volume */
	/* Both streams: the sender's last frame on this stream of a connection moving onto new
	 * streams (HELLO with WIRE_F_SWITCH); u64 the sender's count of such moves. */
	WIRE_SWITCH = 28,
	WIRE_TYPE_MAX = 28,
};

/* Flags of DATA / TRIM / ZERO / RS_DATA. */
#define WIRE_F_FUA      (1u << 0)
#define WIRE_F_RECV_ACK (1u << 1) /* reply RECV_ACK on receipt */
#define WIRE_F_NO_HOLE  (1u << 2) /* ZERO: keep allocated */
#define WIRE_F_HOLE     (1u << 3) /* RS_DATA: the range is a hole at the source, no payload */
/* DATA, RS_DATA with payload: a u32 crc32c of the payload follows the fixed part (data-integrity)
 */
#define WIRE_F_CRC   (1u << 4)
#define WIRE_F_KNOWN (WIRE_F_FUA | WIRE_F_RECV_ACK | WIRE_F_NO_HOLE | WIRE_F_HOLE | WIRE_F_CRC)
/* HELLO: this stream joins the connection already up (transport rdma,tcp moving it from TCP onto
 * RDMA in place), it does not start one; the generation fields are not looked at. */
#define WIRE_F_SWITCH (1u << 5)

/* Roles and disk states as they travel. */
enum wire_role { WIRE_ROLE_SECONDARY = 0, WIRE_ROLE_PRIMARY = 1 };
enum wire_disk {
	WIRE_DISK_UPTODATE = 0,
	WIRE_DISK_OUTDATED = 1,
	WIRE_DISK_INCONSISTENT = 2,
	WIRE_DISK_DISKLESS = 3,
	WIRE_DISK_FAILED = 4,
};

/*
 * HELLO payload, fixed size. After bits_set: u8 after-split-brain policy (0..WIRE_SB_POLICY_MAX),
 * u8[3] zero, u32 crc32c of the discard-node name (0: none), u64 wall-clock ms of the sender's last
 * promotion (0: unknown). Both nodes must agree on the policy to apply it.
 */
#define WIRE_SB_POLICY_MAX 4u
#define WIRE_HELLO_SIZE                                                                            \
	(4 + 1 + 1 + 1 + 1 + WIRE_NAME_MAX + WIRE_NAME_MAX + 16 + 8 + 4 + 4 + 8 * 4 + 8 + 4 + 4 + 8)
/* Fixed part of DATA / TRIM / ZERO / RS_DATA: u64 id, u64 offset, u32 length. */
#define WIRE_IO_SIZE 20u
/* With WIRE_F_CRC, a u32 crc32c of the data sits between the fixed part and the data. */
#define WIRE_CRC_SIZE 4u
/* BARRIER / BARRIER_ACK / RECV_ACK / PING / PONG / RS_DONE: u64 id. WRITE_ACK, RS_ACK: u64 id, u32
 * status. */
#define WIRE_ID_SIZE  8u
#define WIRE_ACK_SIZE 12u
/* BITMAP: u64 first word index, then words (u64 each), at most WIRE_BITMAP_WORDS per frame. */
#define WIRE_BITMAP_WORDS 8192u
/* VERIFY_REQ / CSUM_REQ: u64 id, u64 offset, u32 length, u8 hash alg, 3 zero bytes;
 * VERIFY_REPLY / RS_REQUEST: the same, then one hash per block (daemon/hashrun.h).
 * RS_IN_SYNC: the fixed part of RS_DATA without payload. */
/* READ_REPLY: fixed part; READ_REQ asks for at most WIRE_READ_MAX bytes. */
#define WIRE_RREPLY_SIZE 12u
#define WIRE_READ_MAX    (1u << 20)
/* STATE: u8 role, u8 disk, u16 reserved. */
#define WIRE_STATE_SIZE 4u
/* AUTH_CHALLENGE: 4 bytes then the nonce; AUTH_RESPONSE: the MAC. */
#define WIRE_AUTH_VERSION   1u
#define WIRE_AUTH_NONCE     32u
#define WIRE_AUTH_CHAL_SIZE (4u + WIRE_AUTH_NONCE)
#define WIRE_AUTH_MAC_SIZE  32u

#endif
