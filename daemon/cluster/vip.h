/* SPDX-License-Identifier: MIT */
/*
 * The virtual IP resource: add and remove an IPv4 or IPv6 address on an interface through
 * libnl-route-3, and announce it with gratuitous ARP (IPv4) or unsolicited neighbour
 * advertisements (IPv6) sent from an AF_PACKET socket, so that neighbours' caches point at the
 * new primary's MAC at once instead of after their timeout.
 *
 * Adding and removing are idempotent (adding a present address or removing a missing one is
 * success), so a restarted daemon or a retried action converges. IPv6 addresses are added with
 * IFA_F_NODAD: after a partition heals, duplicate address detection would otherwise leave the
 * address "dadfailed" for good on the node that should serve it.
 *
 * vip_add/vip_remove/vip_present talk to the local kernel and wait for its answer (bounded by a
 * 1 s receive timeout); the announcements are non-blocking sends driven by libev timers.
 */
#ifndef HAK_VIP_H
#define HAK_VIP_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>

#include "lib/ipaddr.h"

#define VIP_DEFAULT_COUNT 5u  /* announcements sent at once ... */
#define VIP_DEFAULT_DELAY 5.0 /* ... and again this many seconds later */

/* Add the address to interface ifname; success if it is there already. 0, or -1 with errno/err. */
int vip_add(const char *ifname, const struct ipaddr *a, char *err, size_t errlen);
/* Remove it; success if it is not there. 0, or -1 with errno and err. */
int vip_remove(const char *ifname, const struct ipaddr *a, char *err, size_t errlen);
/* 1 if the address (any prefix length) is on ifname, 0 if not, -1 with errno and err. */
int vip_present(const char *ifname, const struct ipaddr *a, char *err, size_t errlen);

/*
 * Build one announcement frame payload for mac (6 bytes): an ARP request with sender IP = target
 * IP = the address (IPv4), or an IPv6 packet with an ICMPv6 neighbour advertisement (Override set,
 * target link-layer address option, hop limit 255, to ff02::1). Pure, for tests. Returns the
 * length written (at most len), or 0 if len is too small.
 */
size_t vip_frame_build(const struct ipaddr *a, const uint8_t mac[6], uint8_t *buf, size_t len);

/* The announcement schedule: count now, count again after delay seconds (0: no second burst). */
struct vip_garp {
	struct ev_loop *loop;
	ev_timer timer;
	char ifname[16];
	struct ipaddr addr;
	unsigned count;
	double delay;
	unsigned sent;   /* announcements sent so far */
	unsigned failed; /* bursts that failed */
	bool active;     /* the second burst is pending */
};

/*
 * Send the first burst now and arm the second; calling it again restarts the schedule (the old
 * primary re-appeared: announce again). Returns how many announcements the first
 * burst sent, or -1 with errno (logged).
 */
int vip_garp_start(struct vip_garp *g, struct ev_loop *loop, const char *ifname,
                   const struct ipaddr *a, unsigned count, double delay);
void vip_garp_stop(struct vip_garp *g);

#endif
