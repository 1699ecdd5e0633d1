/* SPDX-License-Identifier: MIT */
/*
 * The virtual IP resource: see vip.h. Addresses go through libnl-route-3; announcements are
 * hand-built frames on an AF_PACKET datagram socket (the kernel adds the Ethernet header).
 */
#include "vip.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_addr.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/endian.h"

#define ARP_LEN 28u
#define NA_LEN  (40u + 32u)
#define NL_WAIT 1 /* seconds the kernel has to answer a netlink request */

static int nl_errno(int nlerr)
{
	switch (-nlerr) {
	case NLE_EXIST:
		return EEXIST;
	case NLE_NODEV:
		return ENODEV;
	case NLE_NOADDR:
		return EADDRNOTAVAIL;
	case NLE_PERM:
		return EPERM;
	case NLE_INVAL:
		return EINVAL;
	case NLE_NOMEM:
		return ENOMEM;
	default:
		return EIO;
	}
}

static struct nl_sock *nl_open(char *err, size_t errlen)
{
	struct timeval tv = {.tv_sec = NL_WAIT};
	struct nl_sock *sk = nl_socket_alloc();
	int rc;

	if (!sk) {
		snprintf(err, errlen, "Out of memory for a netlink socket.");
		errno = ENOMEM;
		return NULL;
	}
	rc = nl_connect(sk, NETLINK_ROUTE);
	if (rc < 0) {
		snprintf(err, errlen, "Cannot open a route netlink socket: %s.", nl_geterror(rc));
		nl_socket_free(sk);
		errno = nl_errno(rc);
		return NULL;
	}
	/* A kernel that never answers must not hang the caller. */
	(void)setsockopt(nl_socket_get_fd(sk), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return sk;
}

static struct rtnl_addr *addr_build(int ifindex, const struct ipaddr *a)
{
	struct rtnl_addr *ra = rtnl_addr_alloc();
	struct nl_addr *local;
	size_t alen = a->family == AF_INET ? sizeof(a->a.v4) : sizeof(a->a.v6);

