/* SPDX-License-Identifier: MIT */
#include "transport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peerauth.h"
#include "tcp.h"
#include "tls.h"
#ifdef HAK_HAVE_RDMA
#include "rdma.h"
#endif

/* The transports this build has, by name: rdma only where rdma-core was found (the Makefile). */
static const struct transport_ops *const transports[] = {
    &transport_tcp,
    &transport_tls,
#ifdef HAK_HAVE_RDMA
    &transport_rdma,
#endif
};

const struct transport_ops *transport_find(const char *name)
{
	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
		if (strcmp(transports[i]->name, name) == 0)
			return transports[i];
	errno = ENOENT;
	return NULL;
}

int tlistener_open(const struct transport_ops *t, const struct tlisten_params *p,
                   struct tlistener **out)
{
	return p->auth ? peerauth_listen(t, p, out) : t->listen(p, out);
}

void tlistener_close(struct tlistener *l)
{
	if (l)
		l->t->listener_close(l);
}

int tconnect_start(const struct transport_ops *t, const struct tconnect_params *p,
                   struct tconnect **out)
{
	return p->auth ? peerauth_connect(t, p, out) : t->connect(p, out);
}

void tconnect_cancel(struct tconnect *c)
{
	if (c)
		c->t->connect_cancel(c);
}

/* The data path: one indirect call per send, no copy, nothing else. */
void tstream_send(struct tstream *s, struct outq_item *it)
{
	s->t->send(s, it);
}

void tstream_send_lazy(struct tstream *s, struct outq_item *it)
{
	s->t->send_lazy(s, it);
}

int tstream_send_small(struct tstream *s, uint16_t type, uint16_t flags, const void *payload,
                       uint32_t len)
{
	return s->t->send_small(s, type, flags, payload, len, false);
}

int tstream_send_small_lazy(struct tstream *s, uint16_t type, uint16_t flags, const void *payload,
                            uint32_t len)
{
	return s->t->send_small(s, type, flags, payload, len, true);
}

void tstream_set_lazy(struct tstream *s, double delay, size_t bytes)
{
	s->t->set_lazy(s, delay, bytes);
}

size_t tstream_queued(const struct tstream *s)
{
	return s->t->queued(s);
}

void tstream_pause(struct tstream *s, bool paused)
{
	s->t->pause(s, paused);
}

double tstream_idle(const struct tstream *s)
{
	return s->t->idle(s);
}

void tstream_try_flush(struct tstream *s)
{
	if (s)
		s->t->try_flush(s);
}

int tstream_peer_name(const struct tstream *s, char *buf, size_t len)
{
	if (s->t->peer_name && s->t->peer_name(s, buf, len) == 0)
		return 0;
	snprintf(buf, len, "an unknown address");
	return -1;
}

void tstream_set_owner(struct tstream *s, const struct tstream_ops *ops, void *ctx)
{
	s->ops = ops;
	s->ctx = ctx;
}

void tstream_close(struct tstream *s)
{
	if (s)
		s->t->close(s);
}

struct outq_item *tstream_small_item(uint16_t type, uint16_t flags, const void *payload,
                                     uint32_t len)
{
	struct outq_item *it = calloc(1, sizeof(*it));
	if (!it || len > sizeof(it->hdr) - WIRE_HDR_SIZE) {
		free(it);
		errno = ENOMEM;
		return NULL;
	}
	wire_hdr_encode(it->hdr, type, flags, len);
	if (len)
		memcpy(it->hdr + WIRE_HDR_SIZE, payload, len);
	it->hdr_len = WIRE_HDR_SIZE + len;
	it->sent = outq_free_item;
	return it;
}
