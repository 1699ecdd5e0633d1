/* SPDX-License-Identifier: MIT */
#include "rdma_flow.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "lib/buf.h"
#include "lib/endian.h"

#define RDMA_MSG_MAGIC 0x4852u /* "HR" */

void rdma_flow_init(struct rdma_flow *f, uint32_t depth)
{
	f->depth = depth;
	f->credits = depth; /* the peer posted all its receives before the connection was up */
	f->to_return = 0;
}

bool rdma_flow_can_send_data(const struct rdma_flow *f)
{
	return f->credits >= 2;
}

bool rdma_flow_wants_credit_msg(const struct rdma_flow *f)
{
	return f->credits >= 1 && f->to_return >= f->depth / 2;
}

uint32_t rdma_flow_take(struct rdma_flow *f)
{
	uint32_t n = f->to_return;
	f->credits--;
	f->to_return = 0;
	return n;
}

int rdma_flow_granted(struct rdma_flow *f, uint32_t n)
{
	if (n > f->depth - f->credits) {
		errno = EPROTO;
		return -1;
	}
	f->credits += n;
	return 0;
}

void rdma_flow_reposted(struct rdma_flow *f)
{
	f->to_return++;
}

void rdma_msg_encode(uint8_t out[RDMA_MSG_HDR], uint32_t credits, uint32_t len)
{
	be_put16(out, RDMA_MSG_MAGIC);
	be_put16(out + 2, (uint16_t)credits);
	be_put32(out + 4, len);
}

int rdma_msg_decode(const uint8_t *in, size_t got, uint32_t *credits, uint32_t *len, char *why,
                    size_t whylen)
{
	if (got < RDMA_MSG_HDR) {
		snprintf(why, whylen,
		         "an RDMA message of %zu bytes is shorter than its %u-byte header", got,
		         RDMA_MSG_HDR);
		return -1;
	}
	if (be_get16(in) != RDMA_MSG_MAGIC) {
		snprintf(why, whylen, "an RDMA message has the magic 0x%04x instead of 0x%04x",
		         be_get16(in), RDMA_MSG_MAGIC);
		return -1;
	}
	*credits = be_get16(in + 2);
	*len = be_get32(in + 4);
	if (*len != got - RDMA_MSG_HDR) {
		snprintf(why, whylen, "an RDMA message of %zu bytes announces %u bytes of data",
		         got, *len);
		return -1;
	}
	return 0;
}

size_t rdma_pack(struct outq *q, uint8_t *buf, size_t cap)
{
	struct iovec iov[16];
	size_t done = 0;
	while (done < cap) {
		int n = outq_iov(q, iov, 16);
		if (n == 0)
			break;
		size_t round = 0;
		for (int i = 0; i < n && done + round < cap; i++) {
			size_t k = iov[i].iov_len;
			if (k > cap - done - round)
				k = cap - done - round;
			memcpy(buf + done + round, iov[i].iov_base, k);
			round += k;
		}
		outq_advance(q, round);
		done += round;
	}
	return done;
}

void rdma_rx_reset(struct rdma_rx *rx)
{
	if (rx->payload)
		buf_put(rx->payload, rx->hdr.len);
	memset(rx, 0, sizeof(*rx));
}

/* The header is complete in rx->hbuf: check it and get the payload's buffer. */
static int rx_start(struct rdma_rx *rx, uint32_t max_payload, char *why, size_t whylen)
{
	if (wire_hdr_decode(rx->hbuf, &rx->hdr, why, whylen) < 0)
		return -1;
	if (max_payload && rx->hdr.len > max_payload) {
		snprintf(why, whylen,
		         "a %s frame of %u bytes exceeds the %u bytes this connection may send yet",
		         wire_type_name(rx->hdr.type), rx->hdr.len, max_payload);
		return -1;
	}
	rx->have_hdr = true;
	rx->got = 0;
	rx->payload = rx->hdr.len ? buf_get_at(rx->hdr.len, wire_payload_align(&rx->hdr)) : NULL;
	if (rx->hdr.len && !rx->payload) {
		snprintf(why, whylen, "out of memory for a %u-byte frame payload", rx->hdr.len);
		return -1;
	}
	return 0;
}

long rdma_rx_feed(struct rdma_rx *rx, const uint8_t *in, size_t len, uint32_t max_payload,
                  bool *done, struct wire_hdr *hdr_out, uint8_t **payload_out, char *why,
                  size_t whylen)
{
	size_t pos = 0;
	*done = false;
	if (!rx->have_hdr) {
		size_t k = WIRE_HDR_SIZE - rx->hgot;
		if (k > len)
			k = len;
		memcpy(rx->hbuf + rx->hgot, in, k);
		rx->hgot += (uint32_t)k;
		pos = k;
		if (rx->hgot < WIRE_HDR_SIZE)
			return (long)pos;
		if (rx_start(rx, max_payload, why, whylen) < 0)
			return -1;
	}
	size_t need = rx->hdr.len - rx->got, k = len - pos < need ? len - pos : need;
	if (k) {
		memcpy(rx->payload + rx->got, in + pos, k);
		rx->got += (uint32_t)k;
		pos += k;
	}
	if (rx->got == rx->hdr.len) {
		*hdr_out = rx->hdr;
		*payload_out = rx->payload;
		*done = true;
		memset(rx, 0, sizeof(*rx));
	}
	return (long)pos;
}