	if (!ra)
		return NULL;
	local = nl_addr_build(a->family, &a->a, alen);
	if (!local) {
		rtnl_addr_put(ra);
		return NULL;
	}
	nl_addr_set_prefixlen(local, (int)a->prefixlen);
	rtnl_addr_set_ifindex(ra, ifindex);
	rtnl_addr_set_family(ra, a->family);
	rtnl_addr_set_prefixlen(ra, (int)a->prefixlen);
	rtnl_addr_set_local(ra, local);
	nl_addr_put(local);
	/* A transient duplicate during a partition must not leave the VIP dadfailed forever. */
	if (a->family == AF_INET6)
		rtnl_addr_set_flags(ra, IFA_F_NODAD);
	return ra;
}

/* One add or delete; the error this operation tolerates counts as success. */
static int addr_change(const char *ifname, const struct ipaddr *a, bool add, char *err,
                       size_t errlen)
{
	char text[IPADDR_TEXT_MAX];
	struct nl_sock *sk = NULL;
	struct rtnl_addr *ra = NULL;
	int ifindex = (int)if_nametoindex(ifname), rc = -1, e = 0;

	ipaddr_format(a, text, sizeof(text));
	if (ifindex == 0) {
		e = errno;
		if (!add && e == ENODEV)
			return 0; /* no interface, no address */
		snprintf(err, errlen, "Cannot %s %s: interface %.32s: %s.", add ? "add" : "remove",
		         text, ifname, strerror(e));
		goto out;
	}
	sk = nl_open(err, errlen);
	ra = sk ? addr_build(ifindex, a) : NULL;
	if (!ra) {
		e = sk ? ENOMEM : errno;
		if (sk)
			snprintf(err, errlen, "Out of memory building the address %s.", text);
		goto out;
	}
	int nrc = add ? rtnl_addr_add(sk, ra, 0) : rtnl_addr_delete(sk, ra, 0);
	if (nrc < 0 && !(add && -nrc == NLE_EXIST) &&
	    !(!add && (-nrc == NLE_NOADDR || -nrc == NLE_NODEV))) {
		e = nl_errno(nrc);
		snprintf(err, errlen, "Cannot %s %s %s interface %.32s: %s.",
		         add ? "add" : "remove", text, add ? "to" : "from", ifname,
		         nl_geterror(nrc));
		goto out;
	}
	rc = 0;
out:
	if (ra)
		rtnl_addr_put(ra);
	if (sk)
		nl_socket_free(sk);
	if (rc < 0)
		errno = e;
	return rc;
}

int vip_add(const char *ifname, const struct ipaddr *a, char *err, size_t errlen)
{
	return addr_change(ifname, a, true, err, errlen);
}

int vip_remove(const char *ifname, const struct ipaddr *a, char *err, size_t errlen)
{
	return addr_change(ifname, a, false, err, errlen);
}

static bool addr_matches(struct rtnl_addr *ra, int ifindex, const struct ipaddr *a)
{
	struct nl_addr *local = rtnl_addr_get_local(ra);
	size_t alen = a->family == AF_INET ? sizeof(a->a.v4) : sizeof(a->a.v6);

	return rtnl_addr_get_ifindex(ra) == ifindex && rtnl_addr_get_family(ra) == a->family &&
	       local && nl_addr_get_len(local) == alen &&
	       memcmp(nl_addr_get_binary_addr(local), &a->a, alen) == 0;
}

int vip_present(const char *ifname, const struct ipaddr *a, char *err, size_t errlen)
{
	struct nl_cache *cache = NULL;
	struct nl_sock *sk;
	int ifindex = (int)if_nametoindex(ifname), found = 0, rc;

	if (ifindex == 0) {
		snprintf(err, errlen, "No interface %.32s: %s.", ifname, strerror(errno));
		return -1;
	}
	sk = nl_open(err, errlen);
	if (!sk)
		return -1;
	rc = rtnl_addr_alloc_cache(sk, &cache);
	if (rc < 0) {
		snprintf(err, errlen, "Cannot list the addresses of %.32s: %s.", ifname,
		         nl_geterror(rc));
		nl_socket_free(sk);
		errno = nl_errno(rc);
		return -1;
	}
	for (struct nl_object *o = nl_cache_get_first(cache); o && !found; o = nl_cache_get_next(o))
		found = addr_matches((struct rtnl_addr *)o, ifindex, a);
	nl_cache_free(cache);
	nl_socket_free(sk);
	return found;
}

/* ---- announcements ---- */

/* RFC 5227 announcement: an ARP request whose sender and target IP are both the address. */
static size_t arp_build(const struct ipaddr *a, const uint8_t mac[6], uint8_t *b)
{
	be_put16(b, 1);          /* Ethernet */
	be_put16(b + 2, 0x0800); /* IPv4 */
	b[4] = 6;
	b[5] = 4;
	be_put16(b + 6, 1); /* request */
	memcpy(b + 8, mac, 6);
	memcpy(b + 14, &a->a.v4, 4);
	memset(b + 18, 0, 6);
	memcpy(b + 24, &a->a.v4, 4);
	return ARP_LEN;
}

static uint16_t icmp6_checksum(const uint8_t *ip6, const uint8_t *icmp, size_t len)
{
	uint32_t sum = 0;

	for (size_t i = 8; i < 40; i += 2) /* source and destination */
		sum += be_get16(ip6 + i);
	sum += (uint32_t)len + 58; /* upper-layer length and next header */
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += be_get16(icmp + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Unsolicited NA to all nodes: Override set, Solicited clear, target link-layer option. */
static size_t na_build(const struct ipaddr *a, const uint8_t mac[6], uint8_t *b)
{
	static const uint8_t all_nodes[16] = {0xff, 0x02, [15] = 0x01};
	uint8_t *icmp = b + 40;

	memset(b, 0, NA_LEN);
	b[0] = 0x60;
	be_put16(b + 4, 32); /* payload length */
	b[6] = 58;           /* ICMPv6 */
	b[7] = 255;          /* hop limit: receivers drop NAs that crossed a router */
	memcpy(b + 8, &a->a.v6, 16);
	memcpy(b + 24, all_nodes, 16);
	icmp[0] = 136;  /* neighbour advertisement */
	icmp[4] = 0x20; /* Override */
	memcpy(icmp + 8, &a->a.v6, 16);
	icmp[24] = 2; /* target link-layer address */
	icmp[25] = 1; /* in units of 8 bytes */
	memcpy(icmp + 26, mac, 6);
	be_put16(icmp + 2, icmp6_checksum(b, icmp, 32));
	return NA_LEN;
}

size_t vip_frame_build(const struct ipaddr *a, const uint8_t mac[6], uint8_t *buf, size_t len)
{
	if (a->family == AF_INET)
		return len >= ARP_LEN ? arp_build(a, mac, buf) : 0;
	if (a->family == AF_INET6)
		return len >= NA_LEN ? na_build(a, mac, buf) : 0;
	return 0;
}

static int announce_fail(char *err, size_t errlen, const char *what, const char *ifname,
                         const struct ipaddr *a)
{
	char text[IPADDR_TEXT_MAX];
	int e = errno;

	snprintf(err, errlen, "Cannot announce %s on %.32s: %s: %s.",
	         ipaddr_format(a, text, sizeof(text)), ifname, what, strerror(e));
	errno = e;
	return -1;
}

/* Send count announcements now on ifname. Returns how many were sent, -1 with errno and err. */
static int vip_announce(const char *ifname, const struct ipaddr *a, unsigned count, char *err,
                        size_t errlen)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t all_nodes_mac[6] = {0x33, 0x33, 0, 0, 0, 1};
	bool v4 = a->family == AF_INET;
	uint16_t proto = v4 ? ETH_P_ARP : ETH_P_IPV6;
	struct sockaddr_ll to = {
	    .sll_family = AF_PACKET, .sll_protocol = htons(proto), .sll_halen = 6};
	struct ifreq ifr = {0};
	uint8_t frame[NA_LEN];
	size_t len;
	int fd, sent = 0;

	if (strlen(ifname) >= sizeof(ifr.ifr_name)) {
		errno = ENODEV;
		return announce_fail(err, errlen, "interface name too long", ifname, a);
	}
	fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(proto));
	if (fd < 0)
		return announce_fail(err, errlen, "packet socket", ifname, a);
	strcpy(ifr.ifr_name, ifname);
	if (ioctl(fd, SIOCGIFINDEX, &ifr) < 0) {
		announce_fail(err, errlen, "interface lookup", ifname, a);
		sent = -1;
		goto out;
	}
	to.sll_ifindex = ifr.ifr_ifindex;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
		announce_fail(err, errlen, "hardware address lookup", ifname, a);
		sent = -1;
		goto out;
	}
	memcpy(to.sll_addr, v4 ? bcast : all_nodes_mac, 6);
	len = vip_frame_build(a, (const uint8_t *)ifr.ifr_hwaddr.sa_data, frame, sizeof(frame));
	for (unsigned i = 0; i < count; i++) {
		if (sendto(fd, frame, len, 0, (struct sockaddr *)&to, sizeof(to)) != (ssize_t)len) {
			announce_fail(err, errlen, "send", ifname, a);
			sent = sent ? sent : -1;
			break;
		}
		sent++;
	}
out:
	close(fd);
	return sent;
}

