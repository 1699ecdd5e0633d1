/* SPDX-License-Identifier: MIT */
/*
 * The device-free half of the RDMA transport (rdma.c): receive credits, the message header, and
 * the byte stream of frames cut into fixed-size messages and joined again. Pure, so the unit tests
 * run it without a device.
 *
 * Each side posts RDMA_RECV_DEPTH receives of RDMA_MSG_SIZE bytes. A SEND consumes one, so a
 * sender holds one credit per receive the peer has posted and sends only while it has one: an
 * RC queue pair never sees a receiver-not-ready. Every message carries the credits its sender
 * gives back (receives it reposted since its last message); a side with nothing to send returns
 * them in a header-only message once half the depth is owed. The last credit is kept for such a
 * message, so two sides that both ran out of data credits can still unblock each other.
 */
#ifndef HAK_RDMA_FLOW_H
#define HAK_RDMA_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/outq.h"
#include "wire.h"

#define RDMA_MSG_SIZE   (64u * 1024u) /* one registered buffer, header included */
#define RDMA_MSG_HDR    8u            /* u16 magic, u16 credits returned, u32 data length */
#define RDMA_RECV_DEPTH 32u
#define RDMA_SEND_DEPTH 16u

struct rdma_flow {
	uint32_t depth;     /* receives each side keeps posted */
	uint32_t credits;   /* messages we may send: receives the peer has posted for us */
	uint32_t to_return; /* receives we reposted and have not told the peer about */
};

void rdma_flow_init(struct rdma_flow *f, uint32_t depth);
/* A message with data may go (one credit stays for a credit-only message). */
bool rdma_flow_can_send_data(const struct rdma_flow *f);
/* Enough is owed back that a header-only message should carry it, and it can go. */
bool rdma_flow_wants_credit_msg(const struct rdma_flow *f);
/* One message leaves: uses a credit, returns the credits to put in its header. */
uint32_t rdma_flow_take(struct rdma_flow *f);
/* The peer gave n credits back: 0, or -1 with errno=EPROTO when that is more than it could owe. */
int rdma_flow_granted(struct rdma_flow *f, uint32_t n);
/* A receive buffer is free again and reposted. */
void rdma_flow_reposted(struct rdma_flow *f);

void rdma_msg_encode(uint8_t out[RDMA_MSG_HDR], uint32_t credits, uint32_t len);
/* A received message of got bytes: its credits and data length; -1 with a sentence in why when it
 * is shorter than the header, has the wrong magic, or its length disagrees with got. */
int rdma_msg_decode(const uint8_t *in, size_t got, uint32_t *credits, uint32_t *len, char *why,
                    size_t whylen);

/* Copy up to cap bytes of q's frames into buf, as one stretch of the byte stream; items copied
 * whole leave q (their sent() runs, err 0). Returns the bytes copied. */
size_t rdma_pack(struct outq *q, uint8_t *buf, size_t cap);

/* Frames joined from stretches of the byte stream. */
struct rdma_rx {
	uint8_t hbuf[WIRE_HDR_SIZE];
	uint32_t hgot;
	bool have_hdr;
	struct wire_hdr hdr;
	uint8_t *payload;
	uint32_t got;
};
/*
 * Take bytes from in (len of them) until a frame is complete or they run out; returns how many
 * were taken. When *hdr_out is filled (return through *done = true) the frame's payload (NULL for
 * none, else buf_put(payload, hdr->len) by the receiver) is the caller's. -1 with a sentence in
 * why: a bad header, a payload over max_payload (0: the wire's limit), out of memory.
 */
long rdma_rx_feed(struct rdma_rx *rx, const uint8_t *in, size_t len, uint32_t max_payload,
                  bool *done, struct wire_hdr *hdr_out, uint8_t **payload_out, char *why,
                  size_t whylen);
/* Release a frame half received. */
void rdma_rx_reset(struct rdma_rx *rx);

#endif
