/* SPDX-License-Identifier: MIT */
/*
 * hak-vip: drives the vip module from integration tests, and watches for announcements.
 *
 *   hak-vip add IFNAME ADDR[/LEN]          add the address (idempotent)
 *   hak-vip remove IFNAME ADDR[/LEN]       remove it (idempotent)
 *   hak-vip present IFNAME ADDR            exit 0 if present, 1 if not
 *   hak-vip garp IFNAME ADDR [COUNT [DELAY]]
 *                                          the announcement schedule: COUNT now, COUNT after
 *                                          DELAY seconds (defaults 5 and 5), then exit
 *   hak-vip listen IFNAME ADDR SECONDS [READY-FILE]
 *                                          count gratuitous ARPs / unsolicited NAs for ADDR
 *                                          received on IFNAME; one line per packet
 *                                          "announce MS MAC" (ms since start), then
 *                                          "total N"; READY-FILE is created once listening
 * Exit status: 0 success, 1 failure (message on stderr), 2 usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster/vip.h"
#include "lib/clock.h"

static int usage(void)
{
	fprintf(stderr, "usage: hak-vip add|remove|present IFNAME ADDR[/LEN]\n"
	                "       hak-vip garp IFNAME ADDR [COUNT [DELAY]]\n"
	                "       hak-vip listen IFNAME ADDR SECONDS [READY-FILE]\n");
	return 2;
}

/* Is this frame (without Ethernet header) an announcement of a? */
static int is_announcement(uint16_t proto, const uint8_t *p, size_t n, const struct ipaddr *a)
{
	if (proto == ETH_P_ARP && a->family == AF_INET && n >= 28)
		return p[7] <= 2 && memcmp(p + 14, &a->a.v4, 4) == 0 &&
		       memcmp(p + 24, &a->a.v4, 4) == 0;
	if (proto == ETH_P_IPV6 && a->family == AF_INET6 && n >= 72)
		return p[6] == 58 && p[40] == 136 && memcmp(p + 48, &a->a.v6, 16) == 0;
	return 0;
}

static int listen_for(const char *ifname, const struct ipaddr *a, double seconds, const char *ready)
{
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};
	double t0 = clock_mono() * 1e3, end = t0 + seconds * 1e3;
	unsigned total = 0;
	int fd;

	sll.sll_ifindex = (int)if_nametoindex(ifname);
	fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (sll.sll_ifindex == 0 || fd < 0 || bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		fprintf(stderr, "Cannot listen on %s: %s.\n", ifname, strerror(errno));
		return 1;
	}
	if (ready)
		close(open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	for (double t = clock_mono() * 1e3; t < end; t = clock_mono() * 1e3) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		uint8_t buf[2048];
		struct sockaddr_ll from;
		socklen_t flen = sizeof(from);
		if (poll(&pfd, 1, (int)(end - t) + 1) <= 0)
			continue;
		ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		if (n < 0 || from.sll_pkttype == PACKET_OUTGOING ||
		    !is_announcement(ntohs(from.sll_protocol), buf, (size_t)n, a))
			continue;
		total++;
		printf("announce %.0f %02x:%02x:%02x:%02x:%02x:%02x\n", clock_mono() * 1e3 - t0,
		       from.sll_addr[0], from.sll_addr[1], from.sll_addr[2], from.sll_addr[3],
		       from.sll_addr[4], from.sll_addr[5]);
		fflush(stdout);
	}
	printf("total %u\n", total);
	close(fd);
	return 0;
}

static void done_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct vip_garp *g = w->data;

	(void)revents;
	if (!g->active)
		ev_break(loop, EVBREAK_ALL);
}

static int garp(const char *ifname, const struct ipaddr *a, unsigned count, double delay)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct vip_garp g = {0};
	ev_timer poll_done;
	char text[IPADDR_TEXT_MAX];

	if (vip_garp_start(&g, loop, ifname, a, count, delay) < 0) {
		ev_loop_destroy(loop);
		return 1; /* vip logged why */
	}
	ev_timer_init(&poll_done, done_cb, 0.05, 0.05);
	poll_done.data = &g;
	ev_timer_start(loop, &poll_done);
	ev_run(loop, 0);
	ev_timer_stop(loop, &poll_done);
	vip_garp_stop(&g);
	ev_loop_destroy(loop);
	printf("Sent %u announcements of %s on %s.\n", g.sent, ipaddr_format(a, text, sizeof(text)),
	       ifname);
	return g.failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct ipaddr a;
	char err[512];
	int rc;

	if (argc < 4)
		return usage();
	if (ipaddr_parse(argv[3], &a, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	if (strcmp(argv[1], "add") == 0 || strcmp(argv[1], "remove") == 0) {
		rc = argv[1][0] == 'a' ? vip_add(argv[2], &a, err, sizeof(err))
		                       : vip_remove(argv[2], &a, err, sizeof(err));
		if (rc < 0)
			fprintf(stderr, "%s\n", err);
		return rc < 0 ? 1 : 0;
	}
	if (strcmp(argv[1], "present") == 0) {
		rc = vip_present(argv[2], &a, err, sizeof(err));
		if (rc < 0)
			fprintf(stderr, "%s\n", err);
		return rc == 1 ? 0 : 1;
	}
	if (strcmp(argv[1], "garp") == 0)
		return garp(argv[2], &a, argc > 4 ? (unsigned)atoi(argv[4]) : VIP_DEFAULT_COUNT,
		            argc > 5 ? atof(argv[5]) : VIP_DEFAULT_DELAY);
	if (strcmp(argv[1], "listen") == 0 && argc >= 5)
		return listen_for(argv[2], &a, atof(argv[4]), argc > 5 ? argv[5] : NULL);
	return usage();
}
