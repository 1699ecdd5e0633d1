/* SPDX-License-Identifier: MIT */
#include "outq.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define IOV_BATCH 64

void outq_push(struct outq *q, struct outq_item *it)
{
	it->next = NULL;
	it->sent_bytes = 0;
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	q->bytes += it->hdr_len + it->data_len;
	q->items++;
}

static void outq_pop(struct outq *q, int err)
{
	struct outq_item *it = q->head;
	q->head = it->next;
	if (!q->head)
		q->tail = NULL;
	q->bytes -= it->hdr_len + it->data_len - it->sent_bytes;
	q->items--;
	if (it->sent)
		it->sent(it, err);
}

int outq_iov(const struct outq *q, struct iovec *iov, int max)
{
	int n = 0;
	for (const struct outq_item *it = q->head; it && n < max - 1; it = it->next) {
		size_t s = it->sent_bytes;
		if (s < it->hdr_len) {
			iov[n].iov_base = (void *)(it->hdr + s);
			iov[n++].iov_len = it->hdr_len - s;
			s = 0;
		} else {
			s -= it->hdr_len;
		}
		if (it->data_len > s) {
			iov[n].iov_base = (void *)(it->data + s);
			iov[n++].iov_len = it->data_len - s;
		}
	}
	return n;
}

void outq_advance(struct outq *q, size_t n)
{
	while (n && q->head) {
		struct outq_item *it = q->head;
		size_t total = it->hdr_len + it->data_len;
		size_t take = total - it->sent_bytes < n ? total - it->sent_bytes : n;
		it->sent_bytes += take;
		q->bytes -= take;
		n -= take;
		if (it->sent_bytes == total) {
			q->head = it->next;
			if (!q->head)
				q->tail = NULL;
			q->items--;
			if (it->sent)
				it->sent(it, 0);
		}
	}
}

int outq_flush(struct outq *q, int fd)
{
	while (q->head) {
		struct iovec iov[IOV_BATCH];
		struct msghdr mh = {.msg_iov = iov,
		                    .msg_iovlen = (size_t)outq_iov(q, iov, IOV_BATCH)};
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 1;
			if (errno == EINTR)
				continue;
			return -1;
		}
		outq_advance(q, (size_t)w);
	}
	return 0;
}

void outq_drop(struct outq *q, int err)
{
	while (q->head)
		outq_pop(q, err);
	q->bytes = 0;
}

void outq_free_item(struct outq_item *it, int err)
{
	(void)err;
	free(it);
}

void outq_free_item_and_data(struct outq_item *it, int err)
{
	(void)err;
	free((void *)it->data);
	free(it);
}
