/* SPDX-License-Identifier: MIT */
#include "tlspair.h"

#include <ev.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int tlspair_files(char *dir, size_t len)
{
	char cmd[512];
	snprintf(dir, len, "/tmp/hak-tls-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(cmd, sizeof(cmd), "tests/tls-certs.sh %s alpha beta", dir);
	return system(cmd) == 0 ? 0 : -1;
}

void tlspair_files_remove(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "Cannot remove %s.\n", dir);
}

static struct tls_ctx *ctx_make(const struct tls_params *p)
{
	struct tls_ctx *c = NULL;
	char err[512];
	if (tls_ctx_create(p, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return NULL;
	}
	return c;
}

struct tls_ctx *tlspair_cert_ctx(const char *dir, const char *ca, const char *cert,
                                 const char *peer)
{
	char caf[300], crt[300], key[300];
	snprintf(caf, sizeof(caf), "%s/%s.crt", dir, ca);
	snprintf(crt, sizeof(crt), "%s/%s.crt", dir, cert);
	snprintf(key, sizeof(key), "%s/%s.key", dir, cert);
	struct tls_params p = {
	    .ca_file = caf, .cert_file = crt, .key_file = key, .peer_name = peer};
	return ctx_make(&p);
}

struct tls_ctx *tlspair_psk_ctx(const char *dir, const char *file)
{
	char psk[300];
	snprintf(psk, sizeof(psk), "%s/%s", dir, file);
	struct tls_params p = {.psk_file = psk};
	return ctx_make(&p);
}

void tlspair_free_port(char *addr, size_t len)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0)
		sa.sin_port = htons(47000);
	snprintf(addr, len, "127.0.0.1:%u", ntohs(sa.sin_port));
	if (fd >= 0)
		close(fd);
}

void tlspair_spin(struct ev_loop *loop, double seconds)
{
	ev_now_update(loop);
	double end = ev_now(loop) + seconds;
	for (int i = 0; i < 1000000; i++) {
		ev_run(loop, EVRUN_NOWAIT);
		usleep(500);
		ev_now_update(loop);
		if (ev_now(loop) >= end)
			break;
	}
}

/* The connection in progress: the listener's and the connect's ctx belong to the streams'
 * owners, so their callbacks find the record here (the tests run one at a time). */
static struct tlspair *pair_cur;

static void pair_accepted(void *ctx, struct tlistener *l, struct tstream *s)
{
	(void)ctx;
	(void)l;
	pair_cur->server = s;
	pair_cur->accepted++;
}

static void pair_done(void *ctx, struct tconnect *c, struct tstream *s, int err)
{
	(void)ctx;
	(void)c;
	pair_cur->client = s;
	pair_cur->client_err = err;
	pair_cur->done++;
}

int tlspair_connect(struct ev_loop *loop, struct tls_ctx *server, struct tls_ctx *client,
                    const struct tstream_ops *ops, void *sctx, void *cctx, struct tlspair *out)
{
	char addr[64];
	struct tlistener *l;
	struct tconnect *c;
	struct tlisten_params lp = {.loop = loop,
	                            .addr = addr,
	                            .ops = ops,
	                            .ctx = sctx,
	                            .accepted = pair_accepted,
	                            .topts = server};
	struct tconnect_params cp = {.loop = loop,
	                             .addr = addr,
	                             .ops = ops,
	                             .ctx = cctx,
	                             .done = pair_done,
	                             .topts = client};
	int rc = -1;

	memset(out, 0, sizeof(*out));
	pair_cur = out;
	tlspair_free_port(addr, sizeof(addr));
	if (tlistener_open(&transport_tls, &lp, &l) < 0)
		goto out;
	if (tconnect_start(&transport_tls, &cp, &c) < 0) {
		tlistener_close(l);
		goto out;
	}
	for (int i = 0; i < 1000 && !out->done; i++)
		tlspair_spin(loop, 0.01);
	/* The server finishes its side a little after the client, or refuses. */
	for (int i = 0; i < 50 && !out->accepted; i++)
		tlspair_spin(loop, 0.01);
	tlistener_close(l);
	rc = 0;
out:
	pair_cur = NULL;
	return rc;
}