/* One burst of g's announcements, counted in g. A failure is logged here: the timer's burst has
 * no caller to return it to. */
static int garp_burst(struct vip_garp *g)
{
	char err[256];
	int n = vip_announce(g->ifname, &g->addr, g->count, err, sizeof(err));

	if (n < 0) {
		g->failed++;
		log_warn("%s", err);
	} else {
		g->sent += (unsigned)n;
	}
	return n;
}

static void garp_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct vip_garp *g = w->data;

	(void)loop;
	(void)revents;
	g->active = false;
	garp_burst(g);
}

int vip_garp_start(struct vip_garp *g, struct ev_loop *loop, const char *ifname,
                   const struct ipaddr *a, unsigned count, double delay)
{
	int n;

	if (g->loop && g->active)
		ev_timer_stop(g->loop, &g->timer);
	memset(g, 0, sizeof(*g));
	g->loop = loop;
	snprintf(g->ifname, sizeof(g->ifname), "%s", ifname);
	g->addr = *a;
	g->count = count;
	g->delay = delay;
	ev_timer_init(&g->timer, garp_timer_cb, delay, 0.);
	g->timer.data = g;
	n = garp_burst(g);
	if (delay > 0) {
		ev_timer_start(loop, &g->timer);
		g->active = true;
	}
	return n;
}

void vip_garp_stop(struct vip_garp *g)
{
	if (g->loop && g->active)
		ev_timer_stop(g->loop, &g->timer);
	g->active = false;
}
